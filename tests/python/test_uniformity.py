"""Uniform values (issue 24): which guards may enclose a collective, and CTA barriers.

A warp collective (here ``ldmatrix``) must be reached by whole warps: every guard around
it is either over thread ids (evaluated thread by thread) or uniform over the warp by
construction (tvm_tirx.tile.analysis.uniformity).  The dynamic tile scheduler publishes a value
through shared memory after a CTA barrier; the same kernel reading a per-thread value
from global memory is refused, naming the value.
"""

import pytest
from tvm.tirx.layout import Axis, S, TileLayout

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T

L = Axis.laneid
FRAG = TileLayout(S[(2, 8, 4) : (2, 4 @ L, 1 @ L)])


@T.macro
def _ldmatrix(sm, r):
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"], r, sm.view(8, 2, 4).permute(1, 0, 2), scope="warp")


@T.function
def published_schedule(Work: T.Tensor((64,), "int32"), n_tiles: T.int32):
    # a persistent loop over tiles handed out at run time: thread 0 takes the next
    # tile from the queue, the CTA barrier publishes it, every thread reads it
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=64))
    tid = T.cuda.thread_idx("x")
    sm = T.alloc_shared((16, 4), "uint32", align=16)
    r = T.alloc_local((2, 8, 4), "uint32", layout=FRAG)
    slot = T.alloc_shared((1,), "int32")
    i = T.alloc_local((1,), "int32")
    i[0] = 0
    if tid == 0:
        slot[0] = Work[T.cuda.block_idx("x")]
    T.cuda.cta_sync()
    tile = slot[0]
    T.cuda.cta_sync()
    while tile < n_tiles:
        _ldmatrix(sm, r)
        i[0] = i[0] + 1
        if tid == 0:
            slot[0] = Work[(T.cuda.block_idx("x") + i[0] * 4) % 64]
        T.cuda.cta_sync()
        tile = slot[0]
        T.cuda.cta_sync()


@T.function
def per_thread_schedule(Work: T.Tensor((64,), "int32"), n_tiles: T.int32):
    # the same loop on a value each thread reads from global memory for itself
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=64))
    tid = T.cuda.thread_idx("x")
    sm = T.alloc_shared((16, 4), "uint32", align=16)
    r = T.alloc_local((2, 8, 4), "uint32", layout=FRAG)
    tile = Work[tid]
    while tile < n_tiles:
        _ldmatrix(sm, r)
        Work[tid] = tile + 1


@T.function
def unpublished_schedule(Work: T.Tensor((64,), "int32"), n_tiles: T.int32):
    # thread 0 writes the slot, but no barrier publishes it before the others read
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=64))
    tid = T.cuda.thread_idx("x")
    sm = T.alloc_shared((16, 4), "uint32", align=16)
    r = T.alloc_local((2, 8, 4), "uint32", layout=FRAG)
    slot = T.alloc_shared((1,), "int32")
    if tid == 0:
        slot[0] = Work[T.cuda.block_idx("x")]
    tile = slot[0]
    if tile < n_tiles:
        _ldmatrix(sm, r)


@T.function
def racing_schedule(Work: T.Tensor((64,), "int32"), n_tiles: T.int32):
    # published, but the next write of the slot comes with no barrier after the read
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=64))
    tid = T.cuda.thread_idx("x")
    sm = T.alloc_shared((16, 4), "uint32", align=16)
    r = T.alloc_local((2, 8, 4), "uint32", layout=FRAG)
    slot = T.alloc_shared((1,), "int32")
    for i in T.serial(4):
        if tid == 0:
            slot[0] = Work[i]
        T.cuda.cta_sync()
        tile = slot[0]
        if tile < n_tiles:
            _ldmatrix(sm, r)


@T.function
def read_only_parameter(Work: T.Tensor((64,), "int32"), n_tiles: T.int32):
    # a tensor the kernel never writes, at a CTA-uniform address: one value for everyone
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=64))
    sm = T.alloc_shared((16, 4), "uint32", align=16)
    r = T.alloc_local((2, 8, 4), "uint32", layout=FRAG)
    if Work[T.cuda.block_idx("x")] < n_tiles:
        _ldmatrix(sm, r)


@T.function
def warp_uniform_guard(Work: T.Tensor((64,), "int32")):
    # w is the same for the 32 lanes of a warp: enough for a warp collective
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    sm = T.alloc_shared((16, 4), "uint32", align=16)
    r = T.alloc_local((2, 8, 4), "uint32", layout=FRAG)
    w = T.cuda.warp_id()
    if Work[w] > 0:
        _ldmatrix(sm, r)


def test_published_schedule_is_accepted():
    assert testing.count_ptx(testing.lower(published_schedule), "ldmatrix.*") == 1


def test_read_only_and_warp_uniform_loads_are_accepted():
    assert testing.count_ptx(testing.lower(read_only_parameter), "ldmatrix.*") == 1
    assert testing.count_ptx(testing.lower(warp_uniform_guard), "ldmatrix.*") == 1


@pytest.mark.parametrize(
    "kernel, why",
    [
        (per_thread_schedule, r"guard not uniform over the warp: .*found if tile < n_tiles: tile = Work\[tid\]"),
        (unpublished_schedule, r"found if tile < n_tiles: tile = slot: slot\[0\] is loaded from shared memory"),
        (racing_schedule, r"found if tile < n_tiles: tile = slot: slot\[0\] is loaded from shared memory"),
    ],
    ids=["per-thread global value", "no barrier", "write races with the read"],
)
def test_non_uniform_schedules_are_refused_naming_the_value(kernel, why):
    with pytest.raises(TileError, match=why):
        testing.lower(kernel)


# -- CTA barriers reached by part of the CTA ---------------------------------------------------


@T.function
def barrier_in_half(A: T.Tensor((256,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((1,), "float32")
    if tid < 128:
        T.cuda.cta_sync()
    T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[tid : tid + 1])


@T.function
def barrier_under_uniform_guard(A: T.Tensor((256,), "float32"), n: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((1,), "float32")
    if tid < 256 and n > 0:
        T.cuda.cta_sync()
    T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[tid : tid + 1])


def test_cta_barrier_under_a_divergent_guard_is_refused():
    with pytest.raises(
        TileError,
        match=r"test_uniformity.py:\d+: T.cuda.cta_sync\(\): CTA barrier reached by part of the CTA: "
        r"expected all 256 threads of the CTA .*found 128 threads under if tid < 128",
    ):
        testing.lower(barrier_in_half)


def test_cta_barrier_under_a_uniform_guard_is_accepted():
    assert testing.count_ptx(testing.lower(barrier_under_uniform_guard), "ld.*") == 1


# -- the dynamic persistent scheduler (tests/python/scheduler_kernels.py) ----------------------


def test_dynamic_persistent_scheduler_is_accepted_and_its_per_thread_twin_refused():
    import scheduler_kernels as K

    assert testing.count_ptx(testing.lower(K.copy_tiles), "ldmatrix.*") == 1
    with pytest.raises(TileError, match=r"guard not uniform over the warp: .*found if .*t.* < tiles: "
                       r"t = got: got is written by a call whose result is per thread"):
        testing.lower(K.copy_tiles_per_thread)


@pytest.mark.gpu
def test_dynamic_persistent_scheduler_on_the_gpu(torch_cuda):
    import scheduler_kernels as K
    import tvm_tirx

    torch = torch_cuda
    kernel = tvm_tirx.compile(K.copy_tiles, target="cuda")
    for tiles in (1, 63, 64, 1000):
        a = torch.randint(-2**31, 2**31 - 1, (tiles, 16, 8), device="cuda", dtype=torch.int32)
        b = torch.zeros_like(a)
        counter = torch.zeros(1, device="cuda", dtype=torch.uint32)
        taken = torch.zeros(64, device="cuda", dtype=torch.uint32)
        kernel(a, b, counter, taken)
        torch.cuda.synchronize()
        assert torch.equal(b, a), tiles
        assert int(taken.to(torch.int64).sum()) == tiles  # every tile taken exactly once
        assert int(counter.to(torch.int64)[0]) == tiles + 64  # one failed ticket per CTA
