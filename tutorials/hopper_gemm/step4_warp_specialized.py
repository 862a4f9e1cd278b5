"""
Step 4: warp specialization
===========================

Step 3's warpgroups take turns: the one that holds thread 0 stops computing
whenever thread 0 waits to refill a stage. Here the roles are split:

* a third warpgroup, the **producer**, only issues TMA loads. It never touches
  an accumulator, so it gives registers back: ``setmaxnreg.dec`` to 40 per
  thread;
* the two **consumer** warpgroups only wait for ``full[s]``, multiply and
  release stages. ``setmaxnreg.inc`` raises them to 232 registers per thread:
  the 128 fp32 accumulators, the 64 bf16x2 words of the epilogue, addresses and
  descriptors fit without spilling. 128 x 40 + 256 x 232 = 64,512 of the SM's
  65,536 registers: one CTA of 384 threads per SM, with the register file
  spent where the math is;
* the producer runs ahead by up to ``STAGES`` K tiles, bounded only by
  ``empty[s]``, so the ring stays full and neither consumer waits for the
  other;
* a consumer leaves one wgmma batch in flight: after committing K tile ``kt``
  it waits with ``wgmma.wait_group 1``, i.e. only for K tile ``kt - 1``, and
  releases *that* stage. The tensor cores always have the next product queued
  while the warpgroup waits, releases and loops.

Run it with ``python tutorials/hopper_gemm/step4_warp_specialized.py [--size M N K]``.
"""

# %%
# The register budget
# -------------------
# ``setmaxnreg`` moves registers between the warpgroups of a CTA at run time
# (PTX ISA 9.7.19.5). It needs the kernel's register count fixed at launch:
# ``LaunchConfig(min_blocks_per_sm=1)`` is CUDA's ``__launch_bounds__(384, 1)``,
# which lets ptxas allocate 168 per thread (65,536 / 384, rounded down to 8);
# the producer's ``dec`` to 40 frees what the consumers' ``inc`` to 232 takes.
# Each is a warpgroup collective: the tile family checks that the guard around
# it keeps whole warpgroups -- here, a branch on ``warp_id() // 4``.
#
# Phases again: the producer's wait on ``empty[s]`` for K tile ``kt`` is for
# the *previous* use of stage ``s`` to be released, parity ``(kt // STAGES +
# 1) % 2``. For the first ``STAGES`` tiles that is the phase "before" a fresh
# barrier's first one, which ``try_wait.parity`` reports as complete: the ring
# fills at once.

from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.tma import swizzled_layout
from tvm_tirx.tile.families.wgmma import accumulator_layout

import _harness
from step1_tile import BK, BN, WG_M, store_tile
from step3_pipeline import BM, STAGES, load_stage, multiply_stage, ring_smem_bytes


@T.macro
def release(empty, s, tid):
    """Thread 0 of a consumer warpgroup arrives on ``empty[s]``."""
    if tid % 128 == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], empty.sub[s, :])


def make_gemm_warp_specialized(m, n, k, stages=STAGES):
    """``C (m, n) = A (m, k) @ B (n, k)^T``, one 128 x 256 tile per CTA, a producer and
    two consumer warpgroups; m a multiple of 128, n of 256, k of 64."""
    tiles_n, k_tiles = n // BN, k // BK
    launch = T.cuda.LaunchConfig(grid=(m // BM) * tiles_n, block=384, min_blocks_per_sm=1,
                                 dynamic_smem_bytes=ring_smem_bytes(stages))

    @T.function
    def gemm_warp_specialized(
        A: T.Tensor((m, k), "bfloat16", align=16),
        B: T.Tensor((n, k), "bfloat16", align=16),
        C: T.Tensor((m, n), "bfloat16", align=16),
    ):
        T.device_entry(launch=launch)
        sa = T.alloc_shared((stages, BM, BK), "bfloat16", scope="shared.dyn", align=1024,
                            layout=swizzled_layout((stages, BM, BK), "bfloat16", 3))
        sb = T.alloc_shared((stages, BN, BK), "bfloat16", scope="shared.dyn", align=1024,
                            layout=swizzled_layout((stages, BN, BK), "bfloat16", 3))
        full = T.alloc_shared((stages, 1), "uint64", scope="shared.dyn", align=8)
        empty = T.alloc_shared((stages, 1), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        wg = T.cuda.warp_id() // 4
        bm = T.cuda.block_idx("x") // tiles_n
        bn = T.cuda.block_idx("x") % tiles_n
        if tid == 0:
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], full, count=T.uint32(1))
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], empty, count=T.uint32(2))
            T.ptx["fence.mbarrier_init.release.cluster"]()
        T.cuda.cta_sync()
        if wg == 0:  # the producer
            T.cuda.tile.apply(T.ptx["setmaxnreg.dec.sync.aligned.u32"], scope="warpgroup", nreg=40)
            if tid == 0:
                for kt in T.serial(k_tiles):
                    s = kt % stages
                    T.cuda.mbarrier_wait_phase(empty.sub[s, :], (kt // stages + 1) % 2)
                    load_stage(sa, sb, full, A, B, s, kt, bm, bn)
        else:  # the consumers: warpgroup 1 + c computes rows 64 c .. 64 c + 63
            T.cuda.tile.apply(T.ptx["setmaxnreg.inc.sync.aligned.u32"], scope="warpgroup", nreg=232)
            c = wg - 1
            acc = T.alloc_local((WG_M, BN), "float32", layout=accumulator_layout(BN))
            words = T.alloc_local((WG_M, BN // 2), "uint32", layout=accumulator_layout(BN, packed=True))
            for kt in T.serial(k_tiles):
                s = kt % stages
                T.cuda.mbarrier_wait_phase(full.sub[s, :], (kt // stages) % 2)
                multiply_stage(acc, sa, sb, s, c, kt > 0)
                T.ptx["wgmma.wait_group.sync.aligned"](1)  # K tile kt - 1 is done ...
                if kt > 0:
                    release(empty, (kt - 1) % stages, tid)  # ... and its stage may be refilled
            T.ptx["wgmma.wait_group.sync.aligned"](0)
            # (the last stage needs no release: this CTA loads nothing more)
            store_tile(acc, words, C, bm * 2 + c, bn)

    return gemm_warp_specialized


# %%
# Build, check, time
# ------------------
# This is the structure of the fastest Hopper GEMMs. What separates it from
# them is outside the K loop: the epilogue stores 4-byte words from registers
# while the tensor cores idle, and consecutive CTAs walk along a row of output
# tiles, so B is read from HBM by every row of CTAs that runs at the same time.
# Step 5 fixes both.

if __name__ == "__main__":
    M, N, K = _harness.size((1024, 1024, 1024), (8192, 8192, 8192))
    _harness.run(make_gemm_warp_specialized(M, N, K), M, N, K)
