"""Hunt for growing inputs that a prompt session or a stream handles worse than linearly: a long
head (a run that rule 3 cuts) followed by a long run of another kind, for every pair of kinds.

    python scripts/sweep_growing_runs.py [--model llama3.1 ...] [--size 8000] [--append 100]
                                         [--head spaces ...] [--run CJK ...] [--all]

For each model, head and run, the text is ``head + run`` at ``--size`` and 4x ``--size``
characters of run. Two checks, each at both sizes, in one process:

- a ``prompt_session()`` fed the text ``--append`` characters at a time: its CPU time (best of 2),
  the ratio 4n/n (linear work is about 4x, re-encoding the run at every append about 16x), and
  the ids against tokenizers' one encode of the whole text;
- a ``stream_encoder()`` fed the same chunks: the largest pending text (``pending_chars``), which
  must not grow with the run, except where docs/serving.md says the ids depend on how the run
  ends ("What is still held whole").

A row is printed when the session's ratio is above 6, its ids differ, or the pending text grew
past 1.5x and 5,000 characters (``--all`` prints every row). This found the quadratic sessions
and unbounded streams of stop 62 (a run after a whitespace run rule 3 cut, a whitespace run after
another, newlines after a long punctuation run): about 15 minutes for four models.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import tokenizers  # noqa: E402

from peek2 import Tokenizer  # noqa: E402

HEADS = {
    "none": "x",
    "spaces": "x" + " " * 3000,
    "letters": "a" * 3000,
    "CJK": "你好世界" * 750,
    "newline, spaces": "\n" + " " * 3000,
    "=": "=" * 3000,
    "tab, space": "x" + "\t " * 1500,
    "marks": "e" + "\u0301" * 3000,
    "emoji": "\U0001f600" * 1500,
    "digits": "1" * 3000,
    "capitals": "A" * 3000,
    "Thai": "\u0e01\u0e34" * 1500,
    "<": "<" * 3000,
    "space, newline": " \n" * 1500,
    "ZWJ": "\u200d" * 3000,
}
RUNS = {
    "spaces": " ",
    "newlines": "\n",
    "=": "=",
    "indent": "\n    ",
    "space, newline": " \n",
    "tab, space": "\t ",
    "CJK": "你好世界中文字符测试我们",
    "kana": "ひらがなカタカナ",
    "word": "abcdefghij",
    "digits": "0123456789",
    "marks": "\u0301",
    "marks of two classes": "\u0301\u0323",
    "Thai": "สวัสดีครับ",
    "emoji": "😀🎉",
    "<": "<",
    "<|": "<|",
    "HTML": "<td>x</td>",
    "ZWJ": "\u200d",
    "jamo": "\u1161\u11a8",
    "a, acute": "a\u0301",
    "aB": "aB",
    "slash, newline": "/\n",
    "-": "-",
    "...": "...",
    "'s": "'s",
}


def session_seconds(tok: Tokenizer, chunks: list[str]) -> tuple[float, list[int]]:
    best = float("inf")
    ids: list[int] = []
    for _ in range(2):
        session = tok.prompt_session(add_special_tokens=False)
        ids = []
        start = time.process_time()
        for chunk in chunks:
            keep, new = session.append(chunk)
            del ids[keep:]
            ids += new
        best = min(best, time.process_time() - start)
    return best, ids


def most_pending(tok: Tokenizer, chunks: list[str]) -> int:
    encoder = tok.stream_encoder(False)
    ids: list[int] = []
    most = 0
    for chunk in chunks:
        encoder.feed(chunk, ids)
        most = max(most, encoder.pending_chars)
    return most


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="a folder under --tokenizers (repeatable; default four models)")
    parser.add_argument("--tokenizers", type=Path, default=ROOT.parent / "shared" / "data" / "tokenizers")
    parser.add_argument("--size", type=int, default=8000, help="characters of run at the smaller size")
    parser.add_argument("--append", type=int, default=100, help="characters per append and per chunk")
    parser.add_argument("--head", action="append", choices=sorted(HEADS), help="heads to try (repeatable; default all)")
    parser.add_argument("--run", action="append", choices=sorted(RUNS), help="runs to try (repeatable; default all)")
    parser.add_argument("--all", action="store_true", help="print every row, not only the suspect ones")
    args = parser.parse_args()
    heads = args.head or list(HEADS)
    runs = args.run or list(RUNS)
    found = 0
    for model in args.model or ["llama3.1", "qwen3", "gpt4o", "deepseek-v3"]:
        path = args.tokenizers / model / "tokenizer.json"
        tok, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
        for head_name in heads:
            for run_name in runs:
                unit = RUNS[run_name]
                seconds, pending, same = [], [], True
                for size in (args.size, 4 * args.size):
                    text = HEADS[head_name] + (unit * (size // len(unit) + 1))[:size]
                    chunks = [text[k : k + args.append] for k in range(0, len(text), args.append)]
                    spent, ids = session_seconds(tok, chunks)
                    seconds.append(spent)
                    pending.append(most_pending(tok, chunks))
                    same = same and ids == ref.encode(text, add_special_tokens=False).ids
                ratio = seconds[1] / max(seconds[0], 1e-4)
                suspect = ratio > 6 or not same or (pending[1] > 1.5 * pending[0] and pending[1] > 5000)
                found += suspect
                if suspect or args.all:
                    print(
                        f"{model:12} {head_name:16} {run_name:20} session {seconds[0]:.3f} -> {seconds[1]:.3f} s"
                        f" ({ratio:.1f}x)  pending {pending[0]} -> {pending[1]}{'' if same else '  IDS DIFFER'}",
                        flush=True,
                    )
        print(f"{model}: done", flush=True)
    print(f"{found} suspect rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
