"""Scaling checks without wall-clock limits: CPU time of this process at two sizes, in one run.

Only ratios are asserted, in CPU time (the other test worker or another process on the machine
does not count). Quadratic work shows as ~16x for 4x the input, linear as ~4x.

The two sizes are timed in pairs, one just after the other, and the ratio is the median of the
pairs' ratios: this machine's speed drifts by up to 1.6x over seconds (other tenants on the same
host slow a CPU-second too), and the ratio of two bests taken one size after the other moved
past its bound when the drift fell between them (6.2x, for a check that measures 3.8-4.0x).
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Callable


def cpu_seconds(call: Callable[[], object], repeat: int = 5) -> float:
    """The fewest CPU seconds of ``repeat`` calls (scripts/bench_growing_session.py)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        call()
        best = min(best, time.process_time() - start)
    return best


def paired_ratio(small: Callable[[], object], large: Callable[[], object], rounds: int = 5) -> float:
    """The median over ``rounds`` pairs of the CPU time of ``large()`` over that of ``small()``
    called just before it (after one call of each, which warms caches and lazy tables).

    The garbage collector is off during each pair, as ``timeit`` turns it off: a full collection
    walks every object of the test process (a worker holding several tokenizers), several ms that
    fell in one call or the other at random (a session of 8 ms timed at 7.6x that of 2 ms, where
    it measures 3.9x alone)."""
    small()
    large()
    ratios = []
    enabled = gc.isenabled()
    gc.collect()
    try:
        for _ in range(rounds):
            gc.disable()
            start = time.process_time()
            small()
            middle = time.process_time()
            large()
            ratios.append((time.process_time() - middle) / max(middle - start, 1e-6))
            if enabled:
                gc.enable()
    finally:
        if enabled:
            gc.enable()
    return statistics.median(ratios)


def growth(make: Callable[[int], str], encode: Callable[[str], object], n: int) -> float:
    """CPU time of ``encode(make(4 * n))`` over that of ``encode(make(n))`` (paired)."""
    small, large = make(n), make(4 * n)
    return paired_ratio(lambda: encode(small), lambda: encode(large))
