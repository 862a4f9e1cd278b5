"""The workspaces of the split-K GEMM launches: the small-M (decode) kernel's
(:class:`~.gemm_plans.SmallMLaunch`) and the tile kernel's with ``splits`` (:class:`~.gemm_plans.KernelPlan`).

With more than one split both kernels take two workspaces
(:class:`~tvm_tirx.kernels.parts.split_k.SplitK`): ``Partial (m, splits * n)`` float32,
which each launch overwrites before it reads (no initial value needed), and ``Counters
(m, tiles_n)`` uint32 (one column per column tile: ``ceil(n / 128)`` for the small-M
kernel, ``ceil(n / block_n)`` for the tile kernel), zero before each launch and left zero
by it.
:func:`workspace` keeps them per (device, CUDA stream, n, splits, tiles_n) for the whole process, never
freed: two streams never share one (concurrent calls do not mix their partial sums), and a
CUDA graph that captured a launch keeps valid addresses after the plan is forgotten
(``clear_kernels``, an override).  Calls of one stream with different ``m`` share the
stream's buffer (their launches are ordered).  Two graphs that captured the same shape on
one stream must not be replayed concurrently.  A launch captured on a stream that has no
view for its ``m`` yet (``torch.cuda.graph``'s own capture stream, the first time) takes a
temporary of the capture instead (:func:`_for_this_capture`): the graph then zeroes its ``Counters`` on
every replay.

The buffers are made on a thread of their own (:func:`_outside_graph_pools`): torch routes
a thread's allocations into a CUDA graph's private memory pool while it warms up or
records one (``torch.compile(mode="reduce-overhead")``'s CUDA graph trees do), and a
buffer that outlives the call must not be in that pool (torch refuses to go on:
"tensor(s) in the cudagraph pool not tracked as outputs").
"""

from __future__ import annotations

import threading

import torch

__all__ = ["workspace"]

#: (device, stream, n, splits, tiles_n) -> [(Partial, Counters), ...]: every buffer made, the last the largest
_BUFFERS: dict = {}
#: (device, stream, n, splits, tiles_n, m) -> the views :func:`workspace` gave
_VIEWS: dict = {}
#: the rows a workspace buffer has at least (the small-M kernel's widest row tile)
MIN_ROWS = 64

_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # pylint: disable=protected-access


def _stream_id(device) -> int:
    """The current CUDA stream of ``device``, as its handle (0 for a device that is not
    CUDA: :func:`tvm_tirx.ops.check`'s meta or CPU tensors, which launch nothing)."""
    if device.type != "cuda":
        return 0
    index = device.index if device.index is not None else torch.cuda.current_device()
    if _RAW_STREAM is not None:
        return _RAW_STREAM(index)
    return torch.cuda.current_stream(device).cuda_stream


def _outside_graph_pools(device, make):
    """``make()``'s tensors, allocated and zeroed by a thread of its own (whose
    allocations no CUDA graph pool takes: torch routes them per thread), the current
    stream of ``device`` made to wait for that thread's work.  Exceptions propagate."""
    made, failed, done = [], [], torch.cuda.Event()

    def run():
        try:
            with torch.cuda.device(device):
                made.append(make())
                done.record()
        except BaseException as error:  # pylint: disable=broad-except  (re-raised in the caller)
            failed.append(error)

    thread = threading.Thread(target=run, name="tvm_tirx-workspace")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    torch.cuda.current_stream(device).wait_event(done)
    return made[0]


def _made(device, rows: int, n: int, splits: int, tiles_n: int) -> tuple:
    """:func:`_allocate`'s pair, made outside any CUDA graph pool (:func:`_outside_graph_pools`)."""
    def make():
        return _allocate(device, rows, n, splits, tiles_n)

    return _outside_graph_pools(device, make) if device.type == "cuda" else make()


def _allocate(device, rows: int, n: int, splits: int, tiles_n: int) -> tuple:
    """``(Partial (rows, splits * n) float32, uninitialized; Counters (rows, tiles_n) uint32,
    zero)``, allocated by the calling thread on its current stream."""
    counters = torch.zeros((rows, tiles_n), dtype=torch.int32, device=device).view(torch.uint32)
    return torch.empty((rows, splits * n), dtype=torch.float32, device=device), counters


def _for_this_capture(device, m: int, n: int, splits: int, tiles_n: int) -> tuple:
    """``(Partial, Counters)`` of ``m`` rows for one launch that a CUDA graph captures on a
    stream with no view for ``m`` yet: ordinary allocations of the capturing stream, so they live in
    the graph's private pool like any temporary of the captured work, and the zeroing of
    ``Counters`` is captured too (a memset node before the launch on every replay).  Not
    kept: a buffer made on another thread could not be ordered before the capture (CUDA
    refuses a captured wait on uncaptured work: cudaErrorStreamCaptureIsolation), and one
    kept past the capture would pin the graph's pool."""
    return _allocate(device, m, n, splits, tiles_n)


def workspace(device, m: int, n: int, splits: int, tiles_n: int) -> tuple:
    """``(Partial (m, splits * n) float32, Counters (m, tiles_n) uint32)`` for a launch of
    ``splits`` splits over ``tiles_n`` column tiles on ``device``'s current CUDA stream,
    ``Counters`` zero: views of the first ``m`` rows of this (device, stream, n, splits,
    tiles_n)'s buffers, made on first use with a power of two of rows, at least
    :data:`MIN_ROWS` (a larger ``m`` adds a buffer of the next power of two and keeps the
    old one: a CUDA graph may hold its address; so the kept buffers take less than twice
    the largest), the same views for every call of one (device, stream, n, splits,
    tiles_n, m)."""
    stream = _stream_id(device)
    key = (str(device), stream, n, splits, tiles_n)
    found = _VIEWS.get((*key, m))
    if found is not None:
        return found
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return _for_this_capture(device, m, n, splits, tiles_n)
    buffers = _BUFFERS.setdefault(key, [])
    if not buffers or buffers[-1][0].shape[0] < m:
        buffers.append(_made(torch.device(device), max(1 << (m - 1).bit_length(), MIN_ROWS), n, splits, tiles_n))
    partial, counters = buffers[-1]
    found = _VIEWS[(*key, m)] = (partial[:m], counters[:m])
    return found
