"""Scaling checks without wall-clock limits: CPU time of this process at two sizes, in one run.

Best of a few runs each, in CPU time (the other test worker or another process on the machine
does not count); only ratios are asserted. Quadratic work shows as ~16x for 4x the input,
linear as ~4x.
"""

from __future__ import annotations

import time
from typing import Callable


def cpu_seconds(call: Callable[[], object], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        call()
        best = min(best, time.process_time() - start)
    return best


def growth(make: Callable[[int], str], encode: Callable[[str], object], n: int) -> float:
    """CPU time of ``encode(make(4 * n))`` over that of ``encode(make(n))``."""
    small, large = make(n), make(4 * n)
    encode(small)  # warm the piece cache and lazy tables alike for both sizes
    return cpu_seconds(lambda: encode(large)) / max(cpu_seconds(lambda: encode(small)), 1e-6)
