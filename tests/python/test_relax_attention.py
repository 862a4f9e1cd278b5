"""Relax offload of R.nn.attention to the attention kernel (tvm_tirx.ops.relax_attention).

CPU: the Before/Expected rewrite with a symbolic batch and sequence, the attentions left
alone with their reasons, and a build of the offloaded module for sm_90a (assembled).
GPU (marker ``gpu``): the Relax VM against a float32 torch reference at two lengths.
"""

import math

import pytest
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from tvm_tirx import testing
from tvm_tirx.ops.attention_kernels import attention_prim_func
from tvm_tirx.ops.relax_attention import SkippedAttention, match_attention
from tvm_tirx.ops.relax_offload import partition_for_tvm_tirx

TARGET = {"kind": "cuda", "arch": "sm_90a"}


@I.ir_module
class Before:
    @R.function
    def main(q: R.Tensor(("b", "s", 4, 64), "bfloat16"), k: R.Tensor(("b", "s", 4, 64), "bfloat16"),
             v: R.Tensor(("b", "s", 4, 64), "bfloat16")):
        b, s = T.int64(), T.int64()
        with R.dataflow():
            y = R.nn.attention(q, k, v, causal_mask="TopLeft")
            R.output(y)
        return y


def test_a_causal_attention_becomes_one_call_of_the_kernel_with_symbolic_sizes():
    @I.ir_module
    class Expected:
        @T.prim_func
        def tvm_tirx_attention_h4_kv4_d64_causal_bf16(q: T.handle, k: T.handle, v: T.handle, o: T.handle,
                                                      lse: T.handle):  # stub: the kernel replaces it
            T.evaluate(0)

        @R.function
        def main(q: R.Tensor(("b", "s", 4, 64), "bfloat16"), k: R.Tensor(("b", "s", 4, 64), "bfloat16"),
                 v: R.Tensor(("b", "s", 4, 64), "bfloat16")):
            b, s = T.int64(), T.int64()
            cls = Expected
            with R.dataflow():
                outs = R.call_tir(cls.tvm_tirx_attention_h4_kv4_d64_causal_bf16, (q, k, v),
                                  out_ty=[R.Tensor((b, s, 4, 64), "bfloat16"), R.Tensor((b, 4, s), "float32")])
                y = outs[0]
                R.output(y)
            return y

    after = partition_for_tvm_tirx(Before)
    gv = Expected.get_global_var("tvm_tirx_attention_h4_kv4_d64_causal_bf16")
    Expected.update_func(gv, attention_prim_func(4, 4, 64, True, "bfloat16", 1 / math.sqrt(64)))
    tvm.ir.assert_structural_equal(after, Expected)
    # attention=False leaves it alone
    tvm.ir.assert_structural_equal(partition_for_tvm_tirx(Before, attention=False), Before)


@I.ir_module
class LeftAlone:
    @R.function
    def main(qf: R.Tensor((2, 16, 4, 64), "float32"), q96: R.Tensor((2, 16, 4, 96), "bfloat16"),
             q: R.Tensor((2, 16, 4, 64), "bfloat16"), k32: R.Tensor((2, 32, 4, 64), "bfloat16")):
        with R.dataflow():
            a = R.nn.attention(qf, qf, qf)
            c = R.nn.attention(q96, q96, q96)
            d = R.nn.attention(q, k32, k32)
            e = R.nn.attention(q, q, q, window_size=8)
            R.output(a, c, d, e)
        return (a, c, d, e)


def test_unsupported_attentions_are_left_alone_with_the_reasons():
    skipped = []
    after = partition_for_tvm_tirx(LeftAlone, skipped=skipped)
    tvm.ir.assert_structural_equal(after, LeftAlone)
    assert all(isinstance(s, SkippedAttention) and s.function == "main" for s in skipped)
    reasons = {s.var: s.reason for s in skipped}
    assert set(reasons) == {"a", "c", "d", "e"}, reasons
    assert reasons["a"] == "dtype float32 (offloaded: ['bfloat16', 'float16'])"
    assert reasons["c"] == "head_dim 96 (offloaded: static, one of [64, 128, 256], equal in q, k and v)"
    assert reasons["d"] == "q and k differ in batch or sequence length (the kernel has one length)"
    assert reasons["e"].startswith("a bias or a sliding window")


def test_the_scale_and_gqa_reach_the_kernel():
    q = relax.Var("q", relax.TensorType([2, 100, 8, 128], "float16"))
    k = relax.Var("k", relax.TensorType([2, 100, 2, 128], "float16"))
    call = relax.Call(tvm.ir.Op.get("relax.nn.attention"), [q, k, k],
                      tvm.ir.make_node("relax.attrs.AttentionAttrs", scale=T.float32(0.5), causal_mask="BottomRight", window_size=None))
    found = match_attention(call)
    assert (found.heads, found.kv_heads, found.head_dim, found.causal, found.scale, found.dtype) == (
        8, 2, 128, True, 0.5, "float16")


def _build(mod):
    return tvm.compile(mod, target=tvm.target.Target(TARGET), relax_pipeline="tvm_tirx", tir_pipeline="tvm_tirx")


@testing.requires_nvcc
def test_the_offloaded_module_builds_and_assembles_for_sm_90a():
    from tvm_tirx.build.nvcc import nvcc  # pylint: disable=import-outside-toplevel

    source = testing.relax_cuda_source(_build(partition_for_tvm_tirx(Before)))
    assert "tvm_tirx_attention_h4_kv4_d64_causal_bf16_kernel" in source
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in source
    assert len(nvcc(source, tvm.target.Target(TARGET), "cubin")) > 0


@pytest.mark.gpu
@testing.requires_cuda
def test_relax_vm_runs_the_offloaded_attention_at_two_lengths(torch_cuda):
    torch = torch_cuda
    vm = relax.VirtualMachine(_build(partition_for_tvm_tirx(Before)), tvm.cuda(0))
    for b, s in ((1, 7), (2, 300)):
        q, k, v = (torch.randn(b, s, 4, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        y = torch.from_dlpack(vm["main"](*[tvm.runtime.from_dlpack(t) for t in (q, k, v)]))
        ref = torch.nn.functional.scaled_dot_product_attention(*(t.float().transpose(1, 2) for t in (q, k, v)),
                                                               is_causal=True).transpose(1, 2)
        assert y.shape == (b, s, 4, 64) and (y.float() - ref).abs().max().item() <= 2e-2
