"""FP8 with block scales (the DeepGEMM format): ``C = sum_kb (SA[:, kb] SB[nb, kb]) * (A_kb @ B_kb^T)``.

A is ``(m, k)`` and B ``(n, k)`` float8 e4m3, quantized in blocks: ``ScalesA (m, ceil(k /
128))`` float32 gives one scale per row of A and 128-element block of K (1 x 128),
``ScalesB (ceil(n / 128), ceil(k / 128))`` one per 128 x 128 block of B.  A stage of the
ring holds 128 bytes of K, that is one 128-element block of e4m3, so the consumer's main
loop does per stage (``make_gemm(block_scales=True)``):

1. load its rows' scales of A and the tile's scale of B for the *next* block
   (``ld.global.f32`` into a second set of three registers, issued before it waits for
   this stage: the loads have this block's wait, product and promotion to land; the first
   block's are loaded before the loop);
2. multiply the stage into a second set of fp32 accumulators ``tmp`` (``wgmma ... k32``, the
   first instruction overwriting them), commit and wait for it (``wgmma.wait_group 0``:
   ``tmp`` is read next), release the stage;
3. promote: ``acc += (SA[row] * SB) * tmp`` (``mul.rn.f32``, ``fma.rn.f32``), one scale per
   accumulator row (register ``4 j + 2 h + e`` of a thread sits on its row ``h``); then the
   next block's scales become this block's (plain register copies, which the compiler
   renames: nothing waits for the loads before the next promotion uses them).

The fp32 sum over blocks is exact up to fp32 rounding, as DeepGEMM's promotion keeps it
(wgmma's fp8 accumulation inside a block is the hardware's).  Tiles are 128 x ``block_n``
with ``block_n`` dividing 128, so one tile's columns share one block of B.  Rows past
``m`` read row ``m - 1``'s scale (their results are never stored).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from tvm.script import tirx as T

from ...tile.fragments import accumulator_row

if TYPE_CHECKING:
    from .config import GemmConfig

__all__ = ["BLOCK", "BLOCK_NS", "FACTORS", "Scales", "make_scaled_mainloop"]

#: elements of K (and rows of B) per scale: DeepGEMM's 128 x 128 weight blocks, 1 x 128 for A
BLOCK = 128
#: the tile widths with one block of B per tile
BLOCK_NS = (64, 128)
#: the registers of ``Scales.factor``: (SA[row 0], SA[row 1], SB) of this block and of the next
FACTORS = 6


class Scales(NamedTuple):
    """A consumer thread's block-scale state: the kernel's ``ScalesA`` / ``ScalesB`` tensors,
    ``tmp`` (the second ``(64, block_n)`` fp32 accumulator set, the wgmma fragment layout)
    and ``factor`` (a ``(FACTORS,)`` float32 register array: this block's two rows' scales
    of A and B's scale, then the same three of the next block)."""

    a: object
    b: object
    tmp: object
    factor: object


def _make_load(cfg: GemmConfig):
    """The macro ``load(scales, row0, tid, bn, kt, first)``: block ``kt``'s scales of the
    thread's two rows of A and of the tile's columns of B into ``scales.factor[first ..
    first + 2]``."""
    m, block_n = cfg.m, cfg.block_n

    @T.macro
    def load(scales, row0, tid, bn, kt, first):
        for h in T.unroll(2):  # rows past m read row m - 1's scale (never stored)
            T.cuda.tile.apply(T.ptx["ld.global.f32"], scales.factor.sub[first + h : first + h + 1],
                              scales.a.sub[T.min(accumulator_row(row0, tid, h), m - 1), kt : kt + 1])
        T.cuda.tile.apply(T.ptx["ld.global.f32"], scales.factor.sub[first + 2 : first + 3],
                          scales.b.sub[bn * block_n // BLOCK, kt : kt + 1])

    return load


def make_scaled_mainloop(cfg: GemmConfig, mma):
    """The macro ``scaled_mainloop(acc, scales, smem, flag, work, bm, bn)`` of ``cfg``: the
    main loop of the module docstring over the tile's K tiles (ring iterations ``work.g0
    ..``), ``acc`` the block's accumulators (zeroed first), ``scales`` a :class:`Scales`,
    ``bm`` and ``bn`` the tile's row and column tile; ``mma`` the kernel's wgmma macro
    (``mma(acc, smem, s, row0, kt)``).  Every stage is released before the next is
    waited for (no wgmma batch stays in flight: ``tmp`` is read after each)."""
    k_tiles, ring, block_n = cfg.k_tiles, cfg.ring, cfg.block_n
    count = block_n // 2  # accumulator registers of a thread
    load = _make_load(cfg)

    @T.macro
    def scaled_mainloop(acc, scales, smem, flag, work, bm, bn):
        row0 = bm * cfg.block_m + work.c * 64
        T.cuda.tile.apply(T.ptx["mov.b32"], acc.local().view("uint32").view(count, 1), T.uint32(0))
        load(scales, row0, work.tid, bn, 0, 0)
        for kt in T.serial(k_tiles):
            if kt + 1 < k_tiles:  # the next block's scales, under this block's wait and product
                load(scales, row0, work.tid, bn, kt + 1, 3)
            s = ring.slot(work.g0 + kt)
            ring.wait(smem.full, s, work.g0 + kt, flag)
            T.ptx["wgmma.fence.sync.aligned"]()
            mma(scales.tmp, smem, s, work.c * 64, 0)
            T.ptx["wgmma.commit_group.sync.aligned"]()
            T.ptx["wgmma.wait_group.sync.aligned"](0)
            ring.release(smem.empty, s, work.tid)
            for h in T.unroll(2):  # acc += SA[row] SB * tmp, on the registers of row h
                T.cuda.tile.apply(T.ptx["mul.rn.f32"], scales.factor.sub[h : h + 1], scales.factor.sub[h : h + 1],
                                  scales.factor[2])
                T.cuda.tile.apply(T.ptx["fma.rn.f32"], acc.local().view(block_n // 8, 2, 2, 1).sub[:, h, :, :],
                                  scales.tmp.local().view(block_n // 8, 2, 2, 1).sub[:, h, :, :], scales.factor[h],
                                  acc.local().view(block_n // 8, 2, 2, 1).sub[:, h, :, :])
            if kt + 1 < k_tiles:  # the next block's scales become this block's
                for i in T.unroll(3):
                    scales.factor[i] = scales.factor[3 + i]

    return scaled_mainloop
