"""Token ids -> their bytes, compiled: the loop of ``Tokenizer.decode`` and ``decode_batch``.

Compiled with mypyc (one C loop: a type check, a bounds check, a tuple load and a copy per id).

Performance notes (Llama-3.2, ids of the 1 MB English and CJK corpora of scripts/corpora.py,
decode to str, median of 9): the interpreted ``b"".join([table[i] for i in ids])`` after
``min(ids)`` took 10.7 and 13.8 ms, this loop 5.1 and 5.3 ms (the UTF-8 decoding of the result
is CPython's in both). For a batch the per-document work (type check, bytes, str) stays in C
too. scripts/bench_decode.py gives the figures against tokenizers and tiktoken.
"""

from __future__ import annotations

from typing import Any, Final

from librt.strings import BytesWriter
from mypy_extensions import i64


def ids_bytes(table: tuple[bytes | None, ...], ids: list[object]) -> bytes | None:
    """The bytes of ``ids`` through ``table``; None when one is not a Python int naming a token
    (the caller then converts other integer types, or names the wrong id)."""
    out = BytesWriter()
    size: i64 = len(table)
    for item in ids:
        if type(item) is not int:
            return None
        if item < 0 or item >= size:
            return None
        data = table[item]
        if data is None:
            return None
        out.write(data)
    return out.getvalue()


def ids_texts(table: tuple[bytes | None, ...], batch: list[object]) -> list[str | None]:
    """``ids_bytes`` of each list of ``batch``, decoded as UTF-8 with U+FFFD for what is not;
    None where a document is not a list or ``ids_bytes`` gives None (the caller decodes those)."""
    texts: list[str | None] = []
    for ids in batch:
        if isinstance(ids, list):
            data = ids_bytes(table, ids)
            texts.append(data.decode("utf-8", "replace") if data is not None else None)
        else:
            texts.append(None)
    return texts


class PlainDecode:
    """``Tokenizer.decode`` as a compiled callable, for the usual call: a list of Python ints,
    each a token. A ``Tokenizer`` installs one as its instance's ``decode``, as it does
    ``peek2.bpe.merger.PlainEncode``; anything else (NumPy arrays and integers, other iterables, a
    wrong id or argument to name) goes to ``fallback``, the interpreted ``Tokenizer.decode``.

    Performance notes: a generation loop decodes one id a call. The interpreted method's checks
    and table lookup cost about 1.1-1.4 us a call, and ``[tok.decode([i]) for i in ids]`` took
    twice tokenizers' time (0.0786 s against 0.0384 s for 50,000 ids, Llama-3.1; a bug hunt).
    """

    def __init__(self, table: tuple[bytes | None, ...], owner: Any) -> None:
        self.table: Final = table  # each id's bytes (None: no token)
        self.skipping: tuple[bytes | None, ...] | None = None  # the same, special tokens empty (the owner makes it)
        self.owner: Final = owner  # the tokenizer (pickled by its source)

    def __reduce__(self) -> tuple[object, tuple[object, str]]:
        return (getattr, (self.owner, "decode"))

    def __call__(self, ids: object, skip_special_tokens: object = True) -> str:
        """The text of ``ids``, as ``tokenizers.Tokenizer.decode``; invalid UTF-8 becomes U+FFFD.

        ``Tokenizer.decode``, compiled: see that method for the arguments and exceptions.
        """
        if type(ids) is list:
            table: tuple[bytes | None, ...] | None = None
            if skip_special_tokens is True:
                table = self.skipping
                if table is None:
                    table = self.skipping = self.owner._decode_table(True)
            elif skip_special_tokens is False:
                table = self.table
            if table is not None:
                try:
                    data = ids_bytes(table, ids)
                except (ValueError, OverflowError):  # (an int past 64 bits: named by the method)
                    data = None
                if data is not None:
                    return data.decode("utf-8", "replace")
        return self.owner._decode(ids, skip_special_tokens)  # type: ignore[no-any-return]
