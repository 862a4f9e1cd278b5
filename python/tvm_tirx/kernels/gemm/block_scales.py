"""FP8 with block scales (the DeepGEMM format): ``C = sum_kb (SA[:, kb] SB[nb, kb]) * (A_kb @ B_kb^T)``.

A is ``(m, k)`` and B ``(n, k)`` float8 e4m3, quantized in blocks: ``ScalesA (m, ceil(k /
128))`` float32 gives one scale per row of A and 128-element block of K (1 x 128),
``ScalesB (ceil(n / 128), ceil(k / 128))`` one per 128 x 128 block of B.  A stage of the
ring holds 128 bytes of K, that is one 128-element block of e4m3, so the consumer's main
loop does per stage (``make_gemm(block_scales=True)``):

1. load its rows' scales of A and the tile's scale of B for this block (``ld.global.f32``,
   issued before it waits for the stage: the loads hide under the wait and the products);
2. multiply the stage into a second set of fp32 accumulators ``tmp`` (``wgmma ... k32``, the
   first instruction overwriting them), commit and wait for it (``wgmma.wait_group 0``:
   ``tmp`` is read next), release the stage;
3. promote: ``acc += (SA[row] * SB) * tmp`` (``mul.rn.f32``, ``fma.rn.f32``), one scale per
   accumulator row (register ``4 j + 2 h + e`` of a thread sits on its row ``h``).

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

__all__ = ["BLOCK", "BLOCK_NS", "Scales", "make_scaled_mainloop"]

#: elements of K (and rows of B) per scale: DeepGEMM's 128 x 128 weight blocks, 1 x 128 for A
BLOCK = 128
#: the tile widths with one block of B per tile
BLOCK_NS = (64, 128)


class Scales(NamedTuple):
    """A consumer thread's block-scale state: the kernel's ``ScalesA`` / ``ScalesB`` tensors,
    ``tmp`` (the second ``(64, block_n)`` fp32 accumulator set, the wgmma fragment layout)
    and ``factor`` (a ``(3,)`` float32 register array: the two rows' scales of A, then B's)."""

    a: object
    b: object
    tmp: object
    factor: object


def make_scaled_mainloop(cfg: GemmConfig, mma):
    """The macro ``scaled_mainloop(acc, scales, smem, flag, work, bm, bn)`` of ``cfg``: the
    main loop of the module docstring over the tile's K tiles (ring iterations ``work.g0
    ..``), ``acc`` the block's accumulators (zeroed first), ``scales`` a :class:`Scales`,
    ``bm`` and ``bn`` the tile's row and column tile; ``mma`` the kernel's wgmma macro
    (``mma(acc, smem, s, row0, kt)``).  Every stage is released before the next is
    waited for (no wgmma batch stays in flight: ``tmp`` is read after each)."""
    k_tiles, ring, m, block_n = cfg.k_tiles, cfg.ring, cfg.m, cfg.block_n
    count = block_n // 2  # accumulator registers of a thread

    @T.macro
    def scaled_mainloop(acc, scales, smem, flag, work, bm, bn):
        row0 = bm * cfg.block_m + work.c * 64
        T.cuda.tile.apply(T.ptx["mov.b32"], acc.local().view("uint32").view(count, 1), T.uint32(0))
        for kt in T.serial(k_tiles):
            for h in T.unroll(2):  # this block's scales of the thread's two rows of A
                T.cuda.tile.apply(T.ptx["ld.global.f32"], scales.factor.sub[h : h + 1],
                                  scales.a.sub[T.min(accumulator_row(row0, work.tid, h), m - 1), kt : kt + 1])
            T.cuda.tile.apply(T.ptx["ld.global.f32"], scales.factor.sub[2:3],
                              scales.b.sub[bn * block_n // BLOCK, kt : kt + 1])
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

    return scaled_mainloop
