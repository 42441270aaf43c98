"""Property-based fuzzing against the reference, with a fixed seed.

Texts are drawn from atoms that exercise every branch and its edges: scripts with
and without marks, every kind of whitespace, apostrophes before every case of the
contraction letters (and U+017F), digits of many scripts, emoji sequences, CR/LF
runs, plus arbitrary scalars. Each example is checked for every family.
The budget is PEEK2_FUZZ_EXAMPLES per test (default 25,000: 50,000 texts per run, each in every
family, the sample CI runs within its time; a campaign sets it higher, see the README).
"""

from __future__ import annotations

import random

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


# Hypothesis draws one seed per example (derandomized: the same seeds every run) and the text is
# built from it: composing strategies costs more Hypothesis bookkeeping per example than the
# three checks themselves. A failure prints the text, so shrinking is not needed to read it.
seeds = st.integers(min_value=0, max_value=2**64 - 1)

# cl100k's reference is tiktoken itself (tests/test_tiktoken_encodings.py).
NAMES = [name for name in peek2.FAMILIES if name not in peek2.TIKTOKEN_PATTERNS]
REFERENCES = {family: reference_split(family) for family in NAMES}
OURS = {family: ours(family) for family in NAMES}


def first_difference(expected: list[tuple[str, tuple[int, int]]], got: list[tuple[str, tuple[int, int]]]) -> str:
    k = next((k for k, (e, g) in enumerate(zip(expected, got)) if e != g), min(len(expected), len(got)))
    return f"first difference at piece {k}: reference {expected[k:k + 1]!r}, peek2 {got[k:k + 1]!r}"


def check_all_families(text: str) -> None:
    for family in NAMES:
        expected, got = REFERENCES[family](text), OURS[family](text)
        assert got == expected, f"{family} {ascii(text)}: {first_difference(expected, got)}"


FUZZ = settings(
    max_examples=fuzz_examples(25_000),
    derandomize=True,  # a fixed seed: the same examples every run
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Two tests of 100,000 examples each (200,000 per family per run), so that two workers share the load.


@FUZZ
@given(seed=seeds)
def test_fuzz_atoms(seed: int) -> None:
    check_all_families(atoms_text(random.Random(seed)))


@FUZZ
@given(seed=seeds)
def test_fuzz_scalars_and_boundaries(seed: int) -> None:
    check_all_families(long_text(random.Random(seed)))
