"""Fuzz prompt sessions and streams fed runs that stay pending (NFC runs of marks, joining scalars,
whitespace) against ``tokenizers``.

Three kinds of case, each compared with tokenizers' encode of the text so far:
- ``marks``: a run of 1-4 combining marks (Latin, Hebrew, Arabic, Thai, Devanagari...) after a
  random starter, appended to a ``prompt_session()`` in parts of 1-1,500 characters
  (``peek2.serving.marks_run``);
- ``joining``: short texts of scalars NFC joins to what precedes them (Hangul jamo, Indic second
  halves, marks, U+212B...) streamed in chunks of 1-5 characters (the NFC cuts of the stream);
- ``whitespace``: runs of mixed whitespace (spaces, tabs, newlines, no-break spaces) and
  punctuation followed by newlines and "/" (o200k's ``[\\r\\n/]*``), appended to a session
  (``StreamEngine._finish_run``, ``_newline_cut``, rule 3's kept head and its slash-newline runs);
- ``pieces``: long pieces of several categories (letters and marks in turn, Thai without spaces,
  Latin letters of two kinds, upper and lower case, spaces and tabs, CJK and kana) with now and
  then a character that may end or change the piece (a space, an apostrophe, a digit, a newline,
  a capital), appended to a session (``StreamEngine._finish_piece``).
tests/test_marks_run.py and tests/test_growing_piece.py run samples of these in CI.

    python scripts/fuzz_sessions.py --model qwen3 --model gpt4o --cases 300
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import tokenizers

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from peek2.tokenizer import Tokenizer  # noqa: E402
from tests.sessions import long_piece, session_in_parts, streamed_in_chunks  # noqa: E402

MARKS = [chr(cp) for cp in range(0x300, 0x340)] + list("\u05b0\u05bc\u05b4\u05c1\u0591\u064e\u0651\u0650\u0670\u093c\u094d")
THAI = list("\u0e38\u0e39\u0e48\u0e49\u0e4a\u0e4b\u0e31\u0e34\u0e35\u0e47\u0e4c\u0e3a")
STARTERS = ["e", "u", "a", "A", "ü", "é", "ε", "ω", "ב", "ع", "क", "\u0e01", "\u0e1c", "!", " ", "\n", "1", ""]
JOINING = list("\u1100\u1112\u1161\u1175\u11a8\u11c2\uac00\uac01\ud7a3\u0301\u0323\u0308")
JOINING += list("\u0bc6\u0bbe\u0bd7\u0bca\u09c7\u09be\u09d7\u09cb\u0cbf\u0cd5\u0cc6\u0cc2\u0cca\u0cc0\u0d46\u0d3e")
JOINING += list("\u0dd9\u0dcf\u0dca\u0b47\u0b3e\u0b56\u0b57\u1025\u102e\u1b05\u1b35\u212b\u01d5\u1e17\u0390\u0958\u2126")
JOINING += list("a !\n") + ["\u1ab0", "\u05b0", "\u0e38", "\u0e48"]
WHITESPACE = [" ", "\t", "\n", "\r\n", "\xa0", "\u3000", " \n", "\n  ", "!\n", "!/", "\n/", "/\n", "//", "/\r\n"]
HEADS = ["", "x", "Hi ", "<|im_start|>user\n", "ab "]
TAILS = ["", "x", " x", "\n", "!", "7", "/x", "<|im_end|>"]


def session_case(tok: Tokenizer, ref: tokenizers.Tokenizer, text: str, rng: random.Random) -> str | None:
    """None if the session's ids equal tokenizers' at every check, else what differed."""
    differed = session_in_parts(tok, ref, text, rng)[1]
    return None if differed < 0 else f"session differs after {differed} characters of {ascii(text[:40])}"


def marks_case(tok: Tokenizer, ref: tokenizers.Tokenizer, rng: random.Random) -> str | None:
    alphabet = rng.sample(THAI if rng.random() < 0.3 else MARKS + THAI, rng.randint(1, 4))
    if rng.random() < 0.5:
        run = "".join(rng.choice(alphabet) for _ in range(rng.randint(2000, 8000)))
    else:
        period = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))
        run = (period * 8000)[: rng.randint(2000, 8000)]
    return session_case(tok, ref, rng.choice(HEADS) + rng.choice(STARTERS) + run + rng.choice(TAILS), rng)


def joining_case(tok: Tokenizer, ref: tokenizers.Tokenizer, rng: random.Random) -> str | None:
    text = "".join(rng.choice(JOINING) for _ in range(rng.randint(1, 80)))
    ids = streamed_in_chunks(tok, text, rng, 5)
    return None if ids == ref.encode(text, add_special_tokens=False).ids else f"stream differs on {ascii(text)}"


def whitespace_case(tok: Tokenizer, ref: tokenizers.Tokenizer, rng: random.Random) -> str | None:
    units = rng.sample(WHITESPACE, rng.randint(1, 3))
    run = "".join(rng.choice(units) for _ in range(rng.randint(2000, 6000)))
    return session_case(tok, ref, rng.choice(HEADS) + run + rng.choice(TAILS), rng)


def pieces_case(tok: Tokenizer, ref: tokenizers.Tokenizer, rng: random.Random) -> str | None:
    return session_case(tok, ref, rng.choice(HEADS) + long_piece(rng, rng.randint(3000, 10000)) + rng.choice(TAILS), rng)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="folder under --tokenizers (default: qwen3)")
    parser.add_argument("--tokenizers", type=Path, default=ROOT.parent / "shared" / "data" / "tokenizers")
    parser.add_argument("--cases", type=int, default=300, help="cases of each kind per model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kind", action="append", help="kinds of case to run (marks, joining, whitespace, pieces; default all)")
    args = parser.parse_args()
    failures = 0
    for model in args.model or ["qwen3"]:
        path = args.tokenizers / model / "tokenizer.json"
        tok, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
        rng = random.Random(f"{args.seed}-{model}")
        for kind, case in (("marks", marks_case), ("joining", joining_case), ("whitespace", whitespace_case), ("pieces", pieces_case)):
            if args.kind and kind not in args.kind:
                continue
            for _ in range(args.cases):
                problem = case(tok, ref, rng)
                if problem is not None:
                    failures += 1
                    print(f"{model} {kind}: {problem}", file=sys.stderr)
            print(f"{model} {kind}: {args.cases} cases, {failures} failures so far", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
