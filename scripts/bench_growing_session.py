"""A prompt session fed one growing run, at n and 4n characters, against one encode by tokenizers.

    python scripts/bench_growing_session.py [--model qwen3] [--size 80000] [--append 1000] [--runs 3]

Each run (whitespace of one or two characters, "=", CJK without punctuation, combining marks of
one and of two classes after a letter, Thai marks, Hangul jamo, marks after 3,000 spaces) is appended ``--append`` characters at a time to a new
``tok.prompt_session()``; the table gives the CPU time of the whole session at ``--size`` and at 4x
that (best of ``--runs``), their ratio (linear work is about 4x, re-encoding the run at every append
about 16x), and tokenizers' CPU time for one encode of the whole 4x text in the same process. The
ids of each session are checked against that encode.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import tokenizers  # noqa: E402

from peek2 import Tokenizer  # noqa: E402
from tests.scaling import cpu_seconds  # noqa: E402

RUNS = {  # the run's name: (what starts it, what it repeats)
    "spaces": ("", " "),
    "newline, spaces": ("\n", " "),
    "space, newline": ("x", " \n"),
    "no-break space, space": ("x", "\xa0 "),
    "=": ("", "="),
    "CJK": ("", "你好世界中文字符测试我们"),
    "marks of one class": ("e", "\u0301"),
    "marks of two classes": ("e", "\u0301\u0323"),
    "Thai marks": ("\u0e01", "\u0e39\u0e49"),
    "Hangul jamo": ("\u1100", "\u1161\u11a8"),
    "spaces, then marks": ("x" + " " * 3000 + "e", "\u0301\u0323"),  # after a piece rule 3 cut
}


def text_of(kind: str, size: int) -> str:
    head, unit = RUNS[kind]
    return head + (unit * (size // len(unit) + 1))[: size - len(head)]


def session_ids(tok: Tokenizer, text: str, step: int) -> list[int]:
    session = tok.prompt_session(add_special_tokens=False)
    ids: list[int] = []
    for at in range(0, len(text), step):
        keep, new = session.append(text[at : at + step])
        del ids[keep:]
        ids += new
    return ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen3")
    parser.add_argument("--tokenizers", type=Path, default=ROOT.parent / "shared" / "data" / "tokenizers")
    parser.add_argument("--size", type=int, default=80_000)
    parser.add_argument("--append", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    path = args.tokenizers / args.model / "tokenizer.json"
    tok, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
    print(f"model {args.model}, appends of {args.append} characters, CPU seconds, best of {args.runs}")
    print(f"  {'run':22} {'n=' + str(args.size):>10} {'4n':>10} {'ratio':>6} {'tokenizers 4n once':>19}")
    for kind in RUNS:
        small, large = text_of(kind, args.size), text_of(kind, 4 * args.size)
        if session_ids(tok, large, args.append) != ref.encode(large, add_special_tokens=False).ids:
            raise SystemExit(f"{kind}: the session's ids differ from tokenizers'")
        a = cpu_seconds(lambda: session_ids(tok, small, args.append), args.runs)
        b = cpu_seconds(lambda: session_ids(tok, large, args.append), args.runs)
        once = cpu_seconds(lambda: ref.encode(large, add_special_tokens=False), args.runs)
        print(f"  {kind:22} {a:10.3f} {b:10.3f} {b / a:6.1f} {once:19.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
