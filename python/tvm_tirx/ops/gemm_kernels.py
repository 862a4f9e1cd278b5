"""The compiled GEMM kernels the torch ops launch, one per :class:`GemmKey`, kept for the process.

A key names what a compiled kernel depends on: ``n`` and ``k`` (static), the input and
output dtypes and the GPU's arch.  ``m`` is not in
the key: every kernel is made with a run-time ``m`` (``T.dynamic("m")``), so one
compiled kernel serves every number of rows.  The first :func:`gemm_kernel` call for a
key compiles it with :func:`tvm_tirx.compile`, whose on-disk compile cache
(:mod:`tvm_tirx.build.cache`) makes that a load in every later process; later calls in
this process return the same :class:`~tvm_tirx.Kernel` object.

This module does not import torch.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from tvm.script import tirx as T

from ..build.kernel import compile as _tirx_compile
from ..kernels.gemm import make_gemm

__all__ = ["CONFIG", "GemmKey", "gemm_kernel", "cached_kernels", "clear_kernels"]


@dataclass(frozen=True)
class GemmKey:
    """What one compiled GEMM kernel ``C (m, n) = A (m, k) @ B (n, k)^T`` depends on.

    Attributes
    ----------
    n : int
        Rows of B, columns of C (elements).
    k : int
        The reduction length (elements); ``k * sizeof(in_dtype)`` a multiple of 16 bytes.
    in_dtype : str
        ``"bfloat16"`` (A and B).
    out_dtype : str
        ``"bfloat16"`` or ``"float32"`` (C).
    arch : str
        The CUDA architecture compiled for, ``"sm_90a"``.
    """

    n: int
    k: int
    in_dtype: str
    out_dtype: str
    arch: str


#: make_gemm's options per output dtype: bench/gemm.py's fastest on the H200 (one CTA per
#: output tile, so the grid follows the run-time m and no SM count enters the key)
CONFIG = {
    "bfloat16": dict(stages=3, wait_depth=1, persistent=False, group_m=16),
    "float32": dict(stages=4, wait_depth=1, persistent=False, group_m=16),
}
_KERNELS: dict = {}
_LOCK = threading.Lock()


def _compile(key: GemmKey):
    """Make and compile the run-time-``m`` kernel of ``key`` (the on-disk cache may serve it)."""
    func = make_gemm(T.dynamic("m"), key.n, key.k, out_dtype=key.out_dtype, in_dtype=key.in_dtype,
                     **CONFIG[key.out_dtype])
    return _tirx_compile(func, target="cuda", arch=key.arch)


def gemm_kernel(key: GemmKey):
    """The compiled kernel of ``key``: compiled (or loaded from the on-disk cache) on the
    first call for that key in this process, the same object afterwards.

    Returns
    -------
    tvm_tirx.Kernel
        Called as ``kernel(a, b, c)`` with torch CUDA tensors ``a`` (m, k), ``b`` (n, k)
        and ``c`` (m, n), contiguous and 16-byte aligned, for any ``m >= 1``.

    Raises
    ------
    ValueError
        What :func:`~tvm_tirx.kernels.gemm.make_gemm` refuses (a ``k`` that breaks the
        16-byte row rule, an unknown dtype).
    tvm_tirx.TileError
        The kernel breaks a tile contract (a bug of the generator, not of the caller).
    """
    kernel = _KERNELS.get(key)
    if kernel is not None:
        return kernel
    with _LOCK:  # one compile per key, even with several threads calling at once
        kernel = _KERNELS.get(key)
        if kernel is None:
            kernel = _compile(key)
            _KERNELS[key] = kernel
    return kernel


def cached_kernels() -> dict:
    """A copy of this process's ``{GemmKey: Kernel}`` table."""
    return dict(_KERNELS)


def clear_kernels() -> None:
    """Forget this process's compiled kernels (the on-disk compile cache is kept)."""
    with _LOCK:
        _KERNELS.clear()
