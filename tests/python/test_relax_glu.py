"""Relax offload of a gated MLP to the gated GEMM (tvm_tirx.ops.relax_glu).

CPU: ``silu(x @ Wg) * (x @ Wu)`` (linear and ``(k, n)`` weights, either operand order)
becomes one call of the gated kernel on the interleaved weight, with the matmuls and the
activation gone; what does not match stays; the rewritten module computes the same on the
CPU with the kernel swapped for a TE reference of its contract; after
``LiftTransformParams`` the interleaved weight is built in the parameter transform.
GPU (marker ``gpu``): the offloaded module on the Relax VM against torch.
"""

import re

import pytest
import tvm
from tvm import relax, te
from tvm.script import ir as I
from tvm.script import relax as R

from tvm_tirx import testing
from tvm_tirx.ops.relax_offload import partition_for_tvm_tirx

TARGET = {"kind": "cuda", "arch": "sm_90a"}


@I.ir_module
class Mlp:
    """A SwiGLU with (n, k) weights; a GeGLU with (k, n) weights, the product's operands
    swapped; a SiLU whose matmul is also returned (read twice: not gated)."""

    @R.function
    def main(x: R.Tensor(("m", 64), "bfloat16"), wg: R.Tensor((32, 64), "bfloat16"),
             wu: R.Tensor((32, 64), "bfloat16"), kg: R.Tensor((64, 16), "bfloat16"),
             ku: R.Tensor((64, 16), "bfloat16")):
        with R.dataflow():
            a = R.multiply(R.nn.silu(R.matmul(x, R.permute_dims(wg))), R.matmul(x, R.permute_dims(wu)))
            b = R.multiply(R.matmul(x, ku), R.nn.gelu_tanh(R.matmul(x, kg)))
            p = R.matmul(x, R.permute_dims(wg))
            c = R.multiply(R.nn.silu(p), R.matmul(x, R.permute_dims(wu)))
            R.output(a, b, c, p)
        return (a, b, c, p)


def test_a_gated_mlp_becomes_one_gated_gemm_on_the_interleaved_weight():
    after = partition_for_tvm_tirx(Mlp)
    names = sorted(gv.name_hint for gv in after.get_global_vars() if gv.name_hint != "main")
    assert names == ["tvm_tirx_gemm_n16_k64_bf16_bf16_gelu_tanh_glu", "tvm_tirx_gemm_n32_k64_bf16_bf16",
                     "tvm_tirx_gemm_n32_k64_bf16_bf16_silu_glu"], names
    main = after["main"].script()
    assert main.count("_glu, ") == 2 and "R.nn.gelu_tanh" not in main
    assert main.count("R.nn.silu") == 1 and main.count("R.multiply") == 1  # c: its matmul is read twice
    assert main.count("R.concat") == 2  # the two interleaved weights
    assert "R.nn.silu" in partition_for_tvm_tirx(Mlp, glu=False, epilogues=False)["main"].script()


def test_a_width_the_gated_gemm_cannot_take_is_a_value_error_naming_glu():
    with pytest.raises(ValueError, match=r"block_n=64: the gated MLP rewrite.*glu=False"):
        partition_for_tvm_tirx(Mlp, gemm_options={"block_n": 64})
    after = partition_for_tvm_tirx(Mlp, gemm_options={"block_n": 64}, glu=False)
    assert "_glu" not in after["main"].script()


_ACTS = {"silu": lambda v: v * te.sigmoid(v),
         "gelu_tanh": lambda v: 0.5 * v * (1.0 + te.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))}


def _reference_kernel(name):
    """A TE kernel with the GEMM's contract for ``name``: plain, or gated (B's rows
    ``16 q + i`` the gate of column ``8 q + i``, ``16 q + 8 + i`` its up)."""
    n, k, act, glu = re.fullmatch(r"tvm_tirx_gemm_n(\d+)_k(\d+)_bf16_bf16(?:_(silu|gelu_tanh))?(_glu)?", name).groups()
    n, k = int(n), int(k)
    a = te.placeholder((tvm.tirx.Var("m", "int64"), k), "bfloat16", "A")
    b = te.placeholder((2 * n if glu else n, k), "bfloat16", "B")
    r = te.reduce_axis((0, k), "r")
    acc = te.compute((a.shape[0], b.shape[0]),
                     lambda i, j: te.sum(a[i, r].astype("float32") * b[j, r].astype("float32"), axis=r))
    if glu:
        c = te.compute((a.shape[0], n), lambda i, j: (_ACTS[act](acc[i, j // 8 * 16 + j % 8])
                                                      * acc[i, j // 8 * 16 + 8 + j % 8]).astype("bfloat16"))
    else:
        c = te.compute((a.shape[0], n), lambda i, j: acc[i, j].astype("bfloat16"))
    return te.create_prim_func([a, b, c]).with_attr("global_symbol", name)


def _cpu_vm(mod):
    for gv, _ in list(mod.functions_items()):
        if gv.name_hint.startswith("tvm_tirx_gemm_"):
            mod.update_func(gv, _reference_kernel(gv.name_hint))
    return relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())


def _torch_reference(torch, x, wg, wu, kg, ku):
    f, xf = torch.nn.functional, x.float()
    a = f.silu(xf @ wg.float().t()) * (xf @ wu.float().t())
    b = f.gelu(xf @ kg.float(), approximate="tanh") * (xf @ ku.float())
    return a, b


def _inputs(torch, m, device="cpu"):
    torch.manual_seed(m)
    shapes = ((m, 64), (32, 64), (32, 64), (64, 16), (64, 16))
    return [(torch.randn(*s) / 4).bfloat16().to(device) for s in shapes]


def _check(torch, outs, ref):
    for got, want in zip(outs, ref):
        err = ((got.float().cpu() - want.cpu()).abs().max() / want.abs().max()).item()
        assert err < 1e-2, err


def test_the_gated_module_computes_the_same_on_the_cpu_with_reference_kernels(torch_cpu):
    torch = torch_cpu
    vm = _cpu_vm(partition_for_tvm_tirx(Mlp))
    for m in (1, 37):
        args = _inputs(torch, m)
        outs = [torch.from_dlpack(t) for t in vm["main"](*[tvm.runtime.from_dlpack(t) for t in args])]
        _check(torch, outs[:2], _torch_reference(torch, *args))


def test_lifting_the_parameters_builds_the_interleaved_weights_once(torch_cpu):
    torch = torch_cpu
    mod = partition_for_tvm_tirx(Mlp)
    mod["main"] = mod["main"].with_attr("num_input", 1)
    lifted = relax.transform.LiftTransformParams()(mod)
    transform, main = lifted["main_transform_params"].script(), lifted["main"].script()
    assert transform.count("R.concat") == 2 and "R.concat" not in main
    vm = _cpu_vm(lifted)
    args = _inputs(torch, 9)
    params = vm["main_transform_params"]([tvm.runtime.from_dlpack(t) for t in args[1:]])
    outs = [torch.from_dlpack(t) for t in vm["main"](tvm.runtime.from_dlpack(args[0]), *params)]
    _check(torch, outs[:2], _torch_reference(torch, *args))


@pytest.mark.gpu
@testing.requires_cuda
def test_the_gated_module_on_the_relax_vm(torch_cuda):
    torch = torch_cuda
    target = tvm.target.Target(TARGET)
    ex = tvm.compile(partition_for_tvm_tirx(Mlp), target=target, relax_pipeline="tvm_tirx", tir_pipeline="tvm_tirx")
    vm = relax.VirtualMachine(ex, tvm.cuda(0))
    for m in (1, 300):
        args = _inputs(torch, m, device="cuda")
        outs = [torch.from_dlpack(t) for t in vm["main"](*[tvm.runtime.from_dlpack(t) for t in args])]
        _check(torch, outs[:2], _torch_reference(torch, *args))
