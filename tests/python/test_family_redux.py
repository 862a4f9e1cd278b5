"""redux.sync family: Before/Expected, the member mask rule, the uniform result, the types
of each line, the .f32 forms' targets, every form assembled, and the GPU."""

import numpy as np
import pytest
from tvm.tirx.layout import Axis, S, TileLayout

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.ir.forms import forms_of

import form_kernels

FRAG = TileLayout(S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)])


def test_one_reduction_per_register():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        x = T.alloc_local((2, 1), "uint32")
        T.cuda.tile.apply("redux.sync.add.u32", x, x)

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        x = T.alloc_local((2, 1), "uint32")
        for r0 in T.unroll(2):
            T.ptx["redux_sync.add.u32"](x[r0, 0], x[r0, 0], T.uint32(0xFFFFFFFF))

    testing.assert_lowers_to(before, expected)


def _half_warp(mask):
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((1,), "int32")
        if T.cuda.lane_id() % 2 == 0:
            T.cuda.tile.apply("redux.sync.max.s32", x, x, membermask=mask)

    return k


def test_a_mask_naming_lanes_that_do_not_reach_it_is_refused():
    with pytest.raises(TileError, match=r"redux.sync.max.s32: parameter membermask: member mask differs from the "
                       r"lanes that reach the call: expected 0x55555555 \(lanes 0, 2, 4,"):
        testing.lower(_half_warp(0xFFFF))
    assert testing.count_ptx(testing.lower(_half_warp(0x55555555)), "redux.sync.max.s32") == 1


@T.macro
def _ldmatrix():
    s = T.alloc_shared((8, 4), "uint32", align=16)
    r = T.alloc_local((1, 8, 4), "uint32", layout=FRAG)
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x1.shared.b16"], r, s.view(1, 8, 4), scope="warp")


@T.function
def total_guards_ldmatrix(A: T.Tensor((32,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    count = T.alloc_local((1,), "uint32")
    total = T.alloc_local((1,), "uint32")
    count[0] = A[tid]
    T.cuda.tile.apply("redux.sync.add.u32", total, count)
    if total[0] > T.uint32(0):
        _ldmatrix()


def test_the_reduction_is_uniform_over_the_warp():
    assert testing.count_ptx(testing.lower(total_guards_ldmatrix), "ldmatrix.*") == 1


@pytest.mark.parametrize(
    "opcode, dtype, match",
    [
        ("redux.sync.min.s32", "uint32", r"dst \(operand 1\): dtype not accepted by the PTX type: expected 32-bit int32"),
        ("redux.sync.and.b32", "float32", r"dtype not accepted by the PTX type: expected 32-bit uint32 / int32"),
    ],
)
def test_each_line_takes_its_own_register_types(opcode, dtype, match):
    with pytest.raises(TileError, match=match):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            x = T.alloc_local((1,), dtype)
            T.cuda.tile.apply(opcode, x, x)


@T.function
def f32_max():
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    x = T.alloc_local((1,), "float32")
    T.cuda.tile.apply("redux.sync.max.abs.NaN.f32", x, x)


def test_the_f32_forms_need_sm100_or_sm103_with_a_suffix():
    """The measured floor (``arch_floors.json``): ptxas 13.0 assembles the ``.f32`` forms
    for sm_100f, sm_100a, sm_103f and sm_103a only."""
    with pytest.raises(TileError, match=r"redux.sync.max.abs.NaN.f32: needs sm_100f or newer \(PTX ISA 9.7.15.13; "
                       r"measured with ptxas 13.0.*found sm_90a(?:\n|$)"):
        tvm_tirx.compile(f32_max, target="cuda", arch="sm_90a")
    for newer in ("sm_100", "sm_110a", "sm_120a"):
        with pytest.raises(TileError, match=r"instruction is specific to another architecture: expected target "
                           rf"sm_100f / sm_100a / sm_103f / sm_103a .*found {newer}(?:\n|$)"):
            tvm_tirx.compile(f32_max, target="cuda", arch=newer)
    for target in ("sm_100a", "sm_100f", "sm_103f"):
        assert "redux.sync.max.abs.NaN.f32" in tvm_tirx.compile(f32_max, target="cuda", arch=target).cuda_source


@testing.requires_nvcc
@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_every_form_assembles(arch, tmp_path):
    forms = [f for f in forms_of("redux") if (f.contract.archs != ()) == (arch == "sm_100a")]
    assert len(forms) == (9 if arch == "sm_90a" else 8)  # add/min/max x u32/s32, and/or/xor; min/max x abs x NaN
    kernels = testing.form_kernels(forms, form_kernels.warp_call, form_kernels.WARP_HEAD)
    for built in testing.assemble_forms(kernels, tmp_path, arch=arch):
        assert built.assembled


@T.function
def sums(A: T.Tensor((64,), "uint32"), B: T.Tensor((64,), "uint32"), C: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    x = T.alloc_local((1,), "uint32")
    y = T.alloc_local((1,), "int32")
    x[0] = A[tid]
    T.cuda.tile.apply("redux.sync.add.u32", x, x)
    B[tid] = x[0]
    y[0] = T.Cast("int32", A[tid]) - 50
    T.cuda.tile.apply("redux.sync.min.s32", y, y)
    C[tid] = y[0]


@pytest.mark.gpu
def test_gpu_sum_and_min_per_warp(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(sums, target="cuda")
    a = torch.from_numpy(np.random.default_rng(0).integers(0, 100, 64).astype(np.uint32)).cuda()
    b = torch.zeros(64, dtype=torch.uint32, device="cuda")
    c = torch.zeros(64, dtype=torch.int32, device="cuda")
    kernel(a, b, c)
    torch.cuda.synchronize()
    warps = a.view(2, 32).cpu().numpy().astype(np.int64)
    np.testing.assert_array_equal(b.view(2, 32).cpu().numpy(), warps.sum(1, keepdims=True).repeat(32, 1))
    np.testing.assert_array_equal(c.view(2, 32).cpu().numpy(), (warps - 50).min(1, keepdims=True).repeat(32, 1))
