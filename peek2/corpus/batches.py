"""Ids of a batch of texts as an Arrow column: for ``datasets.map(batched=True)`` and Ray Data.

One flat array of ids and the offsets of each row (``Tokenizer._write_flat``) make a
``pyarrow.ListArray`` without a Python int or list a id; ``datasets`` and Ray store it as it is.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy
from librt.strings import BytesWriter

from peek2.argument_checks import plain_int
from peek2.bpe.merger import as_flag
from peek2.extras import import_optional
from peek2.tokenizer import Tokenizer


def ids_column(
    tokenizer: Tokenizer,
    texts: Sequence[Any],
    text_key: str,
    add_special_tokens: bool = False,
    first_id: int = -1,
    last_id: int = -1,
    rows: Sequence[int] | None = None,
) -> Any:
    """A ``pyarrow.ListArray`` of uint32: the ids of each text.

    Raises:
        ValueError: a text is null or not a str, or holds a lone surrogate (its row is named:
            ``rows[k]`` where the caller knows the rows' numbers, else its place in the batch).
    """
    pa = import_optional("pyarrow", "batch_function")

    def row(k: int) -> str:
        return f"row {rows[k]}" if rows is not None else f"row {k} of the batch"

    for k, text in enumerate(texts):
        if not isinstance(text, str):
            # (NaN too: Ray hands a column of nulls to a numpy batch as floats, "is float"; a bug hunt)
            null = text is None or (isinstance(text, (float, numpy.floating)) and text != text)
            raise ValueError(f"{row(k)}: column {text_key!r} is {'null' if null else type(text).__name__}, not a string")
    out = BytesWriter()
    try:
        lengths = tokenizer._write_flat(texts, out, True, add_special_tokens, False, first_id, last_id)
    except ValueError as error:
        where = re.match(r"texts\[(\d+)\]: (.*)", str(error), re.DOTALL)
        if where is None:
            raise
        raise ValueError(f"{row(int(where[1]))}: column {text_key!r}: {where[2]}") from None
    values = numpy.frombuffer(out.getvalue(), dtype="<u4")
    offsets = numpy.zeros(len(lengths) + 1, dtype=numpy.int64)
    numpy.cumsum(lengths, out=offsets[1:])
    if offsets[-1] < 2**31:  # (int32 offsets: a list column; past them a large_list, never wrapped)
        return pa.ListArray.from_arrays(pa.array(offsets.astype(numpy.int32)), pa.array(values, type=pa.uint32()))
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values, type=pa.uint32()))


def delimiter_id(tokenizer: Tokenizer, value: object, name: str) -> int:
    """``first_id``/``last_id`` checked: -1 (none) or an id of the tokenizer (an id past the
    vocabulary, or one in a gap of its ids, was written as it was, and -5 was taken for none; bug hunts)."""
    value = plain_int(value)  # (np.int64(128000) was refused; a bug hunt)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int (-1: none), not {type(value).__name__}")
    if value != -1 and not 0 <= value < tokenizer.vocab_size:
        raise ValueError(f"{name} must be -1 (none) or an id below the vocabulary size {tokenizer.vocab_size}, not {value}")
    if value != -1:
        try:
            tokenizer.id_to_bytes(value)
        except ValueError:  # (GPT-4o's 199998 was written, and decoded as an error; a bug hunt)
            raise ValueError(f"{name} must be -1 (none) or an id of the tokenizer, not {value}: no token has it") from None
    return value


class BatchFunction:
    """``ds.map(BatchFunction(tok), batched=True, num_proc=N)``: adds ``input_ids`` (``Tokenizer.batch_function``).

    Pickles with its tokenizer, by source: each ``num_proc`` worker loads the file once.
    """

    def __init__(self, tokenizer: Tokenizer, text_key: str = "text", output_key: str = "input_ids", *, add_special_tokens: bool = False) -> None:
        self.tokenizer = tokenizer
        self.text_key = text_key
        self.output_key = output_key
        self.add_special_tokens = as_flag(add_special_tokens, "add_special_tokens")  # ("no" added BOS)

    def __call__(self, batch: Any, *indices_or_rank: Any) -> dict[str, Any]:
        """``{output_key: ids}``, the ids a NumPy uint32 view a row into one flat array: ``datasets``
        stores them as a list<uint32> column (it refuses Arrow arrays in a dict, and an Arrow table
        returned would replace the input's columns instead of joining them). After ``batch``, what
        ``ds.map`` passes: the rows' numbers (``with_indices=True``), which name a bad row (else
        its place in the batch names it), and the process's rank (``with_rank=True``), unused (it
        was taken for the rows' numbers, or was one argument too many; a bug hunt)."""
        indices: Sequence[int] | None = None
        for extra in indices_or_rank:
            if not isinstance(extra, int) and extra is not None:
                indices = extra
        try:
            texts = batch[self.text_key]
        except KeyError:
            columns = list(batch.keys()) if hasattr(batch, "keys") else []
            raise KeyError(f"the batch has no column {self.text_key!r} (its columns: {columns}): pass text_key=") from None
        except (TypeError, IndexError):  # (a list: "list indices must be integers"; a bug hunt)
            raise TypeError(f"batch must be a mapping of columns (as ds.map(..., batched=True) passes), not {type(batch).__name__}") from None
        if isinstance(texts, str):  # (ds.map without batched=True: each character was a document)
            raise TypeError(f"batch[{self.text_key!r}] is one str, not a batch of texts: call ds.map(..., batched=True)")
        if isinstance(texts, (bytes, bytearray, memoryview)):  # (its bytes were read as texts: "is int"; a bug hunt)
            raise TypeError(f"batch[{self.text_key!r}] is {type(texts).__name__}, not a batch of texts (a list of str)")
        if hasattr(texts, "to_pylist"):  # (a pyarrow column, from ds.with_format("arrow"))
            texts = texts.to_pylist()
        elif not isinstance(texts, (list, tuple)):
            if not hasattr(texts, "__iter__"):  # (None: "'NoneType' object is not iterable"; a bug hunt)
                raise TypeError(f"batch[{self.text_key!r}] is {type(texts).__name__}, not a batch of texts (a list of str)")
            texts = list(texts)  # (read twice below: a generator's rows were lost, the answer empty; a bug hunt)
        column = ids_column(self.tokenizer, texts, self.text_key, self.add_special_tokens, rows=indices)
        values = column.values.to_numpy()
        offsets = column.offsets.to_numpy()
        return {self.output_key: [values[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]}
