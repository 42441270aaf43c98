"""The documents of a corpus, in input order, cut into units of work for the tokenizing workers.

Inputs (``find_inputs``): JSONL (``.jsonl``/``.json``, also ``.gz``, ``.zst``, ``.xz`` and ``.bz2``: one JSON object a
line, the text under a key), Parquet (the text column), plain text (``.txt``: one document a
file), a folder (every such file below it, in sorted order, or a ``datasets`` dataset saved with
``save_to_disk``), or a glob of them.

The reading process does as little as it can, so that one reader feeds many workers: JSONL goes
out as raw lines (the workers decode, parse and check them), Parquet and Arrow as Arrow arrays.
A unit never spans two files, and where units end depends only on the input: the same input
gives the same units, whatever the number of workers, so outputs are identical and a resumed
run starts at a unit boundary (``Cursor``).
"""

from __future__ import annotations

import fnmatch
import glob
import bz2
import errno
import gzip
import hashlib
import json
import lzma
import os
from dataclasses import dataclass
from io import FileIO
from collections.abc import Iterable
from typing import IO, Any, Iterator

from peek2.extras import package_hint

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
COMPRESSED = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".xz": "xz", ".bz2": "bzip2"}
PARQUET_SUFFIXES = (".parquet",)
TEXT_SUFFIXES = (".txt",)
FINGERPRINT_BYTES = 1 << 20
ARROW_BATCH_ROWS = 1024  # Parquet rows read at a time: a unit ends at the end of a batch
END_WINDOW = 64 << 10  # bytes read to find where a unit of an uncompressed JSONL file ends


class CorpusInputError(ValueError):
    """An input that cannot be read as asked: names the file (and line or row) and what is wrong."""


class CorpusLimitError(Exception):
    """Reading an input met a limit of the machine (open files, memory, threads), not a fault of
    the input: ``peek2 tokenize`` exits 1 and keeps the work for ``--resume``."""


# What a limit of the machine looks like: an OSError's errno, or the words of pyarrow's C++ errors
# (a thread pool that could not start under ulimit -v: "Failed to launch worker thread: Resource
# temporarily unavailable", which read as a file not Parquet, "fix the input", status 2; a bug hunt).
LIMIT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN})
LIMIT_WORDS = ("Too many open files", "Cannot allocate memory", "Resource temporarily unavailable", "Failed to launch", "bad_alloc", "Out of memory")


def unreadable(path: str, error: BaseException, kind: str = "") -> Exception:
    """The error to raise for ``path`` that could not be read (as ``kind``): CorpusLimitError where
    ``error`` is a limit of the machine, CorpusInputError otherwise; one line, naming the file."""
    what = f"cannot read as {kind}" if kind else "cannot read"
    reason = error.strerror if isinstance(error, OSError) and error.strerror else _one_line(error)
    if isinstance(error, MemoryError) or (isinstance(error, OSError) and error.errno in LIMIT_ERRNOS) or any(word in reason for word in LIMIT_WORDS):
        return CorpusLimitError(f"{path}: {what}: a limit of the machine was reached ({reason}): is a limit such as ulimit -n, -u or -v set?")
    return CorpusInputError(f"{path}: {what}: {reason}")


@dataclass(frozen=True)
class Source:
    """One input file (or one Arrow file of a saved ``datasets`` dataset)."""

    path: str
    kind: str  # "jsonl", "parquet", "arrow", "text"
    compression: str  # "", "gzip", "zstd", "xz", "bzip2"
    size: int = -1  # its size when the run began (its fingerprint's), -1 before: read up to it, and no shorter

    def fingerprint(self) -> dict[str, Any]:
        """Size, mtime and a hash of the first and last MB: what a resumed run must find again."""
        digest = hashlib.sha256()
        try:  # (an unreadable input was "cannot write" the output: the OSError went to the writer's handler)
            stat = os.stat(self.path)
            with open(self.path, "rb") as handle:
                digest.update(handle.read(FINGERPRINT_BYTES))
                if stat.st_size > FINGERPRINT_BYTES:
                    handle.seek(max(FINGERPRINT_BYTES, stat.st_size - FINGERPRINT_BYTES))
                    digest.update(handle.read(FINGERPRINT_BYTES))
        except OSError as error:
            raise unreadable(self.path, error) from None
        return {"path": os.path.abspath(self.path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256_ends": digest.hexdigest()}


@dataclass(frozen=True)
class Cursor:
    """Where reading stands: the next unit starts at ``position`` of source ``source``.

    ``position``: for JSONL the (decompressed) byte offset, with ``line`` its line number (0 in a
    unit's ``end`` where the reader did not count: see ``Unit``); for Parquet and Arrow the row;
    for text files 0 (a file is one document).
    """

    source: int = 0
    position: int = 0
    line: int = 1

    def to_json(self) -> dict[str, int]:
        return {"source": self.source, "position": self.position, "line": self.line}

    @staticmethod
    def from_json(data: dict[str, int]) -> Cursor:
        return Cursor(int(data["source"]), int(data["position"]), int(data["line"]))


@dataclass
class Unit:
    """A unit of work: documents of one source, as the worker gets them."""

    kind: str  # "jsonl": bytes of whole lines, or (path, start, end) of them; "arrow": a pyarrow array; "text": list of (source, bytes)
    payload: Any
    source: int  # the source of the first document
    # JSONL: line of the first line, or 0 where the reader did not count (an uncompressed file:
    # the worker numbers from 1 and counts, and the reading process adds the unit's start);
    # Arrow: row of the first row
    line: int
    input_bytes: int  # input bytes consumed (compressed bytes for compressed files), for progress
    end: Cursor  # the cursor after this unit


def _kind(path: str) -> tuple[str, str] | None:
    lower = path.lower()
    compression = ""
    for suffix, name in COMPRESSED.items():
        if lower.endswith(suffix):
            compression = name
            lower = lower[: -len(suffix)]
            break
    if lower.endswith(JSONL_SUFFIXES):
        return "jsonl", compression
    if compression:
        return None
    if lower.endswith(PARQUET_SUFFIXES):
        return "parquet", ""
    if lower.endswith(TEXT_SUFFIXES):
        return "text", ""
    return None


UNREAD_COMPRESSION = (".lz4", ".lzma", ".br", ".zip", ".7z", ".tar", ".tgz", ".z")


def _unread_kind(path: str) -> str | None:
    """For a file of no kind peek2 reads whose name says it is a corpus file compressed (or packed)
    in a way peek2 does not read (``x.jsonl.xz``, ``x.txt.gz``): why it is not read, else None."""
    lower = path.lower()
    stem, dot, last = lower.rpartition(".")
    if not dot or "." + last not in UNREAD_COMPRESSION + tuple(COMPRESSED):
        return None
    if stem.endswith(JSONL_SUFFIXES):
        return f"a JSONL file compressed as .{last}: peek2 reads JSONL plain, .gz, .zst, .xz or .bz2"
    if stem.endswith(PARQUET_SUFFIXES + TEXT_SUFFIXES):
        kind = stem.rpartition(".")[2]
        return f"a .{kind} file compressed as .{last}: peek2 reads .{kind} files uncompressed"
    return None


def _refuse_unread(path: str, where: str) -> None:
    """CorpusInputError for a corpus file of a folder or a glob that peek2 cannot read (they were
    left out silently, as a README is: documents lost without a word; a bug hunt)."""
    reason = _unread_kind(path)
    if reason is not None:
        raise CorpusInputError(f"{path}: {reason}: decompress it, or move it out of {where}")


def _json_file(path: str) -> object:
    """A dataset folder's metadata file, or CorpusInputError naming it."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as error:
        raise CorpusInputError(f"{path}: not the JSON that save_to_disk writes ({error})") from None


def _is_saved_dataset(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "dataset_dict.json")) or os.path.isfile(os.path.join(folder, "state.json"))


def _saved_dataset(folder: str) -> list[Source] | None:
    """The Arrow files of a ``datasets`` dataset saved with ``save_to_disk``, in order, or None."""
    state_path = os.path.join(folder, "state.json")
    dict_path = os.path.join(folder, "dataset_dict.json")
    if os.path.isfile(dict_path):
        described = _json_file(dict_path)
        splits = described.get("splits", []) if isinstance(described, dict) else []
        if not isinstance(splits, list):
            splits = []
        raise CorpusInputError(
            f"{folder} is a DatasetDict ({', '.join(map(str, splits))}): give the folder of one split, "
            f"e.g. {os.path.join(folder, str(splits[0]) if splits else 'train')}"
        )
    if not os.path.isfile(state_path):
        return None
    state = _json_file(state_path)
    files = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, dict) and isinstance(f.get("filename"), str) for f in files):
        raise CorpusInputError(f"{state_path}: no list of data files ('_data_files'): not a dataset saved by save_to_disk")
    return [Source(os.path.join(folder, f["filename"]), "arrow", "") for f in files]


WORK_SUFFIX = ".peek2-work"  # a run's work folder (``peek2.corpus.run``): never an input


def _in_work_folder(path: str) -> bool:
    return any(part.endswith(WORK_SUFFIX) for part in os.path.normpath(path).split(os.sep))


def _regular_file(path: str) -> None:
    """CorpusInputError unless ``path`` is a regular file (or a link to one). A pipe was read for
    its fingerprint, then opened again and waited for ever (a bug hunt): every input is read twice,
    its ends for ``--resume`` and then its documents. A broken link named a file that is gone."""
    if os.path.isfile(path):
        return
    if os.path.islink(path) and not os.path.exists(path):
        raise CorpusInputError(f"{path}: a broken symbolic link (to {os.readlink(path)})")
    raise CorpusInputError(
        f"{path}: not a regular file (a pipe or a device?): each input is read twice (its ends, for "
        "--resume, then its documents); write it to a file first"
    )


def _unreadable_folder(error: OSError) -> None:
    """``os.walk`` skips a folder it cannot list: its documents would be lost without a word."""
    raise CorpusInputError(f"{error.filename}: cannot read this folder: {error.strerror or error}")


def _glob_files(pattern: str) -> list[str]:
    """``sorted(glob.glob(pattern, recursive=True))``, but a ``**`` walks each real folder once, as
    a folder input does (through a link back up the tree, glob listed a file once per way round:
    41 times, and with two such links it did not end; a bug hunt)."""
    parts = pattern.replace(os.sep, "/").split("/")
    if "**" not in parts:
        return sorted(glob.glob(pattern))
    literal = 0
    while not glob.has_magic(parts[literal]):
        literal += 1
    base = "/".join(parts[:literal]) or ("." if not pattern.startswith("/") else "/")
    if not os.path.isdir(base):
        return []
    matches = []
    seen: set[tuple[int, int]] = set()
    for root, dirs, files in os.walk(base, onerror=_unreadable_folder, followlinks=True):
        status = os.stat(root)
        if (status.st_dev, status.st_ino) in seen:
            dirs[:] = []
            continue
        seen.add((status.st_dev, status.st_ino))
        for name in files:
            path = os.path.join(root, name) if parts[:literal] else os.path.relpath(os.path.join(root, name), base)
            if _glob_match(tuple(path.replace(os.sep, "/").split("/")[literal if parts[:literal] else 0 :]), tuple(parts[literal:])):
                matches.append(path)
    return sorted(matches)


def _glob_match(names: tuple[str, ...], patterns: tuple[str, ...]) -> bool:
    """Whether path components ``names`` match ``patterns`` as glob's do: ``**`` any number of
    components, and a name that starts with "." only a pattern that does."""
    if not patterns:
        return not names
    first = patterns[0]
    if first == "**":
        for k in range(len(names) + 1):
            if _glob_match(names[k:], patterns[1:]):
                return True
            if k < len(names) and names[k].startswith("."):
                return False
        return False
    if not names or (names[0].startswith(".") and not first.startswith(".")):
        return False
    return fnmatch.fnmatchcase(names[0], first) and _glob_match(names[1:], patterns[1:])


def _folder_sources(folder: str, leave_out: frozenset[str] = frozenset()) -> list[Source]:
    """The input files under ``folder`` as its ``folder/**/*`` glob gives them: in sorted path
    order, hidden files and folders (a name starting with ".") left out, linked folders followed
    (each real folder once); a saved dataset inside it is read as one (its Arrow files, at its
    folder's place); a run's work folder and the files of ``leave_out`` (real paths: the run's own
    outputs) are left out (an output prefix inside the input folder). A corpus file compressed in a
    way peek2 does not read is refused (``_refuse_unread``).
    (Bug hunts: folders were sorted by their parts, "p/x" before "p-q/x" where the glob and the
    sort of paths put it after; linked folders were skipped and hidden files read.)"""
    found: list[tuple[str, list[Source]]] = []
    seen: set[tuple[int, int]] = set()
    for root, dirs, files in os.walk(folder, onerror=_unreadable_folder, followlinks=True):
        status = os.stat(root)
        if (status.st_dev, status.st_ino) in seen:  # (a link back up the tree: once is enough)
            dirs[:] = []
            continue
        seen.add((status.st_dev, status.st_ino))
        kept = []
        for name in dirs:
            path = os.path.join(root, name)
            if name.startswith(".") or name.endswith(WORK_SUFFIX):
                continue
            if _is_saved_dataset(path):
                found.append((path + os.sep, _saved_dataset(path) or []))
                continue
            kept.append(name)
        dirs[:] = sorted(kept)
        for file in sorted(files):  # (sorted: the first file refused is the glob's)
            path = os.path.join(root, file)
            if file.startswith(".") or (leave_out and os.path.realpath(path) in leave_out):
                continue
            kind = _kind(path)
            if kind is None:
                _refuse_unread(path, folder)
                continue
            _regular_file(path)
            found.append((path, [Source(path, *kind)]))
    found.sort(key=lambda item: item[0])
    return [source for _, sources in found for source in sources]


def find_inputs(inputs: object, leave_out: frozenset[str] = frozenset()) -> list[Source]:
    """The input files named by ``inputs`` (a path, or an iterable of paths: files, folders,
    globs), in order. Folders and globs leave out the files of ``leave_out`` (real paths: the
    run's own outputs, found there when its output prefix is inside an input folder; a file named
    as an input is taken as given).

    Raises:
        CorpusInputError: a path that does not exist or matches nothing, a file of unknown kind,
            a folder with no input file.
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if isinstance(inputs, (bytes, bytearray)) or not isinstance(inputs, Iterable):
        raise TypeError(f"inputs must be a path (str or os.PathLike) or a list of them, not {type(inputs).__name__}")
    inputs = list(inputs)
    if not inputs:  # (an empty list wrote empty outputs, where a glob that matches nothing is an error)
        raise CorpusInputError("no inputs: name at least one file, folder or glob")
    sources: list[Source] = []
    for given in inputs:
        name = os.fspath(given) if isinstance(given, (str, os.PathLike)) else given
        if not isinstance(name, str):
            raise TypeError(f"an input must be a str or os.PathLike path, not {type(name).__name__}: {name!r}")
        if os.path.isdir(name):
            saved = _saved_dataset(name)
            if saved is not None:
                sources.extend(saved)
                continue
            found = _folder_sources(name, leave_out)
            if not found:
                raise CorpusInputError(f"{name}: no input files in this folder (.jsonl, .jsonl.gz, .jsonl.zst, .jsonl.xz, .jsonl.bz2, .parquet, .txt)")
            sources.extend(found)
        elif os.path.exists(name):
            kind = _kind(name)
            if kind is None:
                raise CorpusInputError(
                    f"{name}: unknown kind of input (expected .jsonl/.json/.ndjson, optionally .gz, .zst, .xz or .bz2, .parquet or .txt)"
                )
            _regular_file(name)
            sources.append(Source(name, *kind))
        elif glob.has_magic(name):
            matched: list[Source] = []
            for match in _glob_files(name):
                if _in_work_folder(match) or (leave_out and os.path.realpath(match) in leave_out):
                    continue
                if os.path.isdir(match):
                    # A folder it matches is read as a folder input, at its place, as the shell
                    # passes it for the same pattern unquoted (left out before: 'corpus/*' read
                    # fewer documents than corpus/*; a bug hunt). (A ``**`` matches files only.)
                    saved = _saved_dataset(match)
                    matched.extend(saved if saved is not None else _folder_sources(match, leave_out))
                    continue
                kind = _kind(match)
                if kind is None:
                    _refuse_unread(match, f"the files {name} matches")
                    continue
                _regular_file(match)
                matched.append(Source(match, *kind))
            if not matched:
                raise CorpusInputError(f"{name}: the pattern matches no input file")
            sources.extend(matched)
        elif os.path.islink(name):
            _regular_file(name)
        else:
            raise CorpusInputError(f"{name}: no such file or folder")
    return sources


def _open_binary(source: Source) -> IO[bytes]:
    if source.compression and _empty(source.path):
        # (gzip and zstandard read an empty file as no data: a download that failed at its first
        # byte was a corpus of no documents, exit 0; a bug hunt. gzip -t calls it a truncated file.)
        raise CorpusInputError(f"{source.path}: cannot read: the file is empty (0 bytes), so not {source.compression} data")
    try:
        if source.compression == "gzip":
            return gzip.GzipFile(source.path, "rb")  # type: ignore[return-value]  # (owns and closes its file)
        raw = open(source.path, "rb")
    except OSError as error:
        raise unreadable(source.path, error) from None
    if source.compression == "zstd":
        try:
            import zstandard
        except ImportError:
            raw.close()
            raise CorpusInputError(f"{source.path}: reading .zst needs the zstandard package: {package_hint('zstandard')}") from None
        return _ZstdFrames(raw, zstandard)  # type: ignore[return-value]
    if source.compression == "xz":
        return _Unpacked(raw, lzma.LZMAFile(raw))  # type: ignore[return-value]
    if source.compression == "bzip2":
        return _Unpacked(raw, bz2.BZ2File(raw))  # type: ignore[return-value]
    return raw


def _empty(path: str) -> bool:
    try:
        return os.stat(path).st_size == 0
    except OSError:
        return False  # (named where it is opened)


class _Unpacked:
    """A .xz or .bz2 file read through the standard library's reader (which reads on across
    concatenated streams, in bounded steps, and raises EOFError on a file cut short); ``tell``
    is the compressed position, for progress."""

    def __init__(self, raw: IO[bytes], unpacked: IO[bytes]) -> None:
        self.raw = raw
        self.unpacked = unpacked

    def read(self, size: int) -> bytes:
        return self.unpacked.read(size)

    def tell(self) -> int:
        return self.raw.tell()

    def close(self) -> None:
        self.unpacked.close()
        self.raw.close()


ZSTD_OUTPUT_MAX = 8 << 20  # _ZstdFrames: decompressed bytes a step makes, about at most


class _ZstdFrames:
    """The frames of a .zst file, decompressed one after another.

    Not zstandard's ``stream_reader``: on a file cut inside a frame it ends as if the file were
    whole (a bug hunt: a truncated corpus read as a shorter complete one, exit 0). Here the end of
    the file inside a frame raises EOFError, as ``gzip`` does."""

    def __init__(self, raw: IO[bytes], zstandard: Any) -> None:
        self.raw = raw
        self.new_frame = zstandard.ZstdDecompressor().decompressobj
        self.frame = self.new_frame()
        self.in_frame = False  # bytes of the current frame have been given to it
        self.input = b""  # compressed bytes read, from input_at on not yet given to a frame
        self.input_at = 0
        self.output = b""  # decompressed bytes, from output_at on not yet returned
        self.output_at = 0
        # Compressed bytes given to the frame at a time, adapted so that each call makes at most
        # about ZSTD_OUTPUT_MAX bytes: a 1 MB chunk of a file that compresses 12,000x (25 KB for
        # 300 MB of repetitive JSONL) was decompressed whole, then cut by copying the rest after
        # each read: memory as large as the text and quadratic time (a bug hunt).
        self.step = 256

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes (fewer only where a decompression step ends); b"" at the end."""
        while self.output_at >= len(self.output):
            if self.input_at >= len(self.input):
                self.input, self.input_at = self.raw.read(1 << 20), 0
                if not self.input:
                    if self.in_frame:
                        raise EOFError("the file ends inside a zstd frame (truncated)")
                    return b""
            piece = self.input[self.input_at : self.input_at + self.step]
            self.input_at += len(piece)
            self.in_frame = True
            self.output, self.output_at = self.frame.decompress(piece), 0
            if len(self.output) > ZSTD_OUTPUT_MAX:
                self.step = max(self.step // 2, 64)
            elif len(self.output) < ZSTD_OUTPUT_MAX // 8:
                self.step = min(self.step * 2, 1 << 20)
            if self.frame.eof:  # the rest of the piece starts the next frame
                self.input, self.input_at = self.frame.unused_data + self.input[self.input_at :], 0
                self.frame = self.new_frame()
                self.in_frame = False
        data = self.output[self.output_at : self.output_at + size]
        self.output_at += len(data)
        return data

    def tell(self) -> int:
        """Bytes of the compressed file read so far."""
        return self.raw.tell()

    def close(self) -> None:
        self.raw.close()


def _raw_position(handle: IO[bytes], source: Source) -> int:
    """Bytes of the file itself read so far (the compressed position for compressed files)."""
    if source.compression == "gzip":
        return handle.fileobj.tell()  # type: ignore[attr-defined, no-any-return]
    return handle.tell()


def read_units(sources: list[Source], start: Cursor, unit_bytes: int, text_key: str, stop: int | None = None) -> Iterator[Unit]:
    """The units of ``sources`` from ``start`` on (to source ``stop``), each about ``unit_bytes`` of input."""
    stop = len(sources) if stop is None else stop
    text_batch: list[tuple[int, bytes]] = []
    text_bytes = 0
    for index in range(start.source, stop):
        source = sources[index]
        first = start if index == start.source else Cursor(index)
        if source.kind == "text":
            try:
                with open(source.path, "rb") as handle:
                    data = handle.read() if source.size < 0 else handle.read(source.size)
            except OSError as error:
                raise unreadable(source.path, error) from None
            if len(data) < source.size:
                raise _cut_short(source, len(data))
            text_batch.append((index, data))
            text_bytes += len(data)
            last = index + 1 == stop or sources[index + 1].kind != "text"
            if text_bytes >= unit_bytes or last:
                yield Unit("text", text_batch, text_batch[0][0], 0, text_bytes, Cursor(index + 1))
                text_batch, text_bytes = [], 0
        elif source.kind == "jsonl":
            yield from _jsonl_units(source, index, first, unit_bytes)
        else:
            yield from _arrow_units(source, index, first, unit_bytes, text_key)


def _jsonl_units(source: Source, index: int, first: Cursor, unit_bytes: int) -> Iterator[Unit]:
    if not source.compression:
        yield from _file_jsonl_units(source, index, first, unit_bytes)
        return
    handle = _open_binary(source)
    try:
        position, line = first.position, first.line
        skipped = 0
        while skipped < position:  # a compressed stream cannot seek: read up to the cursor
            data = _read_packed(handle, source, min(unit_bytes, position - skipped))
            if not data:
                raise CorpusInputError(f"{source.path}: shorter than when the run began")
            skipped += len(data)
        carry = b""
        consumed = _raw_position(handle, source)
        while True:
            data = _read_packed(handle, source, unit_bytes)
            if not data:
                if carry:  # a last line without its newline
                    yield Unit("jsonl", carry, index, line, _raw_position(handle, source) - consumed, Cursor(index + 1))
                return
            block = carry + data
            cut = block.rfind(b"\n") + 1
            if cut == 0:  # one line longer than a unit: read on
                carry = block
                continue
            lines, carry = block[:cut], block[cut:]
            now = _raw_position(handle, source)
            end = Cursor(index, position + cut, line + lines.count(b"\n"))
            yield Unit("jsonl", lines, index, line, now - consumed, end)
            consumed = now
            position, line = end.position, end.line
    finally:
        handle.close()


def _read_packed(handle: IO[bytes], source: Source, size: int) -> bytes:
    """Up to ``size`` bytes of a compressed file; a file cut short or not of its kind is a
    CorpusInputError naming it."""
    try:
        return handle.read(size)
    except MemoryError:
        raise
    except Exception as error:  # OSError, EOFError, gzip.BadGzipFile, lzma.LZMAError, zstandard.ZstdError
        raise unreadable(source.path, error) from None


def _file_jsonl_units(source: Source, index: int, first: Cursor, unit_bytes: int) -> Iterator[Unit]:
    """The units of an uncompressed JSONL file, each as its place in the file, ``(path, start,
    end)``: the worker reads it (from the page cache), a few bytes go through the pipe, not 4 MB.

    The reading process reads only where a unit may end (the last ``END_WINDOW`` bytes before
    ``unit_bytes``, for a newline) and does not count lines: its units have ``line`` 0, the worker
    numbers their lines from 1 and counts them, and the reading process, which takes the results
    in order, adds where each unit starts (``peek2.corpus.run``). CPU of the reading process is CPU
    a run with as many workers as cores takes from its workers: reading each unit whole and
    counting its newlines cost 0.58-0.73 s over the 1 GB corpus of ``scripts/bench_corpus.py``.
    Over its first 200 MB, the reading process of a ``--workers 2`` run used 1.63-1.77 s of CPU
    (user + system) before, 1.39-1.47 s after (three alternating runs); about 0.7 s of that is
    imports and the tokenizer's load."""
    try:
        handle = open(source.path, "rb", buffering=0)
    except OSError as error:
        raise unreadable(source.path, error) from None
    with handle:
        try:
            size = os.fstat(handle.fileno()).st_size
            if source.size >= 0:
                # (it took the size it found: a file cut short after the run began, by a line or more,
                # lost its end with exit 0 and a warning, and one that grew had its new lines read; a bug hunt)
                if size < source.size:
                    raise _cut_short(source, size)
                size = source.size
            position = first.position
            window = bytearray(END_WINDOW)
            while position < size:
                if size - position <= unit_bytes:  # (the rest, with or without a newline at its end)
                    yield Unit("jsonl", (source.path, position, size), index, 0, size - position, Cursor(index + 1))
                    return
                end = _unit_end(handle, window, position, position + unit_bytes, size)
                yield Unit("jsonl", (source.path, position, end), index, 0, end - position, Cursor(index, end, 0))
                position = end
        except OSError as error:
            raise unreadable(source.path, error) from None


def _cut_short(source: Source, size: int) -> CorpusInputError:
    return CorpusInputError(
        f"{source.path}: shorter than when the run began ({size:,} bytes, {source.size:,} then): its end would be lost"
    )


def _unit_end(handle: FileIO, window: bytearray, start: int, limit: int, size: int) -> int:
    """Where a unit from ``start`` ends: after the last newline before ``limit``; if there is none
    (a line longer than a unit), after the first newline from ``limit`` on, or at the end of the file."""
    high = limit
    while high > start:  # backwards, a window at a time (one read, nearly always)
        low = max(start, high - len(window))
        got = _read_at(handle, window, low, high - low)
        cut = window.rfind(b"\n", 0, got)
        if cut >= 0:
            return low + cut + 1
        high = low
    low = limit
    while low < size:
        got = _read_at(handle, window, low, min(len(window), size - low))
        if not got:
            break
        cut = window.find(b"\n", 0, got)
        if cut >= 0:
            return low + cut + 1
        low += got
    return size


def _read_at(handle: FileIO, window: bytearray, at: int, count: int) -> int:
    """Read ``count`` bytes at ``at`` into the start of ``window``; the bytes read (fewer at the end)."""
    handle.seek(at)
    view = memoryview(window)
    got = 0
    while got < count:
        more = handle.readinto(view[got:count])
        if not more:
            break
        got += more
    return got


def _arrow_units(
    source: Source, index: int, first: Cursor, unit_bytes: int, text_key: str, groups: tuple[int, int] | None = None
) -> Iterator[Unit]:
    """The units of a Parquet or Arrow file from ``first``'s row on; ``groups``: of a Parquet file's
    row groups ``start`` to ``end`` alone (the Ray engine's actors each read a range of them)."""
    import pyarrow as pa

    row = 0
    whole = True  # (read to the file's end: the last unit's cursor is the next file's start)
    try:
        if source.kind == "parquet":
            import pyarrow.parquet as pq

            parquet = pq.ParquetFile(source.path)
            schema = parquet.schema_arrow
            metadata = parquet.metadata
            rows = metadata.num_rows
            # Row groups before the first row wanted (a resumed run's) are not read at all (they
            # were read and dropped, a batch at a time).
            start, end = groups if groups is not None else (0, metadata.num_row_groups)
            whole = end >= metadata.num_row_groups
            for group in range(start):
                row += metadata.row_group(group).num_rows
            while start < end and row + metadata.row_group(start).num_rows <= first.position:
                row += metadata.row_group(start).num_rows
                start += 1
            batches: Iterator[Any] = iter(())
            if text_key in schema.names:
                # A group at a time: pyarrow's batches run on across groups, so that batches (and
                # the units that end with them) would depend on the group reading starts at.
                batches = (
                    batch.column(0)
                    for group in range(start, end)
                    for batch in parquet.iter_batches(batch_size=ARROW_BATCH_ROWS, row_groups=[group], columns=[text_key])
                )
        else:
            _check_stream_end(source.path)
            reader = pa.ipc.open_stream(pa.memory_map(source.path, "r"))
            schema = reader.schema
            table = reader.read_all()
            rows = table.num_rows
            batches = (c for c in (table.column(text_key).chunks if text_key in schema.names else []))
    except CorpusInputError:
        raise
    except Exception as error:
        raise unreadable(source.path, error, source.kind) from None
    if text_key not in schema.names:
        raise CorpusInputError(f"{source.path}: no column {text_key!r} (columns: {', '.join(schema.names)}); choose one with --text-key")
    if schema.names.count(text_key) > 1:  # (pyarrow writes such files; schema.field raised a bare KeyError: a bug hunt)
        raise CorpusInputError(f"{source.path}: {schema.names.count(text_key)} columns are named {text_key!r}: which one holds the text is not known")
    column_type = schema.field(text_key).type
    # Strings, also dictionary-encoded (a pandas Categorical) or as string views: read as strings.
    value_type = column_type.value_type if pa.types.is_dictionary(column_type) else column_type
    viewed = hasattr(pa.types, "is_string_view") and pa.types.is_string_view(value_type)
    if not (pa.types.is_string(value_type) or pa.types.is_large_string(value_type) or viewed):
        raise CorpusInputError(f"{source.path}: column {text_key!r} holds {column_type}, not strings")
    plain_type = pa.large_string() if pa.types.is_large_string(value_type) or viewed else pa.string()
    size = os.path.getsize(source.path)
    pending: list[Any] = []
    pending_bytes = 0
    start_row = first.position

    def share(start: int, end: int) -> int:
        """The file's bytes counted for rows start to end: shares that add up to its size (each
        unit's rounded down alone lost a byte or more of the total; a bug hunt)."""
        total = max(int(rows), 1)
        return size * end // total - size * start // total

    for array in _read_checked(batches, source):
        if array.type != plain_type:
            array = array.cast(plain_type)
        length = len(array)
        if row + length <= start_row:
            row += length
            continue
        if row < start_row:
            array = array.slice(start_row - row)
            row = start_row
        if len(array):
            pending.append(array)
            pending_bytes += array.nbytes
            row += len(array)
            if pending_bytes >= unit_bytes:
                unit_rows = sum(len(a) for a in pending)
                merged = pa.concat_arrays(pending)
                yield Unit("arrow", merged, index, row - unit_rows, share(row - unit_rows, row), Cursor(index, row, 1))
                pending, pending_bytes = [], 0
    if pending:
        unit_rows = sum(len(a) for a in pending)
        last = Cursor(index + 1) if whole else Cursor(index, row, 1)
        yield Unit("arrow", pa.concat_arrays(pending), index, row - unit_rows, share(row - unit_rows, rows if whole else row), last)


ARROW_END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # (the continuation marker, then a message of length 0)


def _check_stream_end(path: str) -> None:
    """CorpusInputError unless the Arrow stream file ``path`` ends with its end-of-stream marker
    right after its last message, as ``save_to_disk``'s writer leaves it (closed). A file cut
    short at a message boundary reads as a shorter, complete dataset: documents were dropped
    silently (a bug hunt), where a truncated .zst is an error."""
    import pyarrow as pa

    size = os.path.getsize(path)
    with pa.memory_map(path, "r") as mapped:
        messages = pa.ipc.MessageReader.open_stream(mapped)
        last_end = 0
        while True:
            try:
                messages.read_next_message()
            except StopIteration:
                break
            last_end = mapped.tell()
        mapped.seek(max(0, size - len(ARROW_END_OF_STREAM)))
        tail = mapped.read()
    if last_end != size - len(ARROW_END_OF_STREAM) or tail != ARROW_END_OF_STREAM:
        raise CorpusInputError(f"{path}: cut short (the Arrow stream has no end-of-stream marker after its last message at byte {last_end} of {size})")


def _read_checked(batches: Iterator[Any], source: Source) -> Iterator[Any]:
    """``batches``, where an error reading one (a Parquet page is read as its batch is wanted: a
    corrupt page was an OSError, reported as an output that could not be written; a bug hunt)
    is a CorpusInputError naming the file, on one line."""
    iterator = iter(batches)
    while True:
        try:
            batch = next(iterator)
        except StopIteration:
            return
        except Exception as error:
            raise unreadable(source.path, error, source.kind) from None
        yield batch


def _one_line(error: BaseException) -> str:
    """An error's message on one line (pyarrow's may hold several)."""
    return "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
