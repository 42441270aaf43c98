"""Offsets: peek2's ``encode_with_offsets`` against tokenizers' ``encode`` (which always computes them).

    python scripts/bench_offsets.py [--model llama3.2] [--runs 5] [--corpus english ...]

Both engines give the ids and the character span of each token of the same text (checked equal
before timing, with special tokens added as the file's post-processor adds them). Every peek2
run starts with an empty piece cache. MB/s of UTF-8 input, median of --runs interleaved rounds.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpora import TEXT_CORPORA, text_corpus  # noqa: E402
from timing import describe, interleaved, model_arguments, table  # noqa: E402

from peek2.tokenizer import Tokenizer  # noqa: E402


def main() -> int:
    parser = model_arguments(__doc__, "llama3.2", 5, TEXT_CORPORA)
    args = parser.parse_args()
    from tokenizers import Tokenizer as Reference

    path = args.tokenizers / args.model / "tokenizer.json"
    ours, reference = Tokenizer.from_file(path), Reference.from_file(str(path))
    print(describe(args))
    for name in args.corpus or TEXT_CORPORA:
        text = text_corpus(name, args.data)
        expected, got = reference.encode(text), ours.encode_with_offsets(text)
        assert (got.ids, got.offsets) == (expected.ids, expected.offsets), (name, "ids or offsets differ")
        runs = {
            "peek2 encode_with_offsets": lambda: ours.encode_with_offsets(text),
            "tokenizers encode": lambda: reference.encode(text),
            "peek2 encode (no offsets)": lambda: ours.encode(text),
        }
        seconds = interleaved(runs, args.runs, before=ours._engine.cache.clear)
        print(f"\n{name}: {len(text.encode('utf-8')) / 1e6:.2f} MB; ids and offsets identical")
        print(table(len(text.encode("utf-8")), seconds, ["tokenizers encode"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
