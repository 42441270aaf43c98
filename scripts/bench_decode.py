"""Decode throughput: peek2's ``decode`` and ``decode_batch`` against tokenizers and tiktoken.

    python scripts/bench_decode.py [--model llama3.2] [--runs 7] [--corpus english ...]

Every engine decodes the same ids (those of tokenizers' encode of the text, without special
tokens) back to a ``str``; the decoded texts are checked equal before timing. "decode" is one
call on the ids of a whole corpus text; "decode_batch" is one call on the ids of the 20,000
XNLI sentences of ``corpora.sentence_corpus`` (short documents, 15 languages). tiktoken decodes
with an ``Encoding`` built from the tokenizer.model ranks (Llama-3 models only). MB/s of UTF-8
output, median of --runs interleaved rounds.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_encode import tiktoken_llama3  # noqa: E402
from corpora import TEXT_CORPORA, sentence_corpus, text_corpus  # noqa: E402
from timing import describe, interleaved, model_arguments, table  # noqa: E402

from peek2.tokenizer import Tokenizer  # noqa: E402


def main() -> int:
    parser = model_arguments(__doc__, "llama3.2", 7, (*TEXT_CORPORA, "batch"))
    args = parser.parse_args()
    from tokenizers import Tokenizer as Reference

    path = args.tokenizers / args.model / "tokenizer.json"
    ours, reference = Tokenizer.from_file(path), Reference.from_file(str(path))
    single: dict[str, Callable[[list[int]], str]] = {
        "peek2": ours.decode,
        "tokenizers": reference.decode,
    }
    batch: dict[str, Callable[[list[list[int]]], list[str]]] = {
        "peek2": ours.decode_batch,
        "tokenizers": reference.decode_batch,
    }
    if ours.family == "llama3" and importlib.util.find_spec("tiktoken"):
        encoding = tiktoken_llama3(args.tokenizers / "llama3.2" / "tokenizer.model")
        single["tiktoken"] = encoding.decode
        batch["tiktoken"] = encoding.decode_batch
    print(describe(args))
    baselines = [b for b in ("tiktoken", "tokenizers") if b in single]
    for name in args.corpus or (*TEXT_CORPORA, "batch"):
        if name == "batch":
            texts = sentence_corpus(args.data)
            ids = [e.ids for e in reference.encode_batch(texts, add_special_tokens=False)]
            expected = reference.decode_batch(ids)
            for engine, run_batch in batch.items():
                assert run_batch(ids) == expected, (engine, "decoded texts differ")
            runs = {engine: (lambda r=run_batch: r(ids)) for engine, run_batch in batch.items()}
            label = f"decode_batch of {len(texts)} sentences"
        else:
            text = text_corpus(name, args.data)
            one = reference.encode(text, add_special_tokens=False).ids
            for engine, decode in single.items():
                assert decode(one) == text, (engine, "decoded text differs")
            runs = {engine: (lambda d=decode: d(one)) for engine, decode in single.items()}
            label, texts = f"decode of {name}", [text]
        nbytes = sum(len(t.encode("utf-8")) for t in texts)
        seconds = interleaved(runs, args.runs)
        print(f"\n{label}: {nbytes / 1e6:.2f} MB decoded; texts identical in all engines")
        print(table(nbytes, seconds, baselines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
