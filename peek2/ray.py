"""Tokenizing on a Ray cluster: ``TokenizeBatches``, a callable class for Ray Data's ``map_batches``.

    >>> import ray, peek2.ray  # doctest: +SKIP
    >>> ds = ray.data.read_parquet("s3://bucket/corpus/")  # doctest: +SKIP
    >>> ds = ds.map_batches(  # doctest: +SKIP
    ...     peek2.ray.TokenizeBatches,
    ...     fn_constructor_kwargs={"tokenizer": "/shared/tokenizer.json", "text_key": "text"},
    ...     compute=ray.data.ActorPoolStrategy(size=8),
    ...     batch_format="pyarrow",
    ... )

Each actor loads the tokenizer once; each batch gains an ``input_ids`` column (a list of uint32
a row) made from one flat array of ids: no Python int or list a id. ``peek2 tokenize --engine
ray`` builds on it (``peek2.corpus.ray_engine``). Ray is an optional extra: ``peek2[ray]``.

Leave the read tasks a CPU: actors that ask one CPU each (the default) on all of a cluster's
CPUs (``size=2`` on ``ray.init(num_cpus=2)``) leave none to the reads, and the pipeline waits for
ever; pass ``num_cpus`` below one to ``map_batches`` there (docs/corpus.md).
"""

from __future__ import annotations

import os
from typing import Any

from peek2.bpe.merger import as_flag
from peek2.corpus.batches import delimiter_id, ids_column
from peek2.tokenizer import Tokenizer


class TokenizeBatches:
    """Add the ids of each row's text to a batch (``batch_format="pyarrow"``, or ``"numpy"``: a dict of arrays).

    ``tokenizer``: a ``Tokenizer`` (it pickles by its source), the path of a tokenizer.json, a
    folder holding one, or a named model. ``first_id``/``last_id``: a delimiter before every
    document's ids, and after those of every non-empty one (the corpus formats' end-of-text).
    ``keep_columns=False``: the batch returned holds the ids' column alone.

    Raises (when called):
        ValueError: a row's text is null, or holds a lone surrogate (its row is named).
        KeyError: the batch has no ``text_key`` column.
    """

    def __init__(
        self,
        tokenizer: Tokenizer | str | os.PathLike[str],
        text_key: str = "text",
        output_key: str = "input_ids",
        *,
        add_special_tokens: bool = False,
        first_id: int = -1,
        last_id: int = -1,
        keep_columns: bool = True,
    ) -> None:
        if isinstance(tokenizer, Tokenizer):
            self.tokenizer = tokenizer
        elif os.path.isfile(os.fspath(tokenizer)):
            self.tokenizer = Tokenizer.from_file(tokenizer)
        else:
            self.tokenizer = Tokenizer.from_pretrained(tokenizer)
        self.text_key = text_key
        self.output_key = output_key
        self.add_special_tokens = as_flag(add_special_tokens, "add_special_tokens")  # ("no" added BOS)
        self.first_id = delimiter_id(self.tokenizer, first_id, "first_id")
        self.last_id = delimiter_id(self.tokenizer, last_id, "last_id")
        self.keep_columns = as_flag(keep_columns, "keep_columns")  # False: the batch returned holds ``output_key`` alone

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        if isinstance(batch, pa.Table):
            column = self._column(batch.column(self.text_key).to_pylist())
            if not self.keep_columns:
                return pa.table({self.output_key: column})
            if self.output_key in batch.column_names:  # (replaced, as the numpy form's dict entry is)
                return batch.set_column(batch.column_names.index(self.output_key), self.output_key, column)
            return batch.append_column(self.output_key, column)
        if isinstance(batch, dict):
            # An Arrow table back, whose list<uint32> column Ray keeps: a NumPy object array of the
            # rows' ids became tensor types that changed with the batch (rows of one id: shape (1,);
            # a bug hunt). The other columns are converted as Ray converts a NumPy batch.
            texts = batch[self.text_key]
            column = self._column(texts.tolist() if hasattr(texts, "tolist") else list(texts))
            others = {key: value for key, value in batch.items() if key != self.output_key} if self.keep_columns else {}
            if not others:
                return pa.table({self.output_key: column})
            from ray.data.block import BlockAccessor

            table = BlockAccessor.batch_to_block(others)
            return table.append_column(self.output_key, column)
        raise TypeError(f"TokenizeBatches takes batch_format='pyarrow' or 'numpy' batches, not {type(batch).__name__}")

    def _column(self, texts: list[Any]) -> Any:
        return ids_column(self.tokenizer, texts, self.text_key, self.add_special_tokens, self.first_id, self.last_id)
