"""Kernels of the TMA tile family (``cp.async.bulk.tensor`` under ``T.cuda.tile.apply``).

The mbarrier is driven with raw ``T.ptx["mbarrier..."]`` calls, as in
``hopper_raw_kernels.py``: init by one thread, ``fence.mbarrier_init``, a barrier,
``arrive.expect_tx`` with the bytes the TMA brings, then every thread polls
``try_wait.parity``.  Each kernel's torch reference is in ``test_family_tma.py``.
"""

from tvm.tirx.layout import Axis, S, TileLayout

from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.tma import swizzled_layout

LOAD2D = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
LOAD3D = "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
STORE2D = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"
STORE3D = "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group"
REDUCE_ADD2D = "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group"
MULTICAST2D = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"

ROWS, COLS = 8, 32
BOX_BYTES = ROWS * COLS * 4


@T.macro
def _init_barrier(bar, tid):
    """Thread 0 makes ``bar`` expect one arrival and publishes it to the TMA unit."""
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bar.ptr_to([0]), T.uint32(1))
        T.ptx["fence.mbarrier_init.release.cluster"]()


@T.macro
def _wait_phase0(bar):
    """Every thread polls ``try_wait.parity`` until phase 0 of ``bar`` completes."""
    done = T.alloc_local((1,), "uint32")
    done[0] = T.uint32(0)
    while done[0] == T.uint32(0):
        T.ptx["mbarrier.try_wait.parity.shared::cta.b64"](done[0], bar.ptr_to([0]), T.uint32(0))


# -- tma_add_one: 8 x 32 float32, TMA load, +1, TMA store ---------------------------------------


@T.function
def tma_add_one(A: T.Tensor((ROWS, COLS), "float32", align=16), B: T.Tensor((ROWS, COLS), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=ROWS * COLS, dynamic_smem_bytes=2048))
    tile = T.alloc_shared((ROWS, COLS), "float32", scope="shared.dyn", align=128)
    bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
    tid = T.cuda.thread_idx("x")
    _init_barrier(bar, tid)
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bar.ptr_to([0]), T.uint32(BOX_BYTES))
        T.cuda.tile.apply(T.ptx[LOAD2D], tile, A, mbar=bar, coords=(0, 0))
    _wait_phase0(bar)
    tile[tid // COLS, tid % COLS] = tile[tid // COLS, tid % COLS] + T.float32(1)
    T.ptx["fence.proxy.async.shared::cta"]()  # thread writes -> visible to the TMA store
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.tile.apply(T.ptx[STORE2D], B, tile, coords=(0, 0))
        T.ptx["cp.async.bulk.commit_group"]()
        T.ptx["cp.async.bulk.wait_group"](0)


# -- coord_steps_3d: a (2, 8, 32) box repeated over two axes ------------------------------------
# A is (4, 16, 64); boxes at (2*i, 8*j, 32) for i, j in 0..1 cover A[:, :, 32:64]; the same
# boxes are stored to B, whose other half stays as it was (zeros).

D0, D1, D2 = 4, 16, 64
BOX3 = (2, 8, 32)
STEPS3 = ((2, 0, 0), (0, 8, 0))
BYTES3 = 2 * 2 * 2 * 8 * 32 * 4


@T.function
def coord_steps_3d(A: T.Tensor((D0, D1, D2), "float32", align=16), B: T.Tensor((D0, D1, D2), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=BYTES3 + 128))
    tiles = T.alloc_shared((2, 2, *BOX3), "float32", scope="shared.dyn", align=128)
    bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
    tid = T.cuda.thread_idx("x")
    _init_barrier(bar, tid)
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bar.ptr_to([0]), T.uint32(BYTES3))
        T.cuda.tile.apply(T.ptx[LOAD3D], tiles, A, mbar=bar, coords=(0, 0, 32), coord_steps=STEPS3)
    _wait_phase0(bar)
    if tid == 0:
        T.cuda.tile.apply(T.ptx[STORE3D], B, tiles, coords=(0, 0, 32), coord_steps=STEPS3)
        T.ptx["cp.async.bulk.commit_group"]()
        T.ptx["cp.async.bulk.wait_group"](0)


# -- swizzle128_ldmatrix: a 64 x 64 bf16 tile with the 128-byte swizzle, read by ldmatrix -------
# The TMA writes the swizzled image; an int32 carve-out over the same bytes (the swizzle is
# in bytes, so its layout is the int32 image of the same swizzle) feeds ldmatrix.x4.  Lane
# 4*r + w receives word (m, r, w) of the four 8x8 matrices of each (row block, column half);
# it writes them back unswizzled to B (64 x 32 words = the 64 x 64 bf16 tile).

SW = 64
SW_BYTES = SW * SW * 2
L16 = swizzled_layout((SW, SW), "bfloat16", 3)
L32 = swizzled_layout((SW, SW // 2), "int32", 3)
FRAG = TileLayout(S[(8, 2, 4, 8, 4) : (8, 4, 1, 4 @ Axis.laneid, 1 @ Axis.laneid)])


@T.function
def swizzle128_ldmatrix(A: T.Tensor((SW, SW), "bfloat16", align=16), B: T.Tensor((SW, SW // 2), "int32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=SW_BYTES + 64))
    tile = T.alloc_shared((SW, SW), "bfloat16", scope="shared.dyn", align=1024, layout=L16)
    words = T.alloc_shared((SW, SW // 2), "int32", scope="shared.dyn", align=1024, layout=L32, offset=0, alias=True)
    bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
    regs = T.alloc_local((8, 2, 4, 8, 4), "int32", layout=FRAG)
    tid = T.cuda.thread_idx("x")
    _init_barrier(bar, tid)
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bar.ptr_to([0]), T.uint32(SW_BYTES))
        T.cuda.tile.apply(T.ptx[LOAD2D], tile, A, mbar=bar, coords=(0, 0), swizzle=3)
    _wait_phase0(bar)
    # words[rb*8 + r, (ch*4 + m)*4 + w] -> atom (m, r, w) at repeat (rb, ch)
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"], regs, words.view(8, 8, 2, 4, 4).permute(0, 2, 3, 1, 4), scope="warp"
    )
    mine = regs.local()
    for rb in T.unroll(8):
        for ch in T.unroll(2):
            for m in T.unroll(4):
                B[rb * 8 + tid // 4, (ch * 4 + m) * 4 + tid % 4] = mine[rb * 8 + ch * 4 + m]


# -- multicast_pair: CTA 0 of a 2-CTA cluster loads one box into both CTAs ------------------------


@T.function
def multicast_pair(A: T.Tensor((ROWS, COLS), "float32", align=16), B: T.Tensor((2, ROWS, COLS), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=ROWS * COLS, cluster=2, dynamic_smem_bytes=2048))
    tile = T.alloc_shared((ROWS, COLS), "float32", scope="shared.dyn", align=128)
    bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
    tid = T.cuda.thread_idx("x")
    rank = T.cuda.cluster_ctaid("x")
    _init_barrier(bar, tid)
    T.cuda.cluster_sync()  # both barriers exist before the multicast signals them
    if tid == 0:
        # each CTA expects the box in its own barrier; the multicast completes both
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bar.ptr_to([0]), T.uint32(BOX_BYTES))
    if tid == 0:
        if rank == 0:
            T.cuda.tile.apply(T.ptx[MULTICAST2D], tile, A, mbar=bar, coords=(0, 0), cta_mask=T.uint16(3))
    _wait_phase0(bar)
    B[rank, tid // COLS, tid % COLS] = tile[tid // COLS, tid % COLS]
    T.cuda.cluster_sync()


# -- store_and_reduce: one TMA load, a TMA store to B and a TMA add-reduction into C -------------


@T.function
def store_and_reduce(
    A: T.Tensor((ROWS, COLS), "float32", align=16),
    B: T.Tensor((ROWS, COLS), "float32", align=16),
    C: T.Tensor((ROWS, COLS), "float32", align=16),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=2048))
    tile = T.alloc_shared((ROWS, COLS), "float32", scope="shared.dyn", align=128)
    bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
    tid = T.cuda.thread_idx("x")
    _init_barrier(bar, tid)
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bar.ptr_to([0]), T.uint32(BOX_BYTES))
        T.cuda.tile.apply(T.ptx[LOAD2D], tile, A, mbar=bar, coords=(0, 0))
    _wait_phase0(bar)
    if tid == 0:
        T.cuda.tile.apply(T.ptx[STORE2D], B, tile, coords=(0, 0))
        T.cuda.tile.apply(T.ptx[REDUCE_ADD2D], C, tile, coords=(0, 0))
        T.ptx["cp.async.bulk.commit_group"]()
        T.ptx["cp.async.bulk.wait_group"](0)


# -- edge_box: an 8 x 32 box at (4, 16) of a 10 x 40 tensor: 4 rows and 8 columns hang over -----
# the load fills them with zeros (B gets the box as loaded); the store back to C at the same
# place writes only the elements inside C.

ER, EC = 10, 40
EDGE_AT = (4, 16)


@T.function
def edge_box(
    A: T.Tensor((ER, EC), "float32", align=16),
    B: T.Tensor((ROWS, COLS), "float32", align=16),
    C: T.Tensor((ER, EC), "float32", align=16),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=ROWS * COLS, dynamic_smem_bytes=2048))
    tile = T.alloc_shared((ROWS, COLS), "float32", scope="shared.dyn", align=128)
    bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
    tid = T.cuda.thread_idx("x")
    _init_barrier(bar, tid)
    T.cuda.cta_sync()
    if tid == 0:
        # the whole box counts, the zero-filled elements too
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bar.ptr_to([0]), T.uint32(BOX_BYTES))
        T.cuda.tile.apply(T.ptx[LOAD2D], tile, A, mbar=bar, coords=EDGE_AT)
    _wait_phase0(bar)
    B[tid // COLS, tid % COLS] = tile[tid // COLS, tid % COLS]
    if tid == 0:
        T.cuda.tile.apply(T.ptx[STORE2D], C, tile, coords=EDGE_AT)
        T.ptx["cp.async.bulk.commit_group"]()
        T.ptx["cp.async.bulk.wait_group"](0)


#: name -> kernel, for the tests.
KERNELS = {
    "tma_add_one": tma_add_one,
    "coord_steps_3d": coord_steps_3d,
    "swizzle128_ldmatrix": swizzle128_ldmatrix,
    "multicast_pair": multicast_pair,
    "store_and_reduce": store_and_reduce,
    "edge_box": edge_box,
}


# -- run-time extents (issue 23): B = A + 1 for A of any (m, n), 32 x 32 boxes --------------------

RT_M, RT_N = T.dynamic("m"), T.dynamic("n")
RT_BOX = 32


@T.function
def tma_add_one_any_shape(A: T.Tensor((RT_M, RT_N), "float32", align=16), B: T.Tensor((RT_M, RT_N), "float32", align=16)):
    # one 32 x 32 box per CTA; the TMA zero-fills what lies past the tensor's edge on the load
    # and skips it on the store, so B = A + 1 exactly, whatever (m, n) is at run time
    T.device_entry(launch=T.cuda.LaunchConfig(grid=(T.ceildiv(RT_N, RT_BOX), T.ceildiv(RT_M, RT_BOX)), block=256))
    tile = T.alloc_shared((RT_BOX, RT_BOX), "float32", align=128)
    bar = T.alloc_shared((1,), "uint64", align=8)
    tid = T.cuda.thread_idx("x")
    row0 = T.cuda.block_idx("y") * RT_BOX
    col0 = T.cuda.block_idx("x") * RT_BOX
    _init_barrier(bar, tid)
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar, tx=T.uint32(RT_BOX * RT_BOX * 4))
        T.cuda.tile.apply(T.ptx[LOAD2D], tile, A, mbar=bar, coords=(row0, col0))
    _wait_phase0(bar)
    for q in T.unroll(RT_BOX * RT_BOX // 256):
        e = q * 256 + tid
        tile[e // RT_BOX, e % RT_BOX] = tile[e // RT_BOX, e % RT_BOX] + T.float32(1)
    T.ptx["fence.proxy.async.shared::cta"]()
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.tile.apply(T.ptx[STORE2D], B, tile, coords=(row0, col0))
        T.ptx["cp.async.bulk.commit_group"]()
        T.ptx["cp.async.bulk.wait_group"](0)
