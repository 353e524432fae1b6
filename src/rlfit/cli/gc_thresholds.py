"""How often an `rlfit` process runs Python's cyclic garbage collector.

Importing JAX, MuJoCo and Playground and tracing an environment's programs create hundreds of thousands of objects
that live as long as the process. Python's default thresholds (700, 10, 10) start a young collection every 700
allocations, and each older collection walks every survivor again: tracing and lowering G1's training step spent
about a sixth of its CPU time in the collector (`benchmarks/gc_thresholds.py`). A young collection every
`YOUNG_THRESHOLD` allocations keeps the older generations' defaults; objects without reference cycles are freed at
once either way, so only the collection of cyclic garbage waits longer (the same resident memory in that benchmark).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
"""Allocations (less deallocations) between two collections of the youngest generation (Python's default: 700)."""


def collect_less_often() -> tuple[int, int, int]:
    """Raises the youngest generation's threshold to `YOUNG_THRESHOLD` (never lowers one set higher, by the
    interpreter's embedder or the user); returns the thresholds now in effect."""
    young, middle, old = gc.get_threshold()
    if young != 0 and young < YOUNG_THRESHOLD:  # 0: collection is disabled, and stays so
        gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    return gc.get_threshold()
