"""The small-M kernel's epilogues (:mod:`.small_m`): each consumer thread's accumulators into C,
directly (one split) or through the split-K reduction of the CTAs that share a tile
(:class:`~tvm_tirx.kernels.parts.split_k.SplitK`).

A consumer thread's accumulator register ``4 b + 2 h + e`` holds, by the wgmma fragment map
(PTX ISA 9.7.15.5.1.1), one element of ``C^T``: :func:`element` gives where it lies in C.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from tvm.script import tirx as T

from ...tile.fragments import accumulator_col, accumulator_row
from ..pairs import make_pack_pairs
from ..parts.split_k import SplitK, make_walk
from .config import CONSUMERS, WG_M

if TYPE_CHECKING:  # the config's module imports this one
    from .small_m import SmallMConfig

__all__ = ["Place", "element", "make_store", "make_reduce"]

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


def element(cfg: SmallMConfig, b, h, e, at: Place):
    """Where register ``4 b + 2 h + e`` of consumer ``c``'s accumulators lies in C: the
    wgmma fragment map (PTX ISA 9.7.15.5.1.1) gives its row of W (C's column) and its
    column of the tile (C's row).  Returns ``(row, col)`` of C, int32."""
    col = accumulator_row(at.tn * ROWS_W + at.c * WG_M, at.tid, h)
    row = accumulator_col(at.tm * cfg.block_m, at.tid, b, e)
    return row, col


def _make_walk(cfg: SmallMConfig, step):
    """:func:`~tvm_tirx.kernels.parts.split_k.make_walk` over the thread's ``block_m / 2``
    accumulators, placed by :func:`element`."""
    return make_walk(cfg.block_m // 8, cfg.m, cfg.n, lambda b, h, e, at: element(cfg, b, h, e, at), step)


def make_store(cfg: SmallMConfig):
    """The macro ``store(C, acc, words, at)`` (``at`` a :class:`Place`): each thread stores its
    accumulators into C one element at a time (C^T's elements are not contiguous), each
    predicated on ``row < m and col < n`` (``pred=``); bf16 output is rounded in pairs first
    (``cvt.rn.bf16x2.f32``, as the GEMM's ``GuardedStore`` does,
    :mod:`tvm_tirx.kernels.parts.epilogue.stores`)."""
    bm, out = cfg.block_m, cfg.out_dtype
    pack_pairs = make_pack_pairs("bfloat16", bm // 2)
    packs = out == "bfloat16"

    @T.macro
    def store_one(C, value, row, col, at, pred):  # pylint: disable=unused-argument
        T.cuda.tile.apply(T.ptx[_STORE[out]], C.sub[row, col : col + 1], value, pred=pred)

    walk = _make_walk(cfg, store_one)

    @T.macro
    def store(C, acc, words, at):
        if packs:
            pack_pairs(words.local(), acc.local())
            walk(C, words.local().view("bfloat16").view(bm // 8, 2, 2, 1), at)
        else:
            walk(C, acc.local().view(bm // 8, 2, 2, 1), at)

    return store


def split_k(cfg: SmallMConfig) -> SplitK:
    """The kernel's :class:`~tvm_tirx.kernels.parts.split_k.SplitK`: ``cfg.splits`` CTAs per
    tile, the two consumer warpgroups (threads 128 .. 383) at named barrier 1."""
    return SplitK(cfg.splits, cfg.m, cfg.n, cfg.block_m // 8, lambda b, h, e, at: element(cfg, b, h, e, at),
                  threads=CONSUMERS * 128, leader=128, barrier=1)


def make_reduce(cfg: SmallMConfig):
    """The macro ``reduce(work, C, acc, words, at)`` (``work`` a
    :class:`~tvm_tirx.kernels.parts.split_k.Workspace`, ``at`` a :class:`Place`): the
    split-K reduction (:func:`split_k`); the CTA that completes its tile's count
    (``Counters[tm * block_m, tn]``) sums the slabs and stores C."""
    reduction, bm = split_k(cfg), cfg.block_m
    publish, gather, store = reduction.make_publish(), reduction.make_gather(), make_store(cfg)

    @T.macro
    def reduce(work, C, acc, words, at):
        publish(work, acc.local().view(bm // 8, 2, 2, 1), at, (at.tm * bm, at.tn))
        if reduction.last(work):  # the last CTA of the tile: every slab is in
            gather(work, acc.local().view(bm // 8, 2, 2, 1), at)
            store(C, acc, words, at)

    return reduce
