"""``peek2 tokenize --engine ray``: read and tokenize on a Ray cluster, write here.

Ray Data reads the inputs (uncompressed JSONL in byte ranges of ``RANGE_BYTES`` cut after a
newline, one read step each; ``read_json`` for compressed JSONL; ``read_parquet``), ``peek2.ray.TokenizeBatches``
actors tokenize, and this process writes the rows it gets back, in input order
(``preserve_order``), with the local engine's writers: the files are the same as the local
engine's. Resources: the actors share the cluster's CPUs less ``READ_CPUS``
shared among the actors) and read tasks a quarter CPU each, so that reading always finds its CPU; with actors of one CPU each
on every CPU of a small cluster, the reads wait for a CPU that never frees and the run hangs.
Resume and ``skip_bad`` are the local engine's alone (the reads are Ray's).
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy

from peek2.corpus.inputs import CorpusInputError, Source
from peek2.corpus.writers import Writer

READ_CPUS = 0.25
RANGE_BYTES = 16 << 20
"""The size of the byte ranges an uncompressed JSONL input is read in, one read step each: on 1 GB
with a local Ray of 2 CPUs, 64 MB ranges took 36.6 s, 16 MB 34.3 s, one read_json task 40.8 s
(``python scripts/bench_corpus.py --only ray``)."""


def ray_batches(
    sources: list[Source], options: Any, tokenizer_source: Any, actors: int | None, ray_address: str | None
) -> Any:
    """Batches (pyarrow Tables with ``input_ids``) of the corpus, in input order, and the number of actors."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise CorpusInputError("the ray engine needs Ray Data: pip install 'peek2[ray]'") from None
    kinds = {s.kind for s in sources}
    if not kinds <= {"jsonl", "parquet"} or (kinds == {"jsonl", "parquet"}) or any(s.compression == "zstd" for s in sources):
        raise CorpusInputError("the ray engine reads JSONL (.jsonl, .jsonl.gz) or Parquet inputs, one kind a run")
    if not ray.is_initialized():
        ray.init(address=ray_address, log_to_driver=False, include_dashboard=False)
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    paths = [os.path.abspath(s.path) for s in sources]
    # Read tasks ask READ_CPUS each and the actors share the rest: a read always finds its CPU
    # (read tasks asking the default 1 CPU beside 2 actors of 0.75 on 2 CPUs hung).
    if kinds == {"jsonl"}:
        # pyarrow's JSON reader (newline-delimited), parsing the text field alone: the other
        # fields may hold anything (pandas' reader, lines=True, was 2-3x slower on 2 CPUs).
        import pyarrow as pa
        import pyarrow.json as pajson

        parse = pajson.ParseOptions(explicit_schema=pa.schema([(options.text_key, pa.string())]), unexpected_field_behavior="ignore")
        if any(s.compression for s in sources):
            dataset = ray.data.read_json(paths, file_extensions=None, num_cpus=READ_CPUS, parse_options=parse)
            inputs = None
        else:
            # Uncompressed files are read in byte ranges cut after a newline, one read step each,
            # in order: batches reach the actors while the rest is read (read_json reads a file
            # in one task before its first row goes on), and a cluster's nodes share a large file.
            ranges = [{"path": p, "start": a, "end": b} for p in paths for a, b in line_ranges(p, RANGE_BYTES)]
            inputs = max(1, len(ranges))
            dataset = ray.data.from_items(ranges, override_num_blocks=inputs).map_batches(
                read_ranges, fn_kwargs={"text_key": options.text_key}, batch_size=1, num_cpus=READ_CPUS, batch_format="pyarrow"
            )
    else:
        dataset = ray.data.read_parquet(paths, columns=[options.text_key], file_extensions=None, num_cpus=READ_CPUS)
        inputs = None
    cpus = float(ray.cluster_resources().get("CPU", 1))
    count = actors or max(1, int(cpus))
    if inputs is not None:
        count = min(count, inputs)  # (an actor with no range to tokenize would idle, and Ray warns)
    from peek2.ray import TokenizeBatches

    tokenized = dataset.map_batches(
        TokenizeBatches,
        fn_constructor_kwargs={
            "tokenizer": tokenizer_source,
            "text_key": options.text_key,
            "first_id": options.eos_id if options.format == "llmc" else -1,
            "last_id": options.eos_id if options.append_eos else -1,
            "add_special_tokens": options.add_special_tokens,
            "keep_columns": False,
        },
        compute=ray.data.ActorPoolStrategy(size=count),
        num_cpus=max(0.05, (cpus - READ_CPUS) / count),
        batch_format="pyarrow",
        batch_size=4096,
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


def read_ranges(batch: Any, text_key: str) -> Any:
    """The ``text_key`` column of the JSON lines in each byte range of ``batch`` (a Ray read step)."""
    import io

    import pyarrow as pa
    import pyarrow.json as pajson

    schema = pa.schema([(text_key, pa.string())])
    parse = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    tables = []
    columns = (batch.column("path").to_pylist(), batch.column("start").to_pylist(), batch.column("end").to_pylist())
    for path, start, end in zip(*columns):
        with open(path, "rb") as handle:
            handle.seek(start)
            data = handle.read(end - start)
        if data.strip():
            tables.append(pajson.read_json(io.BytesIO(data), parse_options=parse))
    return pa.concat_tables(tables) if tables else schema.empty_table()


def write_batches(batches: Any, writer: Writer, dtype: str, progress: Any, stats: dict[str, int], options: Any) -> None:
    for batch in batches:
        column = batch.column("input_ids").combine_chunks()
        offsets = column.offsets.to_numpy()
        values = column.values.to_numpy()[offsets[0] : offsets[-1]]
        lengths = numpy.diff(offsets).astype(numpy.int64)
        ids = values.astype(dtype).tobytes()
        writer.write(ids, lengths)
        stats["documents"] += len(lengths)
        stats["tokens"] += int(lengths.sum())
        stats["empty_documents"] += int(numpy.count_nonzero(lengths == (1 if options.format == "llmc" else 0)))
        progress.update(0, len(lengths), int(lengths.sum()))
