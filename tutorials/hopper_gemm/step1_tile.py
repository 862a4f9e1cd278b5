"""
Step 1: one TMA load and one wgmma tile
=======================================

The smallest Hopper GEMM: ``C = A @ B^T`` for a K of exactly 64. Each CTA is one
warpgroup (128 threads) and computes one 64 x 256 tile of C:

1. thread 0 arms an mbarrier with the bytes it expects and issues two TMA loads,
   the A tile (64 x 64) and the B tile (256 x 64), into shared memory;
2. all 128 threads wait for the barrier's phase 0 -- the TMA unit completes it
   when the last byte has landed;
3. the warpgroup issues ``wgmma.mma_async.m64n256k16`` over the K extent
   (four instructions, 16 columns of K each) into 128 fp32 registers per
   thread, commits them and waits;
4. each thread rounds its accumulators to bf16 pairs and stores them.

Run it with ``python tutorials/hopper_gemm/step1_tile.py [--size M N K]``
(K is 64 here whatever you ask for).
"""

# %%
# Sizes, instructions and layouts
# -------------------------------
# The A and B tiles are rows of 64 bf16 = 128 bytes, loaded with the TMA's
# 128-byte swizzle (``swizzle=3``): the 16-byte chunk ``c`` of row ``r`` lands
# at chunk ``c ^ (r % 8)``. The shared tiles must say so in their layout
# (``swizzled_layout``) -- the wgmma family derives each matrix descriptor from
# that layout, and refuses one no descriptor can describe. A swizzled tile
# starts on a 1024-byte boundary (the pattern's period), so the dynamic shared
# memory reserves 1 KiB for aligning.

from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.tma import swizzled_layout
from tvm_tirx.tile.fragments import accumulator_layout, accumulator_registers, accumulator_tile

import _harness

BN, BK = 256, 64  # a warpgroup's tile is 64 x BN; K comes in BK-wide tiles
WG_M = 64  # rows of C per warpgroup: the m64 of the instruction
MMA = f"wgmma.mma_async.sync.aligned.m64n{BN}k16.f32.bf16.bf16"
LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"

# %%
# The accumulators and the epilogue
# ---------------------------------
# ``accumulator_layout(256)`` is the ISA's fragment map for the m64n256 fp32
# accumulator (PTX ISA 9.7.15.5.1.1): register ``4 j + 2 h + e`` of thread
# ``32 w + 4 g + t`` holds ``C[16 w + 8 h + g, 8 j + 2 t + e]``. To store the
# tile, each thread must pair its registers with the elements of C they hold.
# ``accumulator_registers(acc, "wgmma")`` views the registers thread by thread,
# as ``(warp, lane, j, h, e)``; ``accumulator_tile(C_tile, words, "wgmma")``
# returns that view of the memory tile and of the registers together, so the
# store is one call. In between, ``cvt.rn.bf16x2.f32`` converts each pair
# ``e = 0, 1`` into one ``bf16x2`` word (the first source goes to the upper
# half, the higher column); the words' registers are laid out by
# ``accumulator_layout(256, packed=True)``, and the bf16 tile of C is seen as
# b32 words. The tile family checks that every register the cvt and the store
# use belongs to the thread that issues them -- a wrong view is a TileError,
# not a wrong result.


def c_tile(C, bm, bn):
    """Tile ``(bm, bn)`` of ``C``: its rows ``64 bm ..`` and columns ``256 bn ..``, a
    ``(64, 256)`` view with constant extents."""
    m, n = (int(x) for x in C.shape)
    return C.view(m // WG_M, WG_M, n // BN, BN).sub[bm, :, bn, :]


@T.macro
def store_tile(acc, words, C, bm, bn):
    """Round a warpgroup's ``(64, 256)`` fp32 accumulators to bf16 and store them to
    tile ``(bm, bn)`` of ``C``, ``C[64 bm : 64 bm + 64, 256 bn : 256 bn + 256]``."""
    pairs = accumulator_registers(acc, "wgmma")
    T.cuda.tile.apply(T.ptx["cvt.rn.bf16x2.f32"], accumulator_registers(words, "wgmma"),
                      pairs.sub[:, :, :, :, 1:2], pairs.sub[:, :, :, :, 0:1], scope="warpgroup")
    T.cuda.tile.apply(T.ptx["st.global.b32"], *accumulator_tile(c_tile(C, bm, bn), words, "wgmma"),
                      scope="warpgroup")


# %%
# The kernel
# ----------
# One mbarrier, initialised by thread 0 with an arrival count of 1; the
# ``fence.mbarrier_init`` makes the init visible to the TMA unit before any
# thread passes the CTA barrier. ``mbarrier.arrive.expect_tx`` is the one
# arrival and tells the barrier how many bytes to expect; the two loads
# complete those bytes. ``T.cuda.mbarrier_wait_phase`` spins on
# ``try_wait.parity`` until phase 0 completes.
#
# The wgmma call takes the A tile as ``(M tiles, K tiles, 64, 16)`` and the B
# tile as ``(K tiles, 256, 16)`` -- views of the shared tiles, no copies. The
# call expands to one descriptor per operand and four ``wgmma.mma_async``, each
# adding 32 bytes (16 bf16 of K) to the descriptors' start address.
# ``scale_d=False`` makes the first one overwrite the accumulators (they were
# never written). ``wgmma.fence`` before, ``commit_group`` and ``wait_group 0``
# after are explicit PTX: the tile operation inserts nothing.


def make_gemm_tile(m, n):
    """``C (m, n) = A (m, 64) @ B (n, 64)^T``, one 64 x 256 tile per CTA; m a multiple of
    64, n of 256."""
    tiles_n = n // BN
    smem = (WG_M + BN) * BK * 2 + 1024 + 8

    @T.function
    def gemm_tile(
        A: T.Tensor((m, BK), "bfloat16", align=16),
        B: T.Tensor((n, BK), "bfloat16", align=16),
        C: T.Tensor((m, n), "bfloat16", align=16),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(m // WG_M) * tiles_n, block=128, dynamic_smem_bytes=smem))
        sa = T.alloc_shared((WG_M, BK), "bfloat16", scope="shared.dyn", align=1024,
                            layout=swizzled_layout((WG_M, BK), "bfloat16", 3))
        sb = T.alloc_shared((BN, BK), "bfloat16", scope="shared.dyn", align=1024,
                            layout=swizzled_layout((BN, BK), "bfloat16", 3))
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        acc = T.alloc_local((WG_M, BN), "float32", layout=accumulator_layout(BN))
        words = T.alloc_local((WG_M, BN // 2), "uint32", layout=accumulator_layout(BN, packed=True))
        tid = T.cuda.thread_idx("x")
        bm = T.cuda.block_idx("x") // tiles_n
        bn = T.cuda.block_idx("x") % tiles_n
        if tid == 0:
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(1))
            T.ptx["fence.mbarrier_init.release.cluster"]()
        T.cuda.cta_sync()
        if tid == 0:
            T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar,
                              tx=T.uint32((WG_M + BN) * BK * 2))
            T.cuda.tile.apply(T.ptx[LOAD], sa, A, mbar=bar, coords=(bm * WG_M, 0), swizzle=3)
            T.cuda.tile.apply(T.ptx[LOAD], sb, B, mbar=bar, coords=(bn * BN, 0), swizzle=3)
        T.cuda.mbarrier_wait_phase(bar, 0)
        T.ptx["wgmma.fence.sync.aligned"]()
        T.cuda.tile.apply(
            T.ptx[MMA],
            acc,
            sa.view(1, WG_M, BK // 16, 16).permute(0, 2, 1, 3),
            sb.view(BN, BK // 16, 16).permute(1, 0, 2),
            scope="warpgroup",
            scale_d=False,
        )
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        store_tile(acc, words, C, bm, bn)

    return gemm_tile


# %%
# Build, check, time
# ------------------
# On a GPU the kernel is checked against ``A.float() @ B.float().T`` and timed.
# With K = 64 a CTA loads 40 KiB and stores 32 KiB around 2 MFLOP of work,
# one step after the other: the rate is a small fraction of the tensor
# cores' -- this kernel is about getting one tile right, not about speed.

if __name__ == "__main__":
    M, N, _ = _harness.size((1024, 1024, BK), (8192, 8192, BK))
    _harness.run(make_gemm_tile(M, N), M, N, BK)
