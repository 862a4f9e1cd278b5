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
    (int32 expressions), its thread index ``tid`` and its consumer warpgroup ``c``."""

    tm: object
    tn: object
    tid: object
    c: object


class Workspace(NamedTuple):
    """The split-K reduction's memory: ``partial`` (``Partial (m, n)`` float32, global),
    ``counters`` (``Counters``, uint32, global) and ``slot`` (a ``(1,)`` uint32 shared
    buffer that publishes the count to the CTA's consumer threads)."""

    partial: object
    counters: object
    slot: object


def element(cfg: SmallMConfig, b, h, e, at: Place):
    """Where register ``4 b + 2 h + e`` of consumer ``c``'s accumulators lies in C: the
    wgmma fragment map (PTX ISA 9.7.15.5.1.1) gives its row of W (C's column) and its
    column of the tile (C's row).  Returns ``(row, col)`` of C, int32."""
    col = accumulator_row(at.tn * ROWS_W + at.c * WG_M, at.tid, h)
    row = accumulator_col(at.tm * cfg.block_m, at.tid, b, e)
    return row, col


def _make_walk(cfg: SmallMConfig, step):
    """The macro ``walk(tensor, values, at)`` (``at`` a :class:`Place`): ``step(tensor, value, row, col)``
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
                        step(tensor, values.sub[b, h, e, :], T.Cast("int64", row), col)

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
    def store_one(C, value, row, col):
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


@T.macro
def _add_one(partial, value, row, col):
    """``Partial[row, col] += value`` (``red.global.add.f32``)."""
    T.cuda.tile.apply(T.ptx["red.global.add.f32"], partial.sub[row, col : col + 1], value)


@T.macro
def _take_one(partial, value, row, col):
    """``value = Partial[row, col]`` (``ld.relaxed.gpu``), then ``Partial[row, col] = 0``."""
    T.cuda.tile.apply(T.ptx["ld.relaxed.gpu.global.f32"], value, partial.sub[row, col : col + 1])
    T.cuda.tile.apply(T.ptx["st.global.f32"], partial.sub[row, col : col + 1], T.float32(0))


def make_reduce(cfg: SmallMConfig):
    """The macro ``reduce(work, C, acc, words, got, at)`` (``work`` a :class:`Workspace`,
    ``at`` a :class:`Place`, ``got`` a ``(1,)`` uint32 register array): the split-K
    reduction of the module docstring.  Named barrier 1 joins the two consumer
    warpgroups (256 threads); thread 128 counts the CTA and publishes the count it found
    in the shared ``slot``."""
    splits, bm, m = cfg.splits, cfg.block_m, cfg.m
    add_partial, take_sum = _make_walk(cfg, _add_one), _make_walk(cfg, _take_one)
    store = make_store(cfg)
    consumers = CONSUMERS * 128

    @T.macro
    def reduce(work, C, acc, words, got, at):
        add_partial(work.partial, acc.local().view(bm // 8, 2, 2, 1), at)
        T.ptx["fence.acq_rel.gpu"]()  # this thread's additions, visible at GPU scope
        T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.uint32(1), count=T.uint32(consumers))
        if at.tid == 128:
            if at.tm * bm < m:  # always: tm < ceil(m / block_m)
                T.ptx["fence.acq_rel.gpu"]()  # release: the CTA's additions (the barrier's) before the count
                # atom.inc wraps: the last count (splits - 1) sets the counter back to 0 (PTX ISA,
                # atom: .inc gives old >= b ? 0 : old + 1), for the next launch
                T.cuda.tile.apply(T.ptx["atom.global.inc.u32"], got,
                                  work.counters.sub[T.Cast("int64", at.tm * bm), at.tn : at.tn + 1],
                                  T.uint32(splits - 1))
                T.ptx["fence.acq_rel.gpu"]()  # acquire: the counted CTAs' additions before the reads
                work.slot[0] = got[0]
        T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.uint32(1), count=T.uint32(consumers))
        if work.slot[0] == T.uint32(splits - 1):  # the last CTA of the tile: every partial is in
            T.ptx["fence.acq_rel.gpu"]()
            take_sum(work.partial, acc.local().view(bm // 8, 2, 2, 1), at)
            store(C, acc, words, at)

    return reduce
