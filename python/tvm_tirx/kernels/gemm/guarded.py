"""The guarded epilogue: each thread stores its accumulators into C one register (pair) at
a time, under ``if row < m and col + atom <= columns``.

It serves the tiles that do not cover C exactly: float32 output on any shape, and bf16
output whose rows the TMA cannot store (``n * 2`` bytes not a multiple of 16).  The tile
checker's bounds rule proves each store inside C from its guard, for a run-time ``m`` too
(and refuses the store without it, or with a row guard one row too loose).
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm.script import tirx as T

from ...tile.fragments import accumulator_row
from ..pairs import PAIR_CONVERTS, make_pack_pairs
from .config import BM, WG_M, GemmConfig

__all__ = ["StorePlan", "store_plan", "bound_guard", "make_store_guarded"]


@dataclass(frozen=True)
class StorePlan:
    """How the guarded epilogue stores a thread's accumulators.

    Each register pair ``(j, h)`` (columns ``8 j + 2 t + {0, 1}`` of row half ``h``; PTX ISA
    9.7.15.5.1.1) becomes ``per_pair`` stores of ``atom`` elements of C seen as
    ``view_dtype``, one element of which spans ``columns_per_element`` columns of C.
    """

    store: str  # the PTX store
    view_dtype: str  # C is seen as this type (uint32: bf16 pairs)
    atom: int  # elements of the view per store
    per_pair: int  # stores per register pair
    columns_per_element: int
    convert: str | None  # the conversion of the fp32 accumulators first, if any


def store_plan(cfg: GemmConfig) -> StorePlan:
    """The plan for ``cfg``: float32 pairs (``st.global.v2.f32``) or single elements when
    ``n`` is odd; bf16 pairs (``cvt.rn.bf16x2.f32``, then ``st.global.b32``) or, when
    ``n`` is odd, the same pairs stored one half at a time (``st.global.b16``).  Pairs
    need an even ``n``: a pair's address is then a multiple of its size.

    The odd case converts pairs too, not single values with ``cvt.rn.bf16.f32``: ptxas
    13.0 fuses two of those into one ``F2FP.BF16.F32.PACK_AB`` and schedules it above the
    ``WARPGROUP.DEPBAR`` of the ``wgmma.wait_group 0`` before it, so the epilogue read the
    accumulators before the last wgmma batch had landed (found on the H200: n = 4095 lost
    the last K tile's products; the SASS showed the wait after the conversions)."""
    pairs = cfg.fp32_vector == 2  # a static even n
    if cfg.out_dtype == "float32":
        if pairs:
            return StorePlan("st.global.v2.f32", "float32", 2, 1, 1, None)
        return StorePlan("st.global.f32", "float32", 1, 2, 1, None)
    if pairs:
        return StorePlan("st.global.b32", "uint32", 1, 1, 2, PAIR_CONVERTS["bfloat16"])
    return StorePlan("st.global.b16", "bfloat16", 1, 2, 1, PAIR_CONVERTS["bfloat16"])


def bound_guard(row, col, m, atom: int, columns: int):
    """The condition under which a thread stores ``atom`` elements at ``(row, col)`` of C
    (seen with ``columns`` columns): ``row < m and col + atom <= columns``."""
    return T.And(row < m, col + atom <= columns)


def _as(tensor, dtype: str):
    return tensor if str(tensor.dtype) == dtype else tensor.view(dtype)


def make_store_guarded(cfg: GemmConfig):
    """The macro ``store_guarded(C, acc, words, bm, bn, tid, c)`` of ``cfg``: consumer ``c``
    stores its 64 rows of output tile ``(bm, bn)`` from the fp32 accumulators ``acc``
    (converted first into ``words`` (bf16 pairs) or a bf16 register array, by the
    :func:`store_plan`), each store under its guard."""
    plan = store_plan(cfg)
    bn_cols = cfg.out_block_n
    pack_pairs = make_pack_pairs("bfloat16", bn_cols // 2)
    packs = plan.convert is not None
    guard = bound_guard  # read when the kernel is made (a test swaps it for a looser one)
    m, per, atom, cols = cfg.m, plan.per_pair, plan.atom, plan.columns_per_element
    columns = cfg.n // cols  # of C seen as plan.view_dtype

    @T.macro
    def store_guarded(C, acc, words, bm, bn, tid, c):
        if packs:  # register 4 j + 2 h + e (tile/fragments.py) -> word 2 j + h, e = 1 high
            pack_pairs(words.local(), acc.local())
            out = _as(words.local(), plan.view_dtype).view(bn_cols // 8, 2, per, atom)  # bf16 4 j + 2 h + e
        else:
            out = acc.local().view(bn_cols // 8, 2, per, atom)
        for j in T.unroll(bn_cols // 8):
            for h in T.unroll(2):
                for e in T.unroll(per):
                    row = accumulator_row(bm * BM + c * WG_M, tid, h)
                    col = bn * (bn_cols // cols) + j * (8 // cols) + tid % 4 * (2 // cols) + e * atom
                    if guard(row, col, m, atom, columns):  # the offset in int64: m * n may pass 2**31
                        # C seen as plan.view_dtype, written in place: a name bound to C
                        # itself would rename the kernel's parameter C
                        T.cuda.tile.apply(T.ptx[plan.store],
                                          _as(C, plan.view_dtype).sub[T.Cast("int64", row), col : col + atom],
                                          out.sub[j, h, e, :])

    return store_guarded
