"""The launch plan of a GEMM call that the small-M (decode) kernel computes.

:class:`SmallMLaunch` is :class:`~.gemm_plans.KernelPlan`'s sibling for
:mod:`tvm_tirx.kernels.gemm.small_m`: it allocates C and launches.  With more than one
split the kernel also takes two workspaces (``Partial (m, n)`` float32 and ``Counters
(m, ceil(n / 128))`` uint32), zero before each launch and left zero by it.
:func:`workspace` keeps them per (device, CUDA stream, n) for the whole process, never
freed: two streams never share one (concurrent calls do not mix their partial sums), and a
CUDA graph that captured a launch keeps valid addresses after the plan is forgotten
(``clear_kernels``, an override).  Calls of one stream with different ``m`` share the
stream's buffer (their launches are ordered).  Two graphs that captured the same shape on
one stream must not be replayed concurrently.
"""

from __future__ import annotations

import torch

from .gemm_kernels import SmallMKey, gemm_kernel

__all__ = ["SmallMLaunch", "workspace"]

#: (device, stream, n) -> [(Partial, Counters), ...]: every buffer made, the last the largest
_BUFFERS: dict = {}
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


def workspace(device, stream: int, m: int, n: int) -> tuple:
    """``(Partial (m, n) float32, Counters (m, ceil(n / 128)) uint32)``, both zero: views of
    the first ``m`` rows of this (device, stream, n)'s buffers, made zeroed on first use (at
    least :data:`MIN_ROWS` rows; a larger ``m`` adds a larger buffer, the old one is kept)."""
    buffers = _BUFFERS.setdefault((str(device), stream, n), [])
    if not buffers or buffers[-1][0].shape[0] < m:
        rows, tiles_n = max(m, MIN_ROWS), -(-n // 128)
        counters = torch.zeros((rows, tiles_n), dtype=torch.int32, device=device).view(torch.uint32)
        buffers.append((torch.zeros((rows, n), dtype=torch.float32, device=device), counters))
    partial, counters = buffers[-1]
    return partial[:m], counters[:m]


class SmallMLaunch:
    """One signature's launch of the small-M kernel of ``key`` (:class:`SmallMKey`).

    Made with the key, the output's shape and dtype and one call's ``x (*, k)`` and
    ``w (n, k)`` (contiguous bf16), whose arguments :meth:`tvm_tirx.Kernel.launcher` checks;
    called as ``plan(x, w, bias, residual)`` (``bias`` and ``residual`` None) on tensors of
    that signature, it returns the new ``(*, n)`` output.
    """

    __slots__ = ("key", "shape", "dtype", "device", "like_x", "flat", "m", "workspaces", "launch")

    def __init__(self, key: SmallMKey, shape, out_dtype, x, w):
        self.key, self.shape, self.dtype, self.device = key, shape, out_dtype, x.device
        self.like_x = out_dtype == x.dtype  # x.new_empty: cheaper than torch.empty's keywords
        self.m = x.numel() // key.k
        self.flat = x.dim() == 2  # x is (m, k) and the output (m, n): no views to make
        self.workspaces = {}
        out = self._new_out(x)
        self.launch = gemm_kernel(key).launcher(*self._arguments(x, w, out))

    def _workspace(self) -> tuple:
        """This stream's ``(Partial, Counters)`` views (:func:`workspace`), kept per stream."""
        stream = _stream_id(self.device)
        found = self.workspaces.get(stream)
        if found is None:
            found = self.workspaces[stream] = workspace(self.device, stream, self.m, self.key.n)
        return found

    def _new_out(self, x):
        if self.like_x:
            return x.new_empty(self.shape)
        return torch.empty(self.shape, dtype=self.dtype, device=self.device)

    def _arguments(self, x, w, out) -> tuple:
        a, c = (x, out) if self.flat else (x.view(self.m, self.key.k), out.view(self.m, self.key.n))
        if self.key.splits == 1:
            return (a, w, c)
        return (a, w, *self._workspace(), c)

    def __call__(self, x, w, bias, residual):
        out = self._new_out(x)
        self.launch(*self._arguments(x, w, out))
        return out
