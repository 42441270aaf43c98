"""Interleaved timing: every engine once per round, medians over rounds, throughput in MB/s."""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def interleaved(
    engines: dict[str, Callable[[], object]],
    rounds: int,
    before: Callable[[], None] | None = None,
    grouped: bool = False,
    prepare: dict[str, Callable[[], None]] | None = None,
) -> dict[str, list[float]]:
    """Seconds of each engine in each round; the engines take turns so drift hits all alike.

    With ``grouped`` each engine runs its rounds one after another instead (``--grouped``): then
    its tables stay in the CPU caches from round to round, as in a process that only tokenizes,
    where taking turns gives each run the caches the engine before it left (peek2 loses more
    there than tiktoken: see the README's "Tables out of the CPU caches").

    Each run starts from a collected heap (``gc.collect()``, untimed, after ``before``): a full
    collection set off by the previous engine's garbage otherwise lands on whichever engine runs
    next (``peek2.split`` of the 20,000 sentences measured 16-68 MB/s in one run). Each engine still
    pays the collections its own objects set off, and the freeing of what it returns.

    ``prepare[name]``, if given, runs untimed before each run of that engine (after ``before``):
    what a real program does once, such as transformers patched or not."""
    seconds: dict[str, list[float]] = {name: [] for name in engines}
    order = [name for name in engines for _ in range(rounds)] if grouped else [name for _ in range(rounds) for name in engines]
    for name in order:
        if before is not None:
            before()
        if prepare is not None and name in prepare:
            prepare[name]()
        gc.collect()
        start = time.perf_counter()
        engines[name]()
        seconds[name].append(time.perf_counter() - start)
    return seconds


def table(nbytes: int, seconds: dict[str, list[float]], baselines: list[str]) -> str:
    """MB/s median (min-max) per engine, and each engine's median ratio to the baselines."""
    rows = [f"  {'engine':24} {'MB/s median':>11} {'(min - max)':>16}  " + "  ".join(f"x {b:>12}" for b in baselines)]
    medians = {name: nbytes / statistics.median(times) / 1e6 for name, times in seconds.items()}
    for name, times in seconds.items():
        low, high = nbytes / max(times) / 1e6, nbytes / min(times) / 1e6
        ratios = "  ".join(f"{medians[name] / medians[b]:14.2f}" for b in baselines)
        rows.append(f"  {name:24} {medians[name]:11.1f} {f'({low:.1f} - {high:.1f})':>16}  {ratios}")
    return "\n".join(rows)


def model_arguments(doc: str, model: str, runs: int, corpora: Sequence[str]) -> argparse.ArgumentParser:
    """The options every engine benchmark takes: --model, --tokenizers, --data, --runs, --corpus."""
    from corpora import DEFAULT_DATA

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--model", default=model, help="folder under --tokenizers")
    parser.add_argument("--tokenizers", type=Path, default=DEFAULT_DATA.parent / "tokenizers")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="XNLI folder")
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--corpus", action="append", choices=corpora)
    parser.add_argument("--grouped", action="store_true", help="each engine's runs one after another, not taking turns")
    return parser


def start_up_arguments(doc: str) -> argparse.ArgumentParser:
    """The options of the start-up benchmarks: --model (repeated; default llama3.2, qwen3, gpt4o),
    --tokenizers, --runs."""
    from corpora import DEFAULT_DATA

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--model", action="append", help="folders under --tokenizers (default: llama3.2, qwen3, gpt4o)")
    parser.add_argument("--tokenizers", type=Path, default=DEFAULT_DATA.parent / "tokenizers")
    parser.add_argument("--runs", type=int, default=5)
    return parser


START_UP_MODELS = ["llama3.2", "qwen3", "gpt4o"]


def describe(args: argparse.Namespace) -> str:
    """The first line of a benchmark's report: the machine, the build and the run."""
    import peek2

    return (
        f"python {platform.python_version()}, {os.cpu_count()} cpus, peek2 compiled: {peek2.COMPILED}, "
        f"model {args.model}, median of {args.runs} {'grouped' if getattr(args, 'grouped', False) else 'interleaved'} runs\n{reference_versions()}"
    )


def reference_versions() -> str:
    """The versions of the engines peek2 is timed against: the ratios move with them (tiktoken
    0.13 made its regex about 3x faster on English; the README's figures name the versions)."""
    from importlib import metadata

    found = []
    for name in ("tokenizers", "tiktoken", "fastokens", "tokie", "regex"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return "references: " + ", ".join(found)
