"""Relax offload of RMSNorm and rotary embeddings (tvm_tirx.ops.relax_norm / relax_rotary)
and output reshapes as views (tvm_tirx.ops.relax_views).

CPU: what matches becomes one call of the kernel, what does not stays with its reason;
the rewritten module computes what the original computes on the CPU, with the kernels
swapped for TE references of their contracts; the views pass, Before/Expected, and in the
package's pipeline (no copy kernel for a returned reshape of a GEMM's output).
GPU (marker ``gpu``): the offloaded module on the Relax VM against the default lowering.
"""

import re

import pytest
import tvm
from tvm import relax, te
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from tvm_tirx import testing
from tvm_tirx.ops.relax_offload import partition_for_tvm_tirx
from tvm_tirx.ops.relax_views import ViewReshapedOutputs

TARGET = {"kind": "cuda", "arch": "sm_90a"}


@I.ir_module
class Rowwise:
    """An RMSNorm over (b, s, 256); rotary embeddings of q (split halves, tables reshaped
    to (1, s, 1, 64)) and k (strided slices, products in the other order); an RMSNorm in
    float32 and one of a row the kernel cannot hold (left alone); a sum of products that
    is not a rotation (left alone)."""

    @R.function
    def main(x: R.Tensor(("b", "s", 256), "bfloat16"), w: R.Tensor((256,), "bfloat16"),
             q: R.Tensor(("b", "s", 4, 64), "bfloat16"), k: R.Tensor(("b", "s", 2, 64), "bfloat16"),
             cos: R.Tensor(("s", 64), "bfloat16"), sin: R.Tensor(("s", 64), "bfloat16"),
             y: R.Tensor((8, 100), "bfloat16"), wy: R.Tensor((100,), "bfloat16")):
        b, s = T.int64(), T.int64()
        with R.dataflow():
            n1 = R.nn.rms_norm(x, w, axes=[-1], epsilon=1e-6)
            c4 = R.reshape(cos, [1, s, 1, 64])
            s4 = R.reshape(sin, [1, s, 1, 64])
            halves = R.split(q, [32], axis=3)
            rq = R.concat([R.negative(halves[1]), halves[0]], axis=3)
            q2 = R.add(R.multiply(q, c4), R.multiply(rq, s4))
            rk = R.concat([R.negative(R.strided_slice(k, axes=[3], begin=[32], end=[64])),
                           R.strided_slice(k, axes=[3], begin=[0], end=[32])], axis=-1)
            k2 = R.add(R.multiply(s4, rk), R.multiply(c4, k))
            n2 = R.nn.rms_norm(R.astype(x, "float32"), R.astype(w, "float32"), axes=[-1], epsilon=1e-6)
            n3 = R.nn.rms_norm(y, wy, axes=[-1], epsilon=1e-6)
            not_rope = R.add(R.multiply(q, c4), R.multiply(q, s4))
            R.output(n1, q2, k2, n2, n3, not_rope)
        return (n1, q2, k2, n2, n3, not_rope)


def test_norms_and_rotations_become_kernel_calls_and_the_rest_stays():
    skipped = []
    after = partition_for_tvm_tirx(Rowwise, skipped=skipped)
    names = sorted(gv.name_hint for gv in after.get_global_vars() if gv.name_hint != "main")
    assert names == ["tvm_tirx_rms_norm_h256_bf16_e358637bd", "tvm_tirx_rotary_h2_d64_bf16",
                     "tvm_tirx_rotary_h4_d64_bf16"], names
    main = after["main"].script()
    assert main.count("R.nn.rms_norm") == 2 and main.count("R.call_tir(tvm_tirx_rms_norm") == 1
    assert main.count("R.call_tir(tvm_tirx_rotary") == 2
    assert "R.split" not in main and "R.strided_slice" not in main and "R.negative" not in main
    assert main.count("R.multiply") == 2  # not_rope's
    reasons = sorted(s.reason for s in skipped if type(s).__name__ == "SkippedNorm")
    assert len(reasons) == 2 and "dtype: expected one of ['bfloat16', 'float16'], found 'float32'" in reasons[0]
    assert "hidden: expected a static multiple of 256" in reasons[1], reasons
    kept = partition_for_tvm_tirx(Rowwise, norm=False, rotary=False)["main"].script()
    assert kept.count("R.nn.rms_norm") == 3 and "tvm_tirx_rotary" not in kept


def test_a_norm_over_another_axis_is_left_alone_with_the_reason():
    x = relax.Var("x", relax.TensorType([8, 256], "bfloat16"))
    w = relax.Var("w", relax.TensorType([8], "bfloat16"))
    from tvm_tirx.ops.relax_norm import match_rms_norm  # pylint: disable=import-outside-toplevel

    assert match_rms_norm(relax.op.nn.rms_norm(x, w, axes=[0])) == "axes [0] (offloaded: the last axis only)"


def test_rotary_near_misses_are_left_alone_with_their_reasons():
    bb = relax.BlockBuilder()
    x3 = relax.Var("x3", relax.TensorType([4, 4, 64], "float16"))
    x4 = relax.Var("x4", relax.TensorType([1, 4, 2, 96], "bfloat16"))
    t3, t4 = (relax.Var(n, relax.TensorType(s, d)) for n, s, d in (("t3", [1, 4, 1, 64], "float16"),
                                                                     ("t4", [1, 4, 1, 96], "bfloat16")))
    with bb.function("main", [x3, t3, x4, t4]):
        with bb.dataflow():
            outs = []
            for x, t in ((x3, t3), (x4, t4)):
                halves = bb.emit(relax.op.split(x, 2, axis=-1))
                rot = bb.emit(relax.op.concat([relax.op.negative(relax.TupleGetItem(halves, 1)),
                                               relax.TupleGetItem(halves, 0)], axis=-1))
                outs.append(bb.emit(relax.op.add(relax.op.multiply(x, t), relax.op.multiply(rot, t))))
            out = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(out)
    skipped = []
    after = partition_for_tvm_tirx(bb.get(), skipped=skipped)
    assert "tvm_tirx_rotary" not in after.script()
    reasons = [s.reason for s in skipped if type(s).__name__ == "SkippedRotary"]
    assert len(reasons) == 2, skipped
    assert reasons[0].startswith("x of shape [4, 4, 64] and a sum of shape [1, 4, 4, 64]"), reasons
    assert "head_dim: expected one of [64, 128, 256]" in reasons[1], reasons


def _rms_reference(name, hidden, eps):
    x = te.placeholder((tvm.tirx.Var("m", "int64"), hidden), "bfloat16", "X")
    w = te.placeholder((hidden,), "bfloat16", "W")
    r = te.reduce_axis((0, hidden), "r")
    ss = te.compute((x.shape[0],), lambda i: te.sum(x[i, r].astype("float32") * x[i, r].astype("float32"), axis=r))
    y = te.compute(x.shape, lambda i, j: (x[i, j].astype("float32") * te.rsqrt(ss[i] / hidden + eps)
                                          * w[j].astype("float32")).astype("bfloat16"))
    return te.create_prim_func([x, w, y]).with_attr("global_symbol", name)


def _rotary_reference(name, heads, d):
    b, s = tvm.tirx.Var("b", "int64"), tvm.tirx.Var("s", "int64")
    x = te.placeholder((b, s, heads, d), "bfloat16", "X")
    cos, sin = (te.placeholder((s, d), "bfloat16", n) for n in ("Cos", "Sin"))
    f = lambda t: t.astype("float32")  # noqa: E731
    y = te.compute(x.shape, lambda i, p, h, j: (
        f(x[i, p, h, j]) * f(cos[p, j]) + te.if_then_else(j < d // 2, -f(x[i, p, h, j + d // 2]),
                                                          f(x[i, p, h, j - d // 2])) * f(sin[p, j])
    ).astype("bfloat16"))
    return te.create_prim_func([x, cos, sin, y]).with_attr("global_symbol", name)


def _cpu_vm(mod):
    for gv, _ in list(mod.functions_items()):
        name = gv.name_hint
        if name.startswith("tvm_tirx_rms_norm_h256"):
            mod.update_func(gv, _rms_reference(name, 256, 1e-6))
        elif name.startswith("tvm_tirx_rotary_"):
            mod.update_func(gv, _rotary_reference(name, int(name.split("_h")[1].split("_")[0]), 64))
    return relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())


def _inputs(torch, b, s, device="cpu"):
    torch.manual_seed(s)
    shapes = ((b, s, 256), (256,), (b, s, 4, 64), (b, s, 2, 64), (s, 64), (s, 64), (8, 100), (100,))
    return [torch.randn(*shape).bfloat16().to(device) for shape in shapes]


def _outputs(torch, vm, args):
    return [torch.from_dlpack(t).float().cpu() for t in vm["main"](*[tvm.runtime.from_dlpack(t) for t in args])]


def test_the_rewritten_module_computes_what_the_original_does_on_the_cpu(torch_cpu):
    torch = torch_cpu
    original = relax.VirtualMachine(tvm.compile(Rowwise, target="llvm"), tvm.cpu())
    rewritten = _cpu_vm(partition_for_tvm_tirx(Rowwise))
    for b, s in ((1, 1), (2, 5)):
        args = _inputs(torch, b, s)
        for got, want in zip(_outputs(torch, rewritten, args), _outputs(torch, original, args)):
            err = ((got - want).abs().max() / want.abs().max()).item()
            assert err < 2e-2, err  # the original rounds each product to bf16, the kernels once


@I.ir_module
class Before:
    @T.prim_func
    def double(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, 4), "float32")
        B = T.match_buffer(b, (n, 4), "float32")
        for i, j in T.grid(n, 4):
            B[i, j] = A[i, j] * T.float32(2)

    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        cls = Before
        with R.dataflow():
            a = R.call_tir(cls.double, (x,), out_ty=R.Tensor((n, 4), "float32"))
            c = R.reshape(a, [n * 4])
            d = R.reshape(x, [n * 4])
            e = R.call_tir(cls.double, (x,), out_ty=R.Tensor((n, 4), "float32"))
            f = R.reshape(e, [n * 4])
            g = R.reshape(e, [4, n])
            R.output(c, d, f, g)
        return (c, d, f, g)


@I.ir_module
class Expected:
    @T.prim_func
    def double(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, 4), "float32")
        B = T.match_buffer(b, (n, 4), "float32")
        for i, j in T.grid(n, 4):
            B[i, j] = A[i, j] * T.float32(2)

    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        cls = Expected
        with R.dataflow():
            a = R.call_tir(cls.double, (x,), out_ty=R.Tensor((n, 4), "float32"))
            c_view = R.reshape(a, [n * 4])
            c: R.Tensor((n * 4,), "float32") = c_view
            d = R.reshape(x, [n * 4])  # a parameter's reshape stays a copy: no alias of an input
            e = R.call_tir(cls.double, (x,), out_ty=R.Tensor((n, 4), "float32"))
            f = R.reshape(e, [n * 4])  # e read twice: views of it would make f and g one buffer
            g = R.reshape(e, [4, n])
            R.output(c, d, f, g)
        return (c, d, f, g)


def test_an_output_reshape_of_a_fresh_once_read_tensor_is_bound_through_a_dataflow_variable():
    tvm.ir.assert_structural_equal(ViewReshapedOutputs()(Before), Expected)


def test_the_pipeline_returns_a_view_of_the_gemm_output_not_a_copy():
    from tvm_tirx.ops.relax import relax_pipeline  # pylint: disable=import-outside-toplevel

    @I.ir_module
    class Projection:
        @R.function
        def main(x: R.Tensor(("b", "s", 64), "bfloat16"), w: R.Tensor((64, 64), "bfloat16")):
            with R.dataflow():
                y = R.matmul(x, R.permute_dims(w))
                R.output(y)
            return y

    target = tvm.target.Target(TARGET)
    with target:
        lowered = relax_pipeline(target)(partition_for_tvm_tirx(Projection))
    main = lowered["main"].script()
    assert "vm.builtin.reshape" in main.rsplit("tvm_tirx_gemm", 1)[1], main
    assert not re.search(r"^\s*reshape\d*\(", main, re.M), main  # no copy kernel is called


@pytest.mark.gpu
@testing.requires_cuda
def test_the_offloaded_module_on_the_relax_vm(torch_cuda):
    torch = torch_cuda
    target = tvm.target.Target(TARGET)
    ex = tvm.compile(partition_for_tvm_tirx(Rowwise), target=target, relax_pipeline="tvm_tirx",
                     tir_pipeline="tvm_tirx")
    vm = relax.VirtualMachine(ex, tvm.cuda(0))
    original = relax.VirtualMachine(tvm.compile(Rowwise, target=target), tvm.cuda(0))
    for b, s in ((1, 1), (3, 1000)):
        args = _inputs(torch, b, s, device="cuda")
        for got, want in zip(_outputs(torch, vm, args), _outputs(torch, original, args)):
            err = ((got - want).abs().max() / want.abs().max()).item()
            assert err < 2e-2, err
