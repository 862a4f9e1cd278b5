"""Execution scopes: group axes, register ownership, guards and clusters."""

import numpy as np
import pytest
from tvm.tirx.layout import Axis, S, TileLayout

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T

from scope_kernels import (
    cluster_pair,
    cta_twelve,
    half_warp,
    producer_warp,
    warp_rows,
    warpgroup_tile,
)

KERNELS = {
    "cta_twelve": (cta_twelve, 3, [(64, 12)]),
    "warp_rows": (warp_rows, 1, [(64, 4)]),
    "half_warp": (half_warp, 1, [(2, 16, 4)]),
    "producer_warp": (producer_warp, 1, [(32, 4)]),
    "warpgroup_tile": (warpgroup_tile, 2, [(4, 32, 8)]),
    "cluster_pair": (cluster_pair, 1, [(2, 64, 4)]),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_counts_and_assembly(name):
    func, per_thread, _ = KERNELS[name]
    lowered = testing.lower(func)
    assert testing.count_ptx(lowered, "ld.*") == per_thread
    assert testing.count_ptx(lowered, "st.*") == per_thread
    if testing.has_nvcc():
        kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
        assert len(testing.assemble(kernel)) > 0


def test_cta_scope_uses_each_threads_own_registers():
    kernel = tvm_tirx.compile(cta_twelve, target="cuda", arch="sm_90a")
    src = kernel.cuda_source
    body = src[src.index("cta_twelve_kernel(float") :]
    assert "float _ptr[12];" in body or "[12];" in body  # 12 registers per thread, not 768
    assert body.count("tvm_builtin_ptx_ld_vec_global_v4_b32_f32(") == 3
    # thread t reads row t: element offsets t*12, t*12 + 4, t*12 + 8
    assert "(((int)threadIdx.x) * 12)" in body and "((((int)threadIdx.x) * 12) + 8)" in body


def test_cluster_launch_reads_cluster_ctaid():
    kernel = tvm_tirx.compile(cluster_pair, target="cuda", arch="sm_90a")
    assert "cluster_ctaid" in kernel.cuda_source


def test_group_shape_mismatch_names_both_shapes():
    @T.function
    def k(A: T.Tensor((64, 12), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        r = T.alloc_local((2, 32, 3, 4), "float32", layout=TileLayout(S[(2, 32, 3, 4) : (1 @ Axis.warpid, 1 @ Axis.laneid, 4, 1)]))
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 32, 3, 4), scope="cta")

    with pytest.raises(TileError) as info:
        testing.lower(k)
    msg = str(info.value)
    assert "group shape does not match the scope" in msg
    assert "(4, 32)" in msg and "(2, 32, 3, 4)" in msg


def test_wrong_lane_owner():
    wrong = TileLayout(S[(2, 32, 4) : (1 @ Axis.warpid, 2 @ Axis.laneid, 1)])

    @T.function
    def k(A: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        r = T.alloc_local((2, 32, 4), "float32", layout=wrong)
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 32, 4), scope="cta")

    with pytest.raises(TileError) as info:
        testing.lower(k)
    msg = str(info.value)
    assert "owned by another thread" in msg and "dst (operand 1)" in msg and "laneid" in msg


def test_group_axis_without_thread_axis():
    @T.function
    def k(A: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        r = T.alloc_local((2, 32, 4), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 32, 4), scope="cta")

    with pytest.raises(TileError, match="group axis not mapped to a thread axis"):
        testing.lower(k)


def test_cluster_scope_without_cluster_launch():
    with pytest.raises(TileError, match="cluster scope without a cluster launch"):

        @T.function
        def k(A: T.Tensor((2, 64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64))
            r = T.alloc_local((2, 2, 32, 4), "float32")
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 2, 32, 4), scope="cluster")


def test_guard_reading_memory_is_an_error():
    @T.function
    def k(A: T.Tensor((32, 4), "float32", align=16), Flag: T.Tensor((32,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((32, 4), "float32", layout=TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)]))
        if Flag[tid] == 1:
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")

    with pytest.raises(TileError, match=r"guard not uniform over the warp: .*found if Flag\[tid\] == 1: "
                       r"Flag\[tid\]: the address tid differs between the lanes of a warp"):
        testing.lower(k)


def test_while_condition_is_a_guard():
    # lanes 0..15 and 16..31 iterate a different number of times: the warp collective
    # inside would run with part of the warp (issue: while-conditions were not guards)
    @T.function
    def k(A: T.Tensor((32, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        r = T.alloc_local((32, 4), "float32", layout=TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)]))
        n = T.alloc_local((1,), "int32")
        n[0] = T.cuda.lane_id() // 16
        while n[0] < 2:
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")
            n[0] = n[0] + 1

    with pytest.raises(TileError, match=r"ld.global.v4.b32: guard not uniform over the warp: .*found if n < 2: "
                       r"n = threadIdx.x % 32 // 16: .* differs between the lanes of a warp"):
        testing.lower(k)


def test_while_over_a_thread_id_that_keeps_whole_warps():
    @T.function
    def k(A: T.Tensor((32, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        r = T.alloc_local((32, 4), "float32", layout=TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)]))
        while T.cuda.warp_id() == 0:
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")

    assert testing.count_ptx(testing.lower(k), "ld.*") == 1  # (lowered only, never launched)


def test_cta_uniform_guard_keeps_the_whole_group():
    @T.function
    def k(A: T.Tensor((32, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32))
        r = T.alloc_local((32, 4), "float32", layout=TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)]))
        for i in T.serial(3):
            if T.cuda.block_idx("x") == 0 and i > 0:
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")

    lowered = testing.lower(k)
    assert testing.count_ptx(lowered, "ld.*") == 3  # inside the serial loop of 3


def test_guard_that_is_not_a_box():
    @T.function
    def k(A: T.Tensor((16, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        r = T.alloc_local((16, 4), "float32", layout=TileLayout(S[(16, 4) : (1 @ Axis.laneid, 1)]))
        if T.cuda.lane_id() % 2 == 0:
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")

    with pytest.raises(TileError, match="do not form a box"):
        testing.lower(k)


def test_block_not_whole_warps():
    @T.function
    def k(A: T.Tensor((48, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=48))
        r = T.alloc_local((32, 4), "float32", layout=TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)]))
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[0:32, :], scope="warp")

    with pytest.raises(TileError, match="needs whole warps"):
        testing.lower(k)


def test_launch_config_validation():
    with pytest.raises(ValueError, match="whole number of clusters"):
        T.cuda.LaunchConfig(grid=3, block=32, cluster=2)
    with pytest.raises(ValueError, match="1024"):
        T.cuda.LaunchConfig(grid=1, block=(64, 32))


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_scope_kernels_on_gpu(torch_cuda, name):
    torch = torch_cuda
    func, _, shapes = KERNELS[name]
    kernel = tvm_tirx.compile(func, target="cuda")
    a = torch.randn(*shapes[0], device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    expected = a.cpu().numpy().copy()
    got = b.cpu().numpy()
    if name == "producer_warp":
        pass  # warp 1 copies the whole tile
    np.testing.assert_array_equal(got, expected)
