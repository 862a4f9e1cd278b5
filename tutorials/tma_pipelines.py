"""
TMA and mbarrier pipelines
==========================

On Hopper the *tensor memory accelerator* (TMA) moves whole boxes of a tensor
between global and shared memory: one thread issues one
``cp.async.bulk.tensor`` and the hardware walks the box (PTX ISA
9.7.9.25.5.1). Under ``T.cuda.tile.apply`` a TMA call names

* the shared image -- its last N axes are the box (N from ``.Nd``), in the
  tensor's axis order; leading axes are repeat axes, one copy each;
* the global tensor -- a kernel parameter (or a strided view of one): its
  *tensor map* is encoded on the host, before the kernel starts, from the
  tensor's shape, strides and dtype, the box and ``swizzle=`` (once per
  distinct map in a kernel);
* ``coords=`` -- the box's first element, outermost axis first;
* for a load, ``mbar=`` -- the mbarrier whose transaction count the copy
  completes.

Loads are ``(shared, global)``, stores and reductions ``(global, shared)``.
Nothing is waited for unless the kernel says so: a load completes on its
mbarrier (``mbarrier.arrive.expect_tx`` arms it with the bytes, a
``try_wait.parity`` loop waits), a store is committed to a bulk group and
waited for with ``cp.async.bulk.wait_group``. The mbarriers are the
``mbarrier`` tile family's calls (one call sets up every barrier of a
``(stages, 1)`` tensor) and ``T.cuda.mbarrier_wait_phase``, the spin-wait
(docs/guides/mbarrier_bulk.rst). How they fit together -- the bytes each
``expect_tx`` announces, the parity of each wait, the fences -- is checked
when the kernel is lowered (the guide "Pipelines and protocols",
docs/guides/pipelines.rst). Every parameter of the call, the edges of
the tensor, multicast and run-time extents are on the TMA guide's page,
:doc:`../guides/tma`.

Run it with ``python tutorials/tma_pipelines.py``.
"""

# %%
# Setup
# -----

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.tma import swizzled_layout

ON_GPU = testing.has_cuda()
ARCH = None if ON_GPU else "sm_90a"
LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
STORE = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"


# %%
# One box in, one box out
# -----------------------
# Thread 0 initialises the barrier (``fence.mbarrier_init`` makes the init
# visible to the TMA unit), arms it with the box's 1024 bytes and issues the
# load. Every thread waits for phase 0 (``mbarrier_wait_phase`` loops on
# ``mbarrier.try_wait.parity``), adds one to its element, and after
# ``fence.proxy.async`` (thread writes -> visible to the TMA) and a barrier,
# thread 0 stores the box.

@T.function
def add_one(A: T.Tensor((8, 32), "float32", align=16), B: T.Tensor((8, 32), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256, dynamic_smem_bytes=2048))
    tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
    bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(1))
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar, tx=T.uint32(8 * 32 * 4))
        T.cuda.tile.apply(T.ptx[LOAD], tile, A, mbar=bar, coords=(0, 0))
    T.cuda.mbarrier_wait_phase(bar, 0)
    tile[tid // 32, tid % 32] = tile[tid // 32, tid % 32] + T.float32(1)
    T.ptx["fence.proxy.async.shared::cta"]()
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.tile.apply(T.ptx[STORE], B, tile, coords=(0, 0))
        T.ptx["cp.async.bulk.commit_group"]()
        T.ptx["cp.async.bulk.wait_group"](0)


kernel = testing.compile_and_show(add_one, "cp.async.bulk.tensor", arch=ARCH)
# The host side of the lowered kernel: the map is encoded before the device entry.
print("\n".join(line for line in testing.lower(add_one).script().splitlines() if "tensormap" in line))
if ON_GPU:
    import torch

    a = torch.randn(8, 32, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a + 1)
    print("add_one: B == A + 1 on the GPU")

# %%
# A three-stage pipeline
# ----------------------
# A producer thread (warp 0) streams 8-row tiles of A through three shared
# buffers; a consumer warp doubles each tile into B. Two mbarriers per stage
# say who may go on: ``full[s]`` completes when the TMA has written buffer
# ``s`` (one arrival with ``expect_tx``, plus the bytes); ``empty[s]`` when
# the 32 consumer lanes have read it (32 arrivals). At iteration ``k`` stage
# ``s = k % 3`` is in phase ``(k // 3) % 2``. The producer waits on ``empty``
# for the *other* parity, which a fresh barrier reports complete: the first
# three loads start at once. The barriers are ``(STAGES, 1)`` tensors: one
# call initialises a whole ring, and ``full.sub[s, :]`` is barrier ``s`` (the
# ``mbar=`` of the load); the image is buffer ``s``, ``buf.sub[s]``.

TILES, STAGES = 12, 3


@T.function
def double_rows(A: T.Tensor((TILES * 8, 32), "float32", align=16), B: T.Tensor((TILES * 8, 32), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64, dynamic_smem_bytes=STAGES * 1024 + 64))
    buf = T.alloc_shared((STAGES, 8, 32), "float32", scope="shared.dyn", align=128)
    full = T.alloc_shared((STAGES, 1), "uint64", scope="shared.dyn", align=8)
    empty = T.alloc_shared((STAGES, 1), "uint64", scope="shared.dyn", align=8)
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], full, count=T.uint32(1))
        T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], empty, count=T.uint32(32))
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cta_sync()
    if tid == 0:  # producer
        for k in T.serial(TILES):
            s = k % STAGES
            T.cuda.mbarrier_wait_phase(empty.sub[s, :], (k // STAGES + 1) % 2)
            T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], full.sub[s, :], tx=T.uint32(1024))
            T.cuda.tile.apply(T.ptx[LOAD], buf.sub[s], A, mbar=full.sub[s, :], coords=(k * 8, 0))
    if tid >= 32:  # the consumer warp: lane l doubles column l of the tile
        lane = tid - 32
        for k in T.serial(TILES):
            s = k % STAGES
            T.cuda.mbarrier_wait_phase(full.sub[s, :], (k // STAGES) % 2)
            for r in T.unroll(8):
                B[k * 8 + r, lane] = buf[s, r, lane] * T.float32(2)
            T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], empty.sub[s, :])


kernel = testing.compile_and_show(double_rows, "cp.async.bulk.tensor", arch=ARCH)
if ON_GPU:
    import torch

    a = torch.randn(TILES * 8, 32, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a * 2)
    print("double_rows: B == 2 A on the GPU")

# %%
# Swizzled boxes and repeat axes
# ------------------------------
# ``swizzle=3`` (128 bytes) stores the 16-byte chunk ``c`` of each 128-byte
# row ``r`` at chunk ``c ^ (r % 8)``, so that reading a column touches eight
# different chunks. The shared operand must *say* so: its layout must be the
# image the TMA writes, ``swizzled_layout(shape, dtype, 3)`` (a
# ``ComposeLayout``), and each image starts on a 1024-byte boundary, where
# the pattern repeats. Here a 64 x 128 bf16 region is loaded as two 64 x 64
# boxes (a box row may not exceed the 128-byte swizzle span): the leading
# axis of the shared tile is a repeat axis, and ``coord_steps`` moves the box
# 64 columns per step.

SWZ = swizzled_layout((2, 64, 64), "bfloat16", 3)


@T.function
def swizzled_halves(A: T.Tensor((64, 128), "bfloat16", align=16), B: T.Tensor((2, 64, 64), "bfloat16", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, dynamic_smem_bytes=16384 + 1024 + 64))
    tile = T.alloc_shared((2, 64, 64), "bfloat16", scope="shared.dyn", align=1024, layout=SWZ)
    bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(1))
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar, tx=T.uint32(16384))
        T.cuda.tile.apply(T.ptx[LOAD], tile, A, mbar=bar, coords=(0, 0), coord_steps=((0, 64),), swizzle=3)
    T.cuda.mbarrier_wait_phase(bar, 0)
    # reads through the layout undo the swizzle: B[h] is the h-th 64-column half of A
    for i in T.unroll(64):
        B[i // 32, (i % 32) * 2 + tid // 64, tid % 64] = tile[i // 32, (i % 32) * 2 + tid // 64, tid % 64]


kernel = testing.compile_and_show(swizzled_halves, "cp.async.bulk.tensor", arch=ARCH)
if ON_GPU:
    import torch

    a = torch.randn(64, 128, device="cuda").to(torch.bfloat16)
    b = torch.zeros(2, 64, 64, device="cuda", dtype=torch.bfloat16)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b[0], a[:, :64]) and torch.equal(b[1], a[:, 64:])
    print("swizzled_halves: both halves arrive unswizzled on the GPU")

# %%
# The contract's checks
# ---------------------
# A swizzled TMA into a row-major tile would leave the data where no later
# access looks for it; the call is rejected while the kernel is parsed, with
# the layout it expected.

try:

    @T.function
    def wrong_layout(A: T.Tensor((64, 64), "bfloat16", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=8192 + 64))
        tile = T.alloc_shared((64, 64), "bfloat16", scope="shared.dyn", align=1024)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        T.cuda.tile.apply(T.ptx[LOAD], tile, A, mbar=bar, coords=(0, 0), swizzle=3)

    raise AssertionError("a row-major tile was accepted for swizzle=3")
except tvm_tirx.TileError as err:
    print("rejected as expected:", str(err).split(": ", 1)[1])

print("tma_pipelines: all kernels assembled")
