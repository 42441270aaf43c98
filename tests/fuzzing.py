"""Seeded fuzz campaigns: texts drawn from atoms that exercise every branch, checked in a plain loop.

A campaign is ``count`` texts, each built from its own seed (``f"{salt}:{k}"``), so any case can
be rebuilt alone from the seed the failure names. The loop is plain Python, not Hypothesis:
drawing one seed through Hypothesis costs about 1 ms of bookkeeping per example, twice the
checks of every family together, and the texts never needed its strategies or its shrinking.
A failure is shrunk here instead (characters removed while the check still fails) and reported
with both the original and the shrunk text. The counts are the tests' own (PEEK2_FUZZ_EXAMPLES
overrides them through ``conftest.fuzz_examples``).
"""

from __future__ import annotations

import random
from typing import Callable

ATOMS = [
    # letters of many scripts, with and without combining marks
    "a", "Z", "é", "e\u0301", "ß", "ſ", "ǅ", "ω", "Я", "ա", "א", "ب", "क", "क्ष", "ি", "ก", "ั", "ན", "ᄀ", "가",
    "漢", "か", "カ", "ー", "ꙮ", "𝔄", "ʰ", "ˇ", "\u0301", "\u0903", "\u20dd", "\u093f",
    # whitespace of every kind
    " ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", "\x0b", "\x0c", "\x85", "\xa0", "\u1680", "\u2000", "\u200a",
    "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u200b", "\u180e", "\x1c", "\x1f",
    # apostrophes and contraction letters in every case
    "'", "''", "'s", "'S", "'t", "'T", "'m", "'M", "'d", "'D", "'re", "'RE", "'rE", "'ve", "'Ve", "'ll", "'lL",
    "'LL", "'ſ", "'r", "'v", "'l", "’", "`", "'x",
    # digits and numbers of many scripts
    "0", "7", "123", "4567", "٣", "۴", "५", "๓", "᠑", "²", "½", "Ⅻ", "〇", "𝟘", "①",
    # punctuation and symbols
    ".", ",", "!", "?", "...", "-", "_", "(", ")", "\"", "#", "$", "%", "/", "\\", "<|eot_id|>", "©", "€", "→",
    # emoji sequences
    "😀", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "❤\ufe0f", "\ufe0f", "\u200d", "#\ufe0f\u20e3",
    # case changes inside words (the cased families), titlecase, caseless letters between cases
    "Hello", "HELLO", "hELLo", "McDonald", "iPhone", "ǅ", "Ǆ", "ǆ", "ᾼ", "ΑΒΓ", "αβγ", "ʰA", "Aʰ", "ªB",
    # DeepSeek-V3's CJK ranges and their edges, kana marks and punctuation, Latin after punctuation
    "一", "龥", "\u9fa6", "\u4dff", "\u3040", "\u3097", "\u3099", "\u309b", "゠", "・", "ゝ", "ヿ", "\u3100",
    ".abc", "(café", "_x", "'Hello", "\n/", "//",
    # controls and oddities
    "\x00", "\x7f", "\ufeff", "\U000e0001", "\U0010fffd", "\ue000",
]

BOUNDARY = [" ", "  ", "\t", "\n", "\r", "'", "'s", "'LL", "1", "a", ".", "\u0301", "\xa0"]


def random_scalar(rng: random.Random) -> str:
    """Any scalar but a surrogate: a quarter each from ASCII, U+0080..U+07FF, the BMP, everything."""
    top = rng.choice((0x7F, 0x7FF, 0xFFFF, 0x10FFFF))
    cp = rng.randint(0, top)
    return chr(cp) if not 0xD800 <= cp <= 0xDFFF else chr(cp - 0x800)


def join_parts(rng: random.Random, size: int, other: list[str], other_share: float) -> str:
    """``size`` parts: from ``other`` with probability ``other_share``, else a random scalar;
    one part in ten repeats the previous one (runs of one kind matter to every branch)."""
    parts: list[str] = []
    for _ in range(size):
        if parts and rng.random() < 0.1:
            parts.append(parts[-1])
        else:
            parts.append(rng.choice(other) if rng.random() < other_share else random_scalar(rng))
    return "".join(parts)


def atoms_text(rng: random.Random) -> str:
    """Up to 24 parts, each an atom or an arbitrary scalar."""
    return join_parts(rng, rng.randint(0, 24), ATOMS, 0.5)


def long_text(rng: random.Random) -> str:
    """Up to 64 parts, mostly arbitrary scalars, with the atoms that change a neighbour's piece."""
    return join_parts(rng, rng.randint(0, 64), BOUNDARY, 1 / 3)


def shrink(text: str, fails: Callable[[str], bool]) -> str:
    """A shorter text that still fails: spans of halving length removed while ``fails`` holds."""
    span = max(1, len(text) // 2)
    while True:
        start = 0
        while start < len(text):
            candidate = text[:start] + text[start + span:]
            if fails(candidate):
                text = candidate
            else:
                start += span
        if span == 1:
            return text
        span //= 2


def campaign(check: Callable[[str], None], make_text: Callable[[random.Random], str], count: int, salt: str) -> None:
    """Check ``count`` texts, the k-th built by ``make_text(random.Random(f"{salt}:{k}"))``.

    The first failure (a wrong answer, or any exception) is shrunk to a shorter text failing
    the same way, and raised as an AssertionError naming the seed, the text, the shrunk text
    and the check's own message for each.
    """
    for k in range(count):
        seed = f"{salt}:{k}"
        text = make_text(random.Random(seed))
        try:
            check(text)
        except Exception as error:  # noqa: BLE001 - a crash is a failure like a wrong answer
            kind = type(error)

            def failure(candidate: str) -> Exception | None:
                try:
                    check(candidate)
                except Exception as candidate_error:  # noqa: BLE001
                    return candidate_error if type(candidate_error) is kind else None
                return None

            small = shrink(text, lambda candidate: failure(candidate) is not None)
            raise AssertionError(
                f"fuzz case {seed!r} fails: {ascii(text)}\n  {kind.__name__}: {error}\n"
                f"shrunk to {ascii(small)}:\n  {kind.__name__}: {failure(small)}"
            ) from error


__all__ = ["ATOMS", "BOUNDARY", "atoms_text", "campaign", "join_parts", "long_text", "shrink"]
