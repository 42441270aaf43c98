"""The scanner's ``resume_context``: a scalar or two that put the scan in the state it is in at a
cut inside a piece of several categories, whatever the text goes on with.

Rule 3 of the streaming encoder cuts a growing piece, sends the ids before the cut and keeps the
context in front of the rest (``StreamEngine._loop_cut``); before, a piece of several categories
(o200k's letters and marks in turn, Thai, DeepSeek-V3's Latin of two kinds, punctuation and marks,
spaces and tabs) was held whole, and a prompt session read it from its start at every append.
The claim is checked here on the scanner itself, in every family, for every cut where a context is
given and continuations of every category: the piece read behind the context ends where the
piece read from its start ends, shifted by the cut.
"""

from __future__ import annotations

import random

import pytest

from peek2 import FAMILIES
from peek2.pretokenize.families import find_family
from peek2.pretokenize.scanner import piece_end, resume_context

UNITS = [
    "ab\u0301\u0308",
    "AB\u0301\u0327",
    "aAbB\u0301",
    "\u0e01\u0e34\u0e19\u0e49\u0e32\u0e2a",
    "\u0915\u093e\u0930\u094d\u092f",
    "\u00e9e\u00e8a\u0301",
    "\u4e00\u4e8c\u3042\u30a2\u3099",
    "\u30a2\u3099\u30fc",
    "!'\u0301",
    "!\u3002\u0301/",
    " \t",
    " \t\xa0",
    " \t\n",
    "\u01c5a\u02b0",
    "'s",
]
HEADS = ["", " ", "'", "!", "\u0301", "A", "\t", "\u3000"]
# Continuations: a scalar of each kind the scanners tell apart, and the ASCII ones an alternative names.
POOL = list("aAzZ\u01c5\u02b0\u4e00\u3042\u30a2\u0e01\u0915\u0301\u3099 \t\n\r\xa0\u3000'sStTlLdDrRvVeE!/.,\u3002=0\u0663\u00bd\U0001F600")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_piece_read_behind_the_context_ends_where_it_ends(family: str) -> None:
    spec = find_family(family)
    stage2, rules = spec.stage2, spec.rules
    rng = random.Random(family)
    given = 0
    for _ in range(300):
        unit = rng.choice(UNITS)
        text = rng.choice(HEADS) + "".join(rng.choice(unit) for _ in range(rng.randint(3, 40)))
        n = len(text)
        if piece_end(text, 0, n, stage2, rules) != n:
            continue  # (not one piece: resume_context's premise)
        for x in range(2, n):
            context = resume_context(text, x, stage2, rules)
            if context is None:
                continue
            given += 1
            for _ in range(12):
                more = "".join(rng.choice(POOL) for _ in range(rng.randint(0, 6)))
                whole = text + more
                end = piece_end(whole, 0, len(whole), stage2, rules)
                if end <= x:
                    continue
                rest = context + whole[x:]
                assert piece_end(rest, 0, len(rest), stage2, rules) - len(context) == end - x, (family, ascii(text), x, ascii(more))
    if family == "starcoder2":
        assert given == 0  # (digits apart: GPT-2's pieces between numbers; no context is given)
    else:
        assert given > 200, f"{family}: only {given} cuts had a context"
