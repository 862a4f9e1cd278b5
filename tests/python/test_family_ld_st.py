"""ld / st family: lowering Before/Expected at each scope, and its own rules."""

import pytest
import tvm
from tvm.tirx.layout import Axis, S, TileLayout

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T

lane_rows = TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)])


def test_thread_scope_global_load():
    @T.function
    def before(A: T.Tensor((32, 8), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((2, 4), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :].view(2, 4))

    @T.function
    def expected(A: T.Tensor((32, 8), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((2, 4), "float32")
        a = A.sub[tid, :].view(2, 4)
        for r0 in T.unroll(2):
            T.ptx["ld.global.v4.b32"](r[r0, 0], r[r0, 1], r[r0, 2], r[r0, 3], a.ptr_to([r0, 0]))

    testing.assert_lowers_to(before, expected)


def test_warp_scope_load_reads_the_lane_row():
    @T.function
    def before(A: T.Tensor((32, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((32, 4), "float32", layout=lane_rows)
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")

    @T.function
    def expected(A: T.Tensor((32, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((32, 4), "float32", layout=lane_rows)
        rl = r.local()
        T.ptx["ld.global.v4.b32"](rl[0], rl[1], rl[2], rl[3], A.ptr_to([tid % 32, 0]))

    testing.assert_lowers_to(before, expected)


def test_local_space_takes_the_local_window_address():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        m = T.alloc_buffer((4,), "float32", scope="local")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.local.v4.b32"], r, m)

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        m = T.alloc_buffer((4,), "float32", scope="local")
        r = T.alloc_local((4,), "float32")
        T.ptx["ld.local.v4.b32"](
            r[0], r[1], r[2], r[3], T.call_pure_extern("uint64", "__cvta_generic_to_local", m.ptr_to([0]))
        )

    testing.assert_lowers_to(before, expected)


def test_cache_policy_of_the_wrong_dtype_is_rejected_when_parsed():
    with pytest.raises(TileError, match="parameter of the wrong type"):

        @T.function
        def k(A: T.Tensor((32, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((4,), "float32")
            T.cuda.tile.apply(T.ptx["ld.global.L2::cache_hint.v4.b32"], r, A.sub[tid, :], cache_policy=T.float32(1))
