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

The process is pinned to one CPU (``os.sched_setaffinity``) and every engine runs on it, so
the figures are per core, whatever threads an engine starts: peek2 ``encode_batch`` (its piece
cache emptied before every run, as a new process), fastokens ``encode_batch``, tiktoken
``encode_ordinary_batch(num_threads=1)`` and tokenizers ``encode_batch``, without special tokens.
"pre-tokenizer only" is the scan that finds the pieces (``peek2.pretokenize.scanner.piece_count``: nothing made
per piece, as inside an encode) over the same documents: its time over encode's is the
pre-tokenizer's share of the encode.
"""

from __future__ import annotations

import importlib.util
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_encode import tiktoken_llama3  # noqa: E402
from corpora import ROOT  # noqa: E402
from timing import describe, interleaved, model_arguments, table  # noqa: E402

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
    parser.add_argument("--mb", type=float, default=8.0, help="size of the document set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpu", type=int, default=0, help="the CPU to pin the process to")
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.cpu})
    from tokenizers import Tokenizer as Reference

    path = args.tokenizers / args.model / "tokenizer.json"
    ours, reference = Tokenizer.from_file(path), Reference.from_file(str(path))
    added = tuple(token.content for token in ours.spec.added_tokens)
    documents = mixed_documents(args.data, int(args.mb * 1e6), args.seed, added)
    engines: dict[str, Callable[[], list[list[int]]]] = {
        "peek2 encode_batch": lambda: ours.encode_batch(documents, add_special_tokens=False),
        "tokenizers encode_batch": lambda: [e.ids for e in reference.encode_batch(documents, add_special_tokens=False)],
    }
    if importlib.util.find_spec("fastokens"):
        import fastokens

        fast = fastokens.Tokenizer.from_file(str(path))
        engines["fastokens encode_batch"] = lambda: [e.ids for e in fast.encode_batch(documents, add_special_tokens=False)]
    if ours.family == "llama3" and importlib.util.find_spec("tiktoken"):
        encoding = tiktoken_llama3(args.tokenizers / "llama3.2" / "tokenizer.model")
        engines["tiktoken encode_ordinary_batch"] = lambda: encoding.encode_ordinary_batch(documents, num_threads=1)
    expected = engines["tokenizers encode_batch"]()
    assert engines["peek2 encode_batch"]() == expected, "peek2's ids differ from tokenizers'"
    differ = {name: sum(a != b for a, b in zip(run(), expected)) for name, run in engines.items()}
    family = FAMILIES[ours.family]
    scan = lambda: [piece_count(d, family.stage2, family.rules) for d in documents]  # noqa: E731
    runs: dict[str, Callable[[], object]] = {**engines, "pre-tokenizer only": scan}
    print(describe(args) + f", pinned to CPU {args.cpu}")
    nbytes = sum(len(d.encode("utf-8")) for d in documents)
    seconds = interleaved(runs, args.runs, before=ours._engine.cache.clear)
    agree = ", ".join(f"{name.split()[0]} {count}" for name, count in differ.items() if count) or "none"
    print(f"\n{len(documents)} documents, {nbytes / 1e6:.2f} MB; documents whose ids differ from tokenizers': {agree}")
    baselines = [b for b in ("fastokens encode_batch", "tiktoken encode_ordinary_batch", "tokenizers encode_batch") if b in runs]
    print(table(nbytes, seconds, baselines))
    share = sorted(seconds["pre-tokenizer only"])[args.runs // 2] / sorted(seconds["peek2 encode_batch"])[args.runs // 2]
    print(f"\npre-tokenizer's share of peek2's encode_batch: {share:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
