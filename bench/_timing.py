"""Shared timing helpers for the benchmarks (wall clock on the host, CUDA events on the GPU)."""

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


def median_cuda_ms(torch, fn, runs: int = 50, warmup: int = 5, busy_cycles: int = 2_000_000) -> float:
    """Median milliseconds of ``fn()`` on the GPU, each run timed with its own CUDA events.

    Before each run the stream gets a spin kernel (``torch.cuda._sleep``) that
    outlasts the host's work of recording the start event and launching ``fn``,
    so the events time the GPU work, not the gap while Python launches it.
    """
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(busy_cycles)  # pylint: disable=protected-access
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def table(headers, rows) -> str:
    """A plain-text table."""
    cols = [headers] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(headers))]
    line = lambda r: "  ".join(c.rjust(w) for c, w in zip(r, widths))  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in cols[1:]])
