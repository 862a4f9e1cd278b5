"""Register family (mov, cvt, arithmetic): lowering Before/Expected and its form choice."""

import pytest
import tvm
from tvm.tirx.layout import Axis, S, TileLayout

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T

lane_words = TileLayout(S[(32, 2, 1) : (1 @ Axis.laneid, 1, 1)])


def test_thread_scope_scalar_source_is_reused_at_every_repeat():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        r = T.alloc_local((2, 1), "uint32")
        T.cuda.tile.apply(T.ptx["mov.b32"], r, T.uint32(7))

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        r = T.alloc_local((2, 1), "uint32")
        for r0 in T.unroll(2):
            T.ptx["mov.b32"](r[r0, 0], T.uint32(7))

    testing.assert_lowers_to(before, expected)


def test_warp_scope_add_on_lane_owned_registers():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((32, 2, 1), "float32", layout=lane_words)
        T.cuda.tile.apply(T.ptx["add.f32"], x, x, T.float32(1), scope="warp")

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((32, 2, 1), "float32", layout=lane_words)
        xl = x.local()
        for r0 in T.unroll(2):
            T.ptx["add.f32"](xl[r0], xl[r0], T.float32(1))

    testing.assert_lowers_to(before, expected)


def test_no_fitting_form_reports_the_scalar_form():
    # mov.b64 names a scalar, pack and unpack forms; the scalar form's error wins
    with pytest.raises(TileError, match="element bit width"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            r = T.alloc_local((1,), "uint32")
            T.cuda.tile.apply(T.ptx["mov.b64"], r, r)


def test_no_fitting_form_reports_the_form_with_the_call_operand_count():
    # max.f32 names a two-input and a three-input form: four operands are the
    # three-input form's, so its error is reported, not the two-input form's count
    with pytest.raises(TileError, match=r"a \(operand 2\).*element bit width"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            r = T.alloc_local((1,), "float32")
            h = T.alloc_local((1,), "float16")
            T.cuda.tile.apply(T.ptx["max.f32"], r, h, r, r)
