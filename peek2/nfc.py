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

Performance notes: ASCII returns at once; other text pays one ``frozenset.isdisjoint``
pass (measured at about a tenth of ``unicodedata2.normalize`` on XNLI text) before
the C normalizer; the slow path only runs on text that holds a late scalar.
"""

from __future__ import annotations

import unicodedata2  # type: ignore[import-not-found]  # ships no type stubs

from peek2._nfc_late import LATE


def nfc(text: str) -> str:
    """``text`` in Normalization Form C, as the reference normalizes it."""
    if text.isascii():
        return text  # ASCII is always NFC
    if LATE.isdisjoint(text):
        normalized: str = unicodedata2.normalize("NFC", text)
        return normalized
    parts: list[str] = []
    start = 0
    for index, char in enumerate(text):
        if char in LATE:
            parts.append(unicodedata2.normalize("NFC", text[start:index]))
            parts.append(char)
            start = index + 1
    parts.append(unicodedata2.normalize("NFC", text[start:]))
    return "".join(parts)
