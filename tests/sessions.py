"""Sessions and streams fed a text in random parts, checked against tokenizers as they go (shared
by the tests of growing runs, tests/test_growing_piece.py and tests/test_marks_run.py, and by
scripts/fuzz_sessions.py)."""

from __future__ import annotations

import random

import tokenizers

from peek2.serving.incremental import PromptSession
from peek2.tokenizer import Tokenizer

PIECE_ALPHABETS = [
    "ab\u0301\u0308",  # letters and marks in turn (one o200k word)
    "AB\u0301\u0327",
    "aAbB\u0301",  # case changes: o200k cuts before a capital after lower case
    "\u0e01\u0e34\u0e19\u0e49\u0e32\u0e2a",  # Thai without spaces
    "\u0915\u093e\u0930\u094d\u092f",  # Devanagari with its signs
    "\u05e9\u05b8\u05dc\u05d5\u05b9",  # Hebrew with points
    "\u00e9e\u00e8a",  # Latin letters of two kinds (one DeepSeek-V3 word)
    " \t",  # whitespace of two kinds (one GPT-2 piece)
    "\u4e00\u4e8c\u3042\u30a2",  # CJK and kana (DeepSeek-V3's CJK split)
    "ab12",  # letters and digits
]
BREAKERS = [" ", "'s", "'", "7", "\n", "A", "!", ".", "\u3000", "x y"]


def long_piece(rng: random.Random, length: int) -> str:
    """A text of ``length`` characters of one of ``PIECE_ALPHABETS`` (one long piece of several
    scanner categories), with now and then (or never) one of ``BREAKERS``."""
    alphabet = rng.choice(PIECE_ALPHABETS)
    rare = rng.choice([0.0, 0.0005, 0.003])
    return "".join(rng.choice(BREAKERS) if rng.random() < rare else rng.choice(alphabet) for _ in range(length))


def session_in_parts(tok: Tokenizer, ref: tokenizers.Tokenizer, text: str, rng: random.Random) -> tuple[PromptSession, int]:
    """Appends ``text`` in parts of 1 to 1,500 characters, comparing the ids with tokenizers' now
    and then and at the end, both ``session.ids`` and the ids the answers ``(keep, new)`` make.
    Returns the session (its encoder's state tells which path ran) and the characters appended
    when the ids first differed (-1: never)."""
    session = tok.prompt_session(add_special_tokens=False)
    ids: list[int] = []
    at = 0
    while at < len(text):
        step = rng.randint(1, 1500)
        keep, new = session.append(text[at : at + step])
        del ids[keep:]
        ids += new
        at += step
        if rng.random() < 0.3 or at >= len(text):
            expected = ref.encode(text[:at], add_special_tokens=False).ids
            if session.ids != expected or ids != expected:
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
