"""A consumer warpgroup: the wgmma main loop over the ring, then the epilogue chain."""

from __future__ import annotations

from tvm.script import tirx as T

from ..parts.epilogue import TilePlace
from .block_scales import make_scaled_mainloop
from .config import WG_M, GemmConfig
from .order import tile_order

__all__ = ["make_consumer"]


def _make_mma(cfg: GemmConfig):
    """The macro ``mma(acc, smem, s, row0, kt)``: one warpgroup-wide ``wgmma`` of stage
    ``s`` (its K tile ``kt``: the accumulators are overwritten at ``kt == 0``) of the
    ``WG_M`` (64) rows of A from ``row0`` by the stage's ``block_n`` rows of B, into the
    fp32 accumulators ``acc``."""
    mma, kstep, block_n = cfg.mma, cfg.kstep, cfg.block_n
    op_a, op_b = cfg.operand_a, cfg.operand_b

    @T.macro
    def issue(acc, smem, s, row0, kt):
        T.cuda.tile.apply(
            T.ptx[mma],
            acc,
            op_a.mma_view(smem.sa, s, row0, WG_M, kstep),
            op_b.mma_view(smem.sb, s, 0, block_n, kstep),
            scope="warpgroup",
            scale_d=kt > 0,
        )

    return issue


def _make_finish(cfg: GemmConfig):
    """The macro ``finish(C, ext, smem, regs, at)``: the epilogue chain's register stages
    (if any) and its store of one 64-row block's registers ``regs`` at ``at``."""
    apply, store = cfg.epilogue.apply, cfg.epilogue.store

    @T.macro
    def finish(C, ext, smem, regs, at):
        if apply is not None:  # scale, bias, activation, gate, residual
            apply(regs, ext, at)
        store(C, regs, smem.so, at)

    return finish


def _make_mainloop(cfg: GemmConfig, mma):
    """The macro ``mainloop(regs, smem, flag, work)``: per K tile (ring iteration ``work.g0 +
    kt``) wait for ``full``, issue the stage's wgmma batch into each block's accumulators,
    commit, leave ``wait_depth`` batches in flight and release the stage read before them
    (the last batch's wait and release are the caller's)."""
    k_tiles, ring, wait_depth, blocks = cfg.split_tiles, cfg.ring, cfg.wait_depth, cfg.blocks
    rows = cfg.block_m // cfg.consumers

    @T.macro
    def mainloop(regs, smem, flag, work):
        for kt in T.serial(k_tiles):
            s = ring.slot(work.g0 + kt)
            ring.wait(smem.full, s, work.g0 + kt, flag)
            T.ptx["wgmma.fence.sync.aligned"]()
            mma(regs[0].acc, smem, s, work.c * rows, kt)
            if blocks == 2:  # a 256-row tile: the warpgroup's second 64 rows, the same B
                mma(regs[1].acc, smem, s, work.c * rows + WG_M, kt)
            T.ptx["wgmma.commit_group.sync.aligned"]()
            T.ptx["wgmma.wait_group.sync.aligned"](wait_depth)
            if wait_depth == 0 or kt > 0:
                ring.release(smem.empty, ring.slot(work.g0 + kt - wait_depth), work.tid)

    return mainloop


def make_consumer(cfg: GemmConfig):
    """The macro ``consume_tile(C, ext, smem, regs, flag, work)`` of ``cfg``: ``ext`` the
    epilogue's tensors (``cfg.epilogue.bind(...)``), ``smem`` a :class:`Shared`, ``regs``
    a tuple of ``cfg.blocks`` :class:`~tvm_tirx.kernels.parts.epilogue.Registers` (one per
    64-row block of the warpgroup's rows), ``flag`` the ring's wait flag, ``work`` a
    :class:`.shared.Work`.

    Consumer warpgroup ``c`` computes rows ``block_m / 2 * c ..`` of output tile ``t``
    (64 rows of a 128-row tile, 128 of a 256-row one): per K tile (ring iteration ``g0 +
    kt``) it waits for ``full``, issues the stage's ``wgmma.m64n{block_n}k16`` (bf16; k32
    for e4m3) batch into the fp32 accumulators ``regs[j].acc`` of each block ``j`` (rows
    ``block_m / 2 * c + 64 j``: one batch of one or two wgmma calls, one commit group),
    leaves ``wait_depth`` batches in flight and releases the stage read before them; then
    runs the epilogue chain (``cfg.epilogue``) per block: its prefetch (the residual's
    loads; block 0's before the last ``wgmma.wait_group``), its register stages (scale,
    bias, activation, gate, residual) and its store of ``regs[j].out``.  With splits
    (``cfg.split_k``) the K tiles are those of split ``work.split``, and the epilogue runs
    in the CTA that completes the tile's count only, on the sum of the splits' slabs.  With
    fp8 block scales the main loop is :func:`~.block_scales.make_scaled_mainloop`'s.
    """
    tiles_m, tiles_n, group_m, k_tiles = cfg.tiles_m, cfg.tiles_n, cfg.group_m, cfg.split_tiles
    ring, wait_depth, blocks, tiles_rows = cfg.ring, cfg.wait_depth, cfg.blocks, cfg.block_m
    prefetch, reduction = cfg.epilogue.prefetch, cfg.split_k
    mma, finish = _make_mma(cfg), _make_finish(cfg)
    mainloop = _make_mainloop(cfg, mma)
    scaled_mainloop = make_scaled_mainloop(cfg, mma) if cfg.block_scales else None
    if reduction is not None:
        publish, gather, shape = reduction.make_publish(), reduction.make_gather(), reduction.values_shape

    @T.macro
    def consume_tile(C, ext, smem, regs, flag, work):
        bm = tile_order(work.t, tiles_m, tiles_n, group_m)[0]
        bn = tile_order(work.t, tiles_m, tiles_n, group_m)[1]
        if scaled_mainloop is not None:  # fp8 block scales: 128-row tiles, no prefetch (GemmConfig's checks)
            scaled_mainloop(regs[0].acc, work.scales, smem, flag, work, bm, bn)
        else:
            mainloop(regs, smem, flag, work)
            if prefetch is not None:  # the residual's loads under the last products
                prefetch(regs[0], ext, TilePlace(bm, bn, work.tid, work.c))
            T.ptx["wgmma.wait_group.sync.aligned"](0)
            if wait_depth == 1:
                ring.release(smem.empty, ring.slot(work.g0 + k_tiles - 1), work.tid)
        if reduction is None:
            finish(C, ext, smem, regs[0], TilePlace(bm, bn, work.tid, work.c))
        else:  # 128-row tiles only (one block), no prefetch: GemmConfig's checks
            at = TilePlace(bm, bn, work.tid, work.c, 0, work.split)
            publish(work.work, regs[0].acc.local().view(*shape), at, (bm * tiles_rows, bn))
            if reduction.last(work.work):
                gather(work.work, regs[0].acc.local().view(*shape), at)
                finish(C, ext, smem, regs[0], at)
        if blocks == 2:
            if prefetch is not None:  # block 1 reuses block 0's words: its loads hide under no product
                prefetch(regs[1], ext, TilePlace(bm, bn, work.tid, work.c, 1))
            finish(C, ext, smem, regs[1], TilePlace(bm, bn, work.tid, work.c, 1))

    return consume_tile
