"""Loaded tokenizers kept in the user's cache directory, so that a second load skips the parse.

Reading a tokenizer file is most of a tokenizer's start-up: JSON, the byte-level alphabet of
every token and merge, the merge table and the whole-character tables (``EngineTables``). The
result depends only on the file's bytes, how it is read (the loader and its options) and
peek2's own code, so it is stored once under a name made of the sha256 of those bytes and
options and of that code (``build_id``), and read back in one unpickling on every later load of the same content, from any
path (a text given to ``Tokenizer.from_str`` too: ``load_text``).

- Where: ``$PEEK2_CACHE_DIR``, else the platform's user cache directory (``$XDG_CACHE_HOME`` or
  ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows) under
  ``peek2/``; never beside the tokenizer file. ``PEEK2_CACHE=0`` turns it off.
- Valid only for the same content: the file's bytes are hashed at every load (5 ms for the
  9 MB Llama-3 file), and a file that changes while it is read is read again (``load``).
- Valid only for the same peek2: an entry starts with a header naming the format, peek2's
  version, Python's version and the size and time of peek2's modules that build the tables; any
  other header (another build's entry has another name: two installs in turn keep one each, and
  at most two builds' entries of a file are kept), a truncated, unreadable or corrupt entry (its length and CRC-32 follow the
  header), or an unwritable directory means the file is parsed as without a cache (and the entry rewritten when it can be). Entries are written to a
  temporary name and renamed, so a crash or a concurrent load never leaves half an entry; the
  temporary file of a process killed while writing is removed by a later write (after an hour).
- Bounded: a write removes the entries not read for ``UNUSED_DAYS`` and keeps at most
  ``MAX_ENTRIES`` (the least recently read go first; a read marks an entry at most once a day).
  An entry names the content it was written for, checked at every read.
- An entry is a pickle, and unpickling runs what it names: the directory is the user's own, as
  trusted as the rest of their home directory (``PEEK2_CACHE=0`` where it is not).

Performance notes (Llama-3.2's tokenizer.json, 9 MB, ``python scripts/bench_load.py --runs 3``):
parsing and building took 1.20 s (tokenizers 0.33 s), 0.66 s once the alphabet conversions were
compiled (``peek2.bpe.vocab``); from the cache 0.18-0.20 s (hash 5 ms, unpickling, the merge
table and the engine). The spec's 280K merges were a tuple of pairs of bytes: pickling them took
0.44 s of a first load (the entry's other parts 0.1 s) and unpickling them 0.12 s of a cached one.
They are now kept as their tokens' ids (``peek2.spec.RankedMerges``, 2.2 MB in one bytes object),
in the entry and in every loaded tokenizer: ``python scripts/bench_load.py --runs 5``, cached
loads 1.48-1.81x -> 2.34-4.32x tokenizers' load, the first load 0.24-0.35x -> 0.35-0.39x, and a
loaded Llama-3 tokenizer takes 41 MB less (96.7 -> 55.1 MB of RSS, loaded from the cache).
"""

from __future__ import annotations

import dataclasses
import errno
import gc
import hashlib
import os
import pickle
import re
import stat
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from peek2.spec import RankedMerges, TokenizerFormatError, TokenizerSpec
from peek2.bpe.engine_tables import EngineTables, engine_tables

FORMAT = 5
"""Raised when what an entry holds changes shape (3: a checksum line after the header; 4: the
content's digest on that line; 5: the entry's name, with the build's, on that line)."""

# The modules whose code decides what an entry holds.
_BUILDERS = (
    "peek2.spec",
    "peek2.tokenizer",
    "peek2.bpe.engine_tables",
    "peek2.bpe.whole_chars",
    "peek2.bpe.merge_table",
    "peek2.bpe.merger",
    "peek2.bpe.piece_cache",
    "peek2.bpe.vocab",
    "peek2.pretokenize.families",
    "peek2.formats.hf_json",
    "peek2.formats.byte_level",
    "peek2.formats.tiktoken_file",
    "peek2.formats.gpt2_files",
    "peek2.models",
)

_header: bytes | None = None


def cache_dir() -> Path | None:
    """The directory of the entries, or None when the cache is off (``PEEK2_CACHE=0``)."""
    if os.environ.get("PEEK2_CACHE", "1") == "0":
        return None
    explicit = os.environ.get("PEEK2_CACHE_DIR")
    if explicit:
        # (expanded here: a "~" set where no shell expands it, Docker's ENV or systemd's
        # Environment=, made a directory named "~" wherever the process ran; a bug hunt)
        return _expanded(explicit)
    try:
        if sys.platform == "win32":
            base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        elif sys.platform == "darwin":
            base = str(Path.home() / "Library" / "Caches")
        else:
            xdg = os.environ.get("XDG_CACHE_HOME", "")
            # (a relative one is to be ignored, as the XDG specification says: it put the cache
            # under whatever folder the process ran in; and an empty HOME is no home, not "/"; a bug
            # hunt. "~/..." is the home directory, as set where no shell expands it: an earlier hunt.)
            if os.path.isabs(xdg) or xdg.startswith("~"):
                base = xdg
            elif os.environ.get("HOME") == "" or not Path.home().is_dir():
                # (a home that does not exist, as /nonexistent of service accounts, is none: the
                # cache made /nonexistent/.cache/peek2 as root; a bug hunt)
                return None
            else:
                base = str(Path.home() / ".cache")
    except RuntimeError:  # (no home directory: HOME unset, a user without a passwd entry; every load raised, a bug hunt)
        return None
    directory = _expanded(base)
    if directory is None or not directory.is_absolute():  # (HOME empty or relative: no cache rather than one in "/.cache" or the working folder)
        return None
    return directory / "peek2"


def _expanded(path: str) -> Path | None:
    """``path`` with ``~`` expanded; None (no cache: it costs speed only) where it cannot be
    (``~nosuchuser/x``, or no home directory: Path.expanduser raised, and every load with it; a bug hunt)."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        return None


class Loaded(NamedTuple):
    """What ``load`` gives: the spec and tables, and what they were read from: the files (absolute
    paths), their size and mtime before the read, and ``digest``, the sha256 of their content and
    the options (``Tokenizer`` pickles by it, and refuses a file changed since), and ``options``."""

    spec: TokenizerSpec
    tables: EngineTables
    files: tuple[str, ...]
    stamps: tuple[tuple[int, int], ...]
    digest: str
    options: str = ""


def same_content(files: Sequence[str], options: str, digest: str) -> bool:
    """Whether ``files`` read with ``options`` still hash to ``digest`` (after a touch, or a checkout
    of the same bytes, where their size and mtime moved)."""
    try:
        return _digest(files, options) == digest
    except OSError:
        return False


READS = 3
"""Times a file that changes while it is read is read again before giving up."""


def load(files: Sequence[str | os.PathLike[str]], options: str, build: Callable[[], TokenizerSpec]) -> Loaded:
    """The spec and engine tables that ``build()`` makes from ``files`` read with ``options``, from the
    cache when it holds them, else built (and stored).

    The content is hashed before the read and, where the files are read, after it too: a file
    rewritten while it was read (same size or not) is read again, so that the digest is always that
    of what was read. (A bug hunt: the stamp taken after the read, a pickle carried the new file's
    digest with the old file's vocabulary, and loaded silently as the other.)"""
    for given in files:
        _check_regular(os.fspath(given))
    paths = tuple(os.path.abspath(os.fspath(f)) for f in files)
    directory = cache_dir()
    for _ in range(READS):
        stamps = tuple(file_stamp(path) for path in paths)
        digest = _digest(files, options)
        entry = directory / f"{digest}.{build_id()}.tables" if directory is not None else None
        found = _read(entry) if entry is not None else None
        if found is not None:
            spec, tables = found
            return Loaded(dataclasses.replace(spec, source=os.fspath(files[0])), tables, paths, stamps, digest, options)
        spec, tables = _build(build)
        if _digest(files, options) == digest:
            if entry is not None:
                _write(entry, spec, tables)
            return Loaded(spec, tables, paths, stamps, digest, options)
    raise TokenizerFormatError(f"{', '.join(paths)}: changed while being read, {READS} times: load it once it is written")


def load_text(text: str, options: str, build: Callable[[], TokenizerSpec]) -> Loaded:
    """``load`` for a file's text given in memory (``Tokenizer.from_str``): the entry of the same
    text read the same way, else built (and stored). (The transformers patch makes its engine from
    the backend's JSON in every new process: 1.25 s of a first call, 1.0 s of it ``from_str``.)"""
    digest = _digest_of([text.encode("utf-8", "surrogatepass")], options)
    directory = cache_dir()
    entry = directory / f"{digest}.{build_id()}.tables" if directory is not None else None
    found = _read(entry) if entry is not None else None
    if found is not None:
        spec, tables = found
        return Loaded(dataclasses.replace(spec, source=TEXT_SOURCE), tables, (), (), digest, options)
    spec, tables = _build(build)
    if entry is not None:
        _write(entry, spec, tables)
    return Loaded(spec, tables, (), (), digest, options)


TEXT_SOURCE = "<string>"
"""The ``source`` of a spec read from a text (as ``hf_json.load_str`` names it)."""


def _check_regular(path: str) -> None:
    """Refuse a device, pipe or socket before opening it: ``/dev/zero`` was read until memory ran
    out, a pipe without a writer blocked for ever (a bug hunt), and a pipe read once could not be
    read again for the digest. A missing path is left to ``open``, which names it. A folder is
    refused with what to pass instead (``open`` said only "Is a directory"; a newcomer's first try,
    since ``from_pretrained`` and the command take a folder)."""
    if not path:  # (made absolute, "" was the working directory, named as a folder; a bug hunt)
        raise FileNotFoundError(errno.ENOENT, "an empty path: no tokenizer file named", path)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(
            errno.EISDIR, "a folder, not a tokenizer file: pass the file in it, or the folder to Tokenizer.from_pretrained", path
        )
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, "not a regular file (a device, pipe or socket)", path)


def file_stamp(path: str) -> tuple[int, int]:
    """A file's size and mtime (-1, -1 where it cannot be read)."""
    try:
        status = os.stat(path)
    except OSError:
        return (-1, -1)
    return (status.st_size, status.st_mtime_ns)


def _build(build: Callable[[], TokenizerSpec]) -> tuple[TokenizerSpec, EngineTables]:
    # The collector paused: a load makes a million objects that all live (JSON, the tables), and
    # the collections they set off found nothing to free (Llama-3.2, best of 6: 0.83 -> 0.74 s).
    enabled = gc.isenabled()
    gc.disable()
    try:
        spec = build()
        tables = engine_tables(spec)
        return _ranked(spec, tables), tables
    finally:
        if enabled:
            gc.enable()


def _ranked(spec: TokenizerSpec, tables: EngineTables) -> TokenizerSpec:
    """``spec`` with its merges as ``RankedMerges`` (the same pairs, no object per merge) where the
    vocabulary gives every token its own id, so that each id names one token."""
    vocab = spec.vocab
    if isinstance(spec.merges, RankedMerges) or len(tables.merge_pairs) != 8 * len(spec.merges) or len(set(vocab.values())) != len(vocab):
        return spec
    return dataclasses.replace(spec, merges=RankedMerges(tables.merge_pairs, vocab))


def _digest(files: Sequence[str | os.PathLike[str]], options: str) -> str:
    contents = []
    for path in files:
        with open(path, "rb") as handle:
            contents.append(handle.read())
    return _digest_of(contents, options)


def _digest_of(contents: Sequence[bytes], options: str) -> str:
    digest = hashlib.sha256(options.encode("utf-8"))
    for content in contents:
        digest.update(len(content).to_bytes(8, "little"))
        digest.update(content)
    return digest.hexdigest()


def header() -> bytes:
    """The first line of every entry this peek2 writes and reads."""
    global _header
    if _header is None:
        stamps = []
        for name in _BUILDERS:
            __import__(name)
            path = getattr(sys.modules[name], "__file__", None) or ""
            try:
                status = os.stat(path)
                stamps.append(f"{name}:{status.st_size}:{status.st_mtime_ns}")
            except OSError:
                stamps.append(f"{name}:?")
        from peek2 import __version__

        code = hashlib.sha256("\n".join(stamps).encode()).hexdigest()[:16]
        python = ".".join(map(str, sys.version_info[:2]))
        _header = f"peek2-load-cache {FORMAT} {__version__} python{python} {code}\n".encode()
    return _header


def build_id() -> str:
    """The header's hash, in an entry's name: two installs of peek2 (a project's venv and a
    notebook's, a compiled and a pure build) each read their own entry of a file, where they
    rewrote one name in turn and each load of the other parsed the file again (0.3 -> 0.96 s for
    Qwen3's; a bug hunt)."""
    return hashlib.sha256(header()).hexdigest()[:16]


def _read(entry: Path) -> tuple[TokenizerSpec, EngineTables] | None:
    # The collector paused while the merges are unpickled: their pair tuples then stay in the
    # youngest generation in the order they were made, before the tuple that holds them, and the
    # first collection stops tracking all of them (tokenizer.py's notes on memory). A collection
    # in the middle would move some pairs behind the outer tuple, which then stays tracked.
    enabled = gc.isenabled()
    gc.disable()
    try:
        # (Opened without waiting, then checked to be a regular file: an entry that was a pipe
        # blocked the load for ever at its open, and one linked to /dev/zero was read until memory
        # ran out; a bug hunt. The header lines are read with a limit for the same reason.)
        with open(os.open(entry, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            if handle.readline(256) != header():
                return None
            size, checksum, written_for = handle.readline(256).split()
            if written_for.decode() != entry.stem:  # (an entry copied to another's name loaded as it; a bug hunt)
                return None
            payload = handle.read()
            _used(entry, os.fstat(handle.fileno()).st_mtime)
        # (a bit flipped on disk loaded silently as another vocabulary, or as tables that disagree
        # with it: 40 flips, 39 loads without a word; a bug hunt. CRC-32: 3 ms for 12 MB.)
        if len(payload) != int(size) or zlib.crc32(payload) != int(checksum, 16):
            return None
        spec, tables = pickle.loads(payload)
    except Exception:  # a missing, truncated, corrupt or foreign entry: parse the file instead
        return None
    finally:
        if enabled:
            gc.enable()
    if not isinstance(spec, TokenizerSpec) or not isinstance(tables, EngineTables):
        return None
    return spec, tables


STALE_SECONDS = 3600
"""A temporary entry this old was left by a process that died while writing it."""


UNUSED_DAYS = 30
"""An entry not read for this long is removed by the next write (entries of files edited since, or
of an older peek2, whose header this one never reads, were kept for ever: 213 MB, 27 of 39
entries unreadable, on a developer's machine; a bug hunt)."""

MAX_ENTRIES = 64
"""The most entries kept (7-10 MB each): beyond them the next write removes the least recently read."""


def _used(entry: Path, mtime: float) -> None:
    """Mark ``entry`` read now (its mtime, at most once a day: a read costs no write otherwise)."""
    now = time.time()
    if now - mtime > 86400:
        try:
            os.utime(entry, (now, now))
        except OSError:  # (a read-only cache: only the pruning is less exact)
            pass


def _prune(directory: Path, kept: Path) -> None:
    """Remove the entries not read for ``UNUSED_DAYS``, those of ``kept``'s file by other builds
    but the most recently read one (two installs in turn keep theirs; each rebuild of a
    developer's peek2 made a new one), then the least recently read beyond ``MAX_ENTRIES`` (never
    ``kept``, the one just written). Only entries' own names are touched: the directory may be
    shared."""
    now = time.time()
    found: list[tuple[float, Path]] = []
    same_file: list[tuple[float, Path]] = []
    for path in directory.glob("*.tables"):
        if not _ENTRY.fullmatch(path.name) or path == kept:
            continue
        try:
            mtime = path.stat().st_mtime
            if now - mtime > UNUSED_DAYS * 86400:
                path.unlink()
            elif path.name[:64] == kept.name[:64]:
                same_file.append((mtime, path))
            else:
                found.append((mtime, path))
        except OSError:  # (another process removed it first)
            pass
    same_file.sort()
    for _, path in same_file[:-1]:
        try:
            path.unlink()
        except OSError:
            pass
    found += same_file[-1:]
    found.sort()
    for _, path in found[: max(0, len(found) + 1 - MAX_ENTRIES)]:
        try:
            path.unlink()
        except OSError:
            pass


_ENTRY = re.compile(r"[0-9a-f]{64}(\.[0-9a-f]{16})?\.tables")  # (without the build: FORMAT 4's, pruned as others)


def _write(entry: Path, spec: TokenizerSpec, tables: EngineTables) -> None:
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(entry.parent)
        _prune(entry.parent, entry)
        handle = tempfile.NamedTemporaryFile("wb", dir=entry.parent, prefix=f".{entry.stem}.", suffix=".tmp", delete=False)
        try:
            payload = pickle.dumps((dataclasses.replace(spec, source=""), tables._replace(merge_table=None, merge_pairs=b"")), protocol=5)
            with handle:
                handle.write(header())
                handle.write(f"{len(payload)} {zlib.crc32(payload):08x} {entry.stem}\n".encode())
                handle.write(payload)
            os.replace(handle.name, entry)
        except BaseException:
            os.unlink(handle.name)
            raise
    except OSError:  # a read-only or full cache directory costs the next load its speed, nothing else
        pass


_TEMPORARY = re.compile(r"\.[0-9a-f]{64}(\.[0-9a-f]{16})?\.[0-9a-z_]+\.tmp")
"""The name of a temporary entry (``_write``): nothing else in the directory is removed, which may
be shared ("/tmp", a project's folder: other programs' ``.*.tmp`` files went too; a bug hunt)."""


def _remove_stale(directory: Path) -> None:
    """Remove the temporary entries of writers killed mid-write (4-10 MB each, named only by their
    writer, so never reused); one being written now is younger than ``STALE_SECONDS``."""
    now = time.time()
    for path in directory.glob(".*.tmp"):
        if not _TEMPORARY.fullmatch(path.name):
            continue
        try:
            if now - path.stat().st_mtime > STALE_SECONDS:
                path.unlink()
        except OSError:  # (another process removed it first, or it is not ours to remove)
            pass
