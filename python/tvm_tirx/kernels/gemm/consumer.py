"""A consumer warpgroup: the wgmma main loop over the ring, then the epilogue chain."""

from __future__ import annotations

from tvm.script import tirx as T

from ..parts.epilogue import TilePlace
from .config import WG_M, GemmConfig
from .order import tile_order

__all__ = ["make_consumer"]


def make_consumer(cfg: GemmConfig):
    """The macro ``consume_tile(C, ext, smem, regs, flag, work)`` of ``cfg``: ``ext`` the
    epilogue's tensors (``cfg.epilogue.bind(...)``), ``smem`` a :class:`Shared`, ``regs``
    the :class:`~tvm_tirx.kernels.parts.epilogue.Registers`, ``flag`` the ring's wait
    flag, ``work`` a :class:`.shared.Work`.

    Consumer warpgroup ``c`` computes rows ``64 c ..`` of output tile ``t``: per K tile
    (ring iteration ``g0 + kt``) it waits for ``full``, issues the stage's
    ``wgmma.m64n{block_n}k16`` (bf16; k32 for e4m3) batch into the fp32 accumulators
    ``regs.acc``, leaves ``wait_depth`` batches in flight and releases the stage read
    before them; then runs the epilogue chain (``cfg.epilogue``): its prefetch (the
    residual's loads) before the last ``wgmma.wait_group``, its register stages (scale,
    bias, activation, gate, residual) and its store of ``regs.out``.
    """
    tiles_m, tiles_n, group_m, k_tiles = cfg.tiles_m, cfg.tiles_n, cfg.group_m, cfg.k_tiles
    ring, kstep, mma = cfg.ring, cfg.kstep, cfg.mma
    wait_depth, block_n = cfg.wait_depth, cfg.block_n
    epilogue = cfg.epilogue
    apply, prefetch, store = epilogue.apply, epilogue.prefetch, epilogue.store
    op_a, op_b = cfg.operand_a, cfg.operand_b

    @T.macro
    def consume_tile(C, ext, smem, regs, flag, work):
        bm = tile_order(work.t, tiles_m, tiles_n, group_m)[0]
        bn = tile_order(work.t, tiles_m, tiles_n, group_m)[1]
        for kt in T.serial(k_tiles):
            s = ring.slot(work.g0 + kt)
            ring.wait(smem.full, s, work.g0 + kt, flag)
            T.ptx["wgmma.fence.sync.aligned"]()
            T.cuda.tile.apply(
                T.ptx[mma],
                regs.acc,
                op_a.mma_view(smem.sa, s, work.c * WG_M, WG_M, kstep),
                op_b.mma_view(smem.sb, s, 0, block_n, kstep),
                scope="warpgroup",
                scale_d=kt > 0,
            )
            T.ptx["wgmma.commit_group.sync.aligned"]()
            T.ptx["wgmma.wait_group.sync.aligned"](wait_depth)
            if wait_depth == 0 or kt > 0:
                ring.release(smem.empty, ring.slot(work.g0 + kt - wait_depth), work.tid)
        if prefetch is not None:  # the residual's loads under the last products
            prefetch(regs, ext, TilePlace(bm, bn, work.tid, work.c))
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        if wait_depth == 1:
            ring.release(smem.empty, ring.slot(work.g0 + k_tiles - 1), work.tid)
        if apply is not None:  # scale, bias, activation, gate, residual
            apply(regs, ext, TilePlace(bm, bn, work.tid, work.c))
        store(C, regs, smem.so, TilePlace(bm, bn, work.tid, work.c))

    return consume_tile
