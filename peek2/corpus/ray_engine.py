"""``peek2 tokenize --engine ray``: read and tokenize on a Ray cluster, write here.

The inputs go to ``TokenizeRanges`` actors as places to read (``_row``): an uncompressed JSONL
file in byte ranges of ``RANGE_BYTES`` ending after a newline, a Parquet file in ranges of row
groups, text files and saved datasets' Arrow files whole. The actors read them as the local
engine's reader does (``peek2.corpus.inputs``) and encode them as its workers do
(``peek2.corpus.documents.encode_unit``: the same JSON checks, errors naming the file and line or
row, blank lines counted): the text never travels through Ray's object store, only the ids come
back. A compressed JSONL file (``.gz``, ``.zst``, ``.xz``, ``.bz2``) cannot be cut into ranges: read tasks
(``read_compressed``) decompress it into units of lines that any actor takes, so that one large
file still keeps every actor busy. (Ray's ``read_json``, pyarrow's JSON reader, used here before,
failed on a line of 2 MB across its 1 MB blocks, read two objects on one line as two documents,
refused duplicate keys and counted no blank line; Ray's ``read_parquet`` named no file for a bad
row: bug hunts.) This process writes the rows it gets back, in input order (``preserve_order``),
with the local engine's writers: the files are the same as the local engine's. Resources: where
read tasks run, they ask ``READ_CPUS`` (a quarter CPU) and the actors share all but
``READ_RESERVE`` (one CPU), so that reading always finds its CPU; with actors of one CPU each on
every CPU of a small cluster, the reads wait for a CPU that never frees and the run hangs. ``skip_bad``
and resume work as there: each unit's rejects and end cursor come back with its ids, and
``write_batches`` numbers the lines of byte ranges and lets the run checkpoint where a unit ends.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import numpy

from peek2.corpus.inputs import CorpusInputError, Cursor, Source, _one_line, unreadable
from peek2.corpus.writers import Writer
from peek2.extras import install_hint

READ_CPUS = 0.25
READ_RESERVE = 1.0
"""CPUs the actors leave to the read tasks of compressed files (``READ_CPUS`` each: four run at a
time, and one decompresses faster than several actors tokenize). Ray's CPUs are scheduling
shares, not limits: the actors still use every core."""
RANGE_BYTES = 16 << 20
"""The size of the byte ranges an uncompressed JSONL input is cut into: on 1 GB with a local Ray of
2 CPUs, read by read tasks, 64 MB ranges took 36.6 s, 16 MB 34.3 s, one read_json task 40.8 s
(``python scripts/bench_corpus.py --only ray``); read by the actors themselves, 16 MB: 34.1 s,
peak RSS 2.82 GB instead of 4.34 GB; ids written from the batches' buffers (no ``astype`` and
``tobytes`` copies of 4 bytes an id): 32.1 s, 0.67x the local engine's 21.6 s."""


def ray_batches(
    sources: list[Source], options: Any, tokenizer_source: Any, actors: int | None, ray_address: str | None, quiet: bool = False, start: Cursor = Cursor()
) -> Any:
    """Batches (pyarrow Tables with ``input_ids``) of the corpus, in input order, and the number of actors."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise ImportError(f"the ray engine needs Ray Data: {install_hint('ray')}", name="ray") from None
    if quiet:  # (--quiet: errors only; Ray and Ray Data log their start and plan at INFO)
        import logging

        for name in ("ray", "ray.data"):
            logging.getLogger(name).setLevel(logging.ERROR)
    if not ray.is_initialized():
        ray.init(address=ray_address, log_to_driver=False, include_dashboard=False, **({"logging_level": "ERROR"} if quiet else {}))
    names = [s.path for s in sources]  # (as given: errors name them so, as the local engine does)
    sources = [Source(os.path.abspath(s.path), s.kind, s.compression, s.size) for s in sources]
    dataset, rows, reads = units_dataset(sources, options, quiet, start)
    cpus = float(ray.cluster_resources().get("CPU", 1))
    count = actors or max(1, int(cpus))
    # An actor with no row to tokenize would idle, and Ray warns: no more actors than rows. Where
    # units come from read tasks, their number is known as they come, and ``rows`` counts the
    # least a compressed file gives (its size in units): a pool of a fixed size above the rows
    # warned that it could not be used, and one that grows from one actor started the second
    # 2.3 s after the first (300 MB of gzip, 2 CPUs).
    fixed = rows >= count or not reads
    if not reads:
        count = min(count, rows or 1)
    tokenized = dataset.map_batches(
        TokenizeRanges,
        fn_constructor_kwargs={"tokenizer": tokenizer_source, "options": options, "sources": sources, "names": names},
        compute=ray.data.ActorPoolStrategy(size=count) if fixed else ray.data.ActorPoolStrategy(min_size=1, max_size=count),
        num_cpus=max(0.05, (cpus - (READ_RESERVE if reads else 0.0)) / count),
        batch_format="pyarrow",
        batch_size=1,  # (a row a call)
    )
    return _errors_reported_once(tokenized.iter_batches(batch_format="pyarrow", batch_size=None)), count


def units_dataset(sources: list[Source], options: Any, quiet: bool = False, start: Cursor = Cursor()) -> tuple[Any, int, bool]:
    """The Ray dataset of what the actors read (``_row``) from ``start`` on (a resumed run's
    cursor), a unit a block; the least number of rows the actors get (the read tasks give a row
    a unit of a compressed file); whether it has read tasks (the actors must leave them CPU)."""
    import ray.data

    # What the actors read (TokenizeRanges), a row each, so that the text is not sent through the
    # object store, the first rows are tokenized while the rest is read, and a cluster's nodes
    # share a large file: an uncompressed JSONL file in byte ranges ending after a newline,
    # Parquet in ranges of row groups, other files whole (text files together). A compressed
    # file cannot be cut that way: read tasks (``read_compressed``) decompress it and pass its
    # lines on in units, which any actor takes.
    rows: list[dict[str, Any]] = []
    text_bytes = RANGE_BYTES  # (of the last row of text files: one that is full takes no more)
    for k in range(start.source, len(sources)):
        source = sources[k]
        first = start if k == start.source else Cursor(k)
        if source.kind == "text":
            if text_bytes >= RANGE_BYTES:
                rows.append(_row(k, "files", k, k + 1))
                text_bytes = 0
            rows[-1]["end"] = k + 1
            text_bytes += os.path.getsize(source.path)
            continue
        text_bytes = RANGE_BYTES
        if source.kind == "parquet":
            rows.extend(_row(k, "groups", a, b, first) for a, b in row_group_ranges(source.path, RANGE_BYTES, first.position))
        elif source.kind == "jsonl" and not source.compression:
            rows.extend(_row(k, "range", a, b) for a, b in line_ranges(source.path, RANGE_BYTES, first.position))
        else:
            rows.append(_row(k, "files", k, k + 1, first))
    dataset = ray.data.from_items(rows, override_num_blocks=max(1, len(rows)))
    # The run's settings go to its dataset's context (a copy), not to the process's current one.
    context = dataset.context
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    if quiet:
        context.print_on_execution_start = False
    reads = any(row["kind"] == "files" and sources[row["source"]].compression for row in rows)
    if reads:
        # A block a unit: Ray Data gathers what a task yields into blocks of up to 128 MB, and
        # one block goes to one actor: a compressed file's units all went to the same actor. (A
        # block ends when it exceeds the target: units, about ``unit_bytes`` each, exceed half
        # of it.) Not without read tasks: the target cuts the actors' output too, and an actor
        # waits while more than two of its blocks are unread (Ray Data's streaming generator
        # buffer), so an actor that cut a 16 MB range's ids into eight blocks stood idle a
        # third of the time (``python scripts/bench_corpus.py --only ray``: docs/corpus.md).
        context.target_max_block_size = max(1, min(context.target_max_block_size or options.unit_bytes, options.unit_bytes // 2))
        # (Read tasks ask READ_CPUS each and the actors share all but READ_RESERVE: a read always
        # finds its CPU; read tasks asking the default 1 CPU beside 2 actors of 0.75 on 2 CPUs hung.)
        dataset = dataset.map_batches(
            read_compressed, fn_kwargs={"sources": sources, "options": options}, batch_size=1, batch_format="pyarrow", num_cpus=READ_CPUS
        )
    # (A compressed file's row becomes at least a unit per ``unit_bytes`` of its compressed size.)
    units = len(rows)
    for row in rows:
        if row["kind"] == "files" and sources[row["source"]].compression:
            units += max(0, os.path.getsize(sources[row["source"]].path) // options.unit_bytes - 1)
    return dataset, units, reads


def _errors_reported_once(batches: Any) -> Any:
    """``batches``, with Ray Data's console messages of level ERROR held back meanwhile: a failed
    run is reported by the engine on one line with the user's error (``peek2 tokenize`` printed
    120 lines of Ray's tracebacks before it, --quiet too). Ray Data's log file keeps them."""
    import logging

    class HoldErrors(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return record.levelno < logging.ERROR

    held = HoldErrors()
    consoles = [h for h in logging.getLogger("ray.data").handlers if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]
    for handler in consoles:
        handler.addFilter(held)
    try:
        yield from batches
    finally:
        for handler in consoles:
            handler.removeFilter(held)
        close = getattr(batches, "close", None)
        if close is not None:  # (a run stopped here: Ray Data's execution stops, its actors go)
            close()


def _row(source: int, kind: str, start: int, end: int, first: Cursor | None = None, payload: bytes = b"", unit: str = "") -> dict[str, Any]:
    """What an actor reads: ``kind`` "range" (bytes ``start`` to ``end`` of a JSONL file),
    "groups" (row groups ``start`` to ``end`` of a Parquet file), "files" (sources ``start`` to
    ``end``, whole), "lines" (JSONL lines in ``payload``, the first of them line ``start``;
    ``unit``: the unit's end cursor and input bytes, JSON). ``first``: where reading starts in
    the first source (a resumed run's cursor; row or position and line)."""
    position, line = (first.position, first.line) if first is not None and first.source == source else (0, 1)
    return {"source": source, "kind": kind, "start": start, "end": end, "position": position, "line": line, "payload": payload, "unit": unit}


def line_ranges(path: str, size: int, start: int = 0) -> list[tuple[int, int]]:
    """Byte ranges of about ``size`` covering the file from ``start`` (a line's start), each
    ending after a newline (or at its end)."""
    total = os.path.getsize(path)
    ranges: list[tuple[int, int]] = []
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


def row_group_ranges(path: str, size: int, first_row: int = 0) -> list[tuple[int, int]]:
    """Ranges of a Parquet file's row groups of about ``size`` bytes of data each, from the group
    of row ``first_row`` on (at least one range, empty for a file without groups: the actor
    still checks its column)."""
    import pyarrow.parquet as pq

    try:
        metadata = pq.ParquetFile(path).metadata
    except Exception as error:
        raise unreadable(path, error, "parquet") from None
    ranges: list[tuple[int, int]] = []
    start = held = rows = 0
    for group in range(metadata.num_row_groups):
        rows += metadata.row_group(group).num_rows
        if rows <= first_row:  # (before a resumed run's row)
            start = group + 1
            continue
        held += metadata.row_group(group).total_byte_size
        if held >= size:
            ranges.append((start, group + 1))
            start, held = group + 1, 0
    if start < metadata.num_row_groups or not ranges:
        ranges.append((start, metadata.num_row_groups))
    return ranges


def read_compressed(batch: Any, sources: list[Source], options: Any) -> Any:
    """A Ray Data task: a compressed JSONL file's row becomes rows of its lines, a unit
    (``options.unit_bytes`` of text) each; other rows pass."""
    import pyarrow as pa

    from peek2.corpus.inputs import read_units

    schema = pa.schema(
        [(name, pa.int64()) for name in ("source", "start", "end", "position", "line")]
        + [("kind", pa.string()), ("payload", pa.binary()), ("unit", pa.string())]
    )
    for row in batch.to_pylist():
        if row["kind"] != "files" or not sources[row["source"]].compression:
            yield pa.Table.from_pylist([row], schema=schema)
            continue
        for unit in read_units(sources, Cursor(row["start"], row["position"], row["line"]), options.unit_bytes, options.text_key, row["end"]):
            told = json.dumps({"end": unit.end.to_json(), "input_bytes": unit.input_bytes})
            yield pa.Table.from_pylist([_row(unit.source, "lines", unit.line, 0, None, unit.payload, told)], schema=schema)


class DocumentError(ValueError):
    """A bad document, found by an actor (the writing process raises it where it comes in the
    input: it is the local engine's document error there, with its advice)."""


class ToldInputError(CorpusInputError):
    """An input an actor could not read, raised by the writing process where it comes in the input
    (a class of its own: Ray's wrapper of an error raised on the cluster is also a CorpusInputError)."""


class TokenizeRanges:
    """A Ray actor that encodes what a row names (``_row``) as the local engine's workers encode
    a unit; returns the documents' ids (``input_ids``) and, where the row held blank lines, a last
    row without ids that counts them (``blank_lines``)."""

    def __init__(self, tokenizer: Any, options: Any, sources: list[Source], names: list[str] | None = None) -> None:
        from peek2.ray import TokenizeBatches

        self.tokenizer = TokenizeBatches(tokenizer).tokenizer
        self.options = options
        self.sources = sources
        self.paths = [s.path for s in sources]  # (absolute: read from this actor's process)
        # The inputs as the user gave them, which errors name (a bug hunt: the Ray engine named
        # "/tmp/x/in/bad.jsonl:400" where the local engine said "in/bad.jsonl:400").
        self.names = names if names is not None else self.paths

    def __call__(self, batch: Any) -> Any:
        """A table a unit."""
        from peek2.corpus.documents import BadDocument, encode_unit, location
        from peek2.corpus.inputs import Unit, _arrow_units, read_units

        options = self.options
        for row in batch.to_pylist():
            source, kind, start, end = row["source"], row["kind"], row["start"], row["end"]
            path = self.paths[source]
            first = Cursor(source, row["position"], row["line"])
            if kind == "range":  # (its end's line: the writing process counts the lines)
                units: Any = iter([Unit("jsonl", (path, start, end), source, 0, end - start, Cursor(source, end, 0))])
            elif kind == "lines":
                told = json.loads(row["unit"])
                units = iter([Unit("jsonl", row["payload"], source, start, told["input_bytes"], Cursor.from_json(told["end"]))])
            elif kind == "groups":
                units = _arrow_units(self.sources[source], source, first, options.unit_bytes, options.text_key, (start, end))
            else:
                units = read_units(self.sources, first, options.unit_bytes, options.text_key, end)
            try:
                for unit in units:
                    try:
                        result = encode_unit(unit, self.tokenizer, options, self.names)
                    except BadDocument as error:  # (the local engine's message: the file and its line or row)
                        line = error.line if unit.line or unit.kind != "jsonl" else _line_at(path, start) + error.line - 1
                        raise DocumentError(f"{location(self.names, unit.kind, error.source, line)}: {error.reason}") from None
                    yield self._table(unit, result)
            except (DocumentError, CorpusInputError) as error:
                # Told in order, not raised: the writing process raises it where it comes in the
                # input, after the units before it (an actor's raise stopped the run at whichever
                # failed first, so two bad documents were reported in no fixed order).
                yield self._failure(error)
                return

    def _failure(self, error: Exception) -> Any:
        """A row without ids that tells the error of the unit where the row stopped (``failed``)."""
        import pyarrow as pa

        message = str(error)
        for path, name in zip(self.paths, self.names):  # (an input error names the file as read)
            if path != name:
                message = message.replace(path, name)
        told = {"failed": type(error).__name__, "message": message}
        ids = pa.large_list(pa.uint16() if self.options.dtype == "uint16" else pa.uint32())  # (as _table's)
        return pa.table({"input_ids": pa.array([None], type=ids), "unit": pa.array([json.dumps(told, ensure_ascii=False)], type=pa.string())})

    def _table(self, unit: Any, result: Any) -> Any:
        """The documents of a unit's result as ``input_ids`` rows, then a row without ids that
        tells the rest (``unit``, JSON): its blank lines, newlines and rejected documents, whose
        lines in a byte range count from the range's start (``counted`` false)."""
        import pyarrow as pa

        values = numpy.frombuffer(result.ids, dtype=numpy.uint16 if self.options.dtype == "uint16" else numpy.uint32)
        offsets = numpy.zeros(len(result.lengths) + 1, dtype=numpy.int64)
        numpy.cumsum(result.lengths, out=offsets[1:])
        ids = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))
        told = {
            "source": unit.source,
            "counted": not (unit.kind == "jsonl" and unit.line == 0),
            "blank_lines": result.blank_lines,
            "newlines": result.newlines,
            "rejects": result.rejects,
            "end": unit.end.to_json(),
            "input_bytes": unit.input_bytes,
        }
        return pa.table(
            {
                "input_ids": pa.concat_arrays([ids, pa.array([None], type=ids.type)]),
                "unit": pa.array([None] * len(result.lengths) + [json.dumps(told, ensure_ascii=False)], type=pa.string()),
            }
        )


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


def write_batches(
    batches: Any,
    writer: Writer,
    dtype: str,
    progress: Any,
    stats: dict[str, int],
    options: Any,
    reject: Callable[[int, int, str], None],
    done: Callable[[Cursor], None],
    start: Cursor = Cursor(),
) -> None:
    """Write the actors' batches in order, a unit at a time: its documents, then ``reject(source,
    line, reason)`` for each document it skipped (``skip_bad``), its line numbered in its file,
    then ``done(cursor)`` with the cursor after it (a checkpoint there resumes after the unit).
    A unit's documents wait for the row that ends it (a block may end inside a unit), so that
    what is written always ends at a unit's end."""
    import pyarrow as pa

    next_line: dict[int, int] = {start.source: start.line}  # (where the next byte range of a JSONL source starts)
    held: list[Any] = []  # the documents of a unit whose last row is still to come
    for batch in batches:
        ends = batch.column("input_ids").is_null().to_numpy(zero_copy_only=False).nonzero()[0]
        told_rows = batch.column("unit")
        begin = 0
        for end in ends:
            held.append(batch.slice(begin, end - begin))
            begin = end + 1
            _write(pa.concat_tables(held), writer, dtype, progress, stats, options)
            held.clear()
            unit = json.loads(told_rows[end].as_py())
            if "failed" in unit:  # (the units before it are written and done)
                raise (DocumentError if unit["failed"] == "DocumentError" else ToldInputError)(unit["message"])
            stats["blank_lines"] += unit["blank_lines"]
            stats["input_bytes"] += unit["input_bytes"]
            progress.update(unit["input_bytes"], 0, 0)
            cursor = Cursor.from_json(unit["end"])
            shift = 0
            if not unit["counted"]:
                shift = next_line.get(unit["source"], 1) - 1
                next_line[unit["source"]] = shift + 1 + unit["newlines"]
                if cursor.source == unit["source"]:
                    cursor = Cursor(cursor.source, cursor.position, next_line[unit["source"]])
            for source, line, reason in unit["rejects"]:
                reject(source, line + (shift if source == unit["source"] else 0), reason)
            done(cursor)
        if begin < batch.num_rows:
            held.append(batch.slice(begin))


def _write(batch: Any, writer: Writer, dtype: str, progress: Any, stats: dict[str, int], options: Any) -> None:
    if batch.num_rows == 0:
        return
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
