"""T.cuda.tile.reduce_lanes: a row reduction over the lanes that share an accumulator row is
one call; it expands into checked shfl.sync.bfly + instruction tile calls (two of each per
value for four lanes); the lane group from lanes=, xor= or a fragment's layout (across=);
its rules; and the GPU against torch."""

import numpy as np
import pytest
import tvm
from tvm.tirx import decl_buffer
from tvm.tirx.layout import Axis, S, TileLayout

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.script.lane_reduce import lane_xors
from tvm_tirx.tile.families.wgmma import accumulator_layout

L = Axis.laneid
#: The mma.sync m16n8 C fragment: element (g + 8h, 2t + j) in register 2h + j of lane 4g + t.
MMA_C = TileLayout(S[(2, 8, 4, 2) : (2, 4 @ L, 1 @ L, 1)])


def test_four_lanes_are_two_shuffles_and_two_instructions_per_value():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        row = T.alloc_local((2, 1), "float32")
        T.cuda.tile.reduce_lanes(T.ptx["max.f32"], row, lanes=4)

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        row = T.alloc_local((2, 1), "float32")
        other = T.alloc_local((2, 1), "float32")
        for r0 in T.unroll(2):
            T.ptx["shfl_sync.bfly.b32"](other[r0, 0], row[r0, 0], T.uint32(1), T.uint32(31), T.uint32(0xFFFFFFFF))
        for r0 in T.unroll(2):
            T.ptx["max.f32"](row[r0, 0], row[r0, 0], other[r0, 0])
        for r0 in T.unroll(2):
            T.ptx["shfl_sync.bfly.b32"](other[r0, 0], row[r0, 0], T.uint32(2), T.uint32(31), T.uint32(0xFFFFFFFF))
        for r0 in T.unroll(2):
            T.ptx["max.f32"](row[r0, 0], row[r0, 0], other[r0, 0])

    testing.assert_lowers_to(before, expected)
    lowered = testing.lower(before)
    assert testing.count_ptx(lowered, "shfl.sync.bfly.b32") == 2 * 2
    assert testing.count_ptx(lowered, "max.f32") == 2 * 2


def _reduced(**group):
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        acc = T.alloc_local((64, 32), "float32", layout=accumulator_layout(32))
        row = T.alloc_local((2,), "float32")
        T.cuda.tile.reduce_lanes("add.f32", row, **{k: (acc, v) if k == "across" else v for k, v in group.items()})

    return testing.lower(k)


def test_lanes_xor_and_a_fragment_layout_name_the_same_group():
    by_lanes = _reduced(lanes=4)
    tvm.ir.assert_structural_equal(by_lanes, _reduced(xor=(1, 2)))
    assert testing.issue_counts(by_lanes) == testing.issue_counts(_reduced(xor=(1, 2)))
    assert testing.issue_counts(by_lanes) == testing.issue_counts(_reduced(across=1))
    assert testing.count_ptx(_reduced(lanes=8), "shfl.sync.bfly.b32") == 3 * 2


def test_lane_masks_read_from_fragment_layouts():
    acc = decl_buffer((64, 64), "float32", scope="local", layout=accumulator_layout(64))
    assert lane_xors(acc, 1) == (1, 2)  # a wgmma row: lanes 4g .. 4g+3
    c = decl_buffer((16, 8), "float32", scope="local", layout=MMA_C)
    assert lane_xors(c, 1) == (1, 2)  # an mma.sync row
    assert lane_xors(c, 0) == (4, 8, 16)  # an mma.sync column: lanes t, t+4, ..., t+28


@pytest.mark.parametrize(
    "group, match",
    [
        ({}, r"tile.reduce_lanes: one lane group needed: .*found none of them"),
        ({"lanes": 4, "xor": (1, 2)}, r"one lane group needed: .*found lanes=, xor="),
        ({"lanes": 3}, r"invalid lane group: expected lanes= a power of two from 2 to 32.*found lanes=3"),
        ({"xor": (1, 2, 3)}, r"invalid lane group: expected xor= lane masks in 1..31, none the XOR of others"),
        ({"xor": (32,)}, r"invalid lane group: .*found xor=\(32,\)"),
    ],
    ids=["none", "two", "lanes=3", "dependent masks", "mask past 31"],
)
def test_the_lane_group_is_checked(group, match):
    with pytest.raises(TileError, match=match):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            row = T.alloc_local((1, 1), "float32")
            T.cuda.tile.reduce_lanes("max.f32", row, **group)


@pytest.mark.parametrize(
    "shape, layout, axis, why",
    [
        ((64, 32), accumulator_layout(32), 0, "axis 0 spans several warps"),
        ((4, 8), "default", 1, "no lane axis in its layout"),
        ((1, 3), TileLayout(S[(1, 3) : (0, 1 @ L)]), 1, r"lanes \[0, 1, 2\] are not a butterfly group"),
    ],
    ids=["rows of a wgmma accumulator", "no lanes", "three lanes"],
)
def test_across_needs_an_axis_on_a_butterfly_group(shape, layout, axis, why):
    frag = decl_buffer(shape, "float32", scope="local", layout=layout if layout != "default" else None)
    with pytest.raises(TileError, match=r"parameter across: lanes along the axis are not a butterfly group: .*" + why):
        lane_xors(frag, axis)


def test_values_must_be_registers():
    with pytest.raises(TileError, match=r"values \(operand 2\): not a register tensor"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            s = T.alloc_shared((32, 1), "float32")
            T.cuda.tile.reduce_lanes("max.f32", s, lanes=4)


def test_the_emitted_shuffles_keep_their_rules():
    # under a guard keeping lanes 0-15 the default mask is 0xffff: lanes=32 would read lane 16+
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        row = T.alloc_local((1, 1), "float32")
        if T.cuda.lane_id() < 16:
            T.cuda.tile.reduce_lanes("max.f32", row, lanes=32)

    with pytest.raises(TileError, match=r"shfl.sync.bfly.b32: parameter b: source lane outside the member mask"):
        testing.lower(k)


# -- GPU -------------------------------------------------------------------------------------


@T.function
def row_max_and_sum(A: T.Tensor((8, 16), "float32"), M: T.Tensor((8, 4), "float32"), Z: T.Tensor((8, 4), "float32")):
    # lane 4g + t holds columns 4t .. 4t+3 of row g, as an accumulator row is spread
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    g = lane // 4
    t = lane % 4
    x = T.alloc_local((4,), "float32")
    m = T.alloc_local((1, 1), "float32")
    z = T.alloc_local((1, 1), "float32")
    for i in T.unroll(4):
        x[i] = A[g, 4 * t + i]
    m[0, 0] = T.max(T.max(x[0], x[1]), T.max(x[2], x[3]))
    z[0, 0] = (x[0] + x[1]) + (x[2] + x[3])
    T.cuda.tile.reduce_lanes(T.ptx["max.f32"], m, lanes=4)
    T.cuda.tile.reduce_lanes("add.f32", z, xor=(1, 2))
    M[g, t] = m[0, 0]
    Z[g, t] = z[0, 0]


@pytest.mark.gpu
def test_gpu_row_max_and_row_sum_over_four_lanes(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(row_max_and_sum, target="cuda")
    a = torch.randn(8, 16, device="cuda")
    m, z = torch.empty(8, 4, device="cuda"), torch.empty(8, 4, device="cuda")
    kernel(a, m, z)
    torch.cuda.synchronize()
    assert torch.equal(m, a.amax(dim=1, keepdim=True).expand(8, 4))
    np.testing.assert_allclose(z.cpu().numpy(), a.sum(dim=1, keepdim=True).expand(8, 4).cpu().numpy(), rtol=1e-5)
