"""Tile kernels inside Relax: R.call_tir / R.call_tir_inplace, built with tvm.compile, run by the VM."""

import re

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

from tvm_tirx import testing
from tvm_tirx.ops.relax import ROOT_ANNOTATION, PrepareTileKernels, UnwrapRelaxRoot
from tvm_tirx.script import tirx as T

TARGET = {"kind": "cuda", "arch": "sm_90a"}


@I.ir_module
class RollThenAdd:
    """A tile kernel (row roll) whose result feeds a Relax op: y = roll(x, -1, 0) + x."""

    @T.function
    def roll_rows(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32", layout="default")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[(tid + 1) % 64, :])
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)

    @R.function
    def main(x: R.Tensor((64, 4), "float32")) -> R.Tensor((64, 4), "float32"):
        cls = RollThenAdd
        with R.dataflow():
            y = R.call_tir(cls.roll_rows, (x,), out_ty=R.Tensor((64, 4), "float32"))
            z = R.add(y, x)
            R.output(z)
        return z


@I.ir_module
class ExpThenDoubleInPlace:
    """A Relax op whose result a tile kernel doubles in place: z = 2 * exp(x)."""

    @T.function
    def double_rows(A: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        a = T.alloc_local((4, 1), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], a.view(4), A.sub[tid, :])
        T.cuda.tile.apply(T.ptx["add.f32"], a, a, a)
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], A.sub[tid, :], a.view(4))

    @R.function
    def main(x: R.Tensor((64, 4), "float32")) -> R.Tensor((64, 4), "float32"):
        cls = ExpThenDoubleInPlace
        with R.dataflow():
            e = R.exp(x)
            z = R.call_tir_inplace(cls.double_rows, (e,), 0, out_ty=R.Tensor((64, 4), "float32"))
            R.output(z)
        return z


def _build(mod):
    return tvm.compile(mod, target=tvm.target.Target(TARGET), relax_pipeline="tvm_tirx", tir_pipeline="tvm_tirx")


def _cuda_source(executable) -> str:
    def walk(module):
        if module.kind == "cuda":
            return module.inspect_source()
        for sub in module.imports:
            found = walk(sub)
            if found:
                return found
        return None

    source = walk(executable.mod)
    assert source is not None, "no CUDA module in the executable"
    return source


def test_prepare_marks_only_hand_written_kernels():
    legalized = relax.transform.LegalizeOps()(RollThenAdd)
    prepared = PrepareTileKernels()(legalized)
    kernel = prepared["roll_rows"]
    assert int(kernel.attrs["op_pattern"]) == 8
    assert bool(kernel.attrs["tirx.is_scheduled"])
    assert ROOT_ANNOTATION in kernel.body.block.annotations
    # The legalized add is schedulable: untouched.
    assert prepared["add"].same_as(legalized["add"])
    # The TIR pipeline's first pass gives back the kernel as written.
    unwrapped = UnwrapRelaxRoot()(prepared)["roll_rows"]
    assert unwrapped.body.same_as(RollThenAdd["roll_rows"].body)


@pytest.mark.parametrize("mod", [RollThenAdd, ExpThenDoubleInPlace], ids=["call_tir", "call_tir_inplace"])
def test_relax_module_builds_and_keeps_the_tile_kernel_unfused(mod):
    executable = _build(mod)
    source = _cuda_source(executable)
    # Two kernels: the tile kernel on its own (not fused with its neighbour), and the op's.
    defined = re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\([^;]*?\) \{", source)
    tile_name = next(gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc))
    assert len(defined) == 2 and f"{tile_name}_kernel" in defined, defined
    assert "ld.global.v4.b32" in source and "st.global.v4.b32" in source


@testing.requires_nvcc
def test_relax_module_cuda_assembles_for_sm_90a():
    from tvm_tirx.build.nvcc import nvcc  # pylint: disable=import-outside-toplevel

    source = _cuda_source(_build(RollThenAdd))
    assert len(nvcc(source, tvm.target.Target(TARGET), "cubin")) > 0


def test_stock_relax_pipeline_failure_is_what_the_prepare_pass_avoids():
    # Documents why relax_pipeline="tvm_tirx" exists: apache-tvm's CUDA Relax
    # pipeline cannot take a hand-written kernel whose result feeds another op.
    with pytest.raises(Exception, match="SBlockRealize|Inconsistent buffers"):
        tvm.compile(RollThenAdd, target=tvm.target.Target(TARGET), tir_pipeline="tvm_tirx")


@pytest.mark.gpu
@testing.requires_cuda
@pytest.mark.parametrize(
    "mod, reference",
    [
        (RollThenAdd, lambda x: np.roll(x, -1, axis=0) + x),
        (ExpThenDoubleInPlace, lambda x: 2 * np.exp(x)),
    ],
    ids=["tile kernel then op", "op then in-place tile kernel"],
)
def test_relax_vm_runs_on_gpu(mod, reference):
    dev = tvm.cuda(0)
    x = np.random.default_rng(0).standard_normal((64, 4)).astype("float32")
    vm = relax.VirtualMachine(_build(mod), dev)
    out = vm["main"](tvm.runtime.tensor(x, dev)).numpy()
    np.testing.assert_allclose(out, reference(x), rtol=1e-6, atol=0)


def test_tvm_tirx_compile_points_relax_modules_to_tvm_compile():
    import tvm_tirx  # pylint: disable=import-outside-toplevel

    with pytest.raises(ValueError, match="relax_pipeline='tvm_tirx'"):
        tvm_tirx.compile(RollThenAdd, arch="sm_90a")


@I.ir_module
class OutOfBounds:
    """Row tid + 1 of a 64-row tensor: thread 63 reads past the end."""

    @T.function
    def shifted(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid + 1, :])
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)

    @R.function
    def main(x: R.Tensor((64, 4), "float32")) -> R.Tensor((64, 4), "float32"):
        cls = OutOfBounds
        with R.dataflow():
            y = R.call_tir(cls.shifted, (x,), out_ty=R.Tensor((64, 4), "float32"))
            R.output(y)
        return y


@T.function
def wide_rows(A: T.Tensor((64, 4), "float64", align=32), B: T.Tensor((64, 4), "float64", align=32)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float64")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b64"], r, A.sub[tid, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b64"], B.sub[tid, :], r)


def test_contract_violation_in_a_relax_build_is_a_tile_error():
    # LowerTileApply runs inside apache-tvm's C++ pass manager here; the error
    # still reaches the caller as a TileError, with the user's line.
    import tvm_tirx  # pylint: disable=import-outside-toplevel

    with pytest.raises(tvm_tirx.TileError, match=r"test_relax.py:\d+: ld.global.v4.b32: .*provably out.*tid=63"):
        _build(OutOfBounds)


def test_tvm_compile_applies_the_arch_floor_of_the_bound_target():
    # tvm.compile binds the target to each PrimFunc instead of making it current:
    # the arch check must read it from there (256-bit ld/st need sm_100).
    import tvm_tirx  # pylint: disable=import-outside-toplevel

    with pytest.raises(tvm_tirx.TileError, match=r"needs sm_100 or newer .*: expected a target of sm_100 or newer, found sm_90a"):
        tvm.compile(tvm.IRModule({"wide_rows": wide_rows}), target=tvm.target.Target(TARGET), tir_pipeline="tvm_tirx")
