"""The small-M kernel's epilogues (:mod:`.small_m`): each consumer thread's accumulators into C,
directly (one split) or through the split-K reduction of the CTAs that share a tile.

A consumer thread's accumulator register ``4 b + 2 h + e`` holds, by the wgmma fragment map
(PTX ISA 9.7.15.5.1.1), one element of ``C^T``: :func:`element` gives where it lies in C.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from tvm.script import tirx as T

from ...tile.fragments import accumulator_col, accumulator_row
from ..pairs import make_pack_pairs
from .config import CONSUMERS, WG_M

if TYPE_CHECKING:  # the config's module imports this one
    from .small_m import SmallMConfig

__all__ = ["Place", "Workspace", "element", "make_store", "make_reduce"]

ROWS_W = CONSUMERS * WG_M  # rows of W (columns of C) per CTA tile
#: the element stores of C per output dtype (C^T's elements are not contiguous in C)
_STORE = {"bfloat16": "st.global.b16", "float32": "st.global.f32"}


class Place(NamedTuple):
    """Where a consumer thread works: its CTA's row tile ``tm`` and column tile ``tn`` of C
    (int32 expressions), its thread index ``tid``, its consumer warpgroup ``c`` and its
    CTA's split of K (``split``, 0 with one split)."""

    tm: object
    tn: object
    tid: object
    c: object
    split: object = 0


class Workspace(NamedTuple):
    """The split-K reduction's memory: ``partial`` (``Partial (m, splits * n)`` float32,
    global: split ``s``'s slab is columns ``s n .. s n + n - 1``), ``counters``
    (``Counters``, uint32, global), ``slot`` (a ``(1,)`` uint32 shared buffer that
    publishes the count to the CTA's consumer threads) and ``slab`` (a ``(block_m / 2,)``
    float32 register array: a thread's elements of one slab as they are read back)."""

    partial: object
    counters: object
    slot: object
    slab: object


def element(cfg: SmallMConfig, b, h, e, at: Place):
    """Where register ``4 b + 2 h + e`` of consumer ``c``'s accumulators lies in C: the
    wgmma fragment map (PTX ISA 9.7.15.5.1.1) gives its row of W (C's column) and its
    column of the tile (C's row).  Returns ``(row, col)`` of C, int32."""
    col = accumulator_row(at.tn * ROWS_W + at.c * WG_M, at.tid, h)
    row = accumulator_col(at.tm * cfg.block_m, at.tid, b, e)
    return row, col


def _make_walk(cfg: SmallMConfig, step):
    """The macro ``walk(tensor, values, at)`` (``at`` a :class:`Place`): ``step(tensor, value, row, col, at)``
    for each of the thread's accumulators inside C (``row < m and col < n``), ``value`` its
    register of ``values`` (a ``(block_m / 8, 2, 2, 1)`` view: register ``4 b + 2 h + e``)
    and ``row`` an int64 index."""
    bm, m, n = cfg.block_m, cfg.m, cfg.n

    @T.macro
    def walk(tensor, values, at):
        for b in T.unroll(bm // 8):
            for h in T.unroll(2):
                for e in T.unroll(2):
                    row, col = element(cfg, b, h, e, at)
                    if T.And(row < m, col < n):
                        step(tensor, values.sub[b, h, e, :], T.Cast("int64", row), col, at)

    return walk


def make_store(cfg: SmallMConfig):
    """The macro ``store(C, acc, words, at)`` (``at`` a :class:`Place`): each thread stores its
    accumulators into C one element at a time (C^T's elements are not contiguous), each
    under ``row < m and col < n``; bf16 output is rounded in pairs first
    (``cvt.rn.bf16x2.f32``, as the GEMM's ``GuardedStore`` does,
    :mod:`tvm_tirx.kernels.parts.epilogue.stores`)."""
    bm, out = cfg.block_m, cfg.out_dtype
    pack_pairs = make_pack_pairs("bfloat16", bm // 2)
    packs = out == "bfloat16"

    @T.macro
    def store_one(C, value, row, col, at):  # pylint: disable=unused-argument
        T.cuda.tile.apply(T.ptx[_STORE[out]], C.sub[row, col : col + 1], value)

    walk = _make_walk(cfg, store_one)

    @T.macro
    def store(C, acc, words, at):
        if packs:
            pack_pairs(words.local(), acc.local())
            walk(C, words.local().view("bfloat16").view(bm // 8, 2, 2, 1), at)
        else:
            walk(C, acc.local().view(bm // 8, 2, 2, 1), at)

    return store


def _make_slab_step(n: int, reads: bool):
    """The step between a register and its element of split ``at.split``'s slab,
    ``Partial[row, split n + col]``: stores it (``st.global.f32``) or, with ``reads``,
    loads it (``ld.relaxed.gpu``: from L2, never a stale L1 line)."""

    @T.macro
    def slab_step(work, value, row, col, at):
        if reads:
            T.cuda.tile.apply(T.ptx["ld.relaxed.gpu.global.f32"], value,
                              work.partial.sub[row, at.split * n + col : at.split * n + col + 1])
        else:
            T.cuda.tile.apply(T.ptx["st.global.f32"], work.partial.sub[row, at.split * n + col : at.split * n + col + 1],
                              value)

    return slab_step


def make_reduce(cfg: SmallMConfig):
    """The macro ``reduce(work, C, acc, words, got, at)`` (``work`` a :class:`Workspace`,
    ``at`` a :class:`Place`, ``got`` a ``(1,)`` uint32 register array): the split-K
    reduction of the module docstring.  Each thread stores its partials into its split's
    slab of ``Partial``; named barrier 1 joins the two consumer warpgroups (256 threads);
    thread 128 counts the CTA and publishes the count it found in the shared ``slot``;
    the CTA that completes the count reads slab 0 into ``acc``, then adds each further slab
    in order (all of a slab's loads issued before its additions), and stores C."""
    splits, bm, m, n = cfg.splits, cfg.block_m, cfg.m, cfg.n
    put_slab, get_slab = _make_walk(cfg, _make_slab_step(n, False)), _make_walk(cfg, _make_slab_step(n, True))
    store = make_store(cfg)
    consumers, count = CONSUMERS * 128, bm // 2

    @T.macro
    def reduce(work, C, acc, words, got, at):
        put_slab(work, acc.local().view(bm // 8, 2, 2, 1), at)
        T.ptx["fence.acq_rel.gpu"]()  # this thread's stores, visible at GPU scope
        T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.uint32(1), count=T.uint32(consumers))
        if at.tid == 128:
            if at.tm * bm < m:  # always: tm < ceil(m / block_m)
                T.ptx["fence.acq_rel.gpu"]()  # release: the CTA's stores (the barrier's) before the count
                # atom.inc wraps: the last count (splits - 1) sets the counter back to 0 (PTX ISA,
                # atom: .inc gives old >= b ? 0 : old + 1), for the next launch
                T.cuda.tile.apply(T.ptx["atom.global.inc.u32"], got,
                                  work.counters.sub[T.Cast("int64", at.tm * bm), at.tn : at.tn + 1],
                                  T.uint32(splits - 1))
                T.ptx["fence.acq_rel.gpu"]()  # acquire: the counted CTAs' stores before the reads
                work.slot[0] = got[0]
        T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.uint32(1), count=T.uint32(consumers))
        if work.slot[0] == T.uint32(splits - 1):  # the last CTA of the tile: every slab is in
            T.ptx["fence.acq_rel.gpu"]()
            get_slab(work, acc.local().view(bm // 8, 2, 2, 1), Place(at.tm, at.tn, at.tid, at.c, 0))
            # elements outside C read nothing: their registers add 0 and are never stored
            T.cuda.tile.apply(T.ptx["mov.b32"], work.slab.view("uint32").view(count, 1), T.uint32(0))
            for j in T.unroll(1, splits):
                get_slab(work, work.slab.view(bm // 8, 2, 2, 1), Place(at.tm, at.tn, at.tid, at.c, j))
                T.cuda.tile.apply(T.ptx["add.rn.f32"], acc.local().view(count, 1), acc.local().view(count, 1),
                                  work.slab.view(count, 1))
            store(C, acc, words, at)

    return reduce
