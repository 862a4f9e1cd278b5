"""Shared helpers for the benchmarks: wall-clock timing on the host and plain-text tables.

GPU timing is :func:`tvm_tirx.testing.do_bench` (CUDA events, a spin kernel before each run).
"""

from __future__ import annotations

import statistics
import time


def median_wall(fn, runs: int = 20, warmup: int = 2) -> float:
    """Median wall-clock seconds of ``fn()`` over ``runs`` calls after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def table(headers, rows) -> str:
    """A plain-text table."""
    cols = [headers] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(headers))]
    line = lambda r: "  ".join(c.rjust(w) for c, w in zip(r, widths))  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in cols[1:]])
