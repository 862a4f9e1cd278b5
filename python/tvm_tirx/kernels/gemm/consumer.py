"""A consumer warpgroup: the wgmma main loop over the ring, then the epilogue."""

from __future__ import annotations

from tvm.script import tirx as T

from .config import WG_M, GemmConfig
from .epilogue import make_epilogue
from .fused import make_fused, make_residual_prefetch
from .order import tile_order

__all__ = ["make_consumer"]


def make_consumer(cfg: GemmConfig):
    """The macro ``consume_tile(C, scales, bias, residual, sa, sb, so, full, empty, acc, out,
    words, factor, tmp, t, g0, flag, tid, c)`` of ``cfg``.

    Consumer warpgroup ``c`` (0 or 1) computes rows ``64 c ..`` of output tile ``t``: per
    K tile (ring iteration ``g0 + kt``) it waits for ``full``, issues the stage's
    ``wgmma.m64n{block_n}k16`` (bf16; k32 for e4m3) batch into the fp32 accumulators ``acc``,
    leaves ``wait_depth`` batches in flight and releases the stage read before them;
    then scales the accumulators (fp8: ``Scales[0] * Scales[1]``), adds the bias and applies
    the activation, adds the residual (:mod:`.fused`, ``tmp`` its scratch registers; a gated GEMM's result
    goes to ``out``, ``acc`` itself otherwise) and runs the epilogue (:mod:`.epilogue`) on
    ``out``.
    """
    tiles_m, tiles_n, group_m, k_tiles = cfg.tiles_m, cfg.tiles_n, cfg.group_m, cfg.k_tiles
    ring, kstep, mma = cfg.ring, cfg.kstep, cfg.mma
    wait_depth, block_n = cfg.wait_depth, cfg.block_n
    epilogue, fuse, prefetch = make_epilogue(cfg), make_fused(cfg), make_residual_prefetch(cfg)
    op_a, op_b = cfg.operand_a, cfg.operand_b

    @T.macro
    def consume_tile(C, scales, bias, residual, sa, sb, so, full, empty, acc, out, words, factor, tmp, t, g0, flag,
                     tid, c):
        bm = tile_order(t, tiles_m, tiles_n, group_m)[0]
        bn = tile_order(t, tiles_m, tiles_n, group_m)[1]
        for kt in T.serial(k_tiles):
            s = ring.slot(g0 + kt)
            ring.wait(full, s, g0 + kt, flag)
            T.ptx["wgmma.fence.sync.aligned"]()
            T.cuda.tile.apply(
                T.ptx[mma],
                acc,
                op_a.mma_view(sa, s, c * WG_M, WG_M, kstep),
                op_b.mma_view(sb, s, 0, block_n, kstep),
                scope="warpgroup",
                scale_d=kt > 0,
            )
            T.ptx["wgmma.commit_group.sync.aligned"]()
            T.ptx["wgmma.wait_group.sync.aligned"](wait_depth)
            if wait_depth == 0 or kt > 0:
                ring.release(empty, ring.slot(g0 + kt - wait_depth), tid)
        if prefetch is not None:  # the residual's loads under the last products (.fused)
            prefetch(words, residual, bm, bn, tid, c)
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        if wait_depth == 1:
            ring.release(empty, ring.slot(g0 + k_tiles - 1), tid)
        if scales is not None:  # fp8: C = scale_a * scale_b * (A B^T)
            factor[0] = scales[0] * scales[1]
            T.cuda.tile.apply(T.ptx["mul.rn.f32"], acc.local().view(block_n // 2, 1), acc.local().view(block_n // 2, 1), factor[0])
        if fuse is not None:  # + bias, activation, gate, residual (.fused)
            fuse(acc, out, bias, residual, words, tmp, bm, bn, tid, c)
        epilogue(C, out, words, so, bm, bn, tid, c)

    return consume_tile
