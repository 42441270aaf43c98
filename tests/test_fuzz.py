"""Fuzzing against the reference: 200,000 texts per family in each run, with fixed seeds.

Texts are drawn from atoms that exercise every branch and its edges (tests/fuzzing.py): scripts
with and without marks, every kind of whitespace, apostrophes before every case of the
contraction letters (and U+017F), digits of many scripts, emoji sequences, CR/LF runs, case
changes inside words, CJK next to kana and Latin, plus arbitrary scalars. Each text is checked
for every family: pieces and offsets equal to ``tokenizers``' pre-tokenizer.
The budget is PEEK2_FUZZ_EXAMPLES texts per test (default 100,000: 200,000 per family per run,
the campaign the issue asks of CI; a larger campaign sets it higher, see the README).
"""

from __future__ import annotations

import pytest

import peek2
from conftest import fuzz_examples, ours, reference_split
from fuzzing import atoms_text, campaign, long_text

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


# Each test's budget is cut into shards (distinct seeds: the shard salts them) so that
# pytest-xdist spreads them over the cores.
SHARDS = 4


@pytest.mark.parametrize("shard", range(SHARDS))
def test_fuzz_atoms(shard: int) -> None:
    campaign(check_all_families, atoms_text, fuzz_examples(100_000) // SHARDS, f"atoms:{shard}")


@pytest.mark.parametrize("shard", range(SHARDS))
def test_fuzz_scalars_and_boundaries(shard: int) -> None:
    campaign(check_all_families, long_text, fuzz_examples(100_000) // SHARDS, f"scalars:{shard}")
