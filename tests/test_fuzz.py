"""Property-based fuzzing against the reference, with a fixed seed.

Texts are drawn from atoms that exercise every branch and its edges: scripts with
and without marks, every kind of whitespace, apostrophes before every case of the
contraction letters (and U+017F), digits of many scripts, emoji sequences, CR/LF
runs, plus arbitrary scalars. Each example is checked for all three families.
The budget is PEEK2_FUZZ_EXAMPLES per test (default 100,000: 200,000 per run).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import peek2
from conftest import fuzz_examples, ours, reference_split

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
    # controls and oddities
    "\x00", "\x7f", "\ufeff", "\U000e0001", "\U0010fffd", "\ue000",
]

scalar = st.characters(exclude_categories=["Cs"])
piece = st.one_of(st.sampled_from(ATOMS), scalar)
texts = st.lists(piece, max_size=24).map("".join)
# Longer texts, mostly arbitrary scalars, with the atoms that change a neighbour's piece.
boundary = st.sampled_from([" ", "  ", "\t", "\n", "\r", "'", "'s", "'LL", "1", "a", ".", "\u0301", "\xa0"])
long_texts = st.lists(st.one_of(scalar, scalar, boundary), max_size=64).map("".join)

REFERENCES = {family: reference_split(family) for family in peek2.PATTERNS}
OURS = {family: ours(family) for family in peek2.PATTERNS}


def first_difference(expected: list[tuple[str, tuple[int, int]]], got: list[tuple[str, tuple[int, int]]]) -> str:
    k = next((k for k, (e, g) in enumerate(zip(expected, got)) if e != g), min(len(expected), len(got)))
    return f"first difference at piece {k}: reference {expected[k:k + 1]!r}, peek2 {got[k:k + 1]!r}"


def check_all_families(text: str) -> None:
    for family in peek2.PATTERNS:
        expected, got = REFERENCES[family](text), OURS[family](text)
        assert got == expected, f"{family} {text!r}: {first_difference(expected, got)}"


FUZZ = settings(
    max_examples=fuzz_examples(100_000),
    derandomize=True,  # a fixed seed: the same examples every run
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Two tests of 100,000 examples each (200,000 per run), so that two workers share the load.


@FUZZ
@given(texts)
def test_fuzz_atoms(text: str) -> None:
    check_all_families(text)


@FUZZ
@given(long_texts)
def test_fuzz_scalars_and_boundaries(text: str) -> None:
    check_all_families(text)
