"""Writers of the token files that training stacks read, crash-safe and resumable.

Each writer appends units' ids (bytes of little-endian integers of its ``dtype``, written by the
workers) and each unit's document lengths, keeps its partial files in the run's work folder, and
can ``checkpoint`` (everything so far on disk: fsync; returns its state for the manifest) and be
rebuilt at a checkpoint (``resume``). Only ``finish`` gives files their final names, each by one
``os.replace`` of a complete, fsynced file: a final name never shows a half-written file.

Formats (docs/corpus.md gives their sources and versions):
- ``megatron``: Megatron-Core's indexed dataset (``IndexedDatasetBuilder``: ``.bin`` of ids,
  ``.idx`` with header ``MMIDIDX\\0\\0``, version 1, dtype code, sequence and document counts,
  int32 sequence lengths, int64 byte pointers, int64 document indices), one sequence per
  non-empty document; an empty document adds a document index and no sequence, as
  ``add_document`` does with no ids.
- ``llmc``: llm.c's shards (``data_common.write_datafile``): 256 int32 header (magic, version,
  token count), then the ids; shards of exactly ``shard_size`` ids but the last, a document cut
  where a shard ends (as llm.c's ``fineweb.py``).
- ``parquet``: one row per document (``id`` int64, ``input_ids`` list of uint16/uint32), in
  row groups of at most ``ROW_GROUP_IDS`` ids or ``ROW_GROUP_ROWS`` rows.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterator
from typing import Any

import numpy

MEGATRON_HEADER = b"MMIDIDX\x00\x00"
MEGATRON_DTYPE_CODES = {"uint16": 8, "int32": 4}
LLMC_HEADERS = {"uint16": (20240520, 1), "uint32": (20240801, 7)}  # gpt-2 and llama-3 in llm.c
LLMC_HEADER_BYTES = 256 * 4
ROW_GROUP_IDS = 1 << 20
ROW_GROUP_ROWS = 1 << 16
COPY_BLOCK = 1 << 22


@contextlib.contextmanager
def naming(path: str) -> Iterator[None]:
    """An OSError raised inside that names no file (ENOSPC or EFBIG on a write, EIO on an fsync)
    names ``path``: the command's message said "cannot write PREFIX: File too large" without
    saying which of a run's files (a bug hunt)."""
    try:
        yield
    except OSError as error:
        if error.filename is None:
            error.filename = path
        raise


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        with naming(path):
            os.fsync(fd)
    finally:
        os.close(fd)


def _sync(handle: Any) -> None:
    """Flush and fsync an open file (its name named by an error)."""
    with naming(handle.name):
        handle.flush()
        os.fsync(handle.fileno())


def publish(tmp: str, final: str) -> None:
    """Give a complete file its final name: fsync it, rename it, fsync its folder."""
    fsync_path(tmp)
    os.replace(tmp, final)
    fsync_path(os.path.dirname(os.path.abspath(final)))


def take_back(work_path: str, final: str) -> None:
    """Give a published file its work name again: a run killed while publishing its outputs
    (after its last checkpoint, before its summary) is resumed by finishing again. (An empty
    work file is one a writer opened again before resuming: a new run removed its final names.)"""
    if os.path.exists(final) and (not os.path.exists(work_path) or os.path.getsize(work_path) == 0):
        os.replace(final, work_path)


def _truncate(path: str, size: int) -> None:
    if not os.path.exists(path) or os.path.getsize(path) < size:
        raise RuntimeError(f"{path}: the work file is shorter than the manifest says ({size} bytes): cannot resume")
    os.truncate(path, size)


class Writer:
    """What every format's writer does (see the module's notes)."""

    format = ""

    def __init__(self, prefix: str, work: str, dtype: str, options: dict[str, Any]) -> None:
        self.prefix = prefix
        self.work = work
        self.dtype = dtype
        self.itemsize = numpy.dtype(dtype).itemsize
        self.documents = 0
        self.tokens = 0

    def outputs(self) -> list[str]:
        """The final names of the files this writer makes (llmc: those known so far)."""
        raise NotImplementedError

    def write(self, ids: bytes | memoryview, lengths: numpy.ndarray) -> None:
        raise NotImplementedError

    def checkpoint(self) -> dict[str, Any]:
        raise NotImplementedError

    def resume(self, state: dict[str, Any]) -> None:
        raise NotImplementedError

    def finish(self) -> list[str]:
        raise NotImplementedError

    def after_checkpoint(self) -> None:
        """Called once the manifest holds the state ``checkpoint`` returned."""

    def close(self) -> None:
        pass


class MegatronWriter(Writer):
    format = "megatron"

    def __init__(self, prefix: str, work: str, dtype: str, options: dict[str, Any]) -> None:
        super().__init__(prefix, work, dtype, options)
        self.name = f"{prefix}_{options['text_key']}_document"
        self.data_path = os.path.join(work, "megatron.bin")
        self.lengths_path = os.path.join(work, "megatron.lengths")  # int32 a document, 0 if empty
        self.data = open(self.data_path, "ab")
        self.lengths = open(self.lengths_path, "ab")
        self.sequences = 0

    def outputs(self) -> list[str]:
        return [self.name + ".bin", self.name + ".idx"]

    def write(self, ids: bytes | memoryview, lengths: numpy.ndarray) -> None:
        with naming(self.data_path):
            self.data.write(ids)
        with naming(self.lengths_path):
            self.lengths.write(lengths.astype("<i4").tobytes())
        self.documents += len(lengths)
        self.sequences += int(numpy.count_nonzero(lengths))
        self.tokens += len(ids) // self.itemsize

    def checkpoint(self) -> dict[str, Any]:
        for handle in (self.data, self.lengths):
            _sync(handle)
        return {"documents": self.documents, "sequences": self.sequences, "tokens": self.tokens}

    def resume(self, state: dict[str, Any]) -> None:
        self.close()
        self.documents, self.sequences, self.tokens = state["documents"], state["sequences"], state["tokens"]
        take_back(self.data_path, self.name + ".bin")
        _truncate(self.data_path, self.tokens * self.itemsize)
        _truncate(self.lengths_path, self.documents * 4)
        self.data = open(self.data_path, "ab")
        self.lengths = open(self.lengths_path, "ab")

    def finish(self) -> list[str]:
        self.checkpoint()
        self.close()
        idx_tmp = os.path.join(self.work, "megatron.idx")
        with naming(idx_tmp), open(idx_tmp, "wb") as idx:
            idx.write(MEGATRON_HEADER)
            idx.write(struct.pack("<Q", 1))
            idx.write(struct.pack("<B", MEGATRON_DTYPE_CODES[self.dtype]))
            idx.write(struct.pack("<Q", self.sequences))
            idx.write(struct.pack("<Q", self.documents + 1))
            # Three passes over the lengths file, in blocks: memory stays bounded for any corpus.
            for part in ("lengths", "pointers", "documents"):
                total = 0  # bytes before the block (pointers), sequences before it (documents)
                if part == "documents":
                    idx.write(struct.pack("<q", 0))
                for block in self._length_blocks():
                    nonzero = block[block > 0].astype(numpy.int64)
                    if part == "lengths":
                        idx.write(nonzero.astype("<i4").tobytes())
                    elif part == "pointers":
                        ends = numpy.cumsum(nonzero * self.itemsize) + total
                        idx.write((ends - nonzero * self.itemsize).astype("<i8").tobytes())
                        total = int(ends[-1]) if len(ends) else total
                    else:
                        indices = numpy.cumsum(block > 0, dtype=numpy.int64) + total
                        idx.write(indices.astype("<i8").tobytes())
                        total = int(indices[-1]) if len(indices) else total
            idx.flush()
        publish(self.data_path, self.name + ".bin")
        publish(idx_tmp, self.name + ".idx")
        return self.outputs()

    def _length_blocks(self) -> Any:
        with open(self.lengths_path, "rb") as handle:
            while True:
                data = handle.read(COPY_BLOCK)
                if not data:
                    return
                yield numpy.frombuffer(data, dtype="<i4")

    def close(self) -> None:
        for handle in (self.data, self.lengths):
            if not handle.closed:
                handle.close()


class LlmcWriter(Writer):
    format = "llmc"

    def __init__(self, prefix: str, work: str, dtype: str, options: dict[str, Any]) -> None:
        super().__init__(prefix, work, dtype, options)
        self.shard_size = int(options["shard_size"])
        self.magic, self.version = LLMC_HEADERS[dtype]
        self.shard = 0  # the shard being filled
        self.count = 0  # its ids so far
        self.published = 0  # shards below this one have their final names
        self.handle: Any = None  # the shard being filled, opened at its first write

    def _work_shard(self, index: int) -> str:
        return os.path.join(self.work, f"llmc_{index:06d}.bin")

    def final_shard(self, index: int) -> str:
        return f"{self.prefix}_{index:06d}.bin"

    def _open(self) -> Any:
        if self.handle is None:
            path = self._work_shard(self.shard)
            if self.count:  # resumed inside a shard: not append mode, the header is rewritten at the end
                self.handle = open(path, "r+b")
                self.handle.seek(0, os.SEEK_END)
            else:
                self.handle = open(path, "wb")
                self.handle.write(bytes(LLMC_HEADER_BYTES))
        return self.handle

    def outputs(self) -> list[str]:
        return [self.final_shard(k) for k in range(self.shard + (1 if self.count else 0))]

    def write(self, ids: bytes | memoryview, lengths: numpy.ndarray) -> None:
        self.documents += len(lengths)
        self.tokens += len(ids) // self.itemsize
        view = memoryview(ids)
        while len(view):
            room = (self.shard_size - self.count) * self.itemsize
            part = view[:room]
            with naming(self._work_shard(self.shard)):
                self._open().write(part)
            self.count += len(part) // self.itemsize
            view = view[len(part) :]
            if self.count == self.shard_size:
                self._close_shard()

    def _close_shard(self) -> None:
        handle = self._open()
        header = numpy.zeros(256, dtype="<i4")
        header[0], header[1], header[2] = self.magic, self.version, self.count
        with naming(handle.name):
            handle.seek(0)
            handle.write(header.tobytes())
            handle.close()
        self.handle = None
        self.shard += 1
        self.count = 0

    def checkpoint(self) -> dict[str, Any]:
        if self.handle is not None:
            _sync(self.handle)
        for k in range(self.published, self.shard):
            fsync_path(self._work_shard(k))
        return {"documents": self.documents, "tokens": self.tokens, "shard": self.shard, "count": self.count}

    def after_checkpoint(self) -> None:
        """Publish the shards completed before the checkpoint just recorded."""
        for k in range(self.published, self.shard):
            publish(self._work_shard(k), self.final_shard(k))
        self.published = self.shard

    def resume(self, state: dict[str, Any]) -> None:
        self.close()
        self.documents, self.tokens, self.shard, self.count = state["documents"], state["tokens"], state["shard"], state["count"]
        for k in range(self.shard):  # complete at the checkpoint: publish any not yet published
            if os.path.exists(self._work_shard(k)):
                publish(self._work_shard(k), self.final_shard(k))
            elif not os.path.exists(self.final_shard(k)):
                raise RuntimeError(f"{self.final_shard(k)} is missing: cannot resume")
        self.published = self.shard
        for name in os.listdir(self.work):  # shards begun after the checkpoint
            if name.startswith("llmc_") and int(name[5:11]) > self.shard:
                os.remove(os.path.join(self.work, name))
        if self.count:
            take_back(self._work_shard(self.shard), self.final_shard(self.shard))
            _truncate(self._work_shard(self.shard), LLMC_HEADER_BYTES + self.count * self.itemsize)

    def finish(self) -> list[str]:
        if self.count:
            self._close_shard()
        elif self.handle is not None:
            self.close()
            os.remove(self._work_shard(self.shard))
        for k in range(self.published, self.shard):
            publish(self._work_shard(k), self.final_shard(k))
        self.published = self.shard
        return [self.final_shard(k) for k in range(self.shard)]

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


class ParquetWriter(Writer):
    format = "parquet"

    def __init__(self, prefix: str, work: str, dtype: str, options: dict[str, Any]) -> None:
        super().__init__(prefix, work, dtype, options)
        import pyarrow as pa

        self.pa = pa
        self.schema = pa.schema([("id", pa.int64()), ("input_ids", pa.list_(pa.from_numpy_dtype(numpy.dtype(dtype))))])
        self.groups = 0  # row groups written as parts
        self.pending_ids: list[bytes] = []
        self.pending_lengths: list[int] = []
        self.pending_count = 0  # ids pending
        self.pending_rows = 0
        self.rows_flushed = 0  # rows in the parts
        self.synced = 0  # parts fsynced
        self.checkpoints = 0
        self.pending_file = ""  # the pending rows of the last checkpoint
        self.obsolete = ""  # the pending rows of the one before, removed once the manifest moved on

    def outputs(self) -> list[str]:
        return [self.prefix + ".parquet"]

    def _part(self, index: int) -> str:
        return os.path.join(self.work, f"parquet_{index:06d}.parquet")

    def write(self, ids: bytes | memoryview, lengths: numpy.ndarray) -> None:
        # Rows go out in row groups cut by the ids and rows so far, not by the units: the file
        # is the same whatever the units (local engine, Ray).
        values = numpy.frombuffer(ids, dtype=self.dtype)
        at = 0
        for length in lengths.tolist():
            if self.pending_count + length > ROW_GROUP_IDS and self.pending_rows:
                self._flush_group()
            self.pending_ids.append(values[at : at + length].tobytes())
            self.pending_lengths.append(length)
            self.pending_count += length
            self.pending_rows += 1
            at += length
            if self.pending_rows >= ROW_GROUP_ROWS:
                self._flush_group()
        self.documents += len(lengths)
        self.tokens += len(values)

    def _table(self) -> Any:
        pa = self.pa
        lengths = numpy.array(self.pending_lengths, dtype=numpy.int64)
        offsets = numpy.zeros(len(lengths) + 1, dtype=numpy.int32)
        numpy.cumsum(lengths, out=offsets[1:])
        values = numpy.frombuffer(b"".join(self.pending_ids), dtype=self.dtype)
        first = self.rows_flushed
        ids = pa.array(numpy.arange(first, first + len(lengths), dtype=numpy.int64))
        lists = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
        return pa.Table.from_arrays([ids, lists], schema=self.schema)

    def _flush_group(self) -> None:
        import pyarrow.parquet as pq

        table = self._table()
        tmp = self._part(self.groups) + ".tmp"
        with naming(tmp):
            pq.write_table(table, tmp, row_group_size=max(len(table), 1))
        os.replace(tmp, self._part(self.groups))
        self.groups += 1
        self.rows_flushed += self.pending_rows
        self.pending_ids, self.pending_lengths, self.pending_count, self.pending_rows = [], [], 0, 0

    def checkpoint(self) -> dict[str, Any]:
        import pyarrow.parquet as pq

        for k in range(self.synced, self.groups):
            fsync_path(self._part(k))
        self.synced = self.groups
        self.checkpoints += 1
        pending = ""
        if self.pending_rows:
            pending = os.path.join(self.work, f"pending_{self.checkpoints:06d}.parquet")
            with naming(pending):
                pq.write_table(self._table(), pending)
            fsync_path(pending)
        self.obsolete, self.pending_file = self.pending_file, pending
        return {"documents": self.documents, "tokens": self.tokens, "groups": self.groups, "rows_flushed": self.rows_flushed, "pending": os.path.basename(pending)}

    def after_checkpoint(self) -> None:
        if self.obsolete:
            os.remove(self.obsolete)
            self.obsolete = ""

    def resume(self, state: dict[str, Any]) -> None:
        import pyarrow.parquet as pq

        self.documents, self.tokens, self.groups, self.rows_flushed = state["documents"], state["tokens"], state["groups"], state["rows_flushed"]
        self.synced = self.groups
        pending = state["pending"]
        for name in os.listdir(self.work):
            if name.startswith("parquet_") and (name.endswith(".tmp") or int(name[8:14]) >= self.groups):
                os.remove(os.path.join(self.work, name))
            elif name.startswith("pending_") and name != pending:
                os.remove(os.path.join(self.work, name))
        self.pending_ids, self.pending_lengths, self.pending_count, self.pending_rows = [], [], 0, 0
        self.pending_file = ""
        if pending:
            self.pending_file = os.path.join(self.work, pending)
            self.checkpoints = int(pending[8:14])
            table = pq.read_table(self.pending_file)
            column = table.column("input_ids").combine_chunks()
            offsets = column.offsets.to_numpy()
            values = column.values.to_numpy()
            for k in range(len(table)):
                piece = values[offsets[k] : offsets[k + 1]]
                self.pending_ids.append(piece.astype(self.dtype).tobytes())
                self.pending_lengths.append(len(piece))
                self.pending_count += len(piece)
                self.pending_rows += 1

    def finish(self) -> list[str]:
        import pyarrow.parquet as pq

        if self.pending_rows:
            self._flush_group()
        tmp = os.path.join(self.work, "parquet.out")
        with naming(tmp), pq.ParquetWriter(tmp, self.schema) as out:
            for k in range(self.groups):
                table = pq.read_table(self._part(k))
                out.write_table(table, row_group_size=max(len(table), 1))
        # (The pending rows' file stays until the work folder goes: a run killed before its
        # summary finishes again from the last checkpoint, which names it.)
        publish(tmp, self.prefix + ".parquet")
        return self.outputs()


WRITERS: dict[str, type[Writer]] = {"megatron": MegatronWriter, "llmc": LlmcWriter, "parquet": ParquetWriter}


def token_dtype(format: str, vocab_size: int) -> str:
    """The dtype of ids in each format, from the vocabulary size, as each format's own tools choose it."""
    if format == "megatron":
        return "uint16" if vocab_size < 65500 else "int32"  # DType.optimal_dtype
    return "uint16" if vocab_size <= 1 << 16 else "uint32"
