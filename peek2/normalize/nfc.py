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
of ``CHUNK`` scalars with no such starter (a long run of marks) is put in canonical order by a
stable sort (n log n) before the C normalizer composes it: its insertion sort does nothing on a run
already in order.

Performance notes: ASCII returns at once; other text pays one ``frozenset.isdisjoint`` pass
(about a tenth of ``unicodedata2.normalize`` on XNLI text) and the quick check of the standard
library's ``unicodedata.is_normalized`` (C; its Unicode version is older than 16, but only for
scalars newer than the reference's 9.0, and those that NFC touches are LATE, cut out before). Only
text that is not NFC pays the chunks (a few percent over one C call on XNLI). A pre-scan for long
runs with a compiled ``re`` character class cost 47 ns a character, twice the normalization itself.
"""

from __future__ import annotations

import unicodedata
from typing import Final

import unicodedata2  # type: ignore[import-not-found]  # ships no type stubs

from peek2.normalize.nfc_late import LATE, NOT_BOUNDARIES

CHUNK: Final = 256
"""Scalars normalized by one C call at most (its insertion sort costs at most CHUNK**2 / 2 swaps)."""


def nfc(text: str) -> str:
    """``text`` in Normalization Form C, as the reference normalizes it."""
    if text.isascii():
        return text  # ASCII is always NFC
    if LATE.isdisjoint(text):
        return _nfc(text)
    parts: list[str] = []
    start = 0
    for index, char in enumerate(text):
        if char in LATE:
            parts.append(_nfc(text[start:index]))
            parts.append(char)
            start = index + 1
    parts.append(_nfc(text[start:]))
    return "".join(parts)


def _boundary(char: str) -> bool:
    """True when NFC may cut text just before ``char`` (see the module notes)."""
    return not unicodedata2.combining(char) and char not in NOT_BOUNDARIES


def _nfc(text: str) -> str:
    """Unicode-16 NFC of text without late scalars, linear however long its runs of marks."""
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
        while end < n and not _boundary(text[end]):  # CHUNK scalars and more with no cut
            end += 1
        parts.append(_nfc_sorted(text[start:end]))
        start = end
    return "".join(parts)


def _nfc_sorted(text: str) -> str:
    """NFC of ``text``, its runs of marks put in canonical order by a stable sort first."""
    chars: list[str] = []
    for char in text:
        chars.extend(unicodedata2.normalize("NFD", char))
    classes = [unicodedata2.combining(char) for char in chars]
    at = 0
    while at < len(chars):
        if not classes[at]:
            at += 1
            continue
        stop = at
        while stop < len(chars) and classes[stop]:
            stop += 1
        chars[at:stop] = sorted(chars[at:stop], key=unicodedata2.combining)
        at = stop
    return str(unicodedata2.normalize("NFC", "".join(chars)))
