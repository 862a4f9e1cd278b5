"""
Step 2: the K loop
==================

A real K is many tiles of 64. The kernel of step 1 becomes a loop over them:
each iteration thread 0 loads the next A and B tiles into the *same* two
shared buffers, everybody waits for them, the warpgroup multiplies them into
the accumulators (``scale_d`` is false only in the first iteration), and
before the next load may overwrite the buffers all four warps must be done
reading them.

Load, wait, compute, repeat: at any moment either the TMA or the tensor cores
work, never both. Per iteration the CTA moves 40 KiB from L2/HBM and then does
2 MFLOP, and each TMA round trip costs on the order of a microsecond of
latency -- during which the tensor cores of this SM idle, unless other CTAs on
the SM happen to be computing. That idle time is what the next steps remove.

Run it with ``python tutorials/hopper_gemm/step2_kloop.py [--size M N K]``.
"""

# %%
# What changes from step 1
# ------------------------
# The epilogue (``store_tile``) and the constants come from step 1. The
# mbarrier now completes one phase per K tile: the wait of iteration ``kt`` is
# for parity ``kt % 2``. The ``T.cuda.cta_sync()`` at the end of an iteration
# is the "buffers free" signal: after it, thread 0 may issue the next loads.
# (``wgmma.wait_group 0`` says the warpgroup's products are complete -- their
# shared-memory reads included -- and the barrier makes sure every warp got
# there.)

from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.tma import swizzled_layout
from tvm_tirx.tile.families.wgmma import accumulator_layout

import _harness
from step1_tile import BK, BN, LOAD, MMA, WG_M, store_tile


def make_gemm_kloop(m, n, k):
    """``C (m, n) = A (m, k) @ B (n, k)^T``, one 64 x 256 tile per CTA, one shared buffer
    per operand; m a multiple of 64, n of 256, k of 64."""
    tiles_n, k_tiles = n // BN, k // BK
    smem = (WG_M + BN) * BK * 2 + 1024 + 8

    @T.function
    def gemm_kloop(
        A: T.Tensor((m, k), "bfloat16", align=16),
        B: T.Tensor((n, k), "bfloat16", align=16),
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
        for kt in T.serial(k_tiles):
            if tid == 0:
                T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar,
                                  tx=T.uint32((WG_M + BN) * BK * 2))
                T.cuda.tile.apply(T.ptx[LOAD], sa, A, mbar=bar, coords=(bm * WG_M, kt * BK), swizzle=3)
                T.cuda.tile.apply(T.ptx[LOAD], sb, B, mbar=bar, coords=(bn * BN, kt * BK), swizzle=3)
            T.cuda.mbarrier_wait_phase(bar, kt % 2)
            T.ptx["wgmma.fence.sync.aligned"]()
            T.cuda.tile.apply(
                T.ptx[MMA],
                acc,
                sa.view(1, WG_M, BK // 16, 16).permute(0, 2, 1, 3),
                sb.view(BN, BK // 16, 16).permute(1, 0, 2),
                scope="warpgroup",
                scale_d=kt > 0,
            )
            T.ptx["wgmma.commit_group.sync.aligned"]()
            T.ptx["wgmma.wait_group.sync.aligned"](0)
            T.cuda.cta_sync()  # every warp is done with sa and sb: they may be refilled
        store_tile(acc, words, C, bm, bn)

    return gemm_kloop


# %%
# Build, check, time
# ------------------
# Expect a small fraction of the tensor cores' rate: a 64 x 256 tile does 51
# FLOP per byte of A and B it loads, but the loads are not overlapped with
# anything in the CTA. Several such CTAs share an SM (shared memory would
# allow five; the 128 accumulator registers per thread allow fewer), and
# their independent loops are the only overlap there is.

if __name__ == "__main__":
    M, N, K = _harness.size((1024, 1024, 1024), (8192, 8192, 8192))
    _harness.run(make_gemm_kloop(M, N, K), M, N, K)
