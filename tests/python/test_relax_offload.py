"""Relax offload of R.matmul to the Hopper GEMM (tvm_tirx.ops.relax_offload).

CPU: Before/Expected structural tests of the rewrite (static m, symbolic m, batch axes,
the linear form, matmuls left alone), and builds of offloaded modules for sm_90a.
GPU (marker ``gpu``): the Relax VM against torch with a symbolic m at two values.
"""

import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest
import tvm
from tvm import relax, te
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.ops.gemm_kernels import CONFIG
from tvm_tirx.ops.relax import relax_pipeline
from tvm_tirx.ops.relax_offload import MAX_M, SkippedMatmul, gemm_prim_func, match_gemm, partition_for_tvm_tirx

TARGET = {"kind": "cuda", "arch": "sm_90a"}


def _check(before, expected, **kernels):
    """Offload ``before``; compare with ``expected`` whose stub PrimFunc ``name`` stands for
    ``gemm_prim_func(*kernels[name])``; return the skipped matmuls."""
    skipped = []
    after = partition_for_tvm_tirx(before, skipped=skipped)
    for name, args in kernels.items():  # (n, k, ...) or {"n": ..., "k": ..., options}
        func = gemm_prim_func(**args) if isinstance(args, dict) else gemm_prim_func(*args)
        expected.update_func(expected.get_global_var(name), func)
    tvm.ir.assert_structural_equal(after, expected)
    return skipped


# -- the rewrite ---------------------------------------------------------------------------


def test_static_m_with_a_k_by_n_weight_is_read_n_major_without_a_transpose():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((128, 64), "bfloat16"), w: R.Tensor((64, 256), "bfloat16")):
            with R.dataflow():
                y = R.matmul(x, w)
                R.output(y)
            return y

    @I.ir_module
    class Expected:
        @T.prim_func
        def tvm_tirx_gemm_n256_k64_bf16_bf16_bn64_b_kn(a: T.handle, b: T.handle, c: T.handle):  # stub: the GEMM
            T.evaluate(0)

        @R.function
        def main(x: R.Tensor((128, 64), "bfloat16"), w: R.Tensor((64, 256), "bfloat16")):
            cls = Expected
            with R.dataflow():
                y = R.call_tir(cls.tvm_tirx_gemm_n256_k64_bf16_bf16_bn64_b_kn, (x, w),
                               out_ty=R.Tensor((128, 256), "bfloat16"))
                R.output(y)
            return y

    # a static m: the tile table's width (one 128 x 256 tile would leave 131 SMs idle)
    assert _check(Before, Expected, tvm_tirx_gemm_n256_k64_bf16_bf16_bn64_b_kn=dict(
        n=256, k=64, block_n=64, stages=8, b_major="n")) == []


def test_a_k_by_n_weight_whose_rows_the_tma_cannot_read_gets_a_transpose():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor(("m", 64), "bfloat16"), w: R.Tensor((64, 260), "bfloat16")):
            with R.dataflow():
                y = R.matmul(x, w)
                R.output(y)
            return y

    @I.ir_module
    class Expected:
        @T.prim_func
        def tvm_tirx_gemm_n260_k64_bf16_bf16(a: T.handle, b: T.handle, c: T.handle):
            T.evaluate(0)

        @R.function
        def main(x: R.Tensor(("m", 64), "bfloat16"), w: R.Tensor((64, 260), "bfloat16")):
            m = T.int64()
            cls = Expected
            with R.dataflow():
                wt = R.permute_dims(w, axes=[1, 0])  # rows of 520 bytes: not a multiple of 16
                y = R.call_tir(cls.tvm_tirx_gemm_n260_k64_bf16_bf16, (x, wt), out_ty=R.Tensor((m, 260), "bfloat16"))
                R.output(y)
            return y

    assert _check(Before, Expected, tvm_tirx_gemm_n260_k64_bf16_bf16=(260, 64)) == []


def test_linear_form_with_symbolic_m_passes_the_weight_as_it_is():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor(("m", 64), "bfloat16"), w: R.Tensor((256, 64), "bfloat16")):
            with R.dataflow():
                wt = R.permute_dims(w)
                y = R.matmul(x, wt)
                R.output(y)
            return y

    @I.ir_module
    class Expected:
        @T.prim_func
        def tvm_tirx_gemm_n256_k64_bf16_bf16(a: T.handle, b: T.handle, c: T.handle):
            T.evaluate(0)

        @R.function
        def main(x: R.Tensor(("m", 64), "bfloat16"), w: R.Tensor((256, 64), "bfloat16")):
            m = T.int64()
            cls = Expected
            with R.dataflow():
                y = R.call_tir(cls.tvm_tirx_gemm_n256_k64_bf16_bf16, (x, w), out_ty=R.Tensor((m, 256), "bfloat16"))
                R.output(y)
            return y

    assert _check(Before, Expected, tvm_tirx_gemm_n256_k64_bf16_bf16=(256, 64)) == []


def test_batch_axes_are_flattened_into_one_symbolic_m_and_one_kernel_serves_both_calls():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor(("b", "s", 64), "bfloat16"), w: R.Tensor((256, 64), "bfloat16"),
                 u: R.Tensor((256, 64), "bfloat16")):
            with R.dataflow():
                y = R.matmul(x, R.permute_dims(w, axes=[1, 0]), out_dtype="float32")
                z = R.matmul(x, R.permute_dims(u))
                R.output(y, z)
            return (y, z)

    @I.ir_module
    class Expected:
        @T.prim_func
        def tvm_tirx_gemm_n256_k64_bf16_f32(a: T.handle, b: T.handle, c: T.handle):
            T.evaluate(0)

        @T.prim_func
        def tvm_tirx_gemm_n256_k64_bf16_bf16(a: T.handle, b: T.handle, c: T.handle):
            T.evaluate(0)

        @R.function
        def main(x: R.Tensor(("b", "s", 64), "bfloat16"), w: R.Tensor((256, 64), "bfloat16"),
                 u: R.Tensor((256, 64), "bfloat16")):
            b, s = T.int64(), T.int64()
            cls = Expected
            with R.dataflow():
                x1 = R.reshape(x, R.shape([b * s, 64]))
                y1 = R.call_tir(cls.tvm_tirx_gemm_n256_k64_bf16_f32, (x1, w), out_ty=R.Tensor((b * s, 256), "float32"))
                y = R.reshape(y1, R.shape([b, s, 256]))
                x2 = R.reshape(x, R.shape([b * s, 64]))
                z1 = R.call_tir(cls.tvm_tirx_gemm_n256_k64_bf16_bf16, (x2, u), out_ty=R.Tensor((b * s, 256), "bfloat16"))
                z = R.reshape(z1, R.shape([b, s, 256]))
                R.output(y, z)
            return (y, z)

    kernels = {"tvm_tirx_gemm_n256_k64_bf16_f32": (256, 64, "bfloat16", "float32"),
               "tvm_tirx_gemm_n256_k64_bf16_bf16": (256, 64)}
    assert _check(Before, Expected, **kernels) == []


def test_a_static_m_gets_the_tile_tables_width_and_a_symbolic_m_the_default_kernel():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((1, 64), "bfloat16"), y: R.Tensor(("m", 64), "bfloat16"),
                 w: R.Tensor((256, 64), "bfloat16")):
            with R.dataflow():
                a = R.matmul(x, R.permute_dims(w))
                b = R.matmul(y, R.permute_dims(w))
                R.output(a, b)
            return (a, b)

    after = partition_for_tvm_tirx(Before)
    kernels = sorted(gv.name_hint for gv, f in after.functions_items() if isinstance(f, tvm.tirx.PrimFunc))
    # m = 1: the planner's 64-row tile (planner.DECODE_TILE; the offload has no small-M form)
    assert kernels == ["tvm_tirx_gemm_n256_k64_bf16_bf16", "tvm_tirx_gemm_n256_k64_bf16_bf16_bm64_bn64"]
    assert after["tvm_tirx_gemm_n256_k64_bf16_bf16"].same_as(gemm_prim_func(256, 64))  # every m
    assert after["tvm_tirx_gemm_n256_k64_bf16_bf16_bm64_bn64"].same_as(
        gemm_prim_func(256, 64, block_m=64, block_n=64, stages=8))
    assert partition_for_tvm_tirx(Before, gemm_options={"block_n": 256})["main"].script().count(
        "tvm_tirx_gemm_n256_k64_bf16_bf16,") == 2  # a width given in gemm_options: one kernel for both
    calls = [b.value for b in after["main"].body.blocks[0].bindings]
    assert [c.op.name for c in calls] == ["relax.call_tir", "relax.call_tir"]


@I.ir_module
class LeftAlone:
    """fp32 inputs; bf16 rows of 100 elements (200 bytes: not a multiple of 16); a batched
    weight; a float16 output; a run-time k."""

    @R.function
    def main(f: R.Tensor((4, 64), "float32"), g: R.Tensor((64, 8), "float32"),
             x: R.Tensor(("m", 100), "bfloat16"), w: R.Tensor((256, 100), "bfloat16"),
             xb: R.Tensor((2, 4, 64), "bfloat16"), wb: R.Tensor((2, 64, 8), "bfloat16"),
             h: R.Tensor((4, 64), "bfloat16"), v: R.Tensor((64, 8), "bfloat16"),
             xk: R.Tensor((4, "k"), "bfloat16"), wk: R.Tensor(("k", 8), "bfloat16")):
        with R.dataflow():
            a = R.matmul(f, g)
            b = R.matmul(x, R.permute_dims(w))
            c = R.matmul(xb, wb)
            d = R.matmul(h, v, out_dtype="float16")
            e = R.matmul(xk, wk)
            R.output(a, b, c, d, e)
        return (a, b, c, d, e)


def test_unsupported_matmuls_are_left_alone_with_the_reasons():
    skipped = []
    after = partition_for_tvm_tirx(LeftAlone, skipped=skipped)
    tvm.ir.assert_structural_equal(after, LeftAlone)
    reasons = {s.var: s.reason for s in skipped}
    assert all(isinstance(s, SkippedMatmul) and s.function == "main" for s in skipped)
    assert set(reasons) == {"a", "b", "c", "d", "e"}, reasons
    assert reasons["a"].startswith("inputs float32 x float32")
    assert "k = 100: rows of 200 bytes are not a multiple of 16" in reasons["b"]
    assert "the weight has 3 axes" in reasons["c"]
    assert reasons["d"].startswith("output float16")
    assert reasons["e"] == "k is not a compile-time constant"


def test_static_m_out_of_the_kernels_range_is_left_alone():
    x = relax.Var("x", R.Tensor((MAX_M + 1, 64), "bfloat16"))
    w = relax.Var("w", R.Tensor((64, 8), "bfloat16"))
    call = relax.op.matmul(x, w)
    call = relax.BlockBuilder().normalize(call)
    assert match_gemm(call) == f"m = {MAX_M + 1} outside 1 .. {MAX_M}"


def test_gemm_options_reach_make_gemm_and_its_errors_surface():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor(("m", 64), "bfloat16"), w: R.Tensor((64, 256), "bfloat16")):
            with R.dataflow():
                y = R.matmul(x, w)
                R.output(y)
            return y

    name = "tvm_tirx_gemm_n256_k64_bf16_bf16_b_kn"  # w (k, n): read N-major
    default = partition_for_tvm_tirx(Before)[name]
    assert default.same_as(gemm_prim_func(256, 64, **CONFIG["bfloat16"], b_major="n"))  # the torch operators' options
    after = partition_for_tvm_tirx(Before, gemm_options={"persistent": True, "ctas": 132})
    assert [gv.name_hint for gv in after.functions if gv.name_hint != "main"] == [name + "_persistent132"]  # its schedule
    assert after[name + "_persistent132"].same_as(gemm_prim_func(256, 64, persistent=True, ctas=132, b_major="n"))
    with pytest.raises(ValueError, match="cluster=2 pairs CTAs"):
        partition_for_tvm_tirx(Before, gemm_options={"cluster": 2})
    with pytest.raises(ValueError, match=r"gemm_options: activation, bias cannot be given to the Relax offload"):
        partition_for_tvm_tirx(Before, gemm_options={"bias": "bfloat16", "activation": "silu"})
    with pytest.raises(ValueError, match=r"gemm_options: out_dtype cannot be given .* per call site"):
        partition_for_tvm_tirx(Before, gemm_options={"out_dtype": "float32"})
    with pytest.raises(ValueError, match=r"gemm_options: b_major cannot be given .* per call site"):
        partition_for_tvm_tirx(Before, gemm_options={"b_major": "k"})
    with pytest.raises(ValueError, match=r"gemm_options: unknown option 'foo' \(make_gemm's options: stages, "):
        partition_for_tvm_tirx(Before, gemm_options={"foo": 1})
    with pytest.raises(ValueError, match=r"gemm_options: block_scales, splits cannot be given .* workspaces"):
        partition_for_tvm_tirx(Before, gemm_options={"splits": 2, "block_scales": True})


# -- builds ---------------------------------------------------------------------------------


@I.ir_module
class Block:
    """A projection with a symbolic batch and sequence, then a bias add and a second
    projection (linear form, float32 output); a float32 matmul stays with the default
    lowering."""

    @R.function
    def main(x: R.Tensor(("b", "s", 64), "bfloat16"), w1: R.Tensor((64, 256), "bfloat16"),
             bias: R.Tensor((256,), "bfloat16"), w2: R.Tensor((128, 256), "bfloat16"),
             f: R.Tensor((4, 8), "float32"), g: R.Tensor((8, 4), "float32")):
        with R.dataflow():
            h = R.add(R.matmul(x, w1), bias)
            y = R.matmul(h, R.permute_dims(w2), out_dtype="float32")
            z = R.matmul(f, g)
            R.output(y, z)
        return (y, z)


def _build(mod):
    return tvm.compile(mod, target=tvm.target.Target(TARGET), relax_pipeline="tvm_tirx", tir_pipeline="tvm_tirx")


def test_offloaded_module_builds_for_sm_90a():
    skipped = []
    source = testing.relax_cuda_source(_build(partition_for_tvm_tirx(Block, skipped=skipped)))
    assert [s.var for s in skipped] == ["z"]
    kernels = set(re.findall(r"__global__ void (?:__launch_bounds__\([\d, ]+\) )?(\w+)\(", source))
    assert {"tvm_tirx_gemm_n256_k64_bf16_bf16_bias_bf16_b_kn_kernel", "tvm_tirx_gemm_n128_k256_bf16_f32_kernel"} <= kernels, \
        kernels  # the first matmul's bias add fused into its GEMM
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in source
    assert "matmul_kernel" in kernels  # the float32 matmul, lowered by apache-tvm


def test_importing_the_ops_registers_the_pipelines_they_build_with(monkeypatch):
    # without the tvm.backends entry point (the package found through PYTHONPATH) nothing
    # registers the pipelines at `import tvm`: importing tvm_tirx.ops must, or tvm.compile
    # cannot build an offloaded module ("Unknown pre-built pipeline tvm_tirx", seen on the H200)
    import importlib

    from tvm.relax import pipeline as relax_pipelines

    import tvm_tirx.ops
    from tvm_tirx.ops import relax as ops_relax

    monkeypatch.delitem(relax_pipelines.PIPELINE_MAP, "tvm_tirx")
    ops_relax.register_relax_pipeline.cache_clear()  # as in a process where it never ran
    importlib.reload(tvm_tirx.ops)
    assert "tvm_tirx" in relax_pipelines.PIPELINE_MAP


def test_the_tvm_tirx_relax_pipeline_offloads_when_asked():
    pipeline = relax_pipeline(offload_gemm=True)
    executable = tvm.compile(Block, target=tvm.target.Target(TARGET), relax_pipeline=pipeline, tir_pipeline="tvm_tirx")
    source = testing.relax_cuda_source(executable)
    assert "tvm_tirx_gemm_n256_k64_bf16_bf16_bias_bf16_b_kn_kernel" in source and "tvm_tirx_gemm_n128_k256_bf16_f32_kernel" in source
    # the plain pipeline does not
    assert "tvm_tirx_gemm" not in testing.relax_cuda_source(_build(Block))


def test_offloaded_module_for_another_arch_is_a_tile_error():
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_80"})
    with pytest.raises(tvm_tirx.TileError, match="tvm_tirx_gemm_n256_k64_bf16_bf16"):
        tvm.compile(partition_for_tvm_tirx(Block), target=target, relax_pipeline="tvm_tirx", tir_pipeline="tvm_tirx")


@testing.requires_nvcc
def test_offloaded_module_cuda_assembles_for_sm_90a():
    from tvm_tirx.build.nvcc import nvcc  # pylint: disable=import-outside-toplevel

    source = testing.relax_cuda_source(_build(partition_for_tvm_tirx(Block)))
    assert len(nvcc(source, tvm.target.Target(TARGET), "cubin")) > 0


_DTYPES = {"bf16": "bfloat16", "f32": "float32"}
_ACTIVATIONS = {None: lambda v: v, "relu": lambda v: te.max(v, tvm.tirx.const(0.0, "float32")),
                "silu": lambda v: v * te.sigmoid(v),
                "gelu_tanh": lambda v: 0.5 * v * (1.0 + te.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))}


def _reference_gemm(name):
    """A plain TE kernel with the GEMM's signature and semantics (C = act(A @ B^T + Bias),
    fp32 accumulation, one rounding; B stored (k, n) for a ``_b_kn`` kernel) for the kernel
    ``name``, to run the rewritten module on the CPU."""
    n, k, out, bias, act, kn = re.fullmatch(r"tvm_tirx_gemm_n(\d+)_k(\d+)_bf16_(bf16|f32)(?:_bias_(bf16|f32))?"
                                            r"(?:_(relu|silu|gelu_tanh))?(_b_kn)?", name).groups()
    a = te.placeholder((tvm.tirx.Var("m", "int64"), int(k)), "bfloat16", "A")
    b = te.placeholder((int(k), int(n)) if kn else (int(n), int(k)), "bfloat16", "B")
    v = te.placeholder((int(n),), _DTYPES[bias], "Bias") if bias else None
    r = te.reduce_axis((0, int(k)), "r")
    b_at = (lambda j: b[r, j]) if kn else (lambda j: b[j, r])
    acc = te.compute((a.shape[0], int(n)), lambda i, j: te.sum(a[i, r].astype("float32") * b_at(j).astype("float32"), axis=r))
    c = te.compute(acc.shape, lambda i, j: _ACTIVATIONS[act](acc[i, j] + (v[j].astype("float32") if v is not None else 0.0))
                   .astype(_DTYPES[out]))
    return te.create_prim_func([a, b, *([v] if v is not None else []), c]).with_attr("global_symbol", name)


def _cpu_vm_with_reference_kernels(mod):
    """A CPU VM of the offloaded ``mod`` with each GEMM PrimFunc swapped for :func:`_reference_gemm`."""
    for gv, _ in list(mod.functions_items()):
        if gv.name_hint.startswith("tvm_tirx_gemm_"):
            mod.update_func(gv, _reference_gemm(gv.name_hint))
    return relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())


def _block_reference(x, w1, bias, w2):
    # the bias add is fused into the first GEMM: added in fp32, rounded once
    return (x.float() @ w1.float() + bias.float()).bfloat16().float() @ w2.float().t()


def test_rewritten_block_computes_the_same_on_the_cpu_with_a_reference_gemm(torch_cpu):
    # the rewrite's semantics (operand order, the transpose, the reshapes, symbolic m)
    # checked without a GPU: each GEMM PrimFunc swapped for a TE kernel computing A @ B^T
    torch = torch_cpu
    vm = _cpu_vm_with_reference_kernels(partition_for_tvm_tirx(Block))
    torch.manual_seed(0)
    w1, bias, w2 = torch.randn(64, 256).bfloat16(), torch.randn(256).bfloat16(), torch.randn(128, 256).bfloat16()
    f, g = torch.randn(4, 8), torch.randn(8, 4)
    for b, s in ((1, 7), (3, 30)):
        x = torch.randn(b, s, 64).bfloat16()
        y, z = (torch.from_dlpack(t) for t in vm["main"](*[tvm.runtime.from_dlpack(t) for t in (x, w1, bias, w2, f, g)]))
        ref = _block_reference(x, w1, bias, w2)
        assert y.shape == (b, s, 128) and ((y - ref).abs().max() / ref.abs().max()).item() < 1e-5
        torch.testing.assert_close(z, f @ g)


# -- on the GPU -----------------------------------------------------------------------------


@pytest.mark.gpu
@testing.requires_cuda
def test_relax_vm_runs_the_offloaded_block_at_two_sequence_lengths(torch_cuda):
    torch = torch_cuda
    vm = relax.VirtualMachine(_build(partition_for_tvm_tirx(Block)), tvm.cuda(0))
    torch.manual_seed(0)
    w1 = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(256, device="cuda", dtype=torch.bfloat16)
    w2 = torch.randn(128, 256, device="cuda", dtype=torch.bfloat16)
    f, g = torch.randn(4, 8, device="cuda"), torch.randn(8, 4, device="cuda")
    for b, s in ((1, 7), (3, 300)):
        x = torch.randn(b, s, 64, device="cuda", dtype=torch.bfloat16)
        args = [tvm.runtime.from_dlpack(t.contiguous()) for t in (x, w1, bias, w2, f, g)]
        y, z = (torch.from_dlpack(t) for t in vm["main"](*args))
        ref = _block_reference(x, w1, bias, w2)
        err = ((y - ref).abs().max() / ref.abs().max()).item()
        assert y.shape == (b, s, 128) and err <= 1e-2, (b, s, err)
        torch.testing.assert_close(z, f @ g)


@pytest.mark.slow
def test_the_guide_example_runs_as_it_is(tmp_path):
    # docs/guides/relax_offload.rst: the file example, run as a reader would (without a
    # GPU it offloads and builds, then stops)
    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "guides" / "relax_offload.rst").read_text()
    block = re.search(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", page).group(1)
    source = textwrap.dedent(block)
    assert source.startswith("# relax_offload.py")
    (tmp_path / "relax_offload.py").write_text(source)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(pathlib.Path(tvm_tirx.__file__).parents[1]),
                                                       os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "relax_offload.py"], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]


# -- fused epilogues ---------------------------------------------------------------------------


@I.ir_module
class Epilogues:
    """A bias add (bias on the left) under a SiLU; a ReLU of a matmul; a GELU whose input is
    also returned (read twice: not fused); a bias of two axes (not a (n,) vector)."""

    @R.function
    def main(x: R.Tensor(("m", 64), "bfloat16"), w: R.Tensor((128, 64), "bfloat16"),
             bias: R.Tensor((128,), "bfloat16"), w2: R.Tensor((64, 128), "bfloat16"),
             bias2: R.Tensor((1, 64), "bfloat16")):
        with R.dataflow():
            h = R.nn.silu(R.add(bias, R.matmul(x, R.permute_dims(w))))
            r = R.nn.relu(R.matmul(x, R.permute_dims(w)))
            p = R.matmul(h, R.permute_dims(w2))
            g = R.nn.gelu_tanh(p)
            q = R.add(R.matmul(r, R.permute_dims(w2)), bias2)
            R.output(g, p, q)
        return (g, p, q)


def test_bias_and_activations_fold_into_the_gemm_when_each_step_is_read_once():
    after = partition_for_tvm_tirx(Epilogues)
    names = sorted(gv.name_hint for gv in after.get_global_vars() if gv.name_hint != "main")
    assert names == ["tvm_tirx_gemm_n128_k64_bf16_bf16_bias_bf16_silu", "tvm_tirx_gemm_n128_k64_bf16_bf16_relu",
                     "tvm_tirx_gemm_n64_k128_bf16_bf16"], names
    main = after["main"].script()
    assert "(x, w, bias)" in main  # the fused call's inputs: A, B, Bias (C is its output)
    assert "R.nn.silu" not in main and "R.nn.relu" not in main and "R.matmul" not in main
    assert main.count("R.nn.gelu_tanh") == 1  # p is returned too: its GEMM stays plain
    assert main.count("R.add(") == 1  # the (1, 64) bias is added by Relax
    plain = partition_for_tvm_tirx(Epilogues, epilogues=False)["main"].script()
    assert "R.nn.silu" in plain and plain.count("R.call_tir(tvm_tirx_gemm") == 4


def test_fused_epilogues_compute_the_same_on_the_cpu_with_reference_kernels(torch_cpu):
    torch = torch_cpu
    vm = _cpu_vm_with_reference_kernels(partition_for_tvm_tirx(Epilogues))
    torch.manual_seed(0)
    x, w, w2 = (torch.randn(*s).bfloat16() for s in ((37, 64), (128, 64), (64, 128)))
    bias, bias2 = torch.randn(128).bfloat16(), torch.randn(1, 64).bfloat16()
    g, p, q = (torch.from_dlpack(t) for t in vm["main"](*[tvm.runtime.from_dlpack(t) for t in (x, w, bias, w2, bias2)]))
    f = torch.nn.functional
    h = f.silu(x.float() @ w.float().t() + bias.float()).bfloat16()  # fused: one rounding
    r = f.relu(x.float() @ w.float().t()).bfloat16()
    p_ref = (h.float() @ w2.float().t()).bfloat16()
    for got, ref in ((p, p_ref), (g, f.gelu(p_ref.float(), approximate="tanh").bfloat16()),
                     (q, ((r.float() @ w2.float().t()).bfloat16() + bias2).bfloat16())):
        err = ((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
        assert err < 1e-2, err


# -- K padding (planner.k_padding, as the torch operators pad) -----------------------------


@I.ir_module
class OddK:
    """K-major rows of 40 bf16 (80 bytes: a multiple of 16, not of 64), a static m and a
    symbolic one, a plain GEMM and one with a fused bias."""

    @R.function
    def main(x: R.Tensor((8, 40), "bfloat16"), y: R.Tensor(("m", 40), "bfloat16"),
             w: R.Tensor((16, 40), "bfloat16"), bias: R.Tensor((16,), "bfloat16")):
        with R.dataflow():
            a = R.matmul(x, R.permute_dims(w))
            b = R.matmul(y, R.permute_dims(w))
            c = R.add(R.matmul(x, R.permute_dims(w)), bias)
            R.output(a, b, c)
        return (a, b, c)


def test_a_static_m_pads_k_like_the_torch_operators(monkeypatch):
    from tvm_tirx.kernels.gemm import planner

    monkeypatch.setattr(planner, "PAD_MIN_ROWS", 1)  # pad even these small shapes
    after = partition_for_tvm_tirx(OddK, gemm_options={"block_n": 256})
    names = sorted(gv.name_hint for gv in after.get_global_vars() if gv.name_hint != "main")
    # 80-byte rows padded to 128 (k = 64) for the static m, plain and fused; the symbolic m keeps k = 40
    assert names == ["tvm_tirx_gemm_n16_k40_bf16_bf16", "tvm_tirx_gemm_n16_k64_bf16_bf16",
                     "tvm_tirx_gemm_n16_k64_bf16_bf16_bias_bf16"], names
    main = after["main"].script()
    assert main.count("R.nn.pad(") == 4 and main.count("pad_width=[0, 0, 0, 24]") == 4  # x and w, twice
    monkeypatch.setattr(planner, "PAD_MIN_ROWS", 1024)  # the default: these shapes are too small to pay
    assert "R.nn.pad" not in partition_for_tvm_tirx(OddK, gemm_options={"block_n": 256})["main"].script()


def test_padded_k_computes_the_same_on_the_cpu_with_reference_kernels(torch_cpu, monkeypatch):
    torch = torch_cpu
    from tvm_tirx.kernels.gemm import planner

    monkeypatch.setattr(planner, "PAD_MIN_ROWS", 1)
    vm = _cpu_vm_with_reference_kernels(partition_for_tvm_tirx(OddK, gemm_options={"block_n": 256}))
    torch.manual_seed(0)
    x, y, w, bias = torch.randn(8, 40).bfloat16(), torch.randn(5, 40).bfloat16(), torch.randn(16, 40).bfloat16(), \
        torch.randn(16).bfloat16()
    a, b, c = (torch.from_dlpack(t) for t in vm["main"](*[tvm.runtime.from_dlpack(t) for t in (x, y, w, bias)]))
    for got, ref in ((a, x.float() @ w.float().t()), (b, y.float() @ w.float().t()),
                     (c, x.float() @ w.float().t() + bias.float())):
        err = ((got.float() - ref).abs().max() / ref.abs().max()).item()
        assert got.shape == ref.shape and err < 1e-2, err
