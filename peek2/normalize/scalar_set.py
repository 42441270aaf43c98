"""A set of scalars kept as a bitmap, to find where a text holds one of them.

Compiled with mypyc (``setup.py``'s HOT_MODULES). ``frozenset.isdisjoint(text)`` iterates the text
as one-character strs, each hashed and looked up: with Qwen3's file, whose NFC first looks for the
scalars newer than the reference's Unicode 9.0 (``peek2.normalize.nfc``), a third of the encode of
1 MB of English holding one curly quote went there (``perf record``: ``set_lookkey``,
``unicodeiter_next``). Here a scalar outside the set's range costs two comparisons, and one inside
it a bit test.

>>> late = ScalarSet(frozenset("\\u07fd\\u0860"))
>>> late.first_in("abc\\u0860", 0), late.first_in("abc", 0)
(3, -1)
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64


class ScalarSet:
    """The scalars of ``chars`` (one-character strs), as bits from the smallest to the largest."""

    def __init__(self, chars: frozenset[str]) -> None:
        codes = sorted(ord(char) for char in chars)
        low: i64 = codes[0] if codes else 1
        high: i64 = codes[-1] if codes else 0  # (empty: no scalar is in low..high)
        bits = bytearray(((high - low) >> 3) + 1 if codes else 1)
        for cp in codes:
            bits[(cp - low) >> 3] |= 1 << ((cp - low) & 7)
        self.low: Final = low
        self.high: Final = high
        self.bits: Final = bytes(bits)

    def first_in(self, text: str, start: i64) -> i64:
        """The index of the first scalar of the set in ``text[start:]``, or -1."""
        low = self.low
        high = self.high
        bits = self.bits
        for k in range(start, len(text)):
            cp: i64 = ord(text[k])
            if low <= cp <= high:
                offset = cp - low
                if (bits[offset >> 3] >> (offset & 7)) & 1:
                    return k
        return -1
