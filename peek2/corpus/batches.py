"""Ids of a batch of texts as an Arrow column: for ``datasets.map(batched=True)`` and Ray Data.

One flat array of ids and the offsets of each row (``Tokenizer._write_flat``) make a
``pyarrow.ListArray`` without a Python int or list a id; ``datasets`` and Ray store it as it is.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy
from librt.strings import BytesWriter

from peek2.tokenizer import Tokenizer


def ids_column(
    tokenizer: Tokenizer,
    texts: Sequence[Any],
    text_key: str,
    add_special_tokens: bool = False,
    first_id: int = -1,
    last_id: int = -1,
) -> Any:
    """A ``pyarrow.ListArray`` of uint32: the ids of each text.

    Raises:
        ValueError: a text is null or not a str, or holds a lone surrogate (its row is named).
    """
    import pyarrow as pa

    for k, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"row {k}: column {text_key!r} is {'null' if text is None else type(text).__name__}, not a string")
    out = BytesWriter()
    try:
        lengths = tokenizer._write_flat(texts, out, True, add_special_tokens, False, first_id, last_id)
    except ValueError as error:
        raise ValueError(str(error).replace("texts[", "row [", 1)) from None
    values = numpy.frombuffer(out.getvalue(), dtype="<u4")
    offsets = numpy.zeros(len(lengths) + 1, dtype=numpy.int32)
    numpy.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, type=pa.uint32()))


class BatchFunction:
    """``ds.map(BatchFunction(tok), batched=True, num_proc=N)``: adds ``input_ids`` (``Tokenizer.batch_function``).

    Pickles with its tokenizer, by source: each ``num_proc`` worker loads the file once.
    """

    def __init__(self, tokenizer: Tokenizer, text_key: str = "text", output_key: str = "input_ids", *, add_special_tokens: bool = False) -> None:
        self.tokenizer = tokenizer
        self.text_key = text_key
        self.output_key = output_key
        self.add_special_tokens = add_special_tokens

    def __call__(self, batch: Any) -> dict[str, Any]:
        """``{output_key: ids}``, the ids a NumPy uint32 view a row into one flat array: ``datasets``
        stores them as a list<uint32> column (it refuses Arrow arrays in a dict, and an Arrow table
        returned would replace the input's columns instead of joining them)."""
        texts = batch[self.text_key]
        if isinstance(texts, str):  # (ds.map without batched=True: each character was a document)
            raise TypeError(f"batch[{self.text_key!r}] is one str, not a batch of texts: call ds.map(..., batched=True)")
        if hasattr(texts, "to_pylist"):  # (a pyarrow column, from ds.with_format("arrow"))
            texts = texts.to_pylist()
        column = ids_column(self.tokenizer, texts, self.text_key, self.add_special_tokens)
        values = column.values.to_numpy()
        offsets = column.offsets.to_numpy()
        return {self.output_key: [values[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]}
