"""The ``peek2`` command line: encode, decode and split text with a named model or a tokenizer.json.

    peek2 encode [--model NAME | --tokenizer PATH] [--json] [--no-special] [FILE|-]
    peek2 decode [--model NAME | --tokenizer PATH] [--keep-special-tokens] [--exact] [FILE|-]
    peek2 split  [--pattern FAMILY] [--offsets] [FILE|-]
    peek2 tokenize INPUT... --tokenizer NAME_OR_FILE --output PREFIX --format megatron|llmc|parquet
                 [--workers N] [--text-key text] [--append-eos] [--resume] [--skip-bad] [--quiet] ...
    peek2 --version

Input and output are UTF-8 (bytes are read as they are: no newline translation). ``encode``
and ``decode`` read, convert and write in blocks of ``BLOCK`` bytes through the streaming
encoder and decoder (``peek2.serving.streaming``), whose output equals that of one call on the whole
input for any cut: memory stays flat whatever the size of the input, except for the pending
text of a single piece that has not ended (a run of one character, see docs/serving.md).
``split`` writes each block's pieces up to the last boundary no later text can move (the
streaming encoder's rule 1), flat the same way.

Exit status (one line ``peek2: ...`` on stderr, never a traceback):
    0    success
    1    the output cannot be written (disk full, ...), memory ran out, or an installed module
         failed to load (a memory limit)
    2    bad usage or input: unknown model, unreadable or malformed tokenizer file, input that
         is not UTF-8 (the message gives the line and byte offset), ids that are not ids
    130  interrupted (Ctrl-C; inside an encode call the signal itself ends the process at once)
A closed output pipe (``peek2 encode big.txt | head``) ends quietly, as ``cat`` does (141).
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import errno
import io
import json
import os
import re
import signal
import sys
import threading
import warnings
from typing import IO, Iterable, Iterator, NoReturn

import peek2
from peek2.extras import package_hint
from peek2.pretokenize.scanner import final_boundary
from peek2.serving.streaming import StreamEncoder
from peek2.tokenizer import Tokenizer

BLOCK = 1 << 20
"""Bytes read, converted and written at a time."""
PROGRESS_MIN = 4 * BLOCK
"""Inputs at least this large show a progress bar when stderr is a terminal."""


class CliError(Exception):
    """A user error: printed as ``peek2: message`` with exit status 2."""


class _IdsError(CliError):
    """Input to ``decode`` that is not ids (named with how many ids came before it)."""


class OutputError(Exception):
    """The output cannot be written: printed as ``peek2: message`` with exit status 1."""


class _DependencyError(OutputError):
    """An installed dependency that fails to import (a memory limit, a broken install): status 1,
    as the other failures of the machine rather than of the user's input."""


# ==== Input ====


def _open_input(path: str) -> IO[bytes]:
    if path == "-":
        if sys.stdin is None:  # (started with standard input closed: ``peek2 encode <&-``)
            raise CliError("cannot read standard input: it is closed")
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as error:
        raise CliError(f"cannot read {path!r}: {error.strerror or error}") from None


def _input_size(handle: IO[bytes]) -> int | None:
    try:
        size = os.fstat(handle.fileno()).st_size
    except (OSError, ValueError):
        return None
    return size or None  # a pipe or terminal says 0


def _read_blocks(path: str, progress: _Progress | None = None) -> Iterator[str]:
    """The UTF-8 text of ``path`` (``-``: standard input) in blocks; CliError names the first
    invalid byte by line and byte offset.

    A block is given only once the next one has decoded: a text of one block that ends inside a
    character printed its ids, then the error (a bug hunt); now nothing is printed for it. (A
    longer text prints the ids of what comes before its last two blocks: its memory stays bounded.)"""
    name = "standard input" if path == "-" else repr(path)
    handle = _open_input(path)
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    offset = 0  # bytes before the current block
    lines = 1  # line of the current block's first byte
    pending = ""  # the text of the previous block, given once this one decodes
    try:
        while True:
            try:
                data = handle.read(BLOCK)
            except OSError as error:
                raise CliError(f"cannot read {name}: {error.strerror or error}") from None
            held = len(decoder.getstate()[0])  # bytes of a character begun in the previous block
            try:
                text = decoder.decode(data, final=not data)
            except UnicodeDecodeError as error:  # error.object: the held bytes, then data
                line = lines + error.object.count(b"\n", 0, error.start)
                where = f"0x{error.object[error.start]:02X} at line {line}, byte offset {offset - held + error.start}"
                if not data:
                    raise CliError(f"{name} is not UTF-8 text: it ends inside a character (truncated?): its last character begins with byte {where}") from None
                raise CliError(f"{name} is not UTF-8 text: invalid byte {where}") from None
            if progress is not None:
                progress.update(len(data))
            if pending:
                yield pending
            pending = text
            if not data:
                if pending:
                    yield pending
                return
            offset += len(data)
            lines += data.count(b"\n")
    finally:
        if path != "-":
            handle.close()


# ==== Output ====


class _Output:
    """Standard output, whose write errors (disk full) become OutputError; a closed pipe passes."""

    def __init__(self) -> None:
        self.stream = sys.stdout

    def write(self, text: str) -> None:
        if self.stream is None:  # (started with standard output closed: ``peek2 decode >&-``)
            raise OutputError("cannot write the output: standard output is closed")
        try:
            self.stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputError(f"cannot write the output: {error.strerror or error}") from None

    def flush(self) -> None:
        if self.stream is None:
            return
        try:
            self.stream.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputError(f"cannot write the output: {error.strerror or error}") from None


class _Progress:
    """A tqdm bar of bytes read, on a terminal and for large inputs only."""

    def __init__(self, path: str) -> None:
        self.bar = None
        if not sys.stderr.isatty():
            return
        size = None
        if path != "-":
            try:
                size = os.stat(path).st_size
            except OSError:
                return
        elif sys.stdin is not None:
            size = _input_size(sys.stdin.buffer)
        if size is None or size < PROGRESS_MIN:
            return
        from tqdm import tqdm

        self.bar = tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr, leave=False)

    def update(self, count: int) -> None:
        if self.bar is not None:
            self.bar.update(count)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ==== Commands ====


def _tokenizer(args: argparse.Namespace) -> Tokenizer:
    try:
        if args.tokenizer is not None:  # (an empty one too: it loaded the default model; a bug hunt)
            if not args.tokenizer:
                raise CliError("--tokenizer: an empty path")
            if os.path.isdir(args.tokenizer):  # (a folder holding one, as --model and tokenize take it)
                gpt2_files = [os.path.join(args.tokenizer, name) for name in ("encoder.json", "vocab.bpe")]
                if not os.path.isfile(os.path.join(args.tokenizer, "tokenizer.json")) and not all(map(os.path.isfile, gpt2_files)):
                    from pathlib import Path

                    from peek2.models import folder_without_tokenizer_json

                    raise CliError(f"--tokenizer: {folder_without_tokenizer_json(Path(args.tokenizer))}")
                return Tokenizer.from_pretrained(args.tokenizer)
            from peek2.models import RANK_FILE_SUFFIXES

            if args.tokenizer.endswith(RANK_FILE_SUFFIXES):  # (refused by name there; as JSON it was "not valid JSON (truncated?)")
                return Tokenizer.from_pretrained(args.tokenizer)
            return Tokenizer.from_file(args.tokenizer)
        if args.model.count("/") == 1 and not os.path.exists(args.model):
            _quiet_hub()
        try:
            return Tokenizer._load_pretrained(args.model)  # (a name: never a folder of that name)
        except OSError as error:
            if type(error).__module__.startswith("huggingface_hub"):  # (their message names no repository)
                raise CliError(f"--model {args.model}: the hub repository's tokenizer.json could not be fetched: {error}") from None
            raise
    except FileNotFoundError as error:
        raise CliError(f"tokenizer file not found: {error.filename or error}") from None
    except OSError as error:  # a folder, no permission, ...
        raise CliError(f"cannot read the tokenizer {error.filename or args.tokenizer!r}: {error.strerror or error}") from None
    except (LookupError, ValueError, NotImplementedError) as error:
        raise CliError(str(error)) from None


def _one_line(message: str) -> str:
    """``message`` on one line: a path holding a newline made a second line (a bug hunt)."""
    return message.replace("\r", "\\r").replace("\n", "\\n")


def _quiet_hub() -> None:
    """huggingface_hub's warnings off: the one line ``peek2: ...`` says what went wrong (offline,
    its "Retrying in 1s [Retry 1/5]." lines came before it for 24 s; a bug hunt)."""
    try:
        from huggingface_hub.utils import logging as hub_logging
    except ImportError:
        return
    hub_logging.set_verbosity_error()


@contextlib.contextmanager
def _interrupt_ends_process() -> Iterator[None]:
    """Ctrl-C ends the process at once inside an encode call.

    Python's handler only sets a flag that the interpreter reads between bytecodes, and a
    compiled encode call holds no bytecode: one enormous piece (a 20 MB line of "=") took 11.6 s
    to be interrupted. Here the signal's default action ends the process (status 130 in a shell,
    no traceback); between calls the CLI's own handler prints one line and exits with 130.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


class _WholeText:
    """The stream encoder's interface over one ``encode`` of the whole input, held until the end."""

    def __init__(self, tokenizer: Tokenizer, add_special_tokens: bool) -> None:
        self.tokenizer, self.add_special_tokens, self.parts = tokenizer, add_special_tokens, list[str]()

    def feed(self, text: str) -> list[int]:
        self.parts.append(text)
        return []

    def finish(self) -> list[int]:
        return self.tokenizer.encode("".join(self.parts), self.add_special_tokens)


def _encode(args: argparse.Namespace, out: _Output) -> int:
    tokenizer = _tokenizer(args)
    encoder: StreamEncoder | _WholeText
    try:
        encoder = tokenizer.stream_encoder(add_special_tokens=not args.no_special)
    except NotImplementedError:  # added tokens streaming cannot match yet (DeepSeek-V3's normalized ones)
        encoder = _WholeText(tokenizer, add_special_tokens=not args.no_special)
    separator = ", " if args.json else " "
    first = True

    def emit(ids: list[int]) -> None:
        nonlocal first
        if ids:
            out.write(("" if first else separator) + separator.join(map(str, ids)))
            first = False

    progress = _Progress(args.file)
    if args.json:
        out.write("[")
    try:
        for text in _read_blocks(args.file, progress):
            with _interrupt_ends_process():
                ids = encoder.feed(text)
            emit(ids)
        with _interrupt_ends_process():
            ids = encoder.finish()
        emit(ids)
    except ValueError as error:  # a lone surrogate cannot come from UTF-8: kept for safety
        raise CliError(str(error)) from None
    finally:
        progress.close()
    out.write("]\n" if args.json else "\n")
    return 0


_ID_WORDS = re.compile(r"[\[\],]|[^\s\[\],]+")


MAX_ID_DIGITS = 20
"""The longest word read as an id (u64's 20 digits; every vocabulary's ids fit in u32's 10)."""


def _id_words(path: str) -> Iterator[str]:
    """The words of an ids file (integers, and JSON's brackets and commas), read in blocks.

    A word that goes on into the next block is carried over, at most ``MAX_ID_DIGITS`` + 1
    characters of it: a block-long word was carried and searched again at every block
    (quadratic: a 16 MB word took 12.8 s to be refused, a bug hunt).
    """
    carry = ""
    first = True
    for text in _read_blocks(path):
        if first and text.startswith("\ufeff"):  # (a byte-order mark, as editors on Windows write: "'\ufeff9906' is not an integer")
            text = text[1:]
        first = False
        text = carry + text
        cut = len(text)
        while cut > 0 and not (text[cut - 1].isspace() or text[cut - 1] in "[],"):
            cut -= 1  # a word may go on in the next block
        carry = text[cut:]
        yield from _ID_WORDS.findall(text, 0, cut)
        if len(carry) > MAX_ID_DIGITS + 1:
            yield carry  # (refused by _integer, before the rest of the word is read)
            return
    if carry:
        yield from _ID_WORDS.findall(carry)


def _parse_ids(words: Iterable[str]) -> Iterator[int]:
    """Integers separated by white space, or one JSON list of integers."""
    words = iter(words)
    word = next(words, None)
    if word is None:
        return
    if word != "[":
        yield _integer(word)
        for word in words:
            yield _integer(word)
        return
    word = next(words, None)
    if word != "]":
        while True:
            if word is None:
                raise _IdsError(f"{_IDS_USAGE}: the JSON list is not closed")
            yield _integer(word)
            word = next(words, None)
            if word == "]":
                break
            if word is None:
                raise _IdsError(f"{_IDS_USAGE}: the JSON list is not closed")
            if word != ",":
                raise _IdsError(f"{_IDS_USAGE}: expected ',' or ']' in the JSON list, got {word!r}")
            word = next(words, None)
    extra = next(words, None)
    if extra is not None:
        raise _IdsError(f"{_IDS_USAGE}: {extra[:20]!r} after the end of the JSON list")


_IDS_USAGE = "decode expects ids: integers separated by white space, or a JSON list"


def _integer(word: str) -> int:
    if not re.fullmatch(r"-?[0-9]+", word):
        raise _IdsError(f"{_IDS_USAGE}: {word[:20]!r} is not an integer")
    if len(word.lstrip("-")) > MAX_ID_DIGITS:
        # (int() of more than 4,300 digits raises Python's own message, and the id's number was lost)
        raise _IdsError(f"{_IDS_USAGE}: {word[:20]}... ({len(word):,} characters) is no token id")
    return int(word)


def _decode(args: argparse.Namespace, out: _Output) -> int:
    tokenizer = _tokenizer(args)
    decoder = tokenizer.stream_decoder(skip_special_tokens=not args.keep_special_tokens)
    last = ""
    batch: list[int] = []
    done = 0  # ids decoded before ``batch`` (errors name the bad id's place in the input)
    try:
        for token_id in _parse_ids(_id_words(args.file)):
            batch.append(token_id)
            if len(batch) >= 65_536:
                text = decoder.feed(batch)
                done += len(batch)
                batch = []
                if text:
                    out.write(text)
                    last = text[-1]
        text = decoder.feed(batch) + decoder.finish()
    except _IdsError as error:  # (only these: "standard input: it is closed (after 0 ids)"; a bug hunt)
        raise CliError(f"{error} (after {done + len(batch):,} ids)") from None
    except (TypeError, ValueError) as error:
        raise CliError(f"{error} (id number {done + _first_bad(tokenizer, batch) + 1:,} of the input)") from None
    if text:
        out.write(text)
        last = text[-1]
    if not args.exact and last != "\n":
        out.write("\n")
    return 0


def _first_bad(tokenizer: peek2.Tokenizer, ids: list[int]) -> int:
    """Where in ``ids`` the first id that does not decode is (an error path only)."""
    for k, token_id in enumerate(ids):
        try:
            tokenizer.decode_bytes([token_id], False)
        except (TypeError, ValueError):
            return k
    return len(ids) - 1


def _split(args: argparse.Namespace, out: _Output) -> int:
    try:
        pattern = peek2.Peek2Pattern(args.pattern)
    except ValueError as error:
        raise CliError(str(error)) from None
    # Block by block, as encode reads (the whole text and all its pieces held: 490 MB of peak RSS
    # for 28 MB; a bug hunt). The pieces before the last boundary that no later text can move
    # (rule 1 of peek2.serving.streaming) are written; the rest waits for the next block.
    pending = ""
    base = 0  # characters written before ``pending``
    checked = 0  # no such boundary in pending[:checked]
    blocks = _read_blocks(args.file)
    while True:
        block = next(blocks, None)
        last = block is None
        if block is not None:
            pending += block
            cut = final_boundary(pending, pattern._stage2, pattern._rules, len(pending), max(checked - 1, 0))
            checked = len(pending)
            if cut == 0:
                continue
        else:
            cut = len(pending)
        for start, end in pattern.split_offsets(pending):
            if end > cut:
                break
            piece = json.dumps(pending[start:end], ensure_ascii=False)
            out.write(f"{base + start}\t{base + end}\t{piece}\n" if args.offsets else piece + "\n")
        if last:
            return 0
        pending = pending[cut:]
        base += cut
        checked = 0


# Options of ``peek2 tokenize`` passed to ``peek2.corpus.tokenize`` under the same name.
_TOKENIZE_OPTIONS = (
    "tokenizer", "output", "format", "workers", "text_key", "append_eos", "eos_token", "add_special_tokens", "split_special_tokens", "shard_size",
    "resume", "skip_bad", "force", "quiet", "progress_seconds", "unit_bytes", "checkpoint_seconds", "engine", "ray_address",
)  # fmt: skip


_CORPUS_NEEDS = ("numpy",)  # (what peek2.corpus imports that the package itself does not need)


def _installed(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _tokenize(args: argparse.Namespace, out: _Output) -> int:
    # Imported here: the corpus package needs NumPy (peek2[corpus]), the other commands do not.
    try:
        from peek2 import corpus
    except ImportError as error:
        # A module of NumPy that fails to load under a memory limit raises ImportError too (a bug
        # hunt: "needs _umath_linalg", status 2, with NumPy installed): a missing extra only when
        # the package is missing.
        missing = next((name for name in _CORPUS_NEEDS if not _installed(name)), None)
        if missing is not None:
            raise CliError(f"peek2 tokenize needs {missing}: {package_hint(missing)}") from None
        raise _DependencyError(f"peek2 tokenize could not load {error.name or 'a module it needs'}, which is installed: {error} (is a limit such as ulimit -v set?)") from None
    try:
        stats = corpus.tokenize(
            args.inputs,
            **{name: getattr(args, name) for name in _TOKENIZE_OPTIONS},
            progress="lines" if args.progress_lines else "auto",
        )
    except KeyboardInterrupt:
        if not os.path.isdir(f"{args.output}.peek2-work"):
            raise
        # (it said "interrupted", which left the user to find that the work is kept and how to use it)
        print("peek2: interrupted; the work is kept: the same command with --resume goes on from its last checkpoint", file=sys.stderr)
        return 130
    except (corpus.CorpusOutputError, corpus.CorpusLimitError) as error:
        raise OutputError(str(error)) from None
    except (corpus.CorpusError, corpus.CorpusInputError) as error:
        raise CliError(str(error)) from None
    except FileNotFoundError as error:
        raise CliError(f"file not found: {error.filename or error}") from None
    except (LookupError, ValueError, NotImplementedError) as error:  # the tokenizer
        raise CliError(str(error)) from None
    except OSError as error:  # (the file, where the error names one: the prefix alone said little; a bug hunt)
        limit = " (is a limit such as ulimit -n set?)" if error.errno in (errno.EMFILE, errno.ENFILE) else ""
        raise OutputError(f"cannot write {error.filename or args.output}: {error.strerror or error}{limit}") from None
    if not args.quiet:
        try:  # (a log on a full disk failed a run whose outputs were whole: status 1; a bug hunt)
            print(
                f"peek2 tokenize: {stats.documents:,} documents, {stats.tokens:,} tokens "
                f"({stats.tokens_per_document:.1f} a document), {stats.input_bytes / 1e6:,.1f} MB in {stats.seconds:.1f} s"
                + (f", {stats.rejected:,} rejected (see {args.output}.rejects.jsonl)" if stats.rejected else "")
                + (f"; wrote {', '.join(stats.outputs[:3])}{' ...' if len(stats.outputs) > 3 else ''}" if stats.outputs else "; no output file (no ids to write)"),
                file=sys.stderr,
                flush=True,
            )
        except OSError:
            pass
    return 0


def _tokenize_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help=".jsonl[.gz|.zst|.xz|.bz2], .parquet, .txt, a folder, a glob, or a saved datasets dataset")
    parser.add_argument("--tokenizer", required=True, help="a tokenizer.json, a folder holding one, or a named model")
    parser.add_argument("--output", required=True, metavar="PREFIX", help="prefix of the output files (folders are made)")
    parser.add_argument(
        "--format", required=True, choices=["megatron", "llmc", "parquet"],
        help="megatron: PREFIX_text_document.bin/.idx (Megatron-Core's indexed dataset); llmc: PREFIX_000000.bin, ... "
        "(llm.c's shards); parquet: PREFIX.parquet",
    )
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: every core)")
    parser.add_argument("--text-key", default="text", help="JSON field or column holding the text (default: text)")
    parser.add_argument("--append-eos", action="store_true", help="end every non-empty document with the end-of-text token (Megatron's --append-eod, whose token is the model config's eos_token: see --eos-token)")
    parser.add_argument("--eos-token", default=None, help="the end-of-text token (default: the first of <|endoftext|>, <|end_of_text|>, ... the tokenizer has; e.g. <|eot_id|> for an instruct model)")
    parser.add_argument("--add-special-tokens", action="store_true", help="add the tokenizer's own special tokens (BOS) to every document")
    parser.add_argument(
        "--split-special-tokens",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="an added token's text in a document (<|endoftext|>) is encoded as text, not as the token (default: yes for llmc, as llm.c's fineweb.py; no for megatron and parquet)",
    )
    parser.add_argument("--shard-size", type=int, default=None, help="llmc: ids a shard (default 100,000,000)")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run from its last checkpoint")
    parser.add_argument("--skip-bad", action="store_true", help="skip bad documents, listing each in PREFIX.rejects.jsonl")
    parser.add_argument("--force", action="store_true", help="replace existing outputs (and an interrupted run's work)")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    parser.add_argument("--progress-lines", action="store_true", help="plain progress lines even on a terminal")
    parser.add_argument("--progress-seconds", type=float, default=30.0, help="seconds between progress lines (default 30)")
    parser.add_argument("--engine", choices=["local", "ray"], default="local", help="local worker processes (default), or a Ray cluster (peek2[ray])")
    parser.add_argument("--ray-address", default=None, help="the Ray cluster to join (default: RAY_ADDRESS, else a local Ray)")
    parser.add_argument("--unit-bytes", type=int, default=4 << 20, help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint-seconds", type=float, default=10.0, help=argparse.SUPPRESS)


def _model_options(parser: argparse.ArgumentParser, reads: str) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--model", default="llama3", help="named model (default llama3; see peek2.models)")
    source.add_argument("--tokenizer", help="path of a tokenizer.json, or of a folder holding one")
    parser.add_argument("file", nargs="?", default="-", help=f"{reads}, or - for standard input (the default)")


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line, as every other error (``peek2: ...``, status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"peek2: {message} (see {self.prog} --help)\n")


def _warning_line(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: IO[str] | None = None, line: str | None = None) -> None:
    """A warning (a tokenizer file's oddity that tokenizers accepts too) as one line on stderr."""
    print(f"peek2: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    # NumPy (``peek2 tokenize``'s arrays) loads OpenBLAS, which starts a thread a core and
    # allocates buffers for each; peek2 does no linear algebra. Under an address-space limit
    # (ulimit -v) that start failed and OpenBLAS raised SIGINT itself, which read as Ctrl-C:
    # "peek2: interrupted", status 130 (a bug hunt, 150 MB); a little lower OpenBLAS exited with
    # its own message. With one thread the command has that memory for itself and says it is out
    # of memory where it is. A user's own setting is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    _standard_streams()
    # Ctrl-C from the first moment (the parser being built, the tokenizer loading) is one line and
    # status 130; the console script (peek2_command.py) covers the imports before this.
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _warning_line
            return _main(argv)
    except KeyboardInterrupt:
        print("peek2: interrupted", file=sys.stderr)
        return 130
    except MemoryError:  # (a limit such as ulimit -v: a traceback from the load, a bug hunt)
        print("peek2: out of memory (is a limit such as ulimit -v set?)", file=sys.stderr)
        return 1
    except ImportError as error:
        # A module imported at its first use (pyarrow): missing, or installed and failing to load
        # (under an address-space limit its shared library could not be mapped: a traceback; a bug hunt).
        package = (error.name or "").split(".")[0]
        if package and not _installed(package):
            print(f"peek2: this needs {package}: {package_hint(package)}", file=sys.stderr)
            return 2
        print(f"peek2: {package or 'a module'} is installed but failed to load ({_one_line(str(error))}): is a memory limit such as ulimit -v set?", file=sys.stderr)
        return 1


def _standard_streams() -> None:
    """Output in UTF-8 whatever the locale or PYTHONIOENCODING (the docstring's promise: with
    ``PYTHONIOENCODING=ascii`` decode and split ended in a UnicodeEncodeError traceback, and with
    latin-1 wrote Latin-1; a bug hunt), and a closed standard error read as a null device (its
    ``isatty`` raised, and the error lines went to standard output, into the data)."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and isinstance(stream, io.TextIOWrapper) and codecs.lookup(stream.encoding).name != "utf-8":
            stream.reconfigure(encoding="utf-8")


def _main(argv: list[str] | None) -> int:
    parser = _Parser(
        prog="peek2",
        description="Fast, bit-exact byte-level BPE tokenizer.",
        epilog="Exit status: 0 success, 1 output cannot be written, out of memory or another limit of the machine, 2 bad usage or input, 130 interrupted, "
        "141 output pipe closed (peek2 encode big.txt | head: quietly, as cat).",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"peek2 {peek2.__version__} (compiled: {'yes' if peek2.COMPILED else 'no'})",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    encode = commands.add_parser("encode", help="print the token ids of a text")
    _model_options(encode, "UTF-8 text file")
    encode.add_argument("--json", action="store_true", help="print a JSON list")
    encode.add_argument("--no-special", action="store_true", help="add no special tokens (BOS)")
    encode.set_defaults(run=_encode)
    decode = commands.add_parser(
        "decode",
        help="print the text of token ids",
        description="Print the text of token ids, followed by a newline unless it ends with one (--exact: none).",
    )
    _model_options(decode, "file of ids (integers separated by white space, or a JSON list)")
    specials = decode.add_mutually_exclusive_group()
    specials.add_argument("--keep-special-tokens", action="store_true", help="print special tokens (skipped by default)")
    specials.add_argument("--skip-special-tokens", action="store_true", help="skip special tokens (the default)")
    decode.add_argument("--exact", "-n", action="store_true", help="print the text only, adding no final newline")
    decode.set_defaults(run=_decode)
    split = commands.add_parser("split", help="print the pieces of a text, one JSON string per line")
    split.add_argument("file", nargs="?", default="-", help="UTF-8 text file, or - for standard input (the default)")
    split.add_argument("--pattern", default="llama3", help=f"family ({', '.join(peek2.FAMILIES)}) or pattern string")
    split.add_argument("--offsets", action="store_true", help="print start, end and piece, tab-separated")
    split.set_defaults(run=_split)
    tokenize = commands.add_parser(
        "tokenize",
        help="tokenize a corpus into training files (Megatron .bin/.idx, llm.c shards, Parquet)",
        description="Tokenize a corpus on every core into the files training stacks read.",
        # (it sent the reader to docs/corpus.md, which an installed peek2 does not have)
        epilog="Work in progress lives in PREFIX.peek2-work/, and an output gets its final name only when complete; "
        "PREFIX.summary.json, written last, says the run is done. After a crash or an interrupt, the same "
        "command with --resume goes on from the last checkpoint. Exit status: 0 done, 1 a limit of the machine "
        "or an output that cannot be written, 2 bad usage or input (or a worker process that died), 130 interrupted; "
        "after 1, 130 and a worker's death the work is kept for --resume.",
    )
    _tokenize_options(tokenize)
    tokenize.set_defaults(run=_tokenize)
    args = parser.parse_args(argv)
    out = _Output()
    try:
        result: int = args.run(args, out)
        out.flush()
    except CliError as error:
        print(f"peek2: {_one_line(str(error))}", file=sys.stderr)
        return 2
    except OutputError as error:
        print(f"peek2: {_one_line(str(error))}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as cat does; the interpreter's final
        # flush of stdout must not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return result


if __name__ == "__main__":
    sys.exit(main())
