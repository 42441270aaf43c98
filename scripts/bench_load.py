"""Start-up: ``Tokenizer.from_file`` against tokenizers' ``Tokenizer.from_file``, in one process.

    python scripts/bench_load.py [--runs 5] [--model llama3.2 --model qwen3 ...] [--model gpt2]

A folder of GPT-2's own ``encoder.json`` + ``vocab.bpe`` (``--model gpt2``) is loaded by
``Tokenizer.from_gpt2_files`` against tokenizers' ``Tokenizer(models.BPE.from_file(...))``.

Four ways to load, interleaved, medians of --runs: tokenizers; peek2 with its load cache off
(``PEEK2_CACHE=0``: JSON, the byte-level alphabet, the merge and whole-character tables);
peek2's first load of a file (an empty cache directory: the same, plus writing the entry); and
peek2's later loads (the entry read back, ``peek2/formats/load_cache.py``). The cache directory is a
temporary one, removed at the end. Then the first ``encode_with_offsets`` after a load, on text
that NFC changes (what a new process pays on its first request).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import START_UP_MODELS, start_up_arguments  # noqa: E402

from peek2 import Tokenizer  # noqa: E402
from peek2.bpe import huge_pages  # noqa: E402


def seconds(run: Callable[[], object]) -> float:
    """The time of ``run()``; what it returns is freed after the clock stops (freeing a loaded
    tokenizer's tables is not part of a load), and so is the collapse of peek2's tables into huge
    pages, which a load leaves to a thread: it is waited for after the clock stops, so that it
    does not run beside the next load timed."""
    start = time.perf_counter()
    result = run()
    elapsed = time.perf_counter() - start
    huge_pages.wait()
    del result
    return elapsed


def loaders(folder: Path, reference: Any) -> tuple[Callable[[], Tokenizer], Callable[[], object]]:
    """peek2's load of a model folder and tokenizers' (GPT-2's own two files where it has no tokenizer.json)."""
    if (folder / "tokenizer.json").exists() or not (folder / "encoder.json").exists():
        path = folder / "tokenizer.json"
        return (lambda: Tokenizer.from_file(path)), (lambda: reference.from_file(str(path)))
    from tokenizers import models, pre_tokenizers

    encoder, merges = folder / "encoder.json", folder / "vocab.bpe"

    def gpt2_reference() -> object:
        tok = reference(models.BPE.from_file(str(encoder), str(merges)))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        return tok

    return (lambda: Tokenizer.from_gpt2_files(encoder, merges)), gpt2_reference


def main() -> int:
    args = start_up_arguments(__doc__).parse_args()
    from tokenizers import Tokenizer as Reference

    directory = tempfile.mkdtemp(prefix="peek2-bench-load-")
    os.environ["PEEK2_CACHE_DIR"] = directory
    try:
        print(f"median of {args.runs} interleaved loads, seconds (ratio: tokenizers' time / this time)")
        print(f"  {'model':10} {'tokenizers':>10} {'no cache':>16} {'first load':>16} {'cached':>16}")
        for model in args.model or START_UP_MODELS:
            peek2_load, reference_load = loaders(args.tokenizers / model, Reference)

            def uncached() -> object:
                os.environ["PEEK2_CACHE"] = "0"
                try:
                    return peek2_load()
                finally:
                    del os.environ["PEEK2_CACHE"]

            loads: dict[str, Callable[[], object]] = {
                "tokenizers": reference_load,
                "no cache": uncached,
                "first load": peek2_load,
                "cached": peek2_load,
            }
            times: dict[str, list[float]] = {name: [] for name in loads}
            for _ in range(args.runs):
                for name, load in loads.items():
                    if name == "first load":
                        shutil.rmtree(directory)  # (an empty cache directory, emptied before the clock starts)
                    times[name].append(seconds(load))
            median = {name: statistics.median(t) for name, t in times.items()}
            cells = [f"{median[name]:.3f} ({median['tokenizers'] / median[name]:.2f}x)" for name in ("no cache", "first load", "cached")]
            print(f"  {model:10} {median['tokenizers']:10.3f} " + " ".join(f"{c:>16}" for c in cells))
        text = "Cafe\u0301 co\u0301digo " * 100
        for model in args.model or START_UP_MODELS:
            tok = loaders(args.tokenizers / model, Reference)[0]()
            print(f"first encode_with_offsets after load, {model}: {seconds(lambda: tok.encode_with_offsets(text)) * 1000:.1f} ms, "
                  f"second: {seconds(lambda: tok.encode_with_offsets(text)) * 1000:.1f} ms")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
