"""Every scalar 0..0x10FFFF (surrogates excepted), in contexts that pin its category and its
effect on neighbours, splits exactly like the reference, for every family.

Contexts: after and before a letter, after a space and a tab, after an apostrophe and
before "'s", between digits, doubled, between CR/LF, before a space and a word, before an
uppercase then a lowercase letter (which tells the cased families' Lo from Ll). The scalars are
tested in blocks: each block is one long text, compared piece for piece.

The 917,503 scalars of planes 2-13, 15 and 16 are only Lo (CJK ideographs), Cn (unassigned) and
Co (private use) in Unicode 16, the tables' version: they go through a shorter context that still
tells these from every other category (letter or not, Lu from Lo, whitespace from punctuation,
Ll from Lo), so that the test costs 40% of the full contexts' time (CI runs it for every family).
"""

from __future__ import annotations

import pytest

from conftest import FAMILIES, ours, reference_split

CONTEXT = "a{c}b {c}'{c}1{c}2{c}{c}\n{c}\r\n {c} x\t{c}'s{c}Ab"
SHORT_CONTEXT = "a{c}b {c}{c}Ab"
BLOCK = 2048


def context(cp: int) -> str:
    """The contexts of scalar ``cp``: all of them in planes 0, 1 and 14, the short ones elsewhere."""
    return CONTEXT if cp < 0x20000 or 0xE0000 <= cp < 0xF0000 else SHORT_CONTEXT


def scalars() -> list[int]:
    return [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def block_text(block: list[int]) -> str:
    return "".join(context(cp).format(c=chr(cp)) for cp in block)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_every_scalar_in_context(family: str) -> None:
    reference, peek = reference_split(family), ours(family)
    all_scalars = scalars()
    assert len(all_scalars) == 1_112_064
    failures: list[str] = []
    for start in range(0, len(all_scalars), BLOCK):
        block = all_scalars[start : start + BLOCK]
        text = block_text(block)
        expected, got = reference(text), peek(text)
        if expected != got:
            k = next((k for k, (e, g) in enumerate(zip(expected, got)) if e != g), min(len(expected), len(got)))
            failures.append(
                f"block U+{block[0]:04X}..U+{block[-1]:04X}: piece {k}: "
                f"reference {expected[k:k + 2]!r}, peek2 {got[k:k + 2]!r}"
            )
    assert not failures, "\n".join(failures[:20])
