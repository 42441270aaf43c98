"""Sessions and streams fed a text in random parts, checked against tokenizers as they go (shared
by the tests of growing runs, tests/test_growing_piece.py and tests/test_marks_run.py, and by
scripts/fuzz_sessions.py)."""

from __future__ import annotations

import random

import tokenizers

from peek2.serving.incremental import PromptSession
from peek2.tokenizer import Tokenizer


def session_in_parts(tok: Tokenizer, ref: tokenizers.Tokenizer, text: str, rng: random.Random) -> tuple[PromptSession, int]:
    """Appends ``text`` in parts of 1 to 1,500 characters, comparing the ids with tokenizers' now
    and then and at the end. Returns the session (its encoder's state tells which path ran) and
    the characters appended when the ids first differed (-1: never)."""
    session = tok.prompt_session(add_special_tokens=False)
    at = 0
    while at < len(text):
        step = rng.randint(1, 1500)
        session.append(text[at : at + step])
        at += step
        if (rng.random() < 0.3 or at >= len(text)) and session.ids != ref.encode(text[:at], add_special_tokens=False).ids:
            return session, at
    return session, -1


def appended_in_parts(tok: Tokenizer, ref: tokenizers.Tokenizer, text: str, rng: random.Random) -> PromptSession:
    """``session_in_parts``, asserting that the ids never differed."""
    session, differed = session_in_parts(tok, ref, text, rng)
    assert differed < 0, (ascii(text[:24]), differed)
    return session


def streamed_in_chunks(tok: Tokenizer, text: str, rng: random.Random, largest: int) -> list[int]:
    """The ids of streaming ``text`` in chunks of 1 to ``largest`` characters."""
    encoder = tok.stream_encoder()
    ids: list[int] = []
    at = 0
    while at < len(text):
        step = rng.randint(1, largest)
        encoder.feed(text[at : at + step], ids)
        at += step
    return encoder.finish(ids)
