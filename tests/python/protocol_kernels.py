"""Small kernels for the protocol rules (test_protocols.py): each builder returns the
legal kernel, or with one argument changed the illegal twin the rule refuses.

Conventions as in ``tma_kernels.py``: one thread initialises the barriers, fences the
init and a CTA barrier publishes it; copies complete on ``mbar=``; waits are
``T.cuda.mbarrier_wait_phase``.
"""

from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.tma import swizzled_layout
from tvm_tirx.tile.families.wgmma import accumulator_layout

LOAD2D = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
MULTICAST2D = LOAD2D + ".multicast::cluster"
STORE2D = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"
EXPECT = "mbarrier.arrive.expect_tx.shared::cta.b64"
ARRIVE = "mbarrier.arrive.shared::cta.b64"
INIT = "mbarrier.init.shared::cta.b64"
FENCE_INIT = "fence.mbarrier_init.release.cluster"
FENCE_PROXY = "fence.proxy.async.shared::cta"
MMA = "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"


def box_load(tx=16384):
    """A 64 x 64 float32 box (16384 bytes) loaded by TMA, every thread waits and reads it;
    ``tx``: the bytes ``arrive.expect_tx`` announces (the issue's hang: 4096)."""

    @T.function
    def box_load(A: T.Tensor((64, 64), "float32", align=16), B: T.Tensor((64, 64), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, dynamic_smem_bytes=16384 + 1024))
        tile = T.alloc_shared((64, 64), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx[INIT], bar, count=T.uint32(1))
            T.ptx[FENCE_INIT]()
        T.cuda.cta_sync()
        if tid == 0:
            T.cuda.tile.apply(T.ptx[EXPECT], bar, tx=T.uint32(tx))
            T.cuda.tile.apply(T.ptx[LOAD2D], tile, A, mbar=bar, coords=(0, 0))
        T.cuda.mbarrier_wait_phase(bar, 0)
        for i in T.unroll(32):
            B[i * 2 + tid // 64, tid % 64] = tile[i * 2 + tid // 64, tid % 64]

    return box_load


def raw_bulk(tx=4096):
    """The same protocol in raw ``T.ptx`` calls: a 4096-byte ``cp.async.bulk``, ``tx`` announced."""

    @T.function
    def raw_bulk(A: T.Tensor((1024,), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=4096 + 64))
        buf = T.alloc_shared((1024,), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        if tid == 0:
            T.ptx[INIT](bar.ptr_to([0]), T.uint32(1))
            T.ptx[FENCE_INIT]()
        T.cuda.cta_sync()
        if tid == 0:
            T.ptx[EXPECT](bar.ptr_to([0]), T.uint32(tx))
            T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"](
                buf.ptr_to([0]), A.ptr_to([0]), T.uint32(4096), bar.ptr_to([0]))
        T.cuda.mbarrier_wait_phase(bar, 0)

    return raw_bulk


def ring(stages=3, tiles=12, empty_count=32, stage_tx=1024, consumer_parity=0, consumers=32, phase="counter"):
    """The tutorial's three-stage pipeline: a producer thread fills ``stages`` buffers
    (``full`` barriers, ``stage_tx`` bytes announced), ``consumers`` lanes (a multiple of
    32) double each tile and release it (``empty``, init count ``empty_count``).  The
    producer's first wait on each ``empty`` is on parity 1 (returns at once: the ring
    starts empty).  The consumers wait on ``full`` with parity ``phase``:
    ``"counter"``: ``(k // stages + consumer_parity) % 2``; ``"constant"``:
    ``consumer_parity`` at every use; ``"register"``: a register flipped
    (``phase ^= 1``) when the ring wraps."""
    rows = 8 * 32 // consumers  # the rows of a tile each consumer warp doubles

    @T.function
    def ring(A: T.Tensor((tiles * 8, 32), "float32", align=16), B: T.Tensor((tiles * 8, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32 + consumers, dynamic_smem_bytes=stages * 1024 + 64))
        buf = T.alloc_shared((stages, 8, 32), "float32", scope="shared.dyn", align=128)
        full = T.alloc_shared((stages, 1), "uint64", scope="shared.dyn", align=8)
        empty = T.alloc_shared((stages, 1), "uint64", scope="shared.dyn", align=8)
        bit = T.alloc_local((1,), "int32")
        tid = T.cuda.thread_idx("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx[INIT], full, count=T.uint32(1))
            T.cuda.tile.apply(T.ptx[INIT], empty, count=T.uint32(empty_count))
            T.ptx[FENCE_INIT]()
        T.cuda.cta_sync()
        if tid == 0:
            for k in T.serial(tiles):
                s = k % stages
                T.cuda.mbarrier_wait_phase(empty.sub[s, :], (k // stages + 1) % 2)
                T.cuda.tile.apply(T.ptx[EXPECT], full.sub[s, :], tx=T.uint32(stage_tx))
                T.cuda.tile.apply(T.ptx[LOAD2D], buf.sub[s], A, mbar=full.sub[s, :], coords=(k * 8, 0))
        if tid >= 32:
            lane = tid - 32
            bit[0] = consumer_parity
            for k in T.serial(tiles):
                s = k % stages
                if phase == "counter":  # (Python conditions: decided while parsing)
                    T.cuda.mbarrier_wait_phase(full.sub[s, :], (k // stages + consumer_parity) % 2)
                if phase == "constant":
                    T.cuda.mbarrier_wait_phase(full.sub[s, :], consumer_parity)
                if phase == "register":
                    T.cuda.mbarrier_wait_phase(full.sub[s, :], bit[0])
                    if s == stages - 1:
                        bit[0] = bit[0] ^ 1
                for r in T.unroll(rows):
                    row = lane // 32 * rows + r
                    B[k * 8 + row, lane % 32] = buf[s, row, lane % 32] * T.float32(2)
                T.cuda.tile.apply(T.ptx[ARRIVE], empty.sub[s, :])

    return ring


def arrivals(count=1):
    """Thread 0 arrives once on a barrier of init count ``count`` that every thread waits on."""

    @T.function
    def arrivals():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        bar = T.alloc_shared((1,), "uint64", align=8)
        tid = T.cuda.thread_idx("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx[INIT], bar, count=T.uint32(count))
        T.cuda.cta_sync()
        if tid == 0:
            T.cuda.tile.apply(T.ptx[ARRIVE], bar)
        T.cuda.mbarrier_wait_phase(bar, 0)

    return arrivals


def elected_arrivals(count=2):
    """Arrivals under ``elect_sync``: one per warp, which the rules do not count."""

    @T.function
    def elected_arrivals():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        bar = T.alloc_shared((1,), "uint64", align=8)
        tid = T.cuda.thread_idx("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx[INIT], bar, count=T.uint32(count))
        T.cuda.cta_sync()
        if T.cuda.elect_sync() != T.uint32(0):
            T.cuda.tile.apply(T.ptx[ARRIVE], bar)
        T.cuda.mbarrier_wait_phase(bar, 0)

    return elected_arrivals


def init_then_use(barrier=True):
    """Thread 0 initialises a barrier all 64 threads arrive on and wait on; ``barrier``:
    a CTA barrier between the init and the uses."""

    @T.function
    def init_then_use():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        bar = T.alloc_shared((1,), "uint64", align=8)
        tid = T.cuda.thread_idx("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx[INIT], bar, count=T.uint32(64))
        if barrier:
            T.cuda.cta_sync()
        T.cuda.tile.apply(T.ptx[ARRIVE], bar)
        T.cuda.mbarrier_wait_phase(bar, 0)

    return init_then_use


def init_then_copy(fence=True):
    """Thread 0 initialises a barrier and at once issues a TMA load completing on it;
    ``fence``: ``fence.mbarrier_init`` between (the TMA unit is another agent)."""

    @T.function
    def init_then_copy(A: T.Tensor((8, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=2048))
        tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx[INIT], bar, count=T.uint32(1))
            if fence:
                T.ptx[FENCE_INIT]()
            T.cuda.tile.apply(T.ptx[EXPECT], bar, tx=T.uint32(1024))
            T.cuda.tile.apply(T.ptx[LOAD2D], tile, A, mbar=bar, coords=(0, 0))
            T.cuda.mbarrier_wait_phase(bar, 0)

    return init_then_copy


def multicast_pair(cluster_barriers=(True, True), fence=True):
    """CTA 0 of a 2-CTA cluster multicasts a box into both; ``cluster_barriers``: the
    cluster barrier after the init and the one before the kernel ends."""
    first, last = cluster_barriers

    @T.function
    def multicast_pair(A: T.Tensor((8, 32), "float32", align=16), B: T.Tensor((2, 8, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=256, cluster=2, dynamic_smem_bytes=2048))
        tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        rank = T.cuda.cluster_ctaid("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx[INIT], bar, count=T.uint32(1))
            if fence:
                T.ptx[FENCE_INIT]()
        if first:
            T.cuda.cluster_sync()
        else:
            T.cuda.cta_sync()
        if tid == 0:
            T.cuda.tile.apply(T.ptx[EXPECT], bar, tx=T.uint32(1024))
            if rank == 0:
                T.cuda.tile.apply(T.ptx[MULTICAST2D], tile, A, mbar=bar, coords=(0, 0), cta_mask=T.uint16(3))
        T.cuda.mbarrier_wait_phase(bar, 0)
        B[rank, tid // 32, tid % 32] = tile[tid // 32, tid % 32]
        if last:
            T.cuda.cluster_sync()

    return multicast_pair


def read_after_copy(wait=True):
    """Thread 0 loads a box; every thread reads it, after a wait on its barrier (``wait``) or not."""

    @T.function
    def read_after_copy(A: T.Tensor((8, 32), "float32", align=16), B: T.Tensor((8, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        tile = T.alloc_shared((8, 32), "float32", align=128)
        bar = T.alloc_shared((1,), "uint64", align=8)
        tid = T.cuda.thread_idx("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx[INIT], bar, count=T.uint32(1))
            T.ptx[FENCE_INIT]()
        T.cuda.cta_sync()
        if tid == 0:
            T.cuda.tile.apply(T.ptx[EXPECT], bar, tx=T.uint32(1024))
            T.cuda.tile.apply(T.ptx[LOAD2D], tile, A, mbar=bar, coords=(0, 0))
        if wait:
            T.cuda.mbarrier_wait_phase(bar, 0)
        B[tid // 32, tid % 32] = tile[tid // 32, tid % 32]

    return read_after_copy


def refill(barrier=True):
    """One buffer, four tiles: thread 0 loads, every thread reads; ``barrier``: a CTA
    barrier after the reads, before thread 0 refills the buffer in the next iteration."""

    @T.function
    def refill(A: T.Tensor((32, 32), "float32", align=16), B: T.Tensor((32, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        tile = T.alloc_shared((8, 32), "float32", align=128)
        bar = T.alloc_shared((1,), "uint64", align=8)
        tid = T.cuda.thread_idx("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx[INIT], bar, count=T.uint32(1))
            T.ptx[FENCE_INIT]()
        T.cuda.cta_sync()
        for k in T.serial(4):
            if tid == 0:
                T.cuda.tile.apply(T.ptx[EXPECT], bar, tx=T.uint32(1024))
                T.cuda.tile.apply(T.ptx[LOAD2D], tile, A, mbar=bar, coords=(k * 8, 0))
            T.cuda.mbarrier_wait_phase(bar, k % 2)
            B[k * 8 + tid // 32, tid % 32] = tile[tid // 32, tid % 32]
            if barrier:
                T.cuda.cta_sync()

    return refill


def store_tile(fence=True, barrier=True, by_instruction=False):
    """Every thread writes one element of a tile (a plain store, or ``st.shared`` with
    ``by_instruction``); thread 0 TMA-stores it.  ``fence``: ``fence.proxy.async``
    after the writes; ``barrier``: a CTA barrier before the store (the issue's stale
    data: neither)."""

    @T.function
    def store_tile(B: T.Tensor((8, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        tile = T.alloc_shared((8, 32), "float32", align=128)
        one = T.alloc_local((1,), "float32")
        tid = T.cuda.thread_idx("x")
        one[0] = T.float32(1)
        if by_instruction:
            T.cuda.tile.apply(T.ptx["st.shared.f32"], tile.sub[tid // 32, tid % 32 : tid % 32 + 1], one)
        else:
            tile[tid // 32, tid % 32] = one[0]
        if fence:
            T.ptx[FENCE_PROXY]()
        if barrier:
            T.cuda.cta_sync()
        if tid == 0:
            T.cuda.tile.apply(T.ptx[STORE2D], B, tile, coords=(0, 0))
            T.ptx["cp.async.bulk.commit_group"]()
            T.ptx["cp.async.bulk.wait_group"](0)

    return store_tile


def store_loop(wait=0):
    """Four tiles written into one buffer and TMA-stored; ``wait``: the ``N`` of the
    ``cp.async.bulk.wait_group.read`` after each store's commit (None: no wait), before
    the barrier that lets the threads rewrite the buffer."""

    @T.function
    def store_loop(B: T.Tensor((32, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        tile = T.alloc_shared((8, 32), "float32", align=128)
        tid = T.cuda.thread_idx("x")
        for i in T.serial(4):
            tile[tid // 32, tid % 32] = T.float32(1)
            T.ptx[FENCE_PROXY]()
            T.cuda.cta_sync()
            if tid == 0:
                T.cuda.tile.apply(T.ptx[STORE2D], B, tile, coords=(i * 8, 0))
                T.ptx["cp.async.bulk.commit_group"]()
                if wait is not None:
                    T.ptx["cp.async.bulk.wait_group.read"](wait)
            T.cuda.cta_sync()

    return store_loop


SA = swizzled_layout((64, 64), "bfloat16", 3)
SB = swizzled_layout((256, 64), "bfloat16", 3)


def wgmma_after_stores(fence=True):
    """A warpgroup writes the A and B tiles with plain stores and multiplies them
    (``wgmma`` reads both through the async proxy); ``fence``: ``fence.proxy.async``
    between the stores and the barrier."""

    @T.function
    def wgmma_after_stores(C: T.Tensor((64, 256), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, dynamic_smem_bytes=40960 + 1024))
        sa = T.alloc_shared((64, 64), "bfloat16", scope="shared.dyn", align=1024, layout=SA)
        sb = T.alloc_shared((256, 64), "bfloat16", scope="shared.dyn", align=1024, layout=SB)
        acc = T.alloc_local((64, 256), "float32", layout=accumulator_layout(256))
        tid = T.cuda.thread_idx("x")
        for i in T.serial(32):
            sa[i * 2 + tid // 64, tid % 64] = T.bfloat16(1)
        for i in T.serial(128):
            sb[i * 2 + tid // 64, tid % 64] = T.bfloat16(1)
        if fence:
            T.ptx[FENCE_PROXY]()
        T.cuda.cta_sync()
        T.ptx["wgmma.fence.sync.aligned"]()
        T.cuda.tile.apply(T.ptx[MMA], acc, sa.view(1, 64, 4, 16).permute(0, 2, 1, 3), sb.view(256, 4, 16).permute(1, 0, 2),
                          scope="warpgroup", scale_d=False)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)

    return wgmma_after_stores
