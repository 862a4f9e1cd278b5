"""RMSNorm over the last axis: ``Y = X * rsqrt(mean(X^2, -1) + eps) * W``, one warp per row.

A row of ``hidden`` 16-bit elements is read as 16-byte vectors (``ld.global.v4.b32``):
lane ``l`` holds vectors ``l, l + 32, ...``, so each of the warp's loads is one
contiguous 512-byte stretch.  The row stays in registers as packed pairs; the sum of
squares is taken in f32 (values widened exactly, :func:`.pairs.make_unpack_pairs`),
reduced over the 32 lanes (``shfl.sync.bfly``), and each value is scaled, multiplied by
its weight in f32 and rounded once to the row's dtype (``cvt.rn.bf16x2.f32``) before the
16-byte stores.  Memory traffic is one read and one write of X's size (the weight row
stays in L1/L2).

Hardware facts: PTX ISA 9.7.9.8 / 9.7.9.10 (``ld`` / ``st`` vectors), 9.7.10.4 (``mov``
unpack), 9.7.10.24 (``cvt``), 9.7.9.x (``shfl.sync``).
"""

from __future__ import annotations

import math
import numbers

from tvm.script import tirx as T

from .extents import MAX_ELEMENTS, is_extent, is_int
from .pairs import VECTOR, WIDEN_CONVERTS, make_pack_pairs, make_unpack_pairs

__all__ = ["ROW_STEP", "MAX_HIDDEN", "WARPS", "make_rms_norm", "check_rms_norm"]

#: elements one warp reads per load (32 lanes x one vector); ``hidden`` is a multiple of it
ROW_STEP = 32 * VECTOR
#: the longest row kept in registers, packed: 64 words a lane at 4096 (227 registers with
#: ptxas 13.0); at 8192 nvcc leaves the 512-byte array in local memory (spills)
MAX_HIDDEN = 4096
#: rows (warps) per CTA
WARPS = 4
ELEMENTS_MESSAGE = f"make_rms_norm: rows x hidden must be at most {MAX_ELEMENTS} elements (int32 offsets)"
#: the largest finite float32 (eps is a float32 constant in the kernel)
F32_MAX = 3.4028234663852886e38


def check_rms_norm(rows, hidden, dtype: str, eps) -> None:
    """Raise ``ValueError`` naming the argument :func:`make_rms_norm` refuses, if any."""
    if not isinstance(dtype, str) or dtype not in WIDEN_CONVERTS:
        raise ValueError(f"dtype: expected one of {sorted(WIDEN_CONVERTS)}, found {dtype!r}")
    if not is_int(hidden) or not 0 < hidden <= MAX_HIDDEN or hidden % ROW_STEP:
        raise ValueError(f"hidden: expected a static multiple of {ROW_STEP} (32 lanes x one 16-byte vector) "
                         f"up to {MAX_HIDDEN} (a lane keeps its part of the row in registers), found {hidden!r}")
    if not is_extent(rows):
        raise ValueError(f"rows: expected a positive int or an int32 run-time extent (T.dynamic), found {rows!r}")
    if is_int(rows) and rows * hidden > MAX_ELEMENTS:
        raise ValueError(f"rows x hidden = {rows * hidden}: {ELEMENTS_MESSAGE}")
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not (math.isfinite(eps) and 0 <= eps <= F32_MAX):
        raise ValueError(f"eps: expected a number in [0, {F32_MAX:.7g}] (a float32 constant), found {eps!r}")


def _make_row(hidden: int, dtype: str, eps: float):
    """The macro ``normalize(x, w_words, lane)``: a lane's packed words ``x`` ``(chunks, 4, 1)``
    of one row, normalized and multiplied by the weight in place."""
    chunks = hidden // ROW_STEP
    unpack, pack = make_unpack_pairs(dtype, VECTOR), make_pack_pairs(dtype, VECTOR)

    @T.macro
    def normalize(x, w_words, lane):
        v = T.alloc_local((VECTOR,), "float32")
        ss = T.alloc_local((1, 1), "float32")
        ss[0, 0] = T.float32(0)
        for i in T.unroll(chunks):
            unpack(v, x.sub[i, :, :])
            for e in T.unroll(VECTOR):
                ss[0, 0] = ss[0, 0] + v[e] * v[e]
        T.cuda.tile.reduce_lanes(T.ptx["add.f32"], ss, lanes=32)
        ss[0, 0] = T.rsqrt(ss[0, 0] * T.float32(1.0 / hidden) + T.float32(eps))
        w = T.alloc_local((4, 1), "uint32")
        g = T.alloc_local((VECTOR,), "float32")
        for i in T.unroll(chunks):  # widened again: the packed row is half the registers
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], w.view(4), w_words.sub[i, lane, :])
            unpack(g, w)
            unpack(v, x.sub[i, :, :])
            for e in T.unroll(VECTOR):
                v[e] = v[e] * ss[0, 0] * g[e]
            pack(x.sub[i, :, :].view(4), v)

    return normalize


def make_rms_norm(rows, hidden: int, dtype: str = "bfloat16", eps: float = 1e-5):
    """RMSNorm of each row: a ``T.function`` ``rms_norm(X, W, Y)`` to pass to
    :func:`tvm_tirx.compile` (any CUDA arch from sm_80).

    Parameters
    ----------
    rows : int or tvm.tirx.Var
        Rows of X and Y: a positive int, or an int32 run-time extent (``T.dynamic("M")``:
        one compiled kernel serves every row count).
    hidden : int
        Elements per row (the normalized axis): a multiple of 256, at most 4096.
    dtype : str
        ``"bfloat16"`` or ``"float16"``: X, W and Y; the arithmetic is f32.
    eps : float
        Added to the mean square before the reciprocal square root.

    Returns
    -------
    tvm.tirx.PrimFunc
        ``rms_norm(X (rows, hidden), W (hidden,), Y (rows, hidden))``, every tensor
        contiguous and 16-byte aligned; one warp per row, 4 rows per CTA.  With run-time
        rows the host refuses more than 2**31 - 1 elements before the launch.

    Raises
    ------
    ValueError
        A dtype, ``hidden``, ``rows`` or ``eps`` it refuses (:func:`check_rms_norm`).
    """
    check_rms_norm(rows, hidden, dtype, eps)
    rows, hidden = (int(rows) if is_int(rows) else rows), int(hidden)
    chunks, normalize = hidden // ROW_STEP, _make_row(hidden, dtype, float(eps))
    launch = T.cuda.LaunchConfig(grid=T.ceildiv(rows, WARPS), block=32 * WARPS)
    elements = T.Cast("int64", rows) * hidden
    run_time = not is_int(rows)

    @T.function
    def rms_norm(X: T.Tensor((rows, hidden), dtype, align=16), W: T.Tensor((hidden,), dtype, align=16),
                 Y: T.Tensor((rows, hidden), dtype, align=16)):
        if run_time:
            assert elements <= T.int64(MAX_ELEMENTS), ("ValueError", [ELEMENTS_MESSAGE])
        T.device_entry(launch=launch)
        lane = T.cuda.lane_id()
        row = T.cuda.block_idx("x") * WARPS + T.cuda.warp_id()
        x = T.alloc_local((chunks, 4, 1), "uint32")
        if row < rows:
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], x.view(chunks, 4), X.view("uint32").view(rows, chunks, 32, 4).sub[row, :, lane, :])
            normalize(x, W.view("uint32").view(chunks, 32, 4), lane)
            T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Y.view("uint32").view(rows, chunks, 32, 4).sub[row, :, lane, :], x.view(chunks, 4))

    return rms_norm
