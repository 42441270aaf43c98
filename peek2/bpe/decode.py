"""Token ids -> their bytes, compiled: the loop of ``Tokenizer.decode`` and ``decode_batch``.

Compiled with mypyc (one C loop: a type check, a bounds check, a tuple load and a copy per id).

Performance notes (Llama-3.2, ids of the 1 MB English and CJK corpora of scripts/corpora.py,
decode to str, median of 9): the interpreted ``b"".join([table[i] for i in ids])`` after
``min(ids)`` took 10.7 and 13.8 ms, this loop 5.1 and 5.3 ms (the UTF-8 decoding of the result
is CPython's in both). For a batch the per-document work (type check, bytes, str) stays in C
too. scripts/bench_decode.py gives the figures against tokenizers and tiktoken.
"""

from __future__ import annotations

import operator
from typing import Any, Final

from librt.strings import BytesWriter, write_i64_le
from librt.vecs import vec
from mypy_extensions import i64

NO_WORDS: Final = vec[i64]()
"""``ids_bytes``'s ``words`` where there are none (each token read from the table)."""


SHORT_MAX: Final = 15  # the bytes of a token in its two words (``short_words``)
WORDS_FROM: Final = 1 << 16
"""The ids of a decode call (or batch) from which ``short_words`` is made, if not yet (see
``PlainDecode.words_for``): making it touches every token, 4-11 ms for Llama-3's 128K, which a
call of one id (a generation loop) must not pay; tokenizers takes about 14 ms for 65,536 ids."""


def short_words(table: tuple[bytes | None, ...]) -> vec[i64]:
    """Each token of at most SHORT_MAX bytes as two words (``words[2 * id]``, ``words[2 * id +
    1]``): its bytes, little-endian, and its length in the top byte of the second; -1 for a longer
    token or no token (read from ``table``). Nearly all tokens: Llama-3's vocabulary averages 6.4
    bytes a token, and English text's tokens about 4."""
    words = vec[i64]([-1] * (2 * len(table)))
    for k in range(len(table)):
        data = table[k]
        if data is not None and len(data) <= SHORT_MAX:
            low: i64 = 0
            high: i64 = i64(len(data)) << 56
            for j in range(len(data)):
                if j < 8:
                    low |= i64(data[j]) << (8 * j)
                else:
                    high |= i64(data[j]) << (8 * (j - 8))
            words[2 * k] = low
            words[2 * k + 1] = high
    return words


def ids_bytes(table: tuple[bytes | None, ...], ids: list[object], first: i64, mask: bytes, words: vec[i64] = NO_WORDS) -> bytes | None:
    """The bytes of ``ids`` through ``table``, leaving out the ids from ``first`` on whose byte in
    ``mask`` (at ``id - first``) is 1 (skipped special tokens: ``Tokenizer._skip_mask``); None when
    one is not a Python int naming a token (the caller then converts other integer types, or names
    the wrong id). ``words``: ``short_words(table)``, or NO_WORDS.

    Performance notes: a token of at most SHORT_MAX bytes is written from its two words (16 bytes,
    then the writer cut back), one line of a table of 16 bytes a token instead of the tuple's slot
    and then the bytes object (a separate allocation, elsewhere in memory). cl100k, 100,000 random
    ids: see ``scripts/bench_decode.py`` and the README.
    """
    out = BytesWriter()
    size: i64 = len(table)
    short = len(words) == 2 * size
    for item in ids:
        if type(item) is not int:
            return None
        if item < 0 or item >= size:
            return None
        if short:
            high = words[2 * item + 1]
            if high >= 0:
                if item < first or mask[item - first] == 0:
                    write_i64_le(out, words[2 * item])
                    length = high >> 56
                    if length > 8:
                        write_i64_le(out, high)
                        out.truncate(len(out) - 16 + length)
                    else:
                        out.truncate(len(out) - 8 + length)
                continue
        data = table[item]
        if data is None:
            return None
        if item < first or mask[item - first] == 0:
            out.write(data)
    return out.getvalue()


def total_ids(batch: list[object]) -> i64:
    """The ids of the lists of ``batch`` (``decode_batch``'s count for ``words_for``)."""
    total: i64 = 0
    for ids in batch:
        if isinstance(ids, list):
            total += len(ids)
    return total


def ids_texts(table: tuple[bytes | None, ...], batch: list[object], first: i64, mask: bytes, words: vec[i64] = NO_WORDS) -> list[str | None]:
    """``ids_bytes`` of each list of ``batch``, decoded as UTF-8 with U+FFFD for what is not;
    None where a document is not a list or ``ids_bytes`` gives None (the caller decodes those)."""
    texts: list[str | None] = []
    for ids in batch:
        if isinstance(ids, list):
            data = ids_bytes(table, ids, first, mask, words)
            texts.append(data.decode("utf-8", "replace") if data is not None else None)
        else:
            texts.append(None)
    return texts


class PlainDecode:
    """The work of ``Tokenizer.decode``, compiled, for the usual ids: a list or tuple of ints
    (NumPy integers among them), a 1-d NumPy array of integers; anything else (other iterables,
    a wrong id or argument to name) goes to ``Tokenizer._decode``, the interpreted path, which
    names what is wrong.

    Performance notes: a generation loop decodes one id a call. The interpreted method's checks
    and table lookup cost about 1.1-1.4 us a call, and ``[tok.decode([i]) for i in ids]`` took
    twice tokenizers' time (0.0786 s against 0.0384 s for 50,000 ids, Llama-3.1; a bug hunt).
    Installed as the instance's ``decode`` it took 0.013 s, but the method lost its signature,
    docstring and argument errors (a later hunt): the method calls it, 0.016 s.
    """

    def __init__(self, table: tuple[bytes | None, ...], owner: Any) -> None:
        self.table: Final = table  # each id's bytes (None: no token)
        self.size: Final[i64] = len(table)
        self.skipping: tuple[int, bytes] | None = None  # the owner's ``_skip_mask`` (asked at the first decode that skips)
        self.owner: Final = owner  # the tokenizer
        self._words: vec[i64] = NO_WORDS  # short_words(table), made by the first decode of WORDS_FROM ids

    def words_for(self, count: i64) -> vec[i64]:
        """``short_words`` of the table for a decode of ``count`` ids: made by the first of at
        least WORDS_FROM ids (two threads making it at once make the same), NO_WORDS before."""
        if len(self._words) != 2 * self.size and count >= WORDS_FROM:
            self._words = short_words(self.table)
        return self._words

    def __call__(self, ids: object, skip_special_tokens: object) -> str:
        skip = skip_special_tokens
        if skip is not True and skip is not False and type(skip).__module__ == "numpy" and type(skip).__name__ in ("bool", "bool_"):
            skip = bool(skip)
        table: tuple[bytes | None, ...] | None = None
        first: i64 = self.size
        mask = b""
        if skip is True:
            skipping = self.skipping
            if skipping is None:
                skipping = self.skipping = self.owner._skip_mask()
            first = skipping[0]
            mask = skipping[1]
            table = self.table
        elif skip is False:
            table = self.table
        values: list[object] | None = None
        kind = type(ids)
        if kind is list:
            values = ids  # type: ignore[assignment]
        elif kind is tuple:
            values = list(ids)  # type: ignore[call-overload]
        elif kind.__module__ == "numpy" and kind.__name__ == "ndarray":
            dtype = getattr(ids, "dtype")
            if getattr(ids, "ndim") == 1 and getattr(dtype, "kind") in ("i", "u"):
                values = getattr(ids, "tolist")()
        if table is not None and values is not None:
            try:
                words = self.words_for(len(values))
                data = ids_bytes(table, values, first, mask, words)
                if data is None:  # (NumPy integers, bools: each by its __index__; anything else is named by the method)
                    data = ids_bytes(table, [operator.index(value) for value in values], first, mask, words)  # type: ignore[arg-type]
            except (ValueError, OverflowError, TypeError):  # (an int past 64 bits, a float: named by the method)
                data = None
            if data is not None:
                return data.decode("utf-8", "replace")
        return self.owner._decode(ids, skip_special_tokens)  # type: ignore[no-any-return]
