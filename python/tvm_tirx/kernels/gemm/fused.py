"""The fused epilogue steps: ``C = activation(scale * A B^T + bias)`` in a consumer's registers.

They run on the fp32 accumulators before any of the epilogues (:mod:`.epilogue`) stores
them, so every output path (TMA stores, guarded stores, float32 stores) gets them.  A
consumer thread holds, of its warpgroup's ``(64, block_n)`` accumulators, register ``r =
4 j + 2 h + e`` at column ``8 j + 2 t + e`` of the tile (lane ``4 g + t``; PTX ISA
9.7.15.5.1.1), so the bias of register ``r`` is ``Bias[bn * block_n + 8 j + 2 t + e]``,
read clamped to ``n - 1``: a column past C's edge reads the last bias, and its result is
never stored.

A **gated** GEMM (``gated=True``: GLU, SwiGLU with ``"silu"``, GeGLU with ``"gelu_tanh"``)
multiplies by B rows that interleave gate and up rows in groups of eight (``GLU_ROWS``), so
a thread's registers ``4 j + q`` (``q < 4``) hold a gate column for even ``j`` and its up
column for ``j + 1``; output register ``4 i + q`` of the ``(64, block_n / 2)`` result is
``activation(gate) * up`` of registers ``8 i + q`` and ``8 i + 4 + q`` -- the standard
fragment map of a ``block_n / 2``-column accumulator, which every epilogue stores as is.

A **residual** (``residual=True``: ``C = ... + Residual``, a ``(m, n)`` tensor of C's
dtype) is added last, in float32: output register ``4 i + 2 h + e`` reads ``Residual[row,
col]`` at the fragment's row ``16 w + 8 h + g`` and column ``8 i + 2 t + e`` of the tile,
clamped to ``(m - 1, n - 1)`` like the bias (what lies past C's edge is never stored).
With bf16 output and an even ``n`` the pairs ``(row, 8 i + 2 t + {0, 1})`` are read as one
b32 word each (``ld.global.b32`` into the packed registers the epilogue packs into later),
issued before the consumer's last ``wgmma.wait_group`` so that their latency hides under
the tile's last products (:func:`make_residual_prefetch`), and widened exactly when added;
otherwise each element is read as it is added.

Activations (PTX ISA 9.7.4 and 9.7.3, the ``.approx`` forms):

* ``"relu"``: ``max(x, 0)``;
* ``"silu"``: ``x * sigmoid(x) = x * rcp(1 + ex2(-x * log2(e)))`` (``ex2.approx.ftz.f32``,
  ``rcp.approx.ftz.f32``: about 2 ulp; ``x`` very negative gives ``ex2 = inf``, ``rcp = 0``,
  ``-0``);
* ``"gelu_tanh"``: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, torch's
  ``gelu(approximate="tanh")``, with ``tanh.approx.f32`` (absolute error about 2^-11: use it
  for bf16 output; float32 output carries that error).
"""

from __future__ import annotations

import math

from tvm.script import tirx as T

from ...tile.fragments import accumulator_col, accumulator_row
from ..pairs import make_unpack_pairs
from .config import BM, WG_M, GemmConfig

__all__ = ["make_fused", "make_residual_prefetch", "residual_as_pairs"]

LOG2E = 1.0 / math.log(2.0)
GELU_C0 = math.sqrt(2.0 / math.pi)
GELU_C1 = GELU_C0 * 0.044715


def _make_activation(name: str | None, regs: int):
    """The macro ``activate(x, tmp)`` of ``name`` over a thread's ``regs`` f32 registers
    ``x`` (a ``.local()`` view), with ``tmp`` ``regs`` scratch registers; None for None."""
    if name is None:
        return None

    @T.macro
    def relu(x, tmp):
        for r in T.unroll(regs):
            x[r] = T.max(x[r], T.float32(0.0))

    @T.macro
    def silu(x, tmp):
        for r in T.unroll(regs):
            tmp[r] = x[r] * T.float32(-LOG2E)
        T.cuda.tile.apply(T.ptx["ex2.approx.ftz.f32"], tmp.view(regs, 1), tmp.view(regs, 1))
        for r in T.unroll(regs):
            tmp[r] = tmp[r] + T.float32(1.0)
        T.cuda.tile.apply(T.ptx["rcp.approx.ftz.f32"], tmp.view(regs, 1), tmp.view(regs, 1))
        for r in T.unroll(regs):
            x[r] = x[r] * tmp[r]

    @T.macro
    def gelu_tanh(x, tmp):
        for r in T.unroll(regs):
            tmp[r] = x[r] * (T.float32(GELU_C0) + T.float32(GELU_C1) * x[r] * x[r])
        T.cuda.tile.apply(T.ptx["tanh.approx.f32"], tmp.view(regs, 1), tmp.view(regs, 1))
        for r in T.unroll(regs):
            x[r] = T.float32(0.5) * x[r] * (T.float32(1.0) + tmp[r])

    return {"relu": relu, "silu": silu, "gelu_tanh": gelu_tanh}[name]


def make_fused(cfg: GemmConfig):
    """The macro ``fuse(acc, out, bias, residual, words, tmp, bm, bn, tid, c)`` of ``cfg``, or None
    when ``cfg`` has neither a bias, an activation nor a residual and is not gated.

    ``acc`` is a consumer's ``(64, block_n)`` fp32 accumulator buffer, ``out`` the
    ``(64, out_block_n)`` buffer the epilogue stores (``acc`` itself unless gated),
    ``bias`` the ``Bias`` tensor (``(b_rows,)``, indexed like B's rows; None without one),
    ``residual`` the ``Residual`` tensor ``(m, n)`` (None without one), ``words`` the
    packed registers ``(64, out_block_n / 2)`` (holding the residual's pairs when
    :func:`make_residual_prefetch` loaded them), ``tmp``
    ``(out_block_n / 2,)`` f32 scratch registers, ``(bm, bn)`` the output tile, ``tid`` the
    thread index, ``c`` the consumer warpgroup (its 64 rows of the tile).
    """
    regs, block_n, rows, has_bias = cfg.block_n // 2, cfg.block_n, cfg.b_rows, cfg.bias is not None
    activate = _make_activation(cfg.activation, cfg.out_block_n // 2)
    gated = cfg.gated
    add_residual = _make_residual(cfg) if cfg.residual else None
    if not has_bias and activate is None and not gated and add_residual is None:
        return None

    @T.macro
    def fuse(acc, out, bias, residual, words, tmp, bm, bn, tid, c):
        x, y = acc.local(), out.local()
        if has_bias:
            for r in T.unroll(regs):
                col = accumulator_col(bn * block_n, tid, r // 4, r % 2)
                x[r] = x[r] + T.Cast("float32", bias[T.min(col, rows - 1)])
        if gated:  # output register 4 i + q <- gate 8 i + q; its up register is 8 i + 4 + q
            for r in T.unroll(regs // 2):
                y[r] = x[r // 4 * 8 + r % 4]
        if activate is not None:
            activate(y, tmp)
        if gated:
            for r in T.unroll(regs // 2):
                y[r] = y[r] * x[r // 4 * 8 + 4 + r % 4]
        if add_residual is not None:
            add_residual(y, residual, words, tmp, bm, bn, tid, c)

    return fuse


def residual_as_pairs(cfg: GemmConfig) -> bool:
    """Whether the residual is read as b32 pairs (bf16 output, an even ``n``): it must
    then be 4-byte aligned."""
    return cfg.out_dtype == "bfloat16" and isinstance(cfg.n, int) and cfg.n % 2 == 0


def make_residual_prefetch(cfg: GemmConfig):
    """The macro ``prefetch(words, residual, bm, bn, tid, c)``: consumer ``c``'s residual
    pairs of output tile ``(bm, bn)`` loaded into its packed registers ``words`` (word ``2 i
    + h``: row ``16 w + 8 h + g``, columns ``8 i + 2 t`` and ``+ 1``; one ``ld.global.b32``
    each, the row clamped to ``m - 1`` and the word to ``n / 2 - 1``); None unless the
    GEMM has a residual read that way (bf16 output, an even ``n``)."""
    if not cfg.residual or not residual_as_pairs(cfg):
        return None
    nwords, half_bn, m, half_n = cfg.out_block_n // 4, cfg.out_block_n // 2, cfg.m, cfg.n // 2

    @T.macro
    def prefetch(words, residual, bm, bn, tid, c):
        rw = residual.view("uint32")
        for r in T.unroll(nwords):
            row = T.min(accumulator_row(bm * BM + c * WG_M, tid, r % 2), m - 1)
            col = T.min(bn * half_bn + r // 2 * 4 + tid % 4, half_n - 1)
            T.cuda.tile.apply(T.ptx["ld.global.b32"], words.local().view(nwords, 1).sub[r, :],
                              rw.sub[T.Cast("int64", row), col : col + 1])

    return prefetch


def _make_residual(cfg: GemmConfig):
    """The macro ``add_residual(y, residual, words, tmp, bm, bn, tid, c)``: ``y[r] +=
    Residual[row, col]`` over a consumer thread's output registers -- from the pairs
    :func:`make_residual_prefetch` left in ``words`` (widened into ``tmp``), or else read
    element by element, the indices clamped into C."""
    regs, out_bn, m, n = cfg.out_block_n // 2, cfg.out_block_n, cfg.m, cfg.n
    unpack = make_unpack_pairs("bfloat16", regs)

    @T.macro
    def add_prefetched(y, residual, words, tmp, bm, bn, tid, c):
        unpack(tmp, words.local().view(regs // 2, 1))
        for r in T.unroll(regs):
            y[r] = y[r] + tmp[r]

    @T.macro
    def add_residual(y, residual, words, tmp, bm, bn, tid, c):
        for r in T.unroll(regs):
            row = T.min(accumulator_row(bm * BM + c * WG_M, tid, r // 2 % 2), m - 1)
            col = T.min(accumulator_col(bn * out_bn, tid, r // 4, r % 2), n - 1)
            y[r] = y[r] + T.Cast("float32", residual[T.Cast("int64", row), col])

    return add_prefetched if residual_as_pairs(cfg) else add_residual
