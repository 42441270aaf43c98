"""Interleaved timing: every engine once per round, medians over rounds, throughput in MB/s."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def interleaved(engines: dict[str, Callable[[], object]], rounds: int, before: Callable[[], None] | None = None) -> dict[str, list[float]]:
    """Seconds of each engine in each round; the engines take turns so drift hits all alike."""
    seconds: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(rounds):
        for name, run in engines.items():
            if before is not None:
                before()
            start = time.perf_counter()
            run()
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
