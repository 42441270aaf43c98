"""Per core, on a mix of real documents: peek2's ``encode_batch`` against fastokens, tiktoken and tokenizers.

    python scripts/bench_mixed.py [--model llama3.1] [--mb 8] [--runs 5] [--cpu 0]

The documents (``mixed_documents``, the same for the same --seed) are drawn in these shares:
40% XNLI paragraphs of one language (1-30 sentences of test and dev, any of the 15 languages),
20% slices of 200-8,000 characters of peek2's own source files (peek2/, tests/, scripts/),
15% Chinese paragraphs (5-40 XNLI sentences, no spaces between them), 15% multi-script
paragraphs (a sentence of each of 4-15 languages in turn) and 10% rows of emoji with ZWJ
sequences and skin tones, until --mb megabytes of UTF-8. A document that holds an added token's
text is drawn again, so every engine encodes the same text. peek2's ids must equal tokenizers' on
every document; the others' differences are counted (tiktoken with Meta's rank file agrees with
the Llama-3.1 file, not with Llama-3.2's).

Every round draws a new document set (--seed + round; the first set warms every engine up and is
not timed), and every engine encodes it in turn, keeping whatever it cached from the rounds before:
a worker in its steady state on a stream of documents it has not seen. (This script used to time
every engine on one document set again and again, emptying peek2's piece cache before each run:
fastokens, whose own caches keep what they saw, then met the same documents again, at about twice
its speed on new ones, and peek2 did not.) peek2's ids must equal tokenizers' in every round.
``--cold`` makes new tokenizers of every engine before each timed set instead (untimed, each
called once on one word: fastokens finishes its set-up at its first call, about 0.1 s): a
worker's first documents.

The process is pinned to one CPU (``os.sched_setaffinity``) and every engine runs on it, so
the figures are per core, whatever threads an engine starts: peek2 ``encode_batch``, fastokens
``encode_batch``, tiktoken ``encode_ordinary_batch(num_threads=1)`` and tokenizers
``encode_batch``, without special tokens. The ratios are the medians of each round's ratios.
"pre-tokenizer only" is the scan that finds the pieces
(``peek2.pretokenize.scanner.piece_count``: nothing made per piece, as inside an encode) over the
same documents: its time over encode's is the pre-tokenizer's share of the encode.
"""

from __future__ import annotations

import importlib.util
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_encode import tiktoken_llama3  # noqa: E402
from corpora import ROOT  # noqa: E402
from timing import describe, model_arguments  # noqa: E402

from compliance.xnli import iter_xnli_tsv  # noqa: E402
from peek2.pretokenize.scanner import piece_count  # noqa: E402
from peek2.pretokenize.families import FAMILIES  # noqa: E402
from peek2.tokenizer import Tokenizer  # noqa: E402

EMOJI = ["😀", "👍🏽", "👩\u200d💻", "🏳️\u200d🌈", "👨\u200d👩\u200d👧\u200d👦", "🇫🇷", "❤️", "🙏🏿", "✨", "🎉"]


def mixed_documents(folder: Path, size: int, seed: int = 0, avoid: tuple[str, ...] = ()) -> list[str]:
    """Documents as the module docstring says, ``size`` bytes of UTF-8 in all; one that holds a
    string of ``avoid`` (added tokens: peek2's sources name some) is drawn again."""
    by_language: dict[str, list[str]] = {}
    for row in iter_xnli_tsv(folder, ("test", "dev")):
        by_language.setdefault(row.language, []).extend((row.premise, row.hypothesis))
    languages = sorted(by_language)
    sources = [p.read_text(encoding="utf-8") for d in ("peek2", "tests", "scripts") for p in sorted((ROOT / d).rglob("*.py"))]
    rng = random.Random(seed)
    documents: list[str] = []
    total = 0
    while total < size:
        kind = rng.random()
        if kind < 0.40:
            sentences = by_language[rng.choice(languages)]
            start = rng.randrange(len(sentences))
            text = " ".join(sentences[start : start + rng.randint(1, 30)])
        elif kind < 0.60:
            source = rng.choice(sources)
            start = rng.randrange(max(len(source) - 200, 1))
            text = source[start : start + rng.randint(200, 8000)]
        elif kind < 0.75:
            text = "".join(rng.choice(by_language["zh"]) for _ in range(rng.randint(5, 40)))
        elif kind < 0.90:
            text = " ".join(rng.choice(by_language[language]) for language in rng.sample(languages, rng.randint(4, 15)))
        else:
            text = "\n".join(" ".join(rng.choice(EMOJI) for _ in range(rng.randint(3, 20))) for _ in range(rng.randint(1, 10)))
        if any(token in text for token in avoid):
            continue
        documents.append(text)
        total += len(text.encode("utf-8"))
    return documents


def main() -> int:
    parser = model_arguments(__doc__, "llama3.1", 5, ())
    parser.add_argument("--mb", type=float, default=8.0, help="size of each round's document set")
    parser.add_argument("--seed", type=int, default=0, help="the warm-up set's seed (round r draws with seed + r)")
    parser.add_argument("--cpu", type=int, default=0, help="the CPU to pin the process to")
    parser.add_argument("--cold", action="store_true", help="new tokenizers for every engine before each timed set (caches empty)")
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.cpu})
    from tokenizers import Tokenizer as Reference

    path = args.tokenizers / args.model / "tokenizer.json"

    def make_engines() -> dict[str, Callable[[list[str]], list[list[int]]]]:
        ours, reference = Tokenizer.from_file(path), Reference.from_file(str(path))
        engines: dict[str, Callable[[list[str]], list[list[int]]]] = {
            "peek2 encode_batch": lambda texts: ours.encode_batch(texts, add_special_tokens=False),
            "tokenizers encode_batch": lambda texts: [e.ids for e in reference.encode_batch(texts, add_special_tokens=False)],
        }
        if importlib.util.find_spec("fastokens"):
            import fastokens

            fast = fastokens.Tokenizer.from_file(str(path))
            engines["fastokens encode_batch"] = lambda texts: [e.ids for e in fast.encode_batch(texts, add_special_tokens=False)]
        if ours.family == "llama3" and importlib.util.find_spec("tiktoken"):
            encoding = tiktoken_llama3(args.tokenizers / "llama3.2" / "tokenizer.model")
            engines["tiktoken encode_ordinary_batch"] = lambda texts: encoding.encode_ordinary_batch(texts, num_threads=1)
        family = FAMILIES[ours.family]
        engines["pre-tokenizer only"] = lambda texts: [[piece_count(d, family.stage2, family.rules)] for d in texts]
        for run in engines.values():  # (fastokens finishes setting itself up at its first call: 0.1 s)
            run(["hello"])
        return engines

    added = tuple(token.content for token in Tokenizer.from_file(path).spec.added_tokens)
    engines = make_engines()
    rates: dict[str, list[float]] = {name: [] for name in engines}
    differ = dict.fromkeys(engines, 0)
    sizes = []
    for round_ in range(args.runs + 1):  # round 0 warms up
        documents = mixed_documents(args.data, int(args.mb * 1e6), args.seed + round_, added)
        if args.cold and round_:
            engines = make_engines()  # (new tokenizers: every cache empty, each one's set-up done)
        nbytes = sum(len(d.encode("utf-8")) for d in documents)
        results = {}
        for name, run in engines.items():
            start = time.perf_counter()
            results[name] = run(documents)
            seconds = time.perf_counter() - start
            if round_:
                rates[name].append(nbytes / seconds / 1e6)
        expected = results["tokenizers encode_batch"]
        assert results["peek2 encode_batch"] == expected, f"peek2's ids differ from tokenizers' (seed {args.seed + round_})"
        for name in engines:
            if name != "pre-tokenizer only":
                differ[name] += sum(a != b for a, b in zip(results[name], expected))
        sizes.append((len(documents), nbytes))
    state = "new tokenizers each (cold)" if args.cold else "the same tokenizers throughout"
    print(describe(args).replace("\n", f" on new documents each, {state}, pinned to CPU {args.cpu}\n", 1))
    documents_, nbytes_ = sizes[-1]
    agree = ", ".join(f"{name.split()[0]} {count}" for name, count in differ.items() if count) or "none"
    print(f"\n{args.runs} sets of about {nbytes_ / 1e6:.2f} MB ({documents_} documents in the last); documents whose ids differ from tokenizers': {agree}")
    baselines = [b for b in ("fastokens encode_batch", "tiktoken encode_ordinary_batch", "tokenizers encode_batch") if b in engines]
    medians = {name: statistics.median(values) for name, values in rates.items()}
    print(f"  {'engine':32} {'MB/s median':>11} {'(min - max)':>16}  " + "  ".join(f"x {b.split()[0]:>10}" for b in baselines))
    for name, values in rates.items():
        # Each round's ratio, then their median: a drift of the machine between rounds cancels.
        ratios = "  ".join(f"{statistics.median(v / w for v, w in zip(values, rates[b])):12.2f}" for b in baselines)
        span = f"({min(values):.1f} - {max(values):.1f})"
        print(f"  {name:32} {medians[name]:11.1f} {span:>16}  {ratios}")
    share = statistics.median(v / w for v, w in zip(rates["peek2 encode_batch"], rates["pre-tokenizer only"]))
    print(f"\npre-tokenizer's share of peek2's encode_batch: {share:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
