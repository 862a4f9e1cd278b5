"""Small kernels for the protocol rules of issue 44 (test_protocol_loops.py): a copied tile
read across a CTA barrier with no wait on its mbarrier, and accumulators written between
``wgmma.fence`` and the wgmma.  Each builder returns the legal kernel, or with one argument
changed the illegal twin.  The ring kernels are ``protocol_kernels.ring``."""

from tvm.tirx.layout import ComposeLayout, S, TileLayout

from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.wgmma import accumulator_layout

from protocol_kernels import EXPECT, FENCE_INIT, INIT, LOAD2D, MULTICAST2D

MMA64 = "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"
SW128 = ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)]))


def read_across_barrier(wait=True):
    """Thread 0 loads a box; ``wait``: thread 0 waits on its barrier before the CTA
    barrier (the others learn of the data through it); every thread then reads the tile
    with ``ld.shared``.  Without the wait the CTA barrier orders nothing: the TMA may
    still be writing."""

    @T.function
    def read_across_barrier(A: T.Tensor((8, 32), "float32", align=16), B: T.Tensor((8, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        tile = T.alloc_shared((8, 32), "float32", align=128)
        bar = T.alloc_shared((1,), "uint64", align=8)
        one = T.alloc_local((1,), "float32")
        tid = T.cuda.thread_idx("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx[INIT], bar, count=T.uint32(1))
            T.ptx[FENCE_INIT]()
        T.cuda.cta_sync()
        if tid == 0:
            T.cuda.tile.apply(T.ptx[EXPECT], bar, tx=T.uint32(1024))
            T.cuda.tile.apply(T.ptx[LOAD2D], tile, A, mbar=bar, coords=(0, 0))
            if wait:  # (Python conditions: decided while parsing)
                T.cuda.mbarrier_wait_phase(bar, 0)
        T.cuda.cta_sync()
        T.cuda.tile.apply(T.ptx["ld.shared.f32"], one, tile.sub[tid // 32, tid % 32 : tid % 32 + 1])
        B[tid // 32, tid % 32] = one[0]

    return read_across_barrier


def wgmma_across_barrier(wait=True):
    """Thread 0 loads the A and B tiles of one wgmma by TMA; ``wait``: it waits on their
    barrier before the CTA barrier; then the warpgroup multiplies them (the wgmma reads
    both through the async proxy)."""

    @T.function
    def wgmma_across_barrier(A: T.Tensor((64, 64), "bfloat16", align=16), B: T.Tensor((64, 64), "bfloat16", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, dynamic_smem_bytes=16384 + 2048))
        sa = T.alloc_shared((64, 64), "bfloat16", scope="shared.dyn", align=1024, layout=SW128)
        sb = T.alloc_shared((64, 64), "bfloat16", scope="shared.dyn", align=1024, layout=SW128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        acc = T.alloc_local((1, 64, 64), "float32", layout=accumulator_layout(64, 1))
        tid = T.cuda.thread_idx("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx[INIT], bar, count=T.uint32(1))
            T.ptx[FENCE_INIT]()
        T.cuda.cta_sync()
        if tid == 0:
            T.cuda.tile.apply(T.ptx[EXPECT], bar, tx=T.uint32(16384))
            T.cuda.tile.apply(T.ptx[LOAD2D], sa, A, mbar=bar, coords=(0, 0), swizzle=3)
            T.cuda.tile.apply(T.ptx[LOAD2D], sb, B, mbar=bar, coords=(0, 0), swizzle=3)
            if wait:
                T.cuda.mbarrier_wait_phase(bar, 0)
        T.cuda.cta_sync()
        T.ptx["wgmma.fence.sync.aligned"]()
        T.cuda.tile.apply(T.ptx[MMA64], acc, sa.view(1, 64, 4, 16).permute(0, 2, 1, 3),
                          sb.view(64, 4, 16).permute(1, 0, 2), scope="warpgroup", scale_d=False)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)

    return wgmma_across_barrier


def zero_then_fence(fence_first=False):
    """A warpgroup clears its accumulators with ``mov`` and accumulates one product into
    them; ``fence_first``: ``wgmma.fence`` before the ``mov`` (the ISA wants it after
    every register write the wgmma depends on)."""

    @T.function
    def zero_then_fence():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        sa = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=SW128)
        sb = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=SW128)
        acc = T.alloc_local((1, 64, 64), "float32", layout=accumulator_layout(64, 1))
        if fence_first:
            T.ptx["wgmma.fence.sync.aligned"]()
        T.cuda.tile.apply(T.ptx["mov.b32"], acc.local().view(32, 1), T.float32(0))
        if not fence_first:
            T.ptx["wgmma.fence.sync.aligned"]()
        T.cuda.tile.apply(T.ptx[MMA64], acc, sa.view(1, 64, 4, 16).permute(0, 2, 1, 3),
                          sb.view(64, 4, 16).permute(1, 0, 2), scope="warpgroup", scale_d=True)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)

    return zero_then_fence


def symmetric_multicast(tx=1024):
    """A 2-CTA cluster, symmetric: each CTA loads its half of an 8 x 32 float32 tile (512
    bytes) and multicasts it into both CTAs, so each CTA's barrier receives 1024 bytes;
    ``tx``: the bytes each CTA's ``arrive.expect_tx`` announces (512: its own half only)."""

    @T.function
    def symmetric_multicast(A: T.Tensor((8, 32), "float32", align=16), B: T.Tensor((2, 8, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=256, cluster=2, dynamic_smem_bytes=2048))
        tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        rank = T.cuda.cluster_ctaid("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx[INIT], bar, count=T.uint32(1))
            T.ptx[FENCE_INIT]()
        T.cuda.cluster_sync()
        if tid == 0:
            T.cuda.tile.apply(T.ptx[EXPECT], bar, tx=T.uint32(tx))
            T.cuda.tile.apply(T.ptx[MULTICAST2D], tile.view(2, 4, 32).sub[rank], A, mbar=bar,
                              coords=(rank * 4, 0), cta_mask=T.uint16(3))
        T.cuda.mbarrier_wait_phase(bar, 0)
        B[rank, tid // 32, tid % 32] = tile[tid // 32, tid % 32]
        T.cuda.cluster_sync()

    return symmetric_multicast
