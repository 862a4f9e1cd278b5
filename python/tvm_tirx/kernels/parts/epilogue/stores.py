"""The store stages of an epilogue chain: a consumer warpgroup's ``(64, out_block_n)`` fp32
output registers into C.

* :class:`TmaStore` -- bf16 output whose rows are a multiple of 16 bytes: registers to a
  swizzled shared tile, then one TMA store per 64-column box (clipped at C's edge);
* :class:`ExactStore` -- float32 output on tiles that cover C exactly: one warpgroup-wide
  ``st.global.v2.f32`` call over the fragment map, no guards;
* :class:`GuardedStore` -- any other tile: each thread stores its registers one (pair)
  at a time under ``if row < m and col + atom <= columns``.  The tile checker's bounds
  rule proves each store inside C from its guard, for a run-time ``m`` too (and refuses
  the store without it, or with a guard one row too loose).
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm.script import tirx as T

from ....tile.fragments import accumulator_registers, accumulator_row, accumulator_tile
from ...pairs import PAIR_CONVERTS, make_pack_pairs
from .base import Geometry, Store

__all__ = ["TMA_STORE", "TmaStore", "ExactStore", "GuardedStore", "StorePlan", "store_plan", "bound_guard",
           "stage_tile", "store_bf16_tile"]

TMA_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"
TMA_STRIDE = 16  # bytes: every global stride of a tensor map but the innermost (PTX ISA 5.5.5)


@T.macro
def stage_tile(out, words, tid, bar):
    """Write a consumer warpgroup's packed 16-bit words into its swizzled shared tile for
    one thread's TMA store: ``accumulator_tile(out, words, "wgmma")`` (``out`` seen as
    ``(64 rows, boxes, 32 words)``, ``words`` the ``(64, N / 2)`` b32 registers under the
    wgmma fragment map) by ``st.shared.b32``.  Thread 0 of the warpgroup (``tid % 128 ==
    0``) first waits until its previous bulk store has read the tile
    (``cp.async.bulk.wait_group.read 0``); named barrier ``bar`` (a uint32, 128 threads,
    PTX ISA 9.7.13.1) publishes that wait before the writes and the writes, after
    ``fence.proxy.async.shared::cta`` (the TMA reads through the async proxy, PTX ISA
    8.6), to the thread that then issues the store."""
    if tid % 128 == 0:
        T.ptx["cp.async.bulk.wait_group.read"](0)
    T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=bar, count=T.uint32(128))
    T.cuda.tile.apply(T.ptx["st.shared.b32"], *accumulator_tile(out, words, "wgmma"), scope="warpgroup")
    T.ptx["fence.proxy.async.shared::cta"]()
    T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=bar, count=T.uint32(128))


@T.macro
def store_bf16_tile(acc, words, out, C, row0, col0, tid, c):
    """Round a consumer's (64, N) fp32 registers ``acc`` to bf16 pairs (``words``), write
    them into its swizzled shared tile ``out`` (N / 64 boxes of 64 x 32 words) and
    TMA-store the boxes to ``C[row0 : row0 + 64, col0 : col0 + N]`` (the TMA skips what
    lies past C's edge).  The store issued for the previous tile must have read ``out``
    first (``wait_group.read 0``); named barrier ``1 + c`` joins the warpgroup's 128
    threads (the named-barrier family checks, when lowering, that exactly those 128
    threads use barrier ``1 + c``).  ``accumulator_registers`` / ``accumulator_tile`` view
    the registers and the tile (as ``(rows, boxes, words)``) by the wgmma fragment map."""
    rows = accumulator_registers(acc, "wgmma")  # (warp, lane, j, h, e): columns 8 j + 2 t + e
    T.cuda.tile.apply(T.ptx["cvt.rn.bf16x2.f32"], accumulator_registers(words, "wgmma"),
                      rows.sub[:, :, :, :, 1:2], rows.sub[:, :, :, :, 0:1], scope="warpgroup")
    stage_tile(out.permute(1, 0, 2), words, tid, T.uint32(1 + c))
    if tid % 128 == 0:
        T.cuda.tile.apply(T.ptx[TMA_STORE], C.view("uint32"), out, coords=(row0, col0 // 2), coord_steps=((0, 32),),
                          swizzle=3)
        T.ptx["cp.async.bulk.commit_group"]()


@dataclass(frozen=True)
class TmaStore(Store):
    """bf16 output through shared memory and TMA stores: the macro ``store(C, regs, so, at)``
    stores consumer ``at.c``'s rows through ``so.sub[c]`` (``so``: ``(2, out_block_n / 64,
    64, 32)`` uint32, 128-byte swizzled, 1024-byte aligned shared memory).  A consumer with
    two 64-row blocks (a 256-row tile) stores them one after the other through its one
    slot: :func:`stage_tile` waits until the previous block's bulk store has read it.

    Raises
    ------
    ValueError
        (from :meth:`make`) C is not bf16 with a static ``n`` whose rows (``2 n`` bytes)
        are a multiple of 16 bytes (the TMA's stride rule).
    """

    def make(self, geometry: Geometry):
        g = geometry
        if g.out_dtype != "bfloat16" or not isinstance(g.n, int) or g.n * 2 % TMA_STRIDE:
            raise ValueError(f"TmaStore: needs bfloat16 output with rows of a multiple of {TMA_STRIDE} bytes "
                             f"(a static n, a multiple of 8), found {g.out_dtype} with n={g.n}")
        out_bn = g.out_block_n

        @T.macro
        def tma_store(C, regs, so, at):
            store_bf16_tile(regs.out, regs.words, so.sub[at.c], C, g.row0(at), at.bn * out_bn, at.tid, at.c)

        return tma_store

    def drain(self, geometry: Geometry):
        """The macro ``drain(tid)``: thread 0 of the warpgroup waits until its last TMA
        store has read the shared tile (``cp.async.bulk.wait_group.read 0``)."""

        @T.macro
        def drain(tid):
            if tid % 128 == 0:
                T.ptx["cp.async.bulk.wait_group.read"](0)  # the last store has read its tile

        return drain


@dataclass(frozen=True)
class ExactStore(Store):
    """float32 output on tiles that cover C exactly: the macro ``store(C, regs, so, at)``
    (``so`` unused) is one ``st.global.v2.f32`` tile call over the warpgroup's registers.

    Raises
    ------
    ValueError
        (from :meth:`make`) C is not float32, or its (static) size is not a whole number
        of tiles.
    """

    def make(self, geometry: Geometry):
        g = geometry
        m, n, rows, out_bn = g.m, g.n, g.rows, g.out_block_n
        if g.out_dtype != "float32" or not isinstance(m, int) or m % g.tile_m or n % out_bn:
            raise ValueError(f"ExactStore: needs float32 output whose static (m, n) is a whole number of "
                             f"{g.tile_m} x {out_bn} tiles, found {g.out_dtype} ({m}, {n})")
        per_tile = g.tile_m // rows  # 64-row blocks per tile

        @T.macro
        def store_exact(C, regs, so, at):  # pylint: disable=unused-argument
            c_tile = C.view(m // rows, rows, n // out_bn, out_bn).sub[at.bm * per_tile + g.block(at), :, at.bn, :]
            T.cuda.tile.apply(T.ptx["st.global.v2.f32"], *accumulator_tile(c_tile, regs.out, "wgmma"),
                              scope="warpgroup")

        return store_exact


@dataclass(frozen=True)
class StorePlan:
    """How :class:`GuardedStore` stores a thread's registers.

    Each register pair ``(j, h)`` (columns ``8 j + 2 t + {0, 1}`` of row half ``h``; PTX ISA
    9.7.15.5.1.1) becomes ``per_pair`` stores of ``atom`` elements of C seen as
    ``view_dtype``, one element of which spans ``columns_per_element`` columns of C; bf16
    output is converted first by ``convert`` (None: stored as float32).
    """

    store: str  # the PTX store
    view_dtype: str  # C is seen as this type (uint32: bf16 pairs)
    atom: int  # elements of the view per store
    per_pair: int  # stores per register pair
    columns_per_element: int
    convert: str | None  # the conversion of the fp32 accumulators first, if any


def store_plan(out_dtype: str, n) -> StorePlan:
    """The :class:`StorePlan` for C of ``out_dtype`` (``"float32"``, else bf16) with ``n``
    columns (an int, or a run-time extent: then as for an odd ``n``): float32 pairs (``st.global.v2.f32``) or single elements when ``n`` is odd (or not a
    static int); bf16 pairs (``cvt.rn.bf16x2.f32``, then ``st.global.b32``) or, when ``n``
    is odd, the same pairs stored one half at a time (``st.global.b16``).  Pairs need an
    even ``n``: a pair's address is then a multiple of its size.

    The odd case converts pairs too, not single values with ``cvt.rn.bf16.f32``: ptxas
    13.0 fuses two of those into one ``F2FP.BF16.F32.PACK_AB`` and schedules it above the
    ``WARPGROUP.DEPBAR`` of the ``wgmma.wait_group 0`` before it, so the epilogue read the
    accumulators before the last wgmma batch had landed (found on the H200: n = 4095 lost
    the last K tile's products; the SASS showed the wait after the conversions)."""
    pairs = isinstance(n, int) and n % 2 == 0
    if out_dtype == "float32":
        if pairs:
            return StorePlan("st.global.v2.f32", "float32", 2, 1, 1, None)
        return StorePlan("st.global.f32", "float32", 1, 2, 1, None)
    if pairs:
        return StorePlan("st.global.b32", "uint32", 1, 1, 2, PAIR_CONVERTS["bfloat16"])
    return StorePlan("st.global.b16", "bfloat16", 1, 2, 1, PAIR_CONVERTS["bfloat16"])


def bound_guard(row, col, m, atom: int, columns: int):
    """The condition under which a thread stores ``atom`` elements at ``(row, col)`` of C
    (seen with ``columns`` columns): ``row < m and col + atom <= columns``.

    Parameters
    ----------
    row, col : PrimExpr
        int32 row of C and column of C's view (elements of the plan's ``view_dtype``).
    m : int or PrimExpr
        Rows of C.
    atom : int
        Elements the store writes.
    columns : int
        Columns of C's view.

    Returns
    -------
    PrimExpr
        The boolean condition (``T.And``).
    """
    return T.And(row < m, col + atom <= columns)


def _as(tensor, dtype: str):
    return tensor if str(tensor.dtype) == dtype else tensor.view(dtype)


@dataclass(frozen=True)
class GuardedStore(Store):
    """Per-thread stores, each under its :func:`bound_guard`, by the :func:`store_plan`: the
    macro ``store(C, regs, so, at)`` (``so`` unused) converts ``regs.out`` into
    ``regs.words`` first for bf16 output.  Serves any tile (C's edge, a run-time ``m``).

    ``predicated``: each store carries its guard as ``pred=`` (PTX ``@p``) instead of
    sitting in an ``if``; fewer instructions (no branch and reconvergence per store), but
    ptxas keeps more live values: the 256 x 160 tile's two accumulator sets then spill 36
    bytes (ptxas 13.0), so only the split-K kernel's last CTA takes it."""

    predicated: bool = False

    def make(self, geometry: Geometry):
        g = geometry
        plan = store_plan(g.out_dtype, g.n)
        bn_cols = g.out_block_n
        pack_pairs = make_pack_pairs("bfloat16", bn_cols // 2)
        packs = plan.convert is not None
        guard = bound_guard  # read when the kernel is made (a test swaps it for a looser one)
        m, per, atom, cols = g.m, plan.per_pair, plan.atom, plan.columns_per_element
        columns = g.n // cols  # of C seen as plan.view_dtype
        predicated = self.predicated

        @T.macro
        def store_one(C, value, row, col):
            # C seen as plan.view_dtype, written in place: a name bound to C itself would
            # rename the kernel's parameter C; the offset in int64: m * n may pass 2**31
            if predicated:
                T.cuda.tile.apply(T.ptx[plan.store], _as(C, plan.view_dtype).sub[T.Cast("int64", row), col : col + atom],
                                  value, pred=guard(row, col, m, atom, columns))
            elif guard(row, col, m, atom, columns):
                T.cuda.tile.apply(T.ptx[plan.store], _as(C, plan.view_dtype).sub[T.Cast("int64", row), col : col + atom],
                                  value)

        @T.macro
        def store_guarded(C, regs, so, at):  # pylint: disable=unused-argument
            if packs:  # register 4 j + 2 h + e (tile/fragments.py) -> word 2 j + h, e = 1 high
                pack_pairs(regs.words.local(), regs.out.local())
                out = _as(regs.words.local(), plan.view_dtype).view(bn_cols // 8, 2, per, atom)  # bf16 4 j + 2 h + e
            else:
                out = regs.out.local().view(bn_cols // 8, 2, per, atom)
            for j in T.unroll(bn_cols // 8):
                for h in T.unroll(2):
                    for e in T.unroll(per):
                        row = accumulator_row(g.row0(at), at.tid, h)
                        col = at.bn * (bn_cols // cols) + j * (8 // cols) + at.tid % 4 * (2 // cols) + e * atom
                        store_one(C, out.sub[j, h, e, :], row, col)

        return store_guarded
