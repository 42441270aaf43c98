"""NFC exactly as the reference's ``normalizers.NFC`` computes it.

The reference normalizes with Unicode 9.0 data (measured: tables/nfc.py), so a
scalar assigned later is to it an unassigned starter that nothing reorders or
composes across. peek2 runs Unicode-16 NFC (``unicodedata2``, pinned) on the text
between such scalars, which gives the same result; canonical data of older scalars
never changes.

>>> nfc("e\\u0301")
'é'
>>> nfc("A\\u0327\\u07fd") == "A\\u0327\\u07fd"  # U+07FD (Unicode 11) is not reordered
True

Long runs of marks: the C normalizer orders each run of marks by insertion sort, quadratic in the
run ("e" + 80,000 marks of two classes took 2.1 s, 4x the marks 15x the time). So text that is not
already NFC is normalized in chunks of about ``CHUNK`` scalars, each cut just before a starter that
nothing composes with across (``_boundary``: NFC of the two sides is NFC of the whole), and a stretch
of ``CHUNK`` scalars with no such starter (a long run of marks, whose end a regular expression of
the generated ``NOT_BOUNDARY_CLASS`` finds) is composed by one C call when it is already in canonical
order (the C insertion sort then does nothing), else put in order by a stable sort (n log n) first.

Performance notes: ASCII returns at once, and so does text with none of ``inert_scalars`` (one
pass of a compiled loop); other text pays one such pass for the
LATE scalars (``peek2.normalize.scalar_set``: ``frozenset.isdisjoint`` made a str a scalar, a third
of Qwen3's encode of an English text holding one curly quote) and the quick check of the standard
library's ``unicodedata.is_normalized`` (C; its Unicode version is older than 16, but only for
scalars newer than the reference's 9.0, and those that NFC touches are LATE, cut out before). Only
text that is not NFC pays the chunks (a few percent over one C call on XNLI). A pre-scan for long
runs with a compiled ``re`` character class cost 47 ns a character, twice the normalization itself,
so the class is used only once a chunk has found no cut. On "e" + 200,000 marks (Qwen3 ``encode``
against tokenizers' in the same run, medians of 5, old and new build interleaved, a busy machine):
one class 1.07-1.11x -> 3.4-3.6x, two classes alternating 1.27-1.34x -> 2.05-2.10x; what went is
the Python loops over the run (the cut search, and a decomposition per mark in the sort).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

import unicodedata2  # type: ignore[import-not-found]  # ships no type stubs

from peek2.normalize.nfc_late import CHANGED_NEAR_CLASS, LATE, NOT_BOUNDARIES, NOT_BOUNDARY_CLASS
from peek2.normalize.scalar_set import ScalarSet

_LATE: Final = ScalarSet(LATE)  # (found where they are, see peek2.normalize.scalar_set)

CHUNK: Final = 256
"""Scalars normalized by one C call at most (its insertion sort costs at most CHUNK**2 / 2 swaps)."""


def nfc(text: str) -> str:
    """``text`` in Normalization Form C, as the reference normalizes it."""
    return nfc_with_runs(text, None)


def nfc_with_runs(text: str, runs: dict[int, tuple[int, str]] | None) -> str:
    """``nfc(text)``, and in ``runs`` (when given) each stretch of more than ``CHUNK`` scalars NFC
    may not cut: its start in ``text`` -> its end and its NFC (``nfc_aligned`` needs them again,
    and they are what costs on a long run of marks)."""
    if text.isascii():
        return text  # ASCII is always NFC
    first = (_not_inert[0] if _not_inert else inert_scalars()).first_in(text, 0)
    if first < 0:
        return text  # (no scalar NFC changes or reorders, or joins to one before it; none LATE)
    index = _LATE.first_in(text, first)  # (LATE scalars are among those: none before ``first``)
    if index < 0:
        return _nfc(text, runs, 0)
    parts: list[str] = []
    start = 0
    while index >= 0:
        parts.append(_nfc(text[start:index], runs, start))
        parts.append(text[index])
        start = index + 1
        index = _LATE.first_in(text, start)
    parts.append(_nfc(text[start:], runs, start))
    return "".join(parts)


_not_inert: list[ScalarSet] = []


def inert_scalars() -> ScalarSet:
    """The scalars near which NFC may change text (``CHANGED_NEAR_CLASS``: the marks, the scalars
    that join what precedes them, those NFC changes alone) and those the reference does not know
    (LATE): a text holding none of them is its own NFC, and NFC may cut it before any scalar.
    Built on first use (2,850 scalars)."""
    if not _not_inert:
        body = CHANGED_NEAR_CLASS  # (scalars, and ranges written "a-b": no "-" stands for itself)
        chars = set(LATE)
        k = 0
        while k < len(body):
            if k + 2 < len(body) and body[k + 1] == "-":
                chars.update(chr(cp) for cp in range(ord(body[k]), ord(body[k + 2]) + 1))
                k += 3
            else:
                chars.add(body[k])
                k += 1
        _not_inert.append(ScalarSet(frozenset(chars)))
    return _not_inert[0]


_not_boundary_runs: list[re.Pattern[str]] = []


def not_boundary_end(text: str, at: int) -> int:
    """Where the run of scalars NFC may not cut before (LATE aside) that starts at ``at`` ends.

    A regular expression of their class (compiled on first use: only long runs of marks need it,
    and start-up does not pay for it); a loop in Python cost 0.1 s on a run of 200,000 marks.
    """
    if not _not_boundary_runs:
        _not_boundary_runs.append(re.compile(f"[{NOT_BOUNDARY_CLASS}]*"))
    run = _not_boundary_runs[0].match(text, at)
    return at if run is None else run.end()


def _boundary(char: str) -> bool:
    """True when NFC may cut text just before ``char`` (see the module notes)."""
    return not unicodedata2.combining(char) and char not in NOT_BOUNDARIES


def _nfc(text: str, runs: dict[int, tuple[int, str]] | None, base: int) -> str:
    """Unicode-16 NFC of text without late scalars, linear however long its runs of marks (``runs``:
    see ``nfc_with_runs``; ``base``: where ``text`` starts in the text they index)."""
    if unicodedata.is_normalized("NFC", text):
        return text
    n = len(text)
    if n <= CHUNK:
        return str(unicodedata2.normalize("NFC", text))
    parts: list[str] = []
    start = 0
    while start < n:
        end = start + CHUNK
        if end >= n:
            parts.append(unicodedata2.normalize("NFC", text[start:]))
            break
        cut = end
        while cut > start and not _boundary(text[cut]):
            cut -= 1
        if cut > start:
            parts.append(unicodedata2.normalize("NFC", text[start:cut]))
            start = cut
            continue
        end = not_boundary_end(text, end)  # CHUNK scalars and more with no cut
        run = nfc_run(text[start:end])
        if runs is not None:
            runs[base + start] = (base + end, run)
        parts.append(run)
        start = end
    return "".join(parts)


def nfc_run(text: str) -> str:
    """NFC of a stretch of scalars NFC may not cut, none of them LATE (a long run of marks after a
    starter).

    Where the stretch is in canonical order once decomposed (a run of marks of one class, or of
    classes in order: what a text that is not adversarial has), that form is its NFD and the C
    normalizer's sort does nothing on it, so one C call composes it; otherwise the run is sorted
    first (``_nfc_sorted``). Each distinct scalar is decomposed once (a ``str.translate`` table):
    only the first one was before, and a run of marks that decompose (``"\u0344" * 100,000``,
    U+0308 U+0301 each) went through the sort, 0.049 s, 7x one C call (a bug hunt).
    """
    table: dict[int, str] = {}
    for char in set(text):
        decomposed = unicodedata2.normalize("NFD", char)
        if decomposed != char:
            table[ord(char)] = decomposed
    if table:
        text = text.translate(table)
    if unicodedata.is_normalized("NFD", text):
        return str(unicodedata2.normalize("NFC", text))
    return _nfc_sorted(text)


def _nfc_sorted(text: str) -> str:
    """NFC of ``text`` (decomposed), its runs of marks put in canonical order by a stable sort first.

    The runs are found and sorted by C calls (``list.index``, ``sorted``): a loop over the scalars
    in Python cost 0.12 s on a run of 200,000 marks of two classes, this 0.04 s.
    """
    classes = list(map(unicodedata2.combining, text))
    n = len(text)
    parts: list[str] = []
    at = 0
    while at < n:
        if not classes[at]:
            parts.append(text[at])
            at += 1
            continue
        try:
            stop = classes.index(0, at)
        except ValueError:
            stop = n
        parts.append(_sorted_by_class(text[at:stop]))
        at = stop
    return str(unicodedata2.normalize("NFC", "".join(parts)))


SORT_DISTINCT_MAX = 16
"""A run of marks of at most this many distinct ones is sorted by ``str.replace`` calls ..."""
REPLACES_PER_MARK = 4
"""... when it holds at least this many marks per replace (its classes times its distinct marks)."""


def _sorted_by_class(run: str) -> str:
    """``run`` (marks) stably sorted by combining class. Where it holds few distinct marks (the
    usual adversarial run: two alternating), each class is what is left once the marks of the
    others are replaced by nothing, one C call a mark: a sort with a key call a mark cost half of
    NFC's time on ``"a" + "\u0323\u0340" * 50,000`` (Qwen3 offsets 0.61x tokenizers' encode), and
    ``str.translate`` deleting them was no faster (a dict lookup a character)."""
    distinct = set(run)
    classes = {unicodedata2.combining(char) for char in distinct}
    if len(classes) == 1:
        return run
    if len(distinct) > SORT_DISTINCT_MAX or len(classes) * len(distinct) * REPLACES_PER_MARK > len(run):
        # (a short run of many kinds: a replace per kind and class cost more than a key call per
        # mark; 16 kinds of 14 classes in clusters of 33 marks took 45 us a cluster with offsets,
        # 1.5x tokenizers; a bug hunt)
        return "".join(sorted(run, key=unicodedata2.combining))
    passes = []
    for klass in sorted(classes):
        kept = run
        for char in distinct:
            if unicodedata2.combining(char) != klass:
                kept = kept.replace(char, "")
        passes.append(kept)
    return "".join(passes)
