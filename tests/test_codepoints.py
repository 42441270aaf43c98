"""Every scalar 0..0x10FFFF (surrogates excepted), in contexts that pin its category and its
effect on neighbours, splits exactly like the reference, for every family.

Contexts: after and before a letter, after a space and a tab, after an apostrophe and
before "'s", between digits, doubled, between CR/LF, before a space and a word. The
scalars are tested in blocks: each block is one long text, compared piece for piece.
"""

from __future__ import annotations

import pytest

from conftest import FAMILIES, ours, reference_split

CONTEXT = "a{c}b {c}'{c}1{c}2{c}{c}\n{c}\r\n {c} x\t{c}'s{c}"
BLOCK = 2048


def scalars() -> list[int]:
    return [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def block_text(block: list[int]) -> str:
    return "".join(CONTEXT.format(c=chr(cp)) for cp in block)


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
