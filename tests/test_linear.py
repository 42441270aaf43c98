"""Linear time: the cost per character of 1M characters stays that of 100K, for adversarial texts.

No wall-clock limits: the two sizes are timed in the same run (best of several, in CPU time of
this process, so that the other test worker or another process on the machine does not count),
and only their ratio is checked. A quadratic scanner would show a ratio near 10.
"""

from __future__ import annotations

import time

import pytest

import peek2

KINDS = {
    "english": "The quick brown fox's 12 jumps, over the lazy dog.\n",
    "one letter": "a",
    "one CJK": "漢",
    "spaces": " ",
    "digits": "7",
    "newlines": "\n",
    "apostrophes": "'",
    "punctuation": "!?",
    "space-newline": " \n",
    "tab-space": "\t ",
    "newline then spaces": "\n" + " " * 999,
    "marks": "\u0301",
    "contraction run": "'s",
}
SMALL, LARGE = 100_000, 1_000_000


def best_time(text: str, family: str, repeat: int) -> float:
    pattern = peek2.Peek2Pattern(family)
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        pattern.split(text)
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.parametrize("family", ["llama3", "qwen3.5"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_cost_per_char_does_not_grow(kind: str, family: str) -> None:
    unit = KINDS[kind]
    small = (unit * (SMALL // len(unit) + 1))[:SMALL]
    large = (unit * (LARGE // len(unit) + 1))[:LARGE]
    per_char_small = best_time(small, family, repeat=9) / SMALL
    per_char_large = best_time(large, family, repeat=5) / LARGE
    ratio = per_char_large / per_char_small
    assert ratio < 3.0, f"{kind}: {ratio:.2f}x the cost per character at 1M chars than at 100K"
