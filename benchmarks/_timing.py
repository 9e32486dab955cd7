"""Timing helper shared by the benchmarks: the best of several rounds, in seconds.

The best round is the one least disturbed by the rest of the machine (other processes, the
garbage collector); on a shared 2-core machine it is the most repeatable figure.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], rounds: int) -> float:
    """Seconds of the fastest of `rounds` calls of `fn`."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
