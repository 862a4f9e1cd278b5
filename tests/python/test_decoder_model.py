"""The decoder block of bench/model.py (bench/_decoder.py): torch and Relax agree, and the
offloads take what they should.

CPU: the Relax block (float32, apache-tvm on llvm) against the torch block; the Relax
offload rewrites its 7 matmuls (4 GEMM kernels) and its attention, leaving nothing
behind; the torch block on this package's ops traces into one graph with 7 ``linear``
and 1 ``attention`` calls (meta tensors); the offloaded Relax block builds for sm_90a.
GPU: a training step (forward and backward) of the block on the ops, eager and
compiled, against the torch block in float32.
"""

import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import tvm  # noqa: E402
from tvm import relax  # noqa: E402

from bench._decoder import WEIGHTS, BlockConfig, DecoderBlock, make_weights, relax_block, rope_tables  # noqa: E402
from tvm_tirx import testing  # noqa: E402
from tvm_tirx.ops.relax_offload import partition_for_tvm_tirx  # noqa: E402

SMALL = BlockConfig(hidden=256, heads=4, kv_heads=2, head_dim=64, inter=512)


def test_the_relax_block_computes_what_the_torch_block_does():
    weights = {n: w.float() for n, w in make_weights(SMALL).items()}
    vm = relax.VirtualMachine(tvm.compile(relax_block(SMALL, "float32"), target="llvm"), tvm.cpu())
    for b, s in ((1, 5), (2, 17)):
        x = torch.randn(b, s, SMALL.hidden)
        cos, sin = (t.float() for t in rope_tables(SMALL, s))
        ref = DecoderBlock(SMALL, weights)(x, cos, sin)
        args = [x, cos, sin, *(weights[n] for n in WEIGHTS)]
        y = torch.from_dlpack(vm["main"](*[tvm.runtime.from_dlpack(t.contiguous()) for t in args]))
        torch.testing.assert_close(y, ref, atol=1e-4, rtol=1e-4)


def test_the_offload_takes_every_matmul_the_attention_the_norms_and_the_rotary_embeddings():
    skipped = []
    offloaded = partition_for_tvm_tirx(relax_block(SMALL), skipped=skipped)
    names = sorted(gv.name_hint for gv in offloaded.get_global_vars() if gv.name_hint != "main")
    assert skipped == []
    # q (n 256), k and v (n 128), o (n 256, k 256), gate and up as one gated GEMM (n 512:
    # the SiLU and the product fused), down (n 256, k 512); the K and V heads repeated for R.nn.attention are read
    # unrepeated (2 heads: grouped-query attention) and the repeats drop out
    # and the two residual adds fused into the o and down projections; both RMSNorms (one
    # kernel) and the rotary embeddings of q (4 heads) and k (2 heads)
    assert names == ["tvm_tirx_attention_h4_kv2_d64_causal_bf16", "tvm_tirx_gemm_n128_k256_bf16_bf16",
                     "tvm_tirx_gemm_n256_k256_bf16_bf16", "tvm_tirx_gemm_n256_k256_bf16_bf16_residual",
                     "tvm_tirx_gemm_n256_k512_bf16_bf16_residual", "tvm_tirx_gemm_n512_k256_bf16_bf16_silu_glu",
                     "tvm_tirx_rms_norm_h256_bf16_e3727c5ac", "tvm_tirx_rotary_h2_d64_bf16",
                     "tvm_tirx_rotary_h4_d64_bf16"]
    main = offloaded["main"].script()
    assert main.count("R.call_tir(tvm_tirx_gemm") == 6 and main.count("R.call_tir(tvm_tirx_attention") == 1
    assert main.count("R.call_tir(tvm_tirx_rms_norm") == 2 and main.count("R.call_tir(tvm_tirx_rotary") == 2
    assert "R.matmul" not in main and "R.nn.attention" not in main and "R.nn.silu" not in main
    assert "R.repeat" not in main and "R.add(x" not in main  # the residual adds: in the GEMMs
    assert "R.nn.rms_norm" not in main and "R.split" not in main and "R.negative" not in main


def test_the_torch_block_on_the_ops_traces_into_one_graph():
    block = DecoderBlock(SMALL, make_weights(SMALL, device="meta"), impl="tvm_tirx")
    x = torch.empty(2, 10, SMALL.hidden, dtype=torch.bfloat16, device="meta")
    explanation = torch._dynamo.explain(block)(x, *rope_tables(SMALL, 10, device="meta"))
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0, explanation
    code = explanation.graphs[0].code
    # q, k, v; o and down with their residual adds; gate and up as one gated GEMM (SiLU and
    # product fused)
    assert code.count("torch.ops.tvm_tirx.linear(") == 3 and code.count("torch.ops.tvm_tirx.attention") == 1
    assert code.count("torch.ops.tvm_tirx.linear_residual") == 2
    assert code.count("torch.ops.tvm_tirx.glu_linear") == 1 and "functional.silu" not in code


def test_the_offloaded_block_builds_for_sm_90a():
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    executable = tvm.compile(partition_for_tvm_tirx(relax_block(SMALL)), target=target, relax_pipeline="tvm_tirx",
                             tir_pipeline="tvm_tirx")
    assert executable is not None


def _training_step(block, x, cos, sin, compiled=False):
    """One forward and backward of ``block`` (under ``torch.compile`` with ``compiled``)
    with its weights as leaves: the loss and the weights' and the input's gradients."""
    leaves = {n: getattr(block, n).detach().clone().requires_grad_(True) for n in WEIGHTS}
    for name, w in leaves.items():
        setattr(block, name, w)
    x = x.detach().clone().requires_grad_(True)
    loss = (torch.compile(block) if compiled else block)(x, cos, sin).float().square().mean()
    loss.backward()
    return loss.detach(), {"x": x.grad, **{n: w.grad for n, w in leaves.items()}}


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
@pytest.mark.parametrize("compiled", [False, True])
def test_a_training_step_of_the_block_on_the_ops_matches_torch_on_gpu(torch_cuda, compiled):
    """Forward and backward of the block on this package's ops (under ``torch.compile``
    or eager) against the torch block in float32: the loss within bf16 rounding, every
    gradient (the 9 weights' and the input's) within 5% of the largest element."""
    weights = make_weights(SMALL, device="cuda")
    x = torch.randn(2, 200, SMALL.hidden, device="cuda").to(torch.bfloat16)
    cos, sin = rope_tables(SMALL, 200, device="cuda")
    loss, grads = _training_step(DecoderBlock(SMALL, weights, impl="tvm_tirx"), x, cos, sin, compiled)
    ref_loss, ref_grads = _training_step(DecoderBlock(SMALL, {n: w.float() for n, w in weights.items()}),
                                         x.float(), cos.float(), sin.float())
    assert abs(loss.item() - ref_loss.item()) <= 2e-2 * ref_loss.item(), (loss, ref_loss)
    for name, ref in ref_grads.items():
        err = ((grads[name].float() - ref).abs().max() / ref.abs().max()).item()
        assert err <= 5e-2, (name, err)
