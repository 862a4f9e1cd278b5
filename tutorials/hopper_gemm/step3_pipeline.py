"""
Step 3: a multi-stage TMA ring
==============================

Two changes make the tensor cores busy most of the time:

* **a ring of stages**: ``STAGES`` pairs of A and B buffers, each guarded by two
  mbarriers. ``full[s]`` completes when the TMA has written stage ``s``;
  ``empty[s]`` when every warpgroup has finished reading it. The loads for the
  next ``STAGES - 1`` K tiles are in flight while the current one is
  multiplied, so the load latency is hidden behind compute as long as
  ``STAGES - 1`` tiles of math last longer than one load's round trip. With
  48 KiB per stage, four stages keep up to 144 KiB loading while the fourth
  is multiplied.
* **a 128 x 256 tile**: two warpgroups, each multiplying its 64 rows of A by
  the same B tile. Each byte of B loaded now feeds twice the FLOPs: the tile
  does 85 FLOP per byte of A and B instead of 51 (step 2's 64 x 256).

Thread 0 still issues every load, in line with its own warpgroup's math: after
multiplying K tile ``kt`` out of stage ``s`` it waits until *both* warpgroups
released ``s`` and refills it with K tile ``kt + STAGES``.

Run it with ``python tutorials/hopper_gemm/step3_pipeline.py [--size M N K]``.
"""

# %%
# Phases
# ------
# K tile ``kt`` lives in stage ``s = kt % STAGES``; it is that stage's
# ``kt // STAGES``-th use, so both of its barriers complete their phase of
# parity ``(kt // STAGES) % 2`` for it. ``full[s]`` has one arrival per phase
# (thread 0's ``arrive.expect_tx``) plus the bytes the TMA delivers;
# ``empty[s]`` has two, one from thread 0 of each warpgroup after its
# ``wgmma.wait_group 0`` has returned (the products, and their shared-memory
# reads, are complete).
#
# ``load_stage`` is the producer's half: arm ``full[s]`` with the stage's
# bytes and issue the two TMA loads. Step 4 reuses it.

from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.tma import swizzled_layout
from tvm_tirx.tile.families.wgmma import accumulator_layout

import _harness
from step1_tile import BK, BN, LOAD, MMA, WG_M, store_tile

BM = 2 * WG_M  # two warpgroups per CTA tile
STAGES = 4
STAGE_BYTES = (BM + BN) * BK * 2


def ring_smem_bytes(stages):
    """Dynamic shared memory for ``stages`` A/B stages, bytes: the ring, two mbarriers
    per stage and 1 KiB for aligning the swizzled tiles."""
    return stages * STAGE_BYTES + 16 * stages + 1024


@T.macro
def load_stage(sa, sb, full, A, B, s, kt, bm, bn):
    """Arm ``full[s]`` and load K tile ``kt`` of A's row tile ``bm`` and B's column
    tile ``bn`` into stage ``s`` (one thread calls it)."""
    T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], full.sub[s, :], tx=T.uint32(STAGE_BYTES))
    T.cuda.tile.apply(T.ptx[LOAD], sa.sub[s], A, mbar=full.sub[s, :], coords=(bm * BM, kt * BK), swizzle=3)
    T.cuda.tile.apply(T.ptx[LOAD], sb.sub[s], B, mbar=full.sub[s, :], coords=(bn * BN, kt * BK), swizzle=3)


@T.macro
def multiply_stage(acc, sa, sb, s, c, accumulate):
    """Warpgroup ``c``'s product of its 64 rows of stage ``s``'s A tile and all of its
    B tile, into ``acc`` (``accumulate``: a bool, false to overwrite); committed, not
    waited for."""
    T.ptx["wgmma.fence.sync.aligned"]()
    T.cuda.tile.apply(
        T.ptx[MMA],
        acc,
        sa.sub[s, c * WG_M : c * WG_M + WG_M, :].view(1, WG_M, BK // 16, 16).permute(0, 2, 1, 3),
        sb.sub[s].view(BN, BK // 16, 16).permute(1, 0, 2),
        scope="warpgroup",
        scale_d=accumulate,
    )
    T.ptx["wgmma.commit_group.sync.aligned"]()


# %%
# The kernel
# ----------
# 256 threads; warpgroup ``c = tid / 128`` computes rows ``64 c`` to ``64 c +
# 63`` of the CTA's tile. The ring's tiles are one allocation each, of shape
# ``(STAGES, rows, 64)``: ``swizzled_layout`` swizzles each stage's rows, and
# every stage starts on a 1024-byte boundary since a stage is a multiple of
# 1 KiB.


def make_gemm_pipelined(m, n, k, stages=STAGES):
    """``C (m, n) = A (m, k) @ B (n, k)^T``, one 128 x 256 tile per CTA, a ring of
    ``stages`` buffers; m a multiple of 128, n of 256, k of 64."""
    tiles_n, k_tiles = n // BN, k // BK

    @T.function
    def gemm_pipelined(
        A: T.Tensor((m, k), "bfloat16", align=16),
        B: T.Tensor((n, k), "bfloat16", align=16),
        C: T.Tensor((m, n), "bfloat16", align=16),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(m // BM) * tiles_n, block=256,
                                                  dynamic_smem_bytes=ring_smem_bytes(stages)))
        sa = T.alloc_shared((stages, BM, BK), "bfloat16", scope="shared.dyn", align=1024,
                            layout=swizzled_layout((stages, BM, BK), "bfloat16", 3))
        sb = T.alloc_shared((stages, BN, BK), "bfloat16", scope="shared.dyn", align=1024,
                            layout=swizzled_layout((stages, BN, BK), "bfloat16", 3))
        full = T.alloc_shared((stages, 1), "uint64", scope="shared.dyn", align=8)
        empty = T.alloc_shared((stages, 1), "uint64", scope="shared.dyn", align=8)
        acc = T.alloc_local((WG_M, BN), "float32", layout=accumulator_layout(BN))
        words = T.alloc_local((WG_M, BN // 2), "uint32", layout=accumulator_layout(BN, packed=True))
        tid = T.cuda.thread_idx("x")
        c = T.cuda.warp_id() // 4
        bm = T.cuda.block_idx("x") // tiles_n
        bn = T.cuda.block_idx("x") % tiles_n
        if tid == 0:
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], full, count=T.uint32(1))
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], empty, count=T.uint32(2))
            T.ptx["fence.mbarrier_init.release.cluster"]()
        T.cuda.cta_sync()
        if tid == 0:  # fill the ring
            for kt in T.unroll(min(stages, k_tiles)):
                load_stage(sa, sb, full, A, B, kt, kt, bm, bn)
        for kt in T.serial(k_tiles):
            s = kt % stages
            T.cuda.mbarrier_wait_phase(full.sub[s, :], (kt // stages) % 2)
            multiply_stage(acc, sa, sb, s, c, kt > 0)
            T.ptx["wgmma.wait_group.sync.aligned"](0)
            if tid % 128 == 0:  # this warpgroup is done with stage s
                T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], empty.sub[s, :])
            if tid == 0:
                if kt + stages < k_tiles:  # refill s once the other warpgroup is done with it too
                    T.cuda.mbarrier_wait_phase(empty.sub[s, :], (kt // stages) % 2)
                    load_stage(sa, sb, full, A, B, s, kt + stages, bm, bn)
        store_tile(acc, words, C, bm * 2 + c, bn)

    return gemm_pipelined


# %%
# Build, check, time
# ------------------
# What is left: thread 0 waits for the *other* warpgroup before it refills a
# stage, and its warpgroup's next wgmma waits for thread 0 -- the two
# warpgroups run in lockstep, and the refill is issued only after a stage's
# math has completed (``wait_group 0``), so at most ``STAGES - 1`` loads are in
# flight while the tensor cores work. Each thread also holds all 128
# accumulators and everything the loop needs, with no say in how the register
# file is split.

if __name__ == "__main__":
    M, N, K = _harness.size((1024, 1024, 1024), (8192, 8192, 8192))
    _harness.run(make_gemm_pipelined(M, N, K), M, N, K)
