"""Corpus tokenization: JSONL, Parquet, text files or a saved ``datasets`` dataset to the token
files training stacks read (Megatron-Core's indexed dataset, llm.c shards, Parquet), on every core,
crash-safe and resumable. ``peek2 tokenize`` on the command line; docs/corpus.md.

    >>> import peek2.corpus
    >>> stats = peek2.corpus.tokenize("corpus.jsonl", tokenizer="llama3", output="out/corpus", format="megatron")  # doctest: +SKIP
"""

from peek2.extras import import_optional

import_optional("numpy", "peek2.corpus")  # (said once, here: "No module named 'numpy'" named neither the part nor the extra)

from peek2.corpus.inputs import CorpusInputError, CorpusLimitError  # noqa: E402
from peek2.corpus.run import FORMATS, CorpusError, CorpusOutputError, RunStats, tokenize  # noqa: E402

__all__ = ["FORMATS", "CorpusError", "CorpusInputError", "CorpusLimitError", "CorpusOutputError", "RunStats", "tokenize"]
