"""Hopper data movement written with apache-tvm's raw ``T.ptx[...]`` intrinsics (no tile.apply).

These are the reference ("Expected") kernels for the mbarrier, cp.async.bulk and TMA
tile families (issue 14): each instruction is spelled exactly as apache-tvm 0.27's PTX
table takes it, so a family's lowering can be compared against them.

Conventions used throughout (apache-tvm 0.27):

* shared-memory operands (``addr`` slots in ``.shared::*`` spaces) are passed as the
  generic pointer ``buf.ptr_to([...])``; the engine converts it with
  ``__cvta_generic_to_shared`` into the 32-bit shared-window address the PTX needs;
* a global operand (``cp.async.bulk`` source/destination) is ``A.ptr_to([...])`` too,
  passed as a 64-bit generic address;
* a tensor map is encoded on the host before ``T.device_entry`` and passed as
  ``T.address_of(map)`` (the kernel receives ``const __grid_constant__ CUtensorMap``);
* ``mbarrier.try_wait`` polls once: its ``pred`` destination is a ``uint32`` local
  element (the helper ``selp``s the predicate into it) and the wait is a ``while`` loop
  on that flag;
* immediates (``cp.async.bulk.wait_group N``) are plain Python ints.
"""

from tvm_tirx.script import tirx as T

# tma_add_one: 8 x 32 float32, one box ----------------------------------------------------
ROWS, COLS = 8, 32
BOX_BYTES = ROWS * COLS * 4

# bulk_copy_4k: 4 KiB through shared memory ----------------------------------------------
BULK_ELEMS = 1024
BULK_BYTES = BULK_ELEMS * 4

# tma_swizzle128_bf16: 64 x 64 bfloat16 with the 128-byte swizzle -------------------------
SW = 64
SW_BYTES = SW * SW * 2


@T.function
def tma_add_one(A: T.Tensor((ROWS, COLS), "float32", align=16), B: T.Tensor((ROWS, COLS), "float32", align=16)):
    # Host: one tensor map per tensor; dims innermost first, byte strides of the outer
    # dims, the box, element strides.
    a_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
    b_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
    T.tensormap_encode_tiled(a_map, A.data, COLS, ROWS, COLS * 4, COLS, ROWS, 1, 1,
                             descriptor_dtype="float32", rank=2, interleave=0, swizzle=0,
                             l2_promotion=0, oob_fill=0, force_cu_dtype=-1)
    T.tensormap_encode_tiled(b_map, B.data, COLS, ROWS, COLS * 4, COLS, ROWS, 1, 1,
                             descriptor_dtype="float32", rank=2, interleave=0, swizzle=0,
                             l2_promotion=0, oob_fill=0, force_cu_dtype=-1)
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=ROWS * COLS, dynamic_smem_bytes=2048))
    tile = T.alloc_shared((ROWS, COLS), "float32", scope="shared.dyn", align=128)
    bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
    tid = T.cuda.thread_idx("x")
    if tid < 32:
        if T.cuda.elect_sync() != T.uint32(0):
            T.ptx["mbarrier.init.shared::cta.b64"](bar.ptr_to([0]), T.uint32(1))
            # make the init visible to the async proxy (the TMA unit's complete_tx)
            T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cta_sync()
    if tid < 32:
        if T.cuda.elect_sync() != T.uint32(0):
            T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bar.ptr_to([0]), T.uint32(BOX_BYTES))
            T.ptx["cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"](
                tile.ptr_to([0, 0]), T.address_of(a_map), T.int32(0), T.int32(0), bar.ptr_to([0]))
    done = T.alloc_local((1,), "uint32")
    done[0] = T.uint32(0)
    while done[0] == T.uint32(0):
        T.ptx["mbarrier.try_wait.parity.shared::cta.b64"](done[0], bar.ptr_to([0]), T.uint32(0))
    v = T.alloc_local((1,), "float32")
    v[0] = tile[tid // COLS, tid % COLS]
    tile[tid // COLS, tid % COLS] = v[0] + T.float32(1)
    # generic-proxy writes -> visible to the async proxy (the TMA store reads them)
    T.ptx["fence.proxy.async.shared::cta"]()
    T.cuda.cta_sync()
    if tid < 32:
        if T.cuda.elect_sync() != T.uint32(0):
            T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"](
                T.address_of(b_map), T.int32(0), T.int32(0), tile.ptr_to([0, 0]))
            T.ptx["cp.async.bulk.commit_group"]()
            T.ptx["cp.async.bulk.wait_group"](0)


@T.function
def bulk_copy_4k(A: T.Tensor((BULK_ELEMS,), "float32", align=16), B: T.Tensor((BULK_ELEMS,), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256, dynamic_smem_bytes=BULK_BYTES + 64))
    buf = T.alloc_shared((BULK_ELEMS,), "float32", scope="shared.dyn", align=128)
    bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bar.ptr_to([0]), T.uint32(1))
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bar.ptr_to([0]), T.uint32(BULK_BYTES))
        T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"](
            buf.ptr_to([0]), A.ptr_to([0]), T.uint32(BULK_BYTES), bar.ptr_to([0]))
    done = T.alloc_local((1,), "uint32")
    done[0] = T.uint32(0)
    while done[0] == T.uint32(0):
        T.ptx["mbarrier.try_wait.parity.shared::cta.b64"](done[0], bar.ptr_to([0]), T.uint32(0))
    for i in T.unroll(BULK_ELEMS // 256):
        buf[i * 256 + tid] = buf[i * 256 + tid] * T.float32(2)
    T.ptx["fence.proxy.async.shared::cta"]()
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx["cp.async.bulk.global.shared::cta.bulk_group"](B.ptr_to([0]), buf.ptr_to([0]), T.uint32(BULK_BYTES))
        T.ptx["cp.async.bulk.commit_group"]()
        T.ptx["cp.async.bulk.wait_group"](0)


@T.function
def tma_swizzle128_bf16(A: T.Tensor((SW, SW), "bfloat16", align=16), B: T.Tensor((SW, SW), "bfloat16", align=16)):
    # One 64 x 64 box whose 128-byte rows are stored with the 128-byte swizzle
    # (swizzle=3, CU_TENSOR_MAP_SWIZZLE_128B): the 16-byte chunk c of row r lands at
    # chunk c ^ (r % 8).  B receives the shared image as it is (swizzled).
    a_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
    T.tensormap_encode_tiled(a_map, A.data, SW, SW, SW * 2, SW, SW, 1, 1,
                             descriptor_dtype="bfloat16", rank=2, interleave=0, swizzle=3,
                             l2_promotion=0, oob_fill=0, force_cu_dtype=-1)
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, dynamic_smem_bytes=1024 + SW_BYTES))
    bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
    # 1024-byte aligned: the swizzle pattern is taken from address bits [4, 10)
    tile = T.alloc_shared((SW, SW), "bfloat16", scope="shared.dyn", align=1024)
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.ptx["mbarrier.init.shared::cta.b64"](bar.ptr_to([0]), T.uint32(1))
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bar.ptr_to([0]), T.uint32(SW_BYTES))
        T.ptx["cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"](
            tile.ptr_to([0, 0]), T.address_of(a_map), T.int32(0), T.int32(0), bar.ptr_to([0]))
    done = T.alloc_local((1,), "uint32")
    done[0] = T.uint32(0)
    while done[0] == T.uint32(0):
        T.ptx["mbarrier.try_wait.parity.shared::cta.b64"](done[0], bar.ptr_to([0]), T.uint32(0))
    for i in T.unroll(SW * SW // 128):
        B[(i * 128 + tid) // SW, (i * 128 + tid) % SW] = tile[(i * 128 + tid) // SW, (i * 128 + tid) % SW]


#: name -> kernel, for the tests.
KERNELS = {
    "tma_add_one": tma_add_one,
    "bulk_copy_4k": bulk_copy_4k,
    "tma_swizzle128_bf16": tma_swizzle128_bf16,
}
