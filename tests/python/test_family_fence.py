"""fence family: lowering Before/Expected, every form assembles for sm_90a, a tile-form
fence is the fence the proxy rule looks for (the rule's own tests: test_protocols.py)."""

import pytest

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.ir.forms import forms_of

PROXY = "fence.proxy.async.shared::cta"
STORE2D = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"


def test_a_fence_lowers_to_the_instruction_once_per_thread():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        T.cuda.tile.apply(T.ptx[PROXY])
        T.cuda.tile.apply(T.ptx["fence.mbarrier_init.release.cluster"])

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        T.ptx[PROXY]()
        T.ptx["fence.mbarrier_init.release.cluster"]()

    testing.assert_lowers_to(before, expected)


def test_the_claimed_forms():
    opcodes = {f.opcode for f in forms_of("fence")}
    assert PROXY in opcodes and "fence.mbarrier_init.release.cluster" in opcodes
    assert "fence.proxy.async" in opcodes and "fence.proxy.alias" in opcodes
    with pytest.raises(TileError, match="no tile family"):
        T.cuda.tile.apply(T.ptx["fence.acq_rel.cta"])  # not claimed: raw T.ptx only


def test_every_form_assembles_for_sm90a(tmp_path):
    head = testing.KernelHead(launch="T.cuda.LaunchConfig(grid=1, block=32)")
    kernels = testing.form_kernels(forms_of("fence"), lambda form, i: [f'T.cuda.tile.apply(T.ptx["{form.opcode}"])'], head)
    for built in testing.assemble_forms(kernels, tmp_path):
        assert built.assembled


def _store_after_write(fence):
    @T.function
    def kernel(B: T.Tensor((8, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        tile = T.alloc_shared((8, 32), "float32", align=128)
        tid = T.cuda.thread_idx("x")
        tile[tid // 32, tid % 32] = T.float32(1)
        if fence:
            T.cuda.tile.apply(T.ptx[PROXY])
        T.cuda.cta_sync()
        if tid == 0:
            T.cuda.tile.apply(T.ptx[STORE2D], B, tile, coords=(0, 0))
            T.ptx["cp.async.bulk.commit_group"]()
            T.ptx["cp.async.bulk.wait_group"](0)

    return kernel


def test_a_tile_form_fence_orders_the_writes_for_the_async_proxy():
    testing.lower(_store_after_write(True))
    with pytest.raises(TileError, match="generic-proxy write not fenced before an async-proxy read"):
        testing.lower(_store_after_write(False))


def test_other_proxy_fences_do_not_count():
    @T.function
    def kernel(B: T.Tensor((8, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        tile = T.alloc_shared((8, 32), "float32", align=128)
        tid = T.cuda.thread_idx("x")
        tile[tid // 32, tid % 32] = T.float32(1)
        T.cuda.tile.apply(T.ptx["fence.proxy.async.global"])  # global memory only
        T.cuda.cta_sync()
        if tid == 0:
            T.cuda.tile.apply(T.ptx[STORE2D], B, tile, coords=(0, 0))

    with pytest.raises(TileError, match="no fence.proxy.async between them"):
        testing.lower(kernel)
