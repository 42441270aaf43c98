"""The ``peek2`` command line: encode, decode and split text with a named model or a tokenizer.json.

    peek2 encode [--model NAME | --tokenizer PATH] [--json] [FILE|-]
    peek2 decode [--model NAME | --tokenizer PATH] [FILE|-]      (ids separated by white space or JSON)
    peek2 split  [--pattern FAMILY] [--offsets] [FILE|-]
    peek2 --version
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Iterator

import peek2
from peek2.tokenizer import Tokenizer

CHUNK = 1 << 20  # characters per progress step on large inputs
PROGRESS_MIN = 4 * CHUNK


class CliError(Exception):
    """A user error: printed as ``peek2: message`` with exit status 2."""


def _read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except OSError as error:
        raise CliError(f"cannot read {path!r}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise CliError(f"{path!r} is not UTF-8 text: {error}") from None


def _tokenizer(args: argparse.Namespace) -> Tokenizer:
    try:
        if args.tokenizer:
            return Tokenizer.from_file(args.tokenizer)
        return Tokenizer.from_pretrained(args.model)
    except FileNotFoundError as error:
        raise CliError(f"tokenizer file not found: {error.filename or error}") from None
    except (LookupError, ValueError, NotImplementedError) as error:
        raise CliError(str(error)) from None


def _chunks(text: str) -> Iterator[str]:
    """Cuts of ``text`` that encode independently: just after a newline that precedes a letter or digit.

    No piece of any family spans such a boundary (whitespace and punctuation pieces end at the
    last newline before a non-space; a word or number never starts with a newline), and no
    added token of the supported models contains a newline.
    """
    start = 0
    while len(text) - start > CHUNK:
        cut = text.find("\n", start + CHUNK)
        while cut >= 0 and not (cut + 1 < len(text) and text[cut + 1].isalnum()):
            cut = text.find("\n", cut + 1)
        if cut < 0:
            break
        yield text[start : cut + 1]
        start = cut + 1
    yield text[start:]


def _encode(args: argparse.Namespace) -> int:
    tokenizer = _tokenizer(args)
    text = _read_text(args.file)
    show = len(text) >= PROGRESS_MIN and sys.stderr.isatty()
    special = not args.no_special
    ids: list[int] = list(tokenizer.spec.prefix_ids) if special else []
    done = 0
    for chunk in _chunks(text):
        ids.extend(tokenizer.encode(chunk, add_special_tokens=False))
        done += len(chunk)
        if show:
            filled = 40 * done // len(text)
            print(f"\r[{'#' * filled}{' ' * (40 - filled)}] {100 * done // len(text):3d}%", end="", file=sys.stderr)
    if show:
        print(file=sys.stderr)
    if special:
        ids.extend(tokenizer.spec.suffix_ids)
    sys.stdout.write((json.dumps(ids) if args.json else " ".join(map(str, ids))) + "\n")
    return 0


def _decode(args: argparse.Namespace) -> int:
    tokenizer = _tokenizer(args)
    raw = _read_text(args.file).strip()
    try:
        ids = json.loads(raw) if raw.startswith("[") else [int(word) for word in raw.split()]
    except ValueError:
        raise CliError("decode expects ids: integers separated by white space, or a JSON list") from None
    try:
        sys.stdout.write(tokenizer.decode(ids, skip_special_tokens=args.skip_special_tokens))
    except (TypeError, ValueError) as error:
        raise CliError(str(error)) from None
    return 0


def _split(args: argparse.Namespace) -> int:
    try:
        pattern = peek2.Peek2Pattern(args.pattern)
    except ValueError as error:
        raise CliError(str(error)) from None
    text = _read_text(args.file)
    out = sys.stdout
    if args.offsets:
        for start, end in pattern.split_offsets(text):
            out.write(f"{start}\t{end}\t{json.dumps(text[start:end], ensure_ascii=False)}\n")
    else:
        for piece in pattern.split(text):
            out.write(json.dumps(piece, ensure_ascii=False) + "\n")
    return 0


def _model_options(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--model", default="llama3", help="named model (default llama3; see peek2.models)")
    source.add_argument("--tokenizer", help="path of a tokenizer.json")
    parser.add_argument("file", nargs="?", default="-", help="UTF-8 text file, or - for standard input")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="peek2", description="Fast, bit-exact byte-level BPE tokenizer.")
    parser.add_argument(
        "--version",
        action="version",
        version=f"peek2 {peek2.__version__} (compiled: {'yes' if peek2.COMPILED else 'no'})",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    encode = commands.add_parser("encode", help="print the token ids of a text")
    _model_options(encode)
    encode.add_argument("--json", action="store_true", help="print a JSON list")
    encode.add_argument("--no-special", action="store_true", help="add no special tokens (BOS)")
    encode.set_defaults(run=_encode)
    decode = commands.add_parser("decode", help="print the text of token ids")
    _model_options(decode)
    decode.add_argument("--skip-special-tokens", action="store_true")
    decode.set_defaults(run=_decode)
    split = commands.add_parser("split", help="print the pieces of a text, one JSON string per line")
    split.add_argument("file", nargs="?", default="-", help="UTF-8 text file, or - for standard input")
    split.add_argument("--pattern", default="llama3", help=f"family ({', '.join(peek2.PATTERNS)}) or pattern string")
    split.add_argument("--offsets", action="store_true", help="print start, end and piece, tab-separated")
    split.set_defaults(run=_split)
    args = parser.parse_args(argv)
    try:
        result: int = args.run(args)
    except CliError as error:
        print(f"peek2: {error}", file=sys.stderr)
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
