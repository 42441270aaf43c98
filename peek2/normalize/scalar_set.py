"""A set of scalars kept as a bitmap, to find where a text holds one of them.

Compiled with mypyc (``setup.py``'s HOT_MODULES). ``frozenset.isdisjoint(text)`` iterates the text
as one-character strs, each hashed and looked up: with Qwen3's file, whose NFC first looks for the
scalars newer than the reference's Unicode 9.0 (``peek2.normalize.nfc``), a third of the encode of
1 MB of English holding one curly quote went there (``perf record``: ``set_lookkey``,
``unicodeiter_next``). Here a scalar outside the set's range costs two comparisons, and one inside
it a bit test.

Performance notes: that loop was then 5% of the samples of a process encoding Qwen3's English
corpus over and over (``perf record``), about a seventh of its encode. A set with no Latin-1
scalar (NFC's, from U+0300 on) now passes over each window of 4,096 Latin-1 scalars whole,
sliced and encoded in C: encode of the 1 MB English corpus with Qwen3's file, the piece cache
emptied first, the old and the new build in alternating processes (medians of 9 runs each, two
rounds): 55.4-55.7 -> 61.6-62.0 MB/s; XNLI of 15 languages and the 20,000 sentences one by one
the same within the noise (four scalars spread over a window of another script stop it at once);
the German, French and Spanish text, a window in five holding a scalar beyond Latin-1 (a curly
quote, an oe ligature), within the noise too.

>>> late = ScalarSet(frozenset("\\u07fd\\u0860"))
>>> late.first_in("abc\\u0860", 0), late.first_in("abc", 0)
(3, -1)
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

# first_in: scalars a window of the text passed over whole when all are Latin-1 (and none is in the
# set). ``ord(text[k])`` finds the str's kind and data again at each scalar (see peek2.bpe.merger's
# performance notes); slicing a window and encoding it is two passes in C.
LATIN1_WINDOW: Final = 4096


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
        n: i64 = len(text)
        if self.low <= 0xFF:
            return self._first_between(text, start, n)
        # No scalar of Latin-1 is in the set: windows of Latin-1 text are passed over whole.
        k: i64 = start
        while k < n:
            end: i64 = min(n, k + LATIN1_WINDOW)
            if not _latin1_only(text, k, end):
                found = self._first_between(text, k, end)
                if found >= 0:
                    return found
            k = end
        return -1

    def _first_between(self, text: str, start: i64, end: i64) -> i64:
        """The index of the first scalar of the set in ``text[start:end]``, or -1."""
        low = self.low
        high = self.high
        bits = self.bits
        for k in range(start, end):
            cp: i64 = ord(text[k])
            if low <= cp <= high:
                offset = cp - low
                if (bits[offset >> 3] >> (offset & 7)) & 1:
                    return k
        return -1


def _latin1_only(text: str, start: i64, end: i64) -> bool:
    """Whether no scalar of ``text[start:end]`` is above U+00FF: four of them spread over the range
    first (a text of another script stops there), then the range encoded as Latin-1, in C."""
    step: i64 = (end - start) // 4 + 1
    k: i64 = start + step // 2
    while k < end:
        if ord(text[k]) > 0xFF:
            return False
        k += step
    return len(text[start:end].encode("latin-1", "ignore")) == end - start
