"""Encode throughput: peek2's Tokenizer against tokenizers, tiktoken, and fastokens and tokie if installed.

    python scripts/bench_encode.py [--model llama3.1] [--runs 5] [--corpus english ...] [--grouped]

All engines load the same Llama-3 vocabulary: tokenizers and peek2 the tokenizer.json,
tiktoken an ``Encoding`` from the tokenizer.model ranks and the same pattern. Every run of
"peek2" starts with an empty piece cache (as a new process would); "peek2 (warm cache)" keeps
its cache from run to run (a server that has seen such text). Ids are checked equal across
engines before timing. MB/s of UTF-8 input, median of --runs interleaved rounds.

The corpora are those of ``corpora.py``, plus "sentences joined": the 20,000 sentences of
"sentences" as one text, one per line, which separates the cost of a call per sentence from
the cost of the text itself (15 languages, many pieces never seen before).
"""

from __future__ import annotations

import base64
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpora import ALL_CORPORA, DEFAULT_DATA, sentence_corpus, text_corpus  # noqa: E402
from timing import describe, interleaved, model_arguments, table  # noqa: E402

import peek2  # noqa: E402

if TYPE_CHECKING:
    import tiktoken
from peek2.tokenizer import Tokenizer  # noqa: E402

CORPORA = (*ALL_CORPORA, "sentences joined")
TOKENIZERS = DEFAULT_DATA.parent / "tokenizers"


def tiktoken_llama3(rank_file: Path) -> tiktoken.Encoding:
    """tiktoken's Encoding of a Llama-3 tokenizer.model (base64 token, rank per line), without specials."""
    import tiktoken

    ranks = {}
    with open(rank_file, "rb") as handle:
        for line in handle:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding("llama3", pat_str=peek2.PATTERNS["llama3"], mergeable_ranks=ranks, special_tokens={})


def main() -> int:
    parser = model_arguments(__doc__, "llama3.1", 5, CORPORA)
    args = parser.parse_args()
    from tokenizers import Tokenizer as Reference

    path = args.tokenizers / args.model / "tokenizer.json"
    ours, reference = Tokenizer.from_file(path), Reference.from_file(str(path))
    # A second instance keeps its cache across runs: a long-running process that has seen
    # this kind of text before (the first instance starts every run empty, as a new process).
    warm = Tokenizer.from_file(path)
    engines: dict[str, Callable[[str], list[int]]] = {
        "peek2": lambda t: ours.encode(t, add_special_tokens=False),
        "peek2 (warm cache)": lambda t: warm.encode(t, add_special_tokens=False),
        "tokenizers": lambda t: reference.encode(t, add_special_tokens=False).ids,
    }
    rank_file = args.tokenizers / "llama3.2" / "tokenizer.model"
    if ours.family == "llama3" and importlib.util.find_spec("tiktoken"):
        engines["tiktoken"] = tiktoken_llama3(rank_file).encode_ordinary
    # Other fast engines, when installed (pip install ".[bench]"), on the same tokenizer.json.
    if importlib.util.find_spec("fastokens"):
        import fastokens

        fast = fastokens.Tokenizer.from_file(str(path))
        engines["fastokens"] = lambda t: fast.encode(t, add_special_tokens=False).ids
    if importlib.util.find_spec("tokie"):
        import tokie

        tok_ie = tokie.Tokenizer.from_json(str(path))
        engines["tokie"] = lambda t: tok_ie.encode(t, add_special_tokens=False).ids
    print(describe(args))
    baselines = [b for b in ("tiktoken", "tokenizers") if b in engines]
    for name in args.corpus or CORPORA:
        if name == "sentences":
            texts = sentence_corpus(args.data)
        elif name == "sentences joined":
            texts = ["\n".join(sentence_corpus(args.data))]
        else:
            texts = [text_corpus(name, args.data)]
        nbytes = sum(len(t.encode("utf-8")) for t in texts)
        differ: dict[str, int] = {}
        for text in texts[:2000]:
            expected = engines["tokenizers"](text)
            for engine, encode in engines.items():
                if encode(text) != expected:
                    differ[engine] = differ.get(engine, 0) + 1
        for engine in ("peek2", "peek2 (warm cache)", "tiktoken"):
            assert engine not in differ, (name, engine, "ids differ from tokenizers")
        runs = {engine: (lambda e=encode: [e(t) for t in texts]) for engine, encode in engines.items()}
        seconds = interleaved(runs, args.runs, before=ours._engine.cache.clear, grouped=args.grouped)
        agree = "ids identical in all engines" if not differ else f"ids identical except: {differ} texts differ"
        print(f"\n{name}: {nbytes / 1e6:.2f} MB in {len(texts)} text(s); {agree}")
        print(table(nbytes, seconds, baselines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
