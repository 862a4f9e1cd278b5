"""The consumers' epilogues: a warpgroup's 64 x ``block_n`` fp32 accumulators into C.

bf16 output goes through shared memory and TMA stores, which clip the boxes at C's
edge; float32 output is stored straight from the registers, each store under a guard
``row < m and col + vector <= n`` unless the tiles cover C exactly -- the bounds rule of
the tile checker proves every store inside C from that guard, for a run-time ``m`` too.
"""

from __future__ import annotations

from tvm.script import tirx as T

from ...tile.fragments import accumulator_registers, accumulator_tile
from .config import BM, WG_M, GemmConfig
from .guarded import make_store_guarded

__all__ = ["STORE", "epilogue_bf16", "make_epilogue"]

STORE = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"


@T.macro
def epilogue_bf16(acc, words, out, C, row0, col0, tid, c):
    """Round a consumer's (64, N) fp32 accumulators to bf16 pairs, write them into its
    swizzled shared tile ``out`` (N / 64 boxes of 64 x 32 words) and TMA-store the boxes to
    ``C[row0 : row0 + 64, col0 : col0 + N]`` (the TMA skips what lies past C's edge).
    The store issued for the previous tile must have read ``out`` first (``wait_group.read
    0``); named barrier ``1 + c`` joins the warpgroup's 128 threads (the named-barrier
    family checks, when lowering, that exactly those 128 threads use barrier ``1 + c``).
    ``accumulator_registers`` / ``accumulator_tile`` view the registers and the tile (as
    ``(rows, boxes, words)``) by the wgmma fragment map."""
    rows = accumulator_registers(acc, "wgmma")  # (warp, lane, j, h, e): columns 8 j + 2 t + e
    T.cuda.tile.apply(T.ptx["cvt.rn.bf16x2.f32"], accumulator_registers(words, "wgmma"),
                      rows.sub[:, :, :, :, 1:2], rows.sub[:, :, :, :, 0:1], scope="warpgroup")
    if tid % 128 == 0:
        T.ptx["cp.async.bulk.wait_group.read"](0)
    T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.uint32(1 + c), count=T.uint32(128))
    T.cuda.tile.apply(T.ptx["st.shared.b32"], *accumulator_tile(out.permute(1, 0, 2), words, "wgmma"),
                      scope="warpgroup")
    T.ptx["fence.proxy.async.shared::cta"]()
    T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.uint32(1 + c), count=T.uint32(128))
    if tid % 128 == 0:
        T.cuda.tile.apply(T.ptx[STORE], C.view("uint32"), out, coords=(row0, col0 // 2), coord_steps=((0, 32),),
                          swizzle=3)
        T.ptx["cp.async.bulk.commit_group"]()


def make_epilogue(cfg: GemmConfig):
    """The macro ``epilogue(C, acc, words, so, bm, bn, tid, c)`` of ``cfg``: consumer ``c``
    stores its 64 rows of output tile ``(bm, bn)``.

    * bf16 output whose rows are a multiple of 16 bytes: :func:`epilogue_bf16` (TMA
      stores, clipped at C's edge);
    * float32 output on tiles that cover C exactly: one warpgroup-wide
      ``st.global.v2.f32`` call over the fragment map;
    * otherwise :func:`.guarded.make_store_guarded` (a guard per store).
    """
    tiles_m, tiles_n, bn_cols = cfg.tiles_m, cfg.tiles_n, cfg.out_block_n
    store_guarded = make_store_guarded(cfg)

    @T.macro
    def tma_store(C, acc, words, so, bm, bn, tid, c):
        epilogue_bf16(acc, words, so.sub[c], C, bm * BM + c * WG_M, bn * bn_cols, tid, c)

    @T.macro
    def store_exact(C, acc, words, so, bm, bn, tid, c):
        c_tile = C.view(tiles_m * 2, WG_M, tiles_n, bn_cols).sub[bm * 2 + c, :, bn, :]
        T.cuda.tile.apply(T.ptx["st.global.v2.f32"], *accumulator_tile(c_tile, acc, "wgmma"), scope="warpgroup")

    @T.macro
    def guarded(C, acc, words, so, bm, bn, tid, c):
        store_guarded(C, acc, words, bm, bn, tid, c)

    if cfg.tma_store:
        return tma_store
    return store_exact if cfg.exact else guarded
