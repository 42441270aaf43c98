"""A prompt session fed a text in random parts, checked against tokenizers as it goes (shared by
the tests of growing runs: tests/test_growing_piece.py, tests/test_marks_run.py)."""

from __future__ import annotations

import random

import tokenizers

from peek2.serving.incremental import PromptSession
from peek2.tokenizer import Tokenizer


def appended_in_parts(tok: Tokenizer, ref: tokenizers.Tokenizer, text: str, rng: random.Random) -> PromptSession:
    """Appends ``text`` in parts of 1 to 1,500 characters; the ids equal tokenizers' now and then and
    at the end. Returns the session (its encoder's state tells which path ran)."""
    session = tok.prompt_session(add_special_tokens=False)
    at = 0
    while at < len(text):
        step = rng.randint(1, 1500)
        session.append(text[at : at + step])
        at += step
        if rng.random() < 0.3 or at >= len(text):
            assert session.ids == ref.encode(text[:at], add_special_tokens=False).ids, (ascii(text[:24]), at)
    return session
