"""``peek2 tokenize --engine ray``: read and tokenize on a Ray cluster, write here.

JSONL goes to ``TokenizeRanges`` actors as places to read: an uncompressed file cut into byte
ranges of ``RANGE_BYTES`` ending after a newline, a compressed one (``.gz``, ``.zst``) whole, read
by one actor a unit at a time. The actors encode what they read as the local engine's workers
do (``peek2.corpus.documents.encode_unit``: the same JSON checks, errors naming file and line,
blank lines counted): the text never travels through Ray's object store, only the ids come back.
(Ray's ``read_json``, pyarrow's JSON reader, used here before, failed on a line of 2 MB across its
1 MB blocks, read two objects on one line as two documents, refused duplicate keys and counted
no blank line: a bug hunt.) Parquet is read by Ray Data's ``read_parquet`` tasks, then tokenized
by ``TokenizeBatches`` actors. This process writes the rows it gets back, in input order
(``preserve_order``), with the local engine's writers: the files are the same as the local
engine's. Resources: where Ray reads, its read tasks ask ``READ_CPUS`` (a quarter CPU) and the
actors share all but ``READ_RESERVE`` (one CPU), so that reading always finds its CPU; with actors
of one CPU each on every CPU of a small cluster, the reads wait for a CPU that never frees and the
run hangs. Resume and ``skip_bad`` are the local engine's alone.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy

from peek2.corpus.inputs import CorpusInputError, Source
from peek2.corpus.writers import Writer

READ_CPUS = 0.25
READ_RESERVE = 1.0
"""CPUs the actors leave to Ray Data's reading: its read tasks ask ``READ_CPUS``, but Ray 2.60's
Parquet reader first lists the files in a task of one whole CPU, which never ran beside actors
that shared all but a quarter CPU (a bug hunt: Parquet inputs hung on a local Ray of 2 CPUs).
Ray's CPUs are scheduling shares, not limits: the actors still use every core."""
RANGE_BYTES = 16 << 20
"""The size of the byte ranges an uncompressed JSONL input is cut into: on 1 GB with a local Ray of
2 CPUs, read by read tasks, 64 MB ranges took 36.6 s, 16 MB 34.3 s, one read_json task 40.8 s
(``python scripts/bench_corpus.py --only ray``); read by the actors themselves, 16 MB: 34.1 s,
peak RSS 2.82 GB instead of 4.34 GB; ids written from the batches' buffers (no ``astype`` and
``tobytes`` copies of 4 bytes an id): 32.1 s, 0.67x the local engine's 21.6 s."""


def ray_batches(
    sources: list[Source], options: Any, tokenizer_source: Any, actors: int | None, ray_address: str | None, quiet: bool = False
) -> Any:
    """Batches (pyarrow Tables with ``input_ids``) of the corpus, in input order, and the number of actors."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise CorpusInputError("the ray engine needs Ray Data: pip install 'peek2[ray]'") from None
    kinds = {s.kind for s in sources}
    if not kinds <= {"jsonl", "parquet"} or (kinds == {"jsonl", "parquet"}):
        raise CorpusInputError("the ray engine reads JSONL (.jsonl, .jsonl.gz, .jsonl.zst) or Parquet inputs, one kind a run")
    if quiet:  # (--quiet: errors only; Ray and Ray Data log their start and plan at INFO)
        import logging

        for name in ("ray", "ray.data"):
            logging.getLogger(name).setLevel(logging.ERROR)
    if not ray.is_initialized():
        ray.init(address=ray_address, log_to_driver=False, include_dashboard=False, **({"logging_level": "ERROR"} if quiet else {}))
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    if quiet:
        context.print_on_execution_start = False
    paths = [os.path.abspath(s.path) for s in sources]
    # Read tasks ask READ_CPUS each and the actors share the rest: a read always finds its CPU
    # (read tasks asking the default 1 CPU beside 2 actors of 0.75 on 2 CPUs hung).
    if kinds == {"jsonl"}:
        # Uncompressed files are cut into byte ranges after a newline, compressed ones are a row
        # each (end -1): the actors read them (TokenizeRanges), so that the text is not sent
        # through the object store, the first batches are tokenized while the rest is read, and a
        # cluster's nodes share a large file. (Ray's read_json, pyarrow's reader, read .gz files
        # before: two objects on one line were two documents, silently; a bug hunt.)
        ranges = []
        for k, source in enumerate(sources):
            if source.compression:
                ranges.append({"source": k, "start": 0, "end": -1, "compression": source.compression})
            else:
                ranges.extend({"source": k, "start": a, "end": b, "compression": ""} for a, b in line_ranges(paths[k], RANGE_BYTES))
        inputs = max(1, len(ranges))
        dataset = ray.data.from_items(ranges, override_num_blocks=inputs)
        callable_class: Any = TokenizeRanges
        reads = False
    else:
        # (select_columns, not columns=: Ray 2.60 deprecates it; the projection is pushed into the read)
        dataset = ray.data.read_parquet(paths, file_extensions=None, num_cpus=READ_CPUS).select_columns([options.text_key])
        inputs = None
    if inputs is None:
        from peek2.ray import TokenizeBatches

        callable_class, reads = TokenizeBatches, True
    cpus = float(ray.cluster_resources().get("CPU", 1))
    count = actors or max(1, int(cpus))
    if inputs is not None:
        count = min(count, inputs)  # (an actor with no range to tokenize would idle, and Ray warns)
    arguments: dict[str, Any] = {"tokenizer": tokenizer_source, "options": options, "paths": paths}
    if reads:
        arguments = {
            "tokenizer": tokenizer_source,
            "text_key": options.text_key,
            "first_id": options.eos_id if options.format == "llmc" else -1,
            "last_id": options.eos_id if options.append_eos else -1,
            "add_special_tokens": options.add_special_tokens,
            "keep_columns": False,
        }
    tokenized = dataset.map_batches(
        callable_class,
        fn_constructor_kwargs=arguments,
        # (Where Ray reads, the blocks are Ray's: as few as one, for a small Parquet file. An
        # actor pool of a fixed size above that warned that it could not be used.)
        compute=ray.data.ActorPoolStrategy(size=count) if not reads else ray.data.ActorPoolStrategy(min_size=1, max_size=count),
        num_cpus=max(0.05, (cpus - (READ_RESERVE if reads else 0.0)) / count),
        batch_format="pyarrow",
        batch_size=4096 if reads else 1,  # (a range a call: its lines are the batch)
    )
    return tokenized.iter_batches(batch_format="pyarrow", batch_size=None), count


def line_ranges(path: str, size: int) -> list[tuple[int, int]]:
    """Byte ranges of about ``size`` covering the file, each ending after a newline (or at its end)."""
    total = os.path.getsize(path)
    ranges: list[tuple[int, int]] = []
    start = 0
    with open(path, "rb") as handle:
        while start < total:
            end = start + size
            if end >= total:
                end = total
            else:
                handle.seek(end)
                while True:
                    block = handle.read(1 << 16)
                    if not block:
                        end = total
                        break
                    newline = block.find(b"\n")
                    if newline >= 0:
                        end = handle.tell() - len(block) + newline + 1
                        break
            ranges.append((start, end))
            start = end
    return ranges


class TokenizeRanges:
    """A Ray actor that encodes byte ranges of JSONL files (rows of ``source``, ``start``, ``end``)
    as the local engine's workers encode a unit; returns the documents' ids (``input_ids``) and,
    where the ranges held blank lines, a last row without ids that counts them (``blank_lines``)."""

    def __init__(self, tokenizer: Any, options: Any, paths: list[str]) -> None:
        from peek2.ray import TokenizeBatches

        self.tokenizer = TokenizeBatches(tokenizer).tokenizer
        self.options = options
        self.paths = paths

    def __call__(self, batch: Any) -> Any:
        """A table a unit (a range; a compressed file gives one a ``unit_bytes`` of its text)."""
        from peek2.corpus.documents import BadDocument, encode_unit
        from peek2.corpus.inputs import Cursor, Source, Unit, read_units

        columns = [batch.column(name).to_pylist() for name in ("source", "start", "end", "compression")]
        for source, start, end, compression in zip(*columns):
            path = self.paths[source]
            if end < 0:
                units = read_units([Source(path, "jsonl", compression)], Cursor(), self.options.unit_bytes, self.options.text_key)
            else:
                units = iter([Unit("jsonl", (path, start, end), 0, 0, end - start, Cursor())])
            for unit in units:
                try:
                    result = encode_unit(unit, self.tokenizer, self.options, [path])
                except BadDocument as error:  # (the local engine's message: the file and its line)
                    line = error.line if unit.line else _line_at(path, start) + error.line - 1
                    raise ValueError(f"{path}:{line}: {error.reason}") from None
                yield self._table(result)

    def _table(self, result: Any) -> Any:
        """The documents of a unit's result as ``input_ids`` rows, then a row without ids that
        counts its blank lines (if any)."""
        import pyarrow as pa

        values = numpy.frombuffer(result.ids, dtype=numpy.uint16 if self.options.dtype == "uint16" else numpy.uint32)
        offsets = numpy.zeros(len(result.lengths) + 1, dtype=numpy.int64)
        numpy.cumsum(result.lengths, out=offsets[1:])
        ids = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))
        table = pa.table({"input_ids": ids, "blank_lines": pa.array(numpy.zeros(len(result.lengths), dtype=numpy.int64))})
        if result.blank_lines:
            counted = pa.table({"input_ids": pa.array([None], type=ids.type), "blank_lines": pa.array([result.blank_lines], type=pa.int64())})
            table = pa.concat_tables([table, counted])
        return table


def _line_at(path: str, offset: int) -> int:
    """The line of ``path`` that byte ``offset`` starts (an error's line: read only then)."""
    lines = 1
    with open(path, "rb") as handle:
        while offset > 0:
            block = handle.read(min(offset, 1 << 20))
            if not block:
                break
            lines += block.count(b"\n")
            offset -= len(block)
    return lines


def write_batches(batches: Any, writer: Writer, dtype: str, progress: Any, stats: dict[str, int], options: Any) -> None:
    for batch in batches:
        if "blank_lines" in batch.column_names:  # (TokenizeRanges': a row without ids counts them)
            stats["blank_lines"] += int(numpy.sum(batch.column("blank_lines").to_numpy()))
            if batch.column("input_ids").null_count:
                batch = batch.filter(batch.column("input_ids").is_valid())
        if batch.num_rows == 0:
            continue
        column = batch.column("input_ids").combine_chunks()
        offsets = column.offsets.to_numpy()
        values = column.values.to_numpy()[offsets[0] : offsets[-1]]
        lengths = numpy.diff(offsets).astype(numpy.int64)
        # uint32 ids to int32 (Megatron's dtype past 65,500 tokens) are the same bytes: no copy
        # (ids < 2**31), and the writer takes the array's buffer as it is.
        width = numpy.dtype(dtype).itemsize == values.itemsize
        writer.write(memoryview(values.view(dtype) if width else values.astype(dtype)).cast("B"), lengths)
        stats["documents"] += len(lengths)
        stats["tokens"] += int(lengths.sum())
        stats["empty_documents"] += int(numpy.count_nonzero(lengths == options.empty_length))
        progress.update(0, len(lengths), int(lengths.sum()))
