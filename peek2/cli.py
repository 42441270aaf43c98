"""The ``peek2`` command line: ``peek2 split [--pattern NAME] [FILE|-]`` and ``peek2 --version``."""

from __future__ import annotations

import argparse
import json
import sys

import peek2


def _read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except OSError as error:
        raise SystemExit(f"peek2: cannot read {path!r}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise SystemExit(f"peek2: {path!r} is not UTF-8 text: {error}") from None


def _split(args: argparse.Namespace) -> int:
    try:
        pattern = peek2.Peek2Pattern(args.pattern)
    except ValueError as error:
        raise SystemExit(f"peek2: {error}") from None
    text = _read_text(args.file)
    out = sys.stdout
    if args.offsets:
        for (start, end) in pattern.split_offsets(text):
            out.write(f"{start}\t{end}\t{json.dumps(text[start:end], ensure_ascii=False)}\n")
    else:
        for piece in pattern.split(text):
            out.write(json.dumps(piece, ensure_ascii=False) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="peek2", description="Regex-free Peek2 pre-tokenizer.")
    parser.add_argument(
        "--version",
        action="version",
        version=f"peek2 {peek2.__version__} (compiled: {'yes' if peek2.COMPILED else 'no'})",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    split = commands.add_parser("split", help="print the pieces of a text, one JSON string per line")
    split.add_argument("file", nargs="?", default="-", help="UTF-8 text file, or - for standard input")
    split.add_argument("--pattern", default="llama3", help=f"family ({', '.join(peek2.PATTERNS)}) or pattern string")
    split.add_argument("--offsets", action="store_true", help="print start, end and piece, tab-separated")
    split.set_defaults(run=_split)
    args = parser.parse_args(argv)
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
