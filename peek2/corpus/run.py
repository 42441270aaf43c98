"""``peek2.corpus.tokenize``: a corpus to token files, on every core, crash-safe and resumable.

The reading process cuts the input into units (``inputs.read_units``: about ``unit_bytes`` of
input each, never across files), hands them to worker processes (each holds the tokenizer, loaded
once: forked on Linux, unpickled by source elsewhere), at most ``2 * workers`` at a time, and
writes their results in input order as they come back: memory is bounded by the window, the
output does not depend on the number of workers. Workers parse and check the documents and write
ids as machine integers (``Tokenizer._write_flat``): no Python int or list a id crosses a pipe.

Crash safety (docs/corpus.md): everything is written in ``PREFIX.peek2-work/``; every
``checkpoint_seconds`` the writers fsync and a manifest (inputs' fingerprints, tokenizer hash,
options, the cursor after the last unit written, the writers' state) replaces the previous one
atomically. ``resume=True`` truncates the work files to the manifest's state and reads on from its
cursor: the files are byte-identical to those of an uninterrupted run. Final names are given
only to complete files (``writers.publish``).
"""

from __future__ import annotations

import collections
import concurrent.futures
import concurrent.futures.process
import contextlib
import dataclasses
import functools
import importlib.util
import json
import math
import multiprocessing
import os
import re
import shutil
import signal
import socket
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Iterable

import numpy
from librt.strings import BytesWriter

from peek2.argument_checks import plain_int
from peek2.bpe.merger import as_flag
from peek2.corpus.documents import BadDocument, Options, UnitResult, encode_unit, location
from peek2.corpus.inputs import Cursor, CorpusInputError, CorpusLimitError, Source, Unit, find_inputs, read_units
from peek2.corpus.progress import Progress
from peek2.corpus.writers import WRITERS, Writer, naming, publish, take_back, token_dtype
from peek2.extras import install_hint
from peek2.tokenizer import Tokenizer

FORMATS = tuple(WRITERS)
UNIT_BYTES = 4 << 20
DEFAULT_SHARD_SIZE = 10**8  # ids a llm.c shard (fineweb.py's default)
EOS_CANDIDATES = ("<|endoftext|>", "<|end_of_text|>", "<｜end▁of▁sentence｜>", "</s>", "<eos>")  # (DeepSeek's bars are fullwidth)
MANIFEST_VERSION = 1
# Options that decide the output: a resumed run must have the same ones.
OPTIONS_BEFORE = {"split_special_tokens": False}  # options added since, as runs begun before them had them
OUTPUT_OPTIONS = ("format", "text_key", "append_eos", "eos_id", "add_special_tokens", "split_special_tokens", "shard_size", "unit_bytes", "dtype")


class CorpusError(Exception):
    """A run that cannot start or go on (bad options, refused resume, output in the way)."""


class CorpusOutputError(CorpusError):
    """The output cannot be written where it is asked for (``peek2 tokenize`` exits 1, as for a
    full disk, not 2 as for bad usage)."""


@dataclass
class RunStats:
    """What a run did (also written as ``PREFIX.summary.json``)."""

    documents: int = 0  # documents written (empty ones included)
    tokens: int = 0  # ids written (delimiters included)
    empty_documents: int = 0
    rejected: int = 0  # bad documents skipped (skip_bad), each in PREFIX.rejects.jsonl
    blank_lines: int = 0  # JSONL lines with only white space (not documents)
    input_bytes: int = 0
    seconds: float = 0.0  # of this process (a resumed run: since it resumed)
    tokens_per_document: float = 0.0
    format: str = ""
    workers: int = 0
    resumed: bool = False
    outputs: list[str] = field(default_factory=list)


class _DocumentError(CorpusInputError):
    """A document refused (file and line named): ``skip_bad`` goes past it."""


# ==== Workers ====

_worker: tuple[Tokenizer, Options, list[str]] | None = None


@contextlib.contextmanager
def _interrupts_held() -> Any:
    """Ctrl-C held back (the signal blocked) while the workers are forked, and taken right after.

    A Ctrl-C during the fork raised KeyboardInterrupt inside an at-fork hook of Python's own
    (logging's), where Python prints it as an ignored exception and goes on: the run printed a
    traceback, finished and exited 0 (a bug hunt). Blocked, the signal waits until the fork is
    done and then interrupts the run as anywhere else (status 130, resumable)."""
    import threading

    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _init_worker(tokenizer: Tokenizer, options: Options, paths: list[str], parent: int, lock_fd: int) -> None:
    global _worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what an interrupt does
    if lock_fd >= 0:
        # A forked worker shares the parent's lock on the work folder: let go of it, so that a
        # run resumed after the parent was killed never finds the folder locked by an orphan.
        with contextlib.suppress(OSError):
            os.close(lock_fd)
    if sys.platform.startswith("linux"):
        # A parent killed (SIGKILL) takes its workers with it, at once and without a word.
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)
    _worker = (tokenizer, options, paths)


def _encode_in_worker(unit: Unit) -> UnitResult:
    assert _worker is not None
    return encode_unit(unit, *_worker)


# ==== The run ====


def _load_tokenizer(tokenizer: Tokenizer | str | os.PathLike[str]) -> Tokenizer:
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    if not isinstance(tokenizer, (str, os.PathLike)):
        raise TypeError(f"tokenizer must be a Tokenizer, a path or a model name, not {type(tokenizer).__name__}")
    name = os.fspath(tokenizer)
    if os.path.isfile(name):
        return Tokenizer.from_file(name)
    try:
        return Tokenizer.from_pretrained(name)
    except FileNotFoundError as error:  # (a folder without tokenizer.json has no strerror: it said "None"; a bug hunt)
        # (the hub's own message does not name it: "tokenizer An error happened..."; a bug hunt)
        said = error.strerror or str(error)
        raise CorpusError(f"tokenizer {error}" if not error.strerror and name in said else f"tokenizer {name}: {said}") from None


def _eos_id(tokenizer: Tokenizer, eos_token: str | None) -> int:
    names = (eos_token,) if eos_token is not None else EOS_CANDIDATES
    for name in names:
        token_id = tokenizer.token_to_id(name)
        if token_id is not None:
            return token_id
    if eos_token is not None:
        raise CorpusError(f"eos_token {eos_token!r} is not a token of this tokenizer")
    raise CorpusError(f"this tokenizer has none of the usual end-of-text tokens ({', '.join(EOS_CANDIDATES)}): name one with eos_token (--eos-token)")


class _Run:
    """One run's files: the work folder, its lock and manifest."""

    def __init__(self, output: str) -> None:
        self.output = output
        self.work = output + ".peek2-work"
        self.manifest_path = os.path.join(self.work, "manifest.json")
        self.rejects_path = os.path.join(self.work, "rejects.jsonl")
        self.summary_path = output + ".summary.json"
        self.lock: Any = None

    def acquire(self) -> None:
        import fcntl

        self.lock = open(os.path.join(self.work, "lock"), "ab")  # (text mode without an encoding: an EncodingWarning; a bug hunt)
        try:
            fcntl.flock(self.lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.lock.close()
            raise CorpusError(f"another run is writing {self.output} (its work folder {self.work} is locked)") from None

    def release(self) -> None:
        if self.lock is not None:
            self.lock.close()
            self.lock = None

    def save_manifest(self, manifest: dict[str, Any]) -> None:
        tmp = self.manifest_path + ".tmp"
        with naming(tmp), open(tmp, "w", encoding="utf-8") as handle:  # (a full disk named only the prefix; a bug hunt)
            json.dump(manifest, handle, indent=1)
        publish(tmp, self.manifest_path)


def tokenize(
    inputs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    tokenizer: Tokenizer | str | os.PathLike[str],
    output: str | os.PathLike[str],
    format: str = "megatron",
    workers: int | None = None,
    text_key: str = "text",
    append_eos: bool = False,
    eos_token: str | None = None,
    add_special_tokens: bool = False,
    split_special_tokens: bool | None = None,
    shard_size: int | None = None,
    resume: bool = False,
    skip_bad: bool = False,
    force: bool = False,
    quiet: bool = False,
    progress: str = "auto",
    progress_seconds: float = 30.0,
    unit_bytes: int = UNIT_BYTES,
    checkpoint_seconds: float = 10.0,
    engine: str = "local",
    ray_address: str | None = None,
) -> RunStats:
    """Tokenize a corpus into training-ready token files; returns the run's statistics.

    See docs/corpus.md for the inputs, the formats (``"megatron"``, ``"llmc"``, ``"parquet"``),
    resuming and bad input.

    Raises:
        CorpusInputError: bad input (file and line named), unless ``skip_bad``.
        CorpusError: bad options, an output in the way, a refused resume.
    """
    started = time.monotonic()
    # (Checked before anything starts: a flag "no" was true, force="no" replaced a run's output;
    # shard_size=True wrote one-id shards; a bad number or text_key failed once the run had made
    # its work folder, which then refused the next run; a bug hunt.)
    append_eos, add_special_tokens, resume, skip_bad, force, quiet = (
        _flag(value, name)
        for value, name in (
            (append_eos, "append_eos"), (add_special_tokens, "add_special_tokens"), (resume, "resume"),
            (skip_bad, "skip_bad"), (force, "force"), (quiet, "quiet"),
        )
    )
    for word, name in ((format, "format"), (text_key, "text_key"), (progress, "progress"), (engine, "engine")):
        if not isinstance(word, str):
            raise CorpusError(f"{name} must be a str, not {type(word).__name__} ({word!r})")
    if not isinstance(output, (str, os.PathLike)) or not isinstance(os.fspath(output), str):
        raise CorpusError(f"output must be a str or a path (a prefix of file names), not {type(output).__name__} ({output!r})")
    if eos_token is not None and not isinstance(eos_token, str):
        raise CorpusError(f"eos_token must be a str (a token of the vocabulary) or None, not {type(eos_token).__name__} ({eos_token!r})")
    if split_special_tokens is not None:
        try:
            split_special_tokens = as_flag(split_special_tokens, "split_special_tokens")
        except TypeError:
            raise CorpusError(f"split_special_tokens must be True, False or None (the format's default), not {split_special_tokens!r}") from None
    # (NumPy integers are integers, as everywhere in peek2; their repr named no type: "not np.int64(5)")
    workers = plain_int(workers) if workers is not None else None
    if shard_size is not None and format != "llmc":  # (ignored before: one file where shards were asked for; a bug hunt)
        raise CorpusError(f"shard_size (--shard-size) applies to llmc only: {format!r} writes one file (or one pair of files)")
    if ray_address is not None and engine != "ray":  # (ignored before: the run went local without a word; a bug hunt)
        raise CorpusError("ray_address (--ray-address) applies to engine 'ray' (--engine ray) only")
    if shard_size is None:
        shard_size = DEFAULT_SHARD_SIZE
    shard_size, unit_bytes = plain_int(shard_size), plain_int(unit_bytes)
    progress_seconds, checkpoint_seconds = plain_int(progress_seconds), plain_int(checkpoint_seconds)
    for seconds, name in ((progress_seconds, "progress_seconds"), (checkpoint_seconds, "checkpoint_seconds")):
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 <= seconds < math.inf:
            raise CorpusError(f"{name} must be a number of seconds (0 or more), not {seconds!r}")
    if format not in WRITERS:
        raise CorpusError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    engine_workers_given = workers is not None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if workers is None:
        workers = cpus
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise CorpusError(f"workers must be a positive int, not {workers!r}")
    if engine == "local" and workers > 4 * cpus:  # (each a process: 99999999999 would start them all)
        raise CorpusError(f"workers {workers} is more than 4 per CPU of this machine ({cpus} CPUs): at most {4 * cpus}")
    if not isinstance(shard_size, int) or isinstance(shard_size, bool) or not 0 < shard_size < 1 << 31:
        raise CorpusError(f"shard_size must be from 1 to 2**31 - 1 ids (llm.c's limit), not {shard_size!r}")
    if not isinstance(unit_bytes, int) or isinstance(unit_bytes, bool) or unit_bytes < 1:
        raise CorpusError(f"unit_bytes must be a positive int, not {unit_bytes!r}")
    if format == "llmc" and append_eos:
        raise CorpusError("append_eos (--append-eos) does not apply to llmc: its shards already start every document with the end-of-text token, as llm.c's fineweb.py writes them")
    if format == "megatron" and any(sep and sep in text_key for sep in (os.sep, os.altsep)):
        raise CorpusError(f"text_key {text_key!r} names the Megatron files (PREFIX_{{text_key}}_document.bin, as Megatron names them): it cannot hold a path separator")
    if progress not in ("auto", "bar", "lines", "quiet"):
        raise CorpusError(f"progress must be 'auto', 'bar', 'lines' or 'quiet', not {progress!r}")
    if quiet:
        progress = "quiet"
    if engine not in ("local", "ray"):
        raise CorpusError(f"engine must be 'local' or 'ray', not {engine!r}")
    if engine == "ray":
        # (Before the work folder: a run without Ray said "fix the input", and left a work folder
        # the next run called an interrupted run; a bug hunt.)
        if importlib.util.find_spec("ray") is None:
            raise CorpusError(f"the ray engine needs Ray Data: {install_hint('ray')}")
        _check_ray_address(ray_address)
    # The outputs of this prefix that an input folder or glob may hold (the prefix inside it):
    # never inputs (they were read as such, and a second run then refused; a bug hunt).
    prefix = os.path.abspath(os.fspath(output))
    own_outputs = frozenset(os.path.realpath(prefix + suffix) for suffix in (".parquet", ".summary.json", ".rejects.jsonl"))
    sources = find_inputs(inputs, own_outputs)
    tok = _load_tokenizer(tokenizer)
    digest = tok._content_digest()
    if not digest:
        raise CorpusError("the tokenizer must be loaded from a file or a named model (its content is hashed for --resume)")
    eos_id = _eos_id(tok, eos_token) if (append_eos or format == "llmc") else -1
    if eos_token is not None:  # (checked where unused too: a misspelt token said nothing; a bug hunt)
        _eos_id(tok, eos_token)
    # A document is empty where it is written as what an empty text is (a text of its own gives at
    # least one id more): with add_special_tokens that is its special tokens, not nothing.
    first_id = eos_id if format == "llmc" else -1
    empty_length = tok._write_flat([""], BytesWriter(), True, add_special_tokens, False, first_id, eos_id if append_eos else -1)[0]
    dtype = token_dtype(format, tok.vocab_size)
    # llm.c's fineweb.py encodes a document's text as text (tiktoken's encode_ordinary,
    # tokenizers' split_special_tokens): a "<|endoftext|>" quoted in a web page is no document end.
    split = format == "llmc" if split_special_tokens is None else split_special_tokens
    options = Options(format, text_key, append_eos, eos_id, add_special_tokens, shard_size, unit_bytes, dtype, skip_bad, empty_length, split)
    output = os.fspath(output)
    if not os.path.basename(output) or os.path.basename(output) in (".", ".."):
        raise CorpusError(f"output {output!r} names a folder: give a prefix of file names, e.g. {os.path.join(output or '.', 'corpus')!r}")
    folder = os.path.dirname(output)
    if folder:
        above = folder
        while above and not os.path.exists(above):
            above = os.path.dirname(above)
        if above and not os.path.isdir(above):
            raise CorpusError(f"cannot write {output}: {above} is a file, not a folder")
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as error:  # (it was "file not found: /proc/x", as if an input were missing; a bug hunt)
            raise CorpusOutputError(f"cannot write {output}: cannot make the folder {error.filename or folder}: {error.strerror or error}") from None
    run = _Run(output)
    fingerprints = [s.fingerprint() for s in sources]
    sources = [dataclasses.replace(source, size=fingerprint["size"]) for source, fingerprint in zip(sources, fingerprints)]
    # (shard_size only shapes llm.c's shards: a megatron or parquet run resumed with another
    # was refused; a bug hunt)
    option_values = {name: getattr(options, name) for name in OUTPUT_OPTIONS if name != "shard_size" or format == "llmc"}
    manifest: dict[str, Any]

    if resume and os.path.exists(run.summary_path):
        # (A summary is written last, and a new run removes the old one before it begins.)
        # Finished: its summary, if it was this run (a bug hunt: other inputs, tokenizer
        # or options got the old summary back, exit 0, and the old files).
        try:
            with open(run.summary_path, encoding="utf-8") as handle:
                summary = json.load(handle)
            problem = _resume_problem(summary["run"], fingerprints, digest, option_values)
        except (OSError, ValueError, KeyError, TypeError) as error:
            problem = f"its summary {run.summary_path} does not say what it ran ({type(error).__name__}: {error})"
        if not problem:
            # (A new run killed while it removed the old outputs: the summary goes first now, but
            # one written before that left a summary of outputs gone; a bug hunt.)
            folder = os.path.dirname(run.summary_path)  # (the outputs' folder, however the prefix was written)
            missing = [path for path in summary.get("outputs", []) if not os.path.exists(os.path.join(folder, os.path.basename(path)))]
            if missing:
                problem = f"its output {missing[0]} is gone"
            # An output of another size than the run wrote (cut short, rewritten) is not that run's
            # (it was taken as finished, exit 0; a bug hunt). Summaries before this held no sizes.
            sizes = summary["run"].get("output_bytes", {}) if isinstance(summary["run"], dict) else {}
            for name, size in sizes.items() if isinstance(sizes, dict) and not problem else ():
                now = os.path.getsize(os.path.join(folder, name)) if os.path.isfile(os.path.join(folder, name)) else -1
                if now != size:
                    problem = f"its output {name} is {now} bytes, not the {size} the run wrote"
                    break
        if problem:
            raise CorpusError(f"cannot resume {output}: the run is finished, and {problem}: start a new run (--force replaces its outputs)")
        shutil.rmtree(run.work, ignore_errors=True)  # (a run killed while removing its work folder)
        return RunStats(**{f.name: summary[f.name] for f in fields(RunStats)})
    if resume and os.path.isdir(run.work):
        # (No work folder: stopped before it was made, or never run. It begins, as a run stopped
        # before its first checkpoint begins again: a retry loop always passing --resume must
        # not fail there; a bug hunt killed runs in their first 0.1-0.3 s.)
        run.acquire()
        try:
            with open(run.manifest_path, encoding="utf-8") as handle:
                begun: dict[str, Any] | None = json.load(handle)
        except FileNotFoundError:
            begun = None  # (stopped before its first manifest: nothing was written, it begins again)
        except (OSError, ValueError) as error:
            run.release()
            raise CorpusError(f"cannot resume: {run.manifest_path}: {error}") from None
        problem = ""
        if begun is not None:
            problem = _manifest_shape_problem(begun, run.manifest_path) or _resume_problem(begun, fingerprints, digest, option_values)
        if problem:
            run.release()
            raise CorpusError(f"cannot resume {output}: {problem}")
    else:
        _clear_the_way(run, format, text_key, force, sources)
        try:
            os.makedirs(run.work)
        except FileExistsError:  # (two runs begun at once on a new prefix: "cannot write ...: File exists"; a bug hunt)
            raise CorpusError(f"another run began writing {output} at the same time (it made the work folder {run.work})") from None
        run.acquire()
        begun = None
    if begun is not None:
        manifest = begun
    else:
        manifest = {
            "peek2_corpus_manifest": MANIFEST_VERSION,
            "inputs": fingerprints,
            "tokenizer": {"source": str(tok.spec.source), "sha256": digest, "vocab_size": tok.vocab_size},
            "options": option_values,
            "cursor": Cursor().to_json(),
            "writer": None,
            "stats": {"documents": 0, "tokens": 0, "empty_documents": 0, "rejected": 0, "blank_lines": 0, "input_bytes": 0},
            "rejects_bytes": 0,
        }
    try:
        if begun is None:
            run.save_manifest(manifest)
        ray = (workers if engine_workers_given else None, ray_address) if engine == "ray" else None
        reporter = Progress(sum(f["size"] for f in manifest["inputs"]), progress, progress_seconds)
        return _run(run, manifest, sources, tok, options, workers, reporter, checkpoint_seconds, started, resume, ray)
    except FileNotFoundError as error:
        if os.path.isdir(run.work):
            raise
        # (it was "file not found: PREFIX.peek2-work/manifest.json.tmp", as if an input were missing; a bug hunt)
        raise CorpusError(f"the run's work folder {run.work} was removed while the run went on ({error.filename}): it cannot go on; start over with --force") from None
    finally:
        run.release()


def _check_ray_address(address: str | None) -> None:
    """A cluster address (``host:port``, ``ray://host:port``; else ``RAY_ADDRESS``) where nothing
    answers is refused before the run begins: Ray itself tried again for minutes, logging each try,
    and peek2 said nothing (a bug hunt). ``auto`` and names Ray resolves are left to Ray."""
    if address is None:
        address = os.environ.get("RAY_ADDRESS")
    if not address or address in ("auto", "local"):
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_CONNECT_SECONDS).close()
    except (OSError, OverflowError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error) or type(error).__name__
        raise CorpusError(
            f"cannot reach the Ray cluster at {address}: {reason} (start it with `ray start --head`, "
            "or leave out --ray-address and RAY_ADDRESS for a local Ray)"
        ) from None


RAY_CONNECT_SECONDS = 5.0
"""How long ``_check_ray_address`` waits for a cluster's port to answer."""


def _flag(value: object, name: str) -> bool:
    try:
        return as_flag(value, name)
    except TypeError as error:
        raise CorpusError(str(error)) from None


MANIFEST_SHAPE = {"inputs": list, "tokenizer": dict, "options": dict, "cursor": dict, "stats": dict, "rejects_bytes": int}
FINGERPRINT_KEYS = ("path", "size", "mtime_ns", "sha256_ends")


def _manifest_shape_problem(manifest: object, path: str) -> str:
    """Why ``manifest`` (read from ``path``) is not a manifest peek2 writes, or "" (one of another
    version: ``_resume_problem`` says so). A JSON file of another shape was a traceback
    (AttributeError, TypeError) or a bare key name (a bug hunt)."""
    not_ours = f"its manifest {path} is not one peek2 wrote"
    if not isinstance(manifest, dict):
        return f"{not_ours} (a JSON {type(manifest).__name__}, not an object)"
    if manifest.get("peek2_corpus_manifest") != MANIFEST_VERSION:
        return ""
    for key, kind in MANIFEST_SHAPE.items():
        if not isinstance(manifest.get(key), kind):
            return f"{not_ours} (its {key!r} is missing or not a JSON {'array' if kind is list else 'object' if kind is dict else 'integer'})"
    if not all(isinstance(f, dict) and all(k in f for k in FINGERPRINT_KEYS) for f in manifest["inputs"]):
        return f"{not_ours} (an input of its 'inputs' is not {{{', '.join(FINGERPRINT_KEYS)}}})"
    if not isinstance(manifest["tokenizer"].get("sha256"), str) or not isinstance(manifest["tokenizer"].get("source"), str):
        return f"{not_ours} (its 'tokenizer' has no sha256 and source)"
    return ""


def _resume_problem(manifest: dict[str, Any], fingerprints: list[dict[str, Any]], digest: str, options: dict[str, Any]) -> str:
    if manifest.get("peek2_corpus_manifest") != MANIFEST_VERSION:
        return "its manifest was written by another version of peek2"
    before = manifest["inputs"]
    if [f["path"] for f in before] != [f["path"] for f in fingerprints]:
        return f"the inputs differ from those the run began with ({len(before)} files: {', '.join(f['path'] for f in before[:3])}{', ...' if len(before) > 3 else ''})"
    for old, new in zip(before, fingerprints):
        if old != new:
            what = [k for k in ("size", "mtime_ns", "sha256_ends") if old[k] != new[k]]
            return f"{new['path']} changed since the run began ({', '.join(what)})"
    if manifest["tokenizer"]["sha256"] != digest:
        return f"the tokenizer differs from the run's ({manifest['tokenizer']['source']}, sha256 {manifest['tokenizer']['sha256'][:12]}...)"
    for name, value in options.items():
        before = manifest["options"].get(name, OPTIONS_BEFORE.get(name))
        if before != value:
            return f"option {name} was {before!r} when the run began, now {value!r}"
    return ""


def _clear_the_way(run: _Run, format: str, text_key: str, force: bool, sources: list[Source]) -> None:
    output = run.output
    in_the_way = []
    if os.path.lexists(run.work) and not os.path.isdir(run.work):  # (it said "cannot write: Not a directory")
        raise CorpusError(f"{run.work} is in the way: a file where this run's work folder goes (remove it or choose another output prefix)")
    if os.path.exists(run.work):
        if os.path.exists(os.path.join(run.work, "lock")):
            run.acquire()  # (refused while another run is writing there: --force is for stopped runs)
            run.release()
        if not force:
            raise CorpusError(f"an interrupted run's work is in {run.work}: continue it with --resume (resume=True), or start over with --force")
        shutil.rmtree(run.work)
    folder = os.path.dirname(os.path.abspath(output))
    base = os.path.basename(output)
    for name in sorted(os.listdir(folder)):
        if name in (f"{base}_{text_key}_document.bin", f"{base}_{text_key}_document.idx", f"{base}.parquet", f"{base}.summary.json", f"{base}.rejects.jsonl") or (
            name.startswith(base + "_") and name.endswith(".bin") and name[len(base) + 1 : -4].isdigit() and len(name) - len(base) - 5 == 6
        ):
            in_the_way.append(os.path.join(folder, name))
    inputs = {os.path.realpath(source.path) for source in sources}
    for path in in_the_way:
        if os.path.realpath(path) in inputs:
            raise CorpusError(f"{path} is an input of this run and the name of one of its outputs: choose another output prefix")
    if in_the_way and not force:
        raise CorpusError(f"{in_the_way[0]} exists{f' (and {len(in_the_way) - 1} more outputs)' if len(in_the_way) > 1 else ''}: pass --force (force=True) to replace the outputs of {output}")
    # The summary first: it says the run finished, and a run killed among these removals must not
    # leave one that names outputs already removed (a --resume then returned it, exit 0; a bug hunt).
    in_the_way.sort(key=lambda path: not path.endswith(".summary.json"))
    for path in in_the_way:
        os.remove(path)


def _run(
    run: _Run,
    manifest: dict[str, Any],
    sources: list[Source],
    tok: Tokenizer,
    options: Options,
    workers: int,
    progress: Progress,
    checkpoint_seconds: float,
    started: float,
    resumed: bool,
    ray: tuple[int | None, str | None] | None = None,
) -> RunStats:
    if manifest["writer"] is None:
        # Nothing written was checkpointed (a run stopped in its first seconds): what it wrote
        # goes, or a writer that appends (Megatron's) would keep it and write it again.
        for name in os.listdir(run.work):
            if name not in ("manifest.json", "lock"):
                path = os.path.join(run.work, name)
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    writer: Writer = WRITERS[options.format](run.output, run.work, options.dtype, {"text_key": options.text_key, "shard_size": options.shard_size})
    stats = dict(manifest["stats"])
    if manifest["writer"] is not None:
        try:
            writer.resume(manifest["writer"])
        except (RuntimeError, OSError) as error:  # (its files are not what the manifest says: a crash while publishing them)
            writer.close()
            raise CorpusError(f"cannot resume {run.output}: {error}; start over with --force") from None
    rejects_size = manifest["rejects_bytes"]
    take_back(run.rejects_path, run.output + ".rejects.jsonl")
    with open(run.rejects_path, "ab"):
        pass
    os.truncate(run.rejects_path, rejects_size)
    rejects = open(run.rejects_path, "ab")
    cursor = Cursor.from_json(manifest["cursor"])
    paths = [s.path for s in sources]
    total_bytes = sum(f["size"] for f in manifest["inputs"])
    progress.skip(stats["input_bytes"], stats["documents"], stats["tokens"])
    remaining = total_bytes - stats["input_bytes"]
    in_process = workers == 1 or remaining <= 2 * options.unit_bytes
    pool: Any = None
    last_checkpoint = time.monotonic()

    def checkpoint(at: Cursor) -> None:
        manifest["writer"] = writer.checkpoint()
        rejects.flush()
        os.fsync(rejects.fileno())
        manifest["rejects_bytes"] = rejects.tell()
        manifest["cursor"] = at.to_json()
        manifest["stats"] = dict(stats)
        run.save_manifest(manifest)
        writer.after_checkpoint()

    def reject(source: int, line: int, reason: str) -> None:
        """A document skipped (``skip_bad``), in PREFIX.rejects.jsonl."""
        record = {"file": paths[source], "line": line, "reason": reason}
        try:
            rejects.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
        except UnicodeEncodeError:  # (a file name that is not UTF-8: \udcXX escapes, which json.loads and
            rejects.write((json.dumps(record) + "\n").encode("ascii"))  # os.fsencode turn back into its bytes)
        stats["rejected"] += 1

    # Where the next unit of each JSONL source starts, for the units whose lines the worker counted.
    next_line = {cursor.source: cursor.line}

    def take(unit: Unit, compute: Callable[[], UnitResult]) -> Cursor:
        """Write the unit's result (``compute`` gives it, or raises the worker's error); returns the
        cursor after the unit, its line numbered in the file."""
        counted = not (unit.kind == "jsonl" and unit.line == 0)
        start = unit.line if counted else next_line.get(unit.source, 1)
        shift = 0 if counted else start - 1
        try:
            result = compute()
        except BadDocument as error:
            raise _DocumentError(f"{location(paths, unit.kind, error.source, error.line + shift)}: {error.reason}") from None
        end = unit.end
        if not counted:
            next_line[unit.source] = start + result.newlines
            if end.source == unit.source:
                end = Cursor(end.source, end.position, start + result.newlines)
        writer.write(result.ids, result.lengths)
        for source, line, reason in result.rejects:
            reject(source, line + (shift if source == unit.source else 0), reason)
        tokens = int(result.lengths.sum())
        stats["documents"] += len(result.lengths)
        stats["tokens"] += tokens
        stats["empty_documents"] += int(numpy.count_nonzero(result.lengths == options.empty_length))
        stats["blank_lines"] += result.blank_lines
        stats["input_bytes"] += unit.input_bytes
        progress.update(unit.input_bytes, len(result.lengths), tokens)
        return end

    done = cursor
    try:
        units = read_units(sources, cursor, options.unit_bytes, options.text_key)
        if ray is not None:
            from peek2.corpus.ray_engine import DocumentError, ToldInputError, ray_batches, write_batches

            batches, workers = ray_batches(sources, options, tok, ray[0], ray[1], progress.mode == "quiet", cursor)

            def unit_done(at: Cursor) -> None:
                nonlocal done, last_checkpoint
                done = at
                if time.monotonic() - last_checkpoint >= checkpoint_seconds:
                    checkpoint(done)
                    last_checkpoint = time.monotonic()

            try:
                write_batches(batches, writer, options.dtype, progress, stats, options, reject, unit_done, cursor)
            except (OSError, ToldInputError):  # (writing here, or an input an actor told of: as on the local engine)
                raise
            except DocumentError as error:  # (told by an actor in its place in the input: the first bad document)
                raise _DocumentError(str(error)) from None
            except Exception as error:  # a read or a batch failed on the cluster (RayTaskError, ...)
                # The user's error is the last "SomeError: ..." line of Ray's report; what was
                # written before it is kept for --resume, as the local engine keeps it. A bad
                # document or an unreadable input is the local engine's error, with its advice
                # (a run that had --skip-bad was told to add it; a bug hunt).
                # (Dotted names too: pyarrow.lib.ArrowInvalid was not named; Ray's own wrappers left out.)
                causes = [
                    line.strip()
                    for line in str(error).splitlines()
                    if re.match(r"\s*[\w.]+(Error|Invalid|Exception): ", line) and not line.strip().startswith("ray.")
                ]
                cause = causes[-1] if causes else type(error).__name__
                for source in sources:  # (the cluster read them by absolute path: named as given, as the local engine names them)
                    cause = cause.replace(os.path.abspath(source.path), source.path) if os.path.abspath(source.path) != source.path else cause
                kind, _, message = cause.partition(": ")
                if kind.rsplit(".", 1)[-1] == "DocumentError":
                    raise _DocumentError(message) from None
                if kind.rsplit(".", 1)[-1] == "CorpusInputError":
                    raise CorpusInputError(message) from None
                if kind.rsplit(".", 1)[-1] == "CorpusLimitError":
                    raise CorpusLimitError(message) from None
                raise CorpusError(f"the ray engine failed: {cause} (the work so far is kept in {run.work}: continue with --resume)") from None
            done = Cursor(len(sources))
        elif in_process:
            workers = 1
            for unit in units:
                done = take(unit, functools.partial(encode_unit, unit, tok, options, paths))
                if time.monotonic() - last_checkpoint >= checkpoint_seconds:
                    checkpoint(done)
                    last_checkpoint = time.monotonic()
        else:
            context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
            lock_fd = run.lock.fileno() if context.get_start_method() == "fork" else -1
            # An executor, not multiprocessing.Pool: a worker that dies (the OOM killer) breaks it
            # and the results wait for raise; Pool lost that task and waited for ever, or hung in
            # terminate on the queue lock the dead worker held (a bug hunt).
            pool = concurrent.futures.ProcessPoolExecutor(
                workers, mp_context=context, initializer=_init_worker, initargs=(tok, options, paths, os.getpid(), lock_fd)
            )
            window: collections.deque[tuple[Unit, Any]] = collections.deque()
            spawned: list[Any] = []  # the worker processes (to name one that dies; the executor forgets them)

            def result_of(pending: Any) -> UnitResult:
                try:
                    return pending.result()  # type: ignore[no-any-return]
                except concurrent.futures.process.BrokenProcessPool:
                    for process in spawned:  # (the executor reaps them in its own thread: wait for their exit codes)
                        with contextlib.suppress(Exception):
                            process.join(5)
                    # A join racing the executor's own for the same process returns before the
                    # exit code is set (its waitpid finds the child reaped): wait for the codes, or
                    # the dead worker went unnamed and one the executor ended named instead (a CI run).
                    deadline = time.monotonic() + 5
                    while any(p.exitcode is None for p in spawned) and time.monotonic() < deadline:
                        time.sleep(0.01)
                    dead = [p for p in spawned if p.exitcode is not None]
                    dead.sort(key=lambda p: p.exitcode == -signal.SIGTERM)  # (the executor ends the others with SIGTERM)
                    if not dead:
                        raise CorpusError(f"a worker process died (out of memory?): the work so far is kept in {run.work}: continue with --resume") from None
                    code = dead[0].exitcode
                    how = f"killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals() else f"exit status {code}"
                    raise CorpusError(
                        f"worker process {dead[0].pid} died ({how}; out of memory?): the work so far is kept in {run.work}: continue with --resume"
                    ) from None

            def take_first() -> None:
                nonlocal done, last_checkpoint
                first, pending = window.popleft()
                done = take(first, functools.partial(result_of, pending))
                if time.monotonic() - last_checkpoint >= checkpoint_seconds:
                    checkpoint(done)
                    last_checkpoint = time.monotonic()

            for unit in units:
                try:
                    with _interrupts_held() if not spawned else contextlib.nullcontext():
                        pending = pool.submit(_encode_in_worker, unit)  # (the first forks the workers)
                except concurrent.futures.process.BrokenProcessPool as error:
                    # A worker died before this unit went out: the error a waited result gives
                    # (it escaped as a traceback when the executor saw the death first; a test run).
                    pending = concurrent.futures.Future()
                    pending.set_exception(error)
                    result_of(pending)
                window.append((unit, pending))
                if not spawned:
                    spawned.extend(getattr(pool, "_processes", {}).values())
                if len(window) >= 2 * workers:
                    take_first()
            while window:
                take_first()
            pool.shutdown()
            pool = None
        # Every byte of every input was read: the units' counts are for progress, and a compressed
        # file's read-ahead past a resumed run's cursor counted some twice (a bug hunt: 4,082,270
        # of 4,080,476 bytes after a resume).
        stats["input_bytes"] = total_bytes
        _warn_of_changed_inputs(sources, manifest["inputs"])
        checkpoint(done)
        progress.close()
        outputs = writer.finish()
        rejects.close()
        if options.skip_bad or stats["rejected"]:  # (rejected before a resume without skip_bad: kept too)
            publish(run.rejects_path, run.output + ".rejects.jsonl")
            outputs.append(run.output + ".rejects.jsonl")
        result = RunStats(
            documents=stats["documents"],
            tokens=stats["tokens"],
            empty_documents=stats["empty_documents"],
            rejected=stats["rejected"],
            blank_lines=stats["blank_lines"],
            input_bytes=stats["input_bytes"],
            seconds=round(time.monotonic() - started, 3),
            tokens_per_document=round(stats["tokens"] / stats["documents"], 2) if stats["documents"] else 0.0,
            format=options.format,
            workers=workers,
            resumed=resumed,
            outputs=outputs,
        )
        tmp = run.summary_path + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as handle:
                # The run's identity too: a later --resume of a finished run checks it (see tokenize).
                identity = {key: manifest[key] for key in ("peek2_corpus_manifest", "inputs", "tokenizer", "options")}
                identity["output_bytes"] = {os.path.basename(path): os.path.getsize(path) for path in outputs}
                json.dump({**asdict(result), "run": identity}, handle, indent=1)
            publish(tmp, run.summary_path)
        except BaseException:  # (a full disk left PREFIX.summary.json.tmp beside the outputs; a bug hunt)
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise
        run.release()
        try:
            shutil.rmtree(run.work)
        except OSError as error:  # (every output and the summary are complete: exit 1 said the run failed; a bug hunt)
            warnings.warn(f"the run is complete, but its work folder {run.work} could not be removed ({error.strerror or error}): remove it by hand", stacklevel=2)
        return result
    except CorpusInputError as error:
        # What came before the bad unit is written: keep it, so that a run with skip_bad resumes.
        _stop(pool)
        with contextlib.suppress(Exception):
            checkpoint(done)
        if isinstance(error, _DocumentError):
            raise CorpusInputError(f"{error} (the work so far is kept in {run.work}: continue past such documents with --resume --skip-bad)") from None
        # (a file that cannot be read as a whole, a missing column: --skip-bad skips documents, and
        # a fixed file is another input, so only a new run reads it)
        raise CorpusInputError(f"{error} (fix the input, then start over with --force)") from None
    except CorpusLimitError as error:  # (the input is good: once the limit is raised, the run goes on)
        _stop(pool)
        with contextlib.suppress(Exception):
            checkpoint(done)
        raise CorpusLimitError(f"{error} (the work so far is kept in {run.work}: continue with --resume)") from None
    except CorpusError:  # (a worker died: what came before is written, keep it for --resume)
        _stop(pool)
        with contextlib.suppress(Exception):
            checkpoint(done)
        raise
    except BaseException:
        _stop(pool)
        raise
    finally:
        progress.close()
        writer.close()
        if not rejects.closed:
            rejects.close()


def _warn_of_changed_inputs(sources: list[Source], inputs: list[dict[str, Any]]) -> None:
    """Say which inputs changed while the run read them (their size or modification time): the
    output holds what was read. A file that grew had its new end left out without a word, exit 0
    (a bug hunt); one cut short or removed is an error where it is read."""
    for source, before in zip(sources, inputs):
        try:
            status = os.stat(source.path)
        except OSError:
            continue
        if status.st_size != before["size"] or status.st_mtime_ns != before["mtime_ns"]:
            warnings.warn(
                f"{source.path} changed while the run read it ({before['size']:,} bytes when it began, {status.st_size:,} now): "
                "the output holds what was read; run again with --force for the new content",
                stacklevel=3,
            )


def _stop(pool: Any) -> None:
    """Stop the workers at once (an error or an interrupt: their results are not wanted)."""
    if pool is not None:
        processes = list(getattr(pool, "_processes", {}).values())  # (no public way to kill them before 3.14)
        results = getattr(pool, "_result_queue", None)  # (shutdown forgets both)
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            with contextlib.suppress(Exception):
                process.kill()
        for process in processes:
            with contextlib.suppress(Exception):
                process.join(5)
        # A worker killed while it sent a result left part of it in the results pipe, and the
        # executor's thread waited for the rest for ever: the process then hung at its exit, where
        # Python joins that thread (1 to 3 runs in 15 stopped by Ctrl-C or a full disk with 2
        # workers; a bug hunt). The workers are gone, so this process holds the pipe's last write
        # end: closed, the thread reads the end of the pipe and stops.
        writer = getattr(results, "_writer", None)
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()
