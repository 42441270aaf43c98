"""Benchmark of the tokenizers plugin and of patch_transformers, against the originals, in one run.

    python scripts/bench_plugin.py --runs 5
    python scripts/bench_plugin.py --model qwen3 --sentences 5000 --size 300000

1. ``tokenizers.Tokenizer``: ``encode`` (one text at a time) and ``encode_batch``, original
   regex pipeline against ``peek2.patch(tok)``, on XNLI sentences (all languages) and on a
   long document (XNLI dev as one text; ``encode_batch`` gets it cut at line ends into
   ~64 KB parts).
2. transformers ``AutoTokenizer``: ``__call__`` without offsets, on the sentences one by one,
   as one batch, and in batches of 32 padded and truncated to 128 ids as NumPy arrays (a
   training loop's call), unpatched against ``peek2.patch_transformers()``.

Every engine is checked to give the same ids (and offsets for the plugin) before timing;
the engines take turns in each round (``timing.interleaved``); MB/s of UTF-8 input, medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpora import DEFAULT_DATA, sentence_corpus, text_corpus  # noqa: E402
from timing import interleaved, table  # noqa: E402

import peek2  # noqa: E402


def parts(text: str, size: int = 65_536) -> list[str]:
    out, start = [], 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        out.append(text[start:end])
        start = end
    return out


def check_same(original: Any, patched: Any, texts: list[str]) -> None:
    for expected, got in zip(original.encode_batch(texts), patched.encode_batch(texts)):
        if (expected.ids, expected.offsets) != (got.ids, got.offsets):
            raise SystemExit("bench_plugin: the plugin differs from the original; not timing")


def ratios(seconds: dict[str, list[float]], pairs: list[tuple[str, str]]) -> str:
    lines = []
    for fast, slow in pairs:
        ratio = statistics.median(seconds[slow]) / statistics.median(seconds[fast])
        lines.append(f"  {fast} / {slow}: {ratio:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA.parent), help="folder with xnli/ and tokenizers/")
    parser.add_argument("--model", default="llama3.1", help="a folder under tokenizers/ (default llama3.1)")
    parser.add_argument("--runs", type=int, default=5, help="rounds (medians are reported)")
    parser.add_argument("--sentences", type=int, default=5_000, help="XNLI sentences")
    parser.add_argument("--size", type=int, default=500_000, help="characters of the long document")
    parser.add_argument("--no-transformers", action="store_true", help="skip part 2")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    from tokenizers import Tokenizer

    data = Path(args.data)
    folder = data / "tokenizers" / args.model
    sentences = sentence_corpus(data / "xnli", args.sentences)
    document = text_corpus("xnli", data / "xnli", args.size)
    chunks = parts(document)
    original = Tokenizer.from_file(str(folder / "tokenizer.json"))
    patched = peek2.patch(Tokenizer.from_file(str(folder / "tokenizer.json")))
    check_same(original, patched, sentences + chunks)
    print(f"model {args.model}; {len(sentences)} XNLI sentences; document of {len(document)} characters; "
          f"{args.runs} rounds, interleaved; peek2 compiled: {peek2.COMPILED}")

    def encode_each(tok: Any, texts: list[str]) -> Callable[[], object]:
        return lambda: [tok.encode(text) for text in texts]

    def batch(tok: Any, texts: list[str]) -> Callable[[], object]:
        return lambda: tok.encode_batch(texts)

    nbytes = sum(len(t.encode("utf-8")) for t in sentences)
    seconds = interleaved(
        {"original encode": encode_each(original, sentences), "plugin encode": encode_each(patched, sentences),
         "original encode_batch": batch(original, sentences), "plugin encode_batch": batch(patched, sentences)},
        args.runs,
    )
    print(f"\ntokenizers, XNLI sentences ({nbytes / 1e6:.2f} MB)")
    print(table(nbytes, seconds, []))
    print(ratios(seconds, [("plugin encode", "original encode"), ("plugin encode_batch", "original encode_batch")]))

    nbytes = len(document.encode("utf-8"))
    seconds = interleaved(
        {"original encode": lambda: original.encode(document), "plugin encode": lambda: patched.encode(document),
         "original encode_batch": batch(original, chunks), "plugin encode_batch": batch(patched, chunks)},
        args.runs,
    )
    print(f"\ntokenizers, long document ({nbytes / 1e6:.2f} MB; encode_batch of {len(chunks)} parts)")
    print(table(nbytes, seconds, []))
    print(ratios(seconds, [("plugin encode", "original encode"), ("plugin encode_batch", "original encode_batch")]))

    if args.no_transformers:
        return 0
    from transformers import AutoTokenizer

    from peek2.plugin import transformers_patch

    peek2.unpatch_transformers()
    reference = AutoTokenizer.from_pretrained(str(folder))
    peek2.patch_transformers()
    fast = AutoTokenizer.from_pretrained(str(folder))
    fast(sentences[:1])  # builds peek2's tokenizer for it, once

    for tok in (reference, fast):
        tok.pad_token = tok.pad_token or tok.eos_token  # (Llama-3 files have none)
    batches = [sentences[k : k + 32] for k in range(0, len(sentences), 32)]
    padded = {"padding": True, "truncation": True, "max_length": 128, "return_tensors": "np"}

    def call(tok: Any, patched_mode: bool, one_by_one: bool, options: dict[str, Any] | None = None) -> Callable[[], object]:
        def run() -> object:
            (peek2.patch_transformers if patched_mode else peek2.unpatch_transformers)()  # (untimed in the runs: see mode)
            if options is not None:  # a training loop's batches of 32, padded and truncated
                return [tok(batch, **options) for batch in batches]
            return [tok(text) for text in sentences] if one_by_one else tok(sentences)

        return run

    expected = call(reference, False, False)()
    if dict(call(fast, True, False)()) != dict(expected):  # type: ignore[call-overload]
        raise SystemExit("bench_plugin: patch_transformers differs from transformers; not timing")
    for want, got in zip(call(reference, False, False, padded)(), call(fast, True, False, padded)()):  # type: ignore[call-overload]
        if want.keys() != got.keys() or any((want[key] != got[key]).any() for key in want):
            raise SystemExit("bench_plugin: patch_transformers pads differently from transformers; not timing")
    nbytes = sum(len(t.encode("utf-8")) for t in sentences)
    def mode(patched_mode: bool) -> Callable[[], None]:
        # transformers patched or not before a run, untimed: a program patches once, and each
        # patch_transformers() makes a patched tokenizer find its engine again at its next call
        # (its backend's JSON read and hashed: tokens may have been added while unpatched).
        def switch() -> None:
            if patched_mode:
                peek2.patch_transformers()
                fast(sentences[:1])
            else:
                peek2.unpatch_transformers()

        return switch

    engines = {
        "transformers __call__": call(reference, False, True), "patched __call__": call(fast, True, True),
        "transformers batch": call(reference, False, False), "patched batch": call(fast, True, False),
        "transformers padded": call(reference, False, False, padded), "patched padded": call(fast, True, False, padded),
    }  # fmt: skip
    seconds = interleaved(engines, args.runs, prepare={name: mode(name.startswith("patched")) for name in engines})
    transformers_patch.unpatch_transformers()
    print(f"\ntransformers AutoTokenizer __call__ without offsets, XNLI sentences ({nbytes / 1e6:.2f} MB; padded: batches of 32, {padded})")
    print(table(nbytes, seconds, []))
    print(ratios(seconds, [("patched __call__", "transformers __call__"), ("patched batch", "transformers batch"), ("patched padded", "transformers padded")]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
