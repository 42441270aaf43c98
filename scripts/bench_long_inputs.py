"""Cost per UTF-8 byte of long adversarial texts against ordinary English, and against tokenizers.

    python scripts/bench_long_inputs.py [--runs 5] [--size 1000000] [--tokenizer PATH]

Each text is one kind repeated to ``--size`` characters (a single piece for a run of one
character); "english" is XNLI's English text. peek2 starts each run with an empty piece cache
(a new document); the medians of interleaved runs are reported as microseconds per KB, the ratio to
peek2's English, and tokenizers' time for the same call in the same run (tokenizers is left out,
"-", where one call would take over ``--reference-limit`` seconds: it is quadratic on some of these).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from compliance.xnli import iter_xnli_tsv  # noqa: E402
from peek2 import Tokenizer  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def kinds(size: int, english: str) -> dict[str, str]:
    rng = random.Random(7)
    scalars = [cp for cp in range(0x20, 0x30000) if not 0xD800 <= cp <= 0xDFFF]

    def sized(unit: str) -> str:
        return (unit * (size // len(unit) + 1))[:size]

    return {
        "english (XNLI)": english[:size],
        "one letter": sized("a"),
        "spaces": sized(" "),
        "newlines": sized("\n"),
        "one CJK character": sized("漢"),
        "digits": sized("7"),
        "punctuation '!?'": sized("!?"),
        "'<|' (one piece)": sized("<|"),
        "random scalars": "".join(chr(rng.choice(scalars)) for _ in range(size)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--tokenizer", default=str(DATA / "tokenizers" / "llama3.1" / "tokenizer.json"))
    parser.add_argument("--xnli", default=str(DATA / "xnli"))
    parser.add_argument("--reference-limit", type=float, default=20.0)
    parser.add_argument(
        "--one-heap", action="store_true",
        help="also time each text with its long pieces merged in one heap, not in blocks (LongPieces off)",
    )
    args = parser.parse_args()

    import tokenizers

    tok = Tokenizer.from_file(args.tokenizer)
    reference = tokenizers.Tokenizer.from_file(args.tokenizer)
    english = " ".join(r.premise + " " + r.hypothesis for r in iter_xnli_tsv(args.xnli, ("test", "dev")) if r.language == "en")
    texts = kinds(args.size, english)
    print(f"{Path(args.tokenizer).parent.name}, {args.size:,} characters a text, medians of {args.runs} interleaved runs")
    heap_column = f" {'one heap us/KB':>15}" if args.one_heap else ""
    print(f"  {'text':20} {'peek2 us/KB':>12} {'x english':>10} {'tokenizers us/KB':>17} {'peek2 speed-up':>15}{heap_column}")
    base = 0.0
    engine = tok._engine
    blocks = engine.long_pieces
    for name, text in texts.items():
        nbytes = len(text.encode("utf-8"))
        ours: list[float] = []
        one_heap: list[float] = []
        theirs: list[float] = []
        skip_reference = False
        for _ in range(args.runs):
            engine.cache.clear()
            start = time.process_time()
            ids = tok.encode(text, add_special_tokens=False)
            ours.append(time.process_time() - start)
            if args.one_heap:
                engine.long_pieces = None
                engine.cache.clear()
                start = time.process_time()
                tok.encode(text, add_special_tokens=False)
                one_heap.append(time.process_time() - start)
                engine.long_pieces = blocks
            if not skip_reference:
                start = time.process_time()
                expected = reference.encode(text, add_special_tokens=False).ids
                theirs.append(time.process_time() - start)
                if ids != expected:
                    raise SystemExit(f"{name}: peek2's ids differ from tokenizers'")
                skip_reference = theirs[-1] > args.reference_limit
        per_kb = statistics.median(ours) / nbytes * 1e9
        base = base or per_kb
        reference_kb = statistics.median(theirs) / nbytes * 1e9 if theirs and not skip_reference else None
        shown = f"{reference_kb:17.1f} {reference_kb / per_kb:14.1f}x" if reference_kb else f"{'-':>17} {'-':>15}"
        heap_shown = f" {statistics.median(one_heap) / nbytes * 1e9:15.1f}" if one_heap else ""
        print(f"  {name:20} {per_kb:12.1f} {per_kb / base:9.1f}x {shown}{heap_shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
