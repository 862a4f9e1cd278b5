"""
A decoder block on tvm_tirx kernels, from PyTorch and from Relax
================================================================

A Llama-style decoder block -- RMSNorm, Q/K/V projections, rotary embedding,
causal grouped-query attention, output projection, SwiGLU MLP, two residual
adds -- reaches this package's kernels two ways, one line each:

* in PyTorch, by calling ``tvm_tirx.ops.linear`` and ``tvm_tirx.ops.attention``
  (custom ops: ``torch.compile(fullgraph=True)`` traces them);
* in Relax, by ``partition_for_tvm_tirx`` before ``tvm.compile``: every
  ``R.matmul`` goes to the Hopper GEMM, ``R.nn.attention`` to the attention
  kernel, and the RMSNorms and rotary embeddings to this package's row-wise
  kernels, so that no operator is left to apache-tvm's default lowering.

The block is ``bench/_decoder.py`` (the one ``bench/model.py`` times at
Llama-3-8B sizes); here it is small. Run it with ``python
tutorials/decoder_block.py`` from the repository root; without a GPU it traces,
offloads and builds, and stops before running.
"""

# %%
# Setup
# -----

import os
import sys

import tvm
from tvm import relax

from tvm_tirx import testing
from tvm_tirx.build.nvcc import nvcc
from tvm_tirx.ops.relax_offload import partition_for_tvm_tirx

try:
    import torch
except ImportError:
    print("decoder_block: needs torch (pip install torch; a CPU build will do)")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._decoder import WEIGHTS, BlockConfig, DecoderBlock, make_weights, relax_block, rope_tables  # noqa: E402

ON_GPU = testing.has_cuda() and testing.arch_supported("sm_90a", torch.cuda.get_device_capability())
cfg = BlockConfig(hidden=1024, heads=8, kv_heads=2, head_dim=128, inter=2816)
device = "cuda" if ON_GPU else "meta"  # meta tensors: shapes only, for tracing without a GPU

# %%
# PyTorch: the block on our operators
# -----------------------------------
# ``DecoderBlock(..., impl="tvm_tirx")`` calls ``ops.linear`` for its Q, K, V, output and
# down projections (the last two with the residual add fused: ``residual=x``),
# ``ops.glu_linear(h, w_gate, w_up)`` for the SwiGLU's gate and up projections (one gated
# GEMM, the SiLU and the product in its epilogue) and
# ``ops.attention(q, k, v, causal=True)`` on ``(batch, seq, heads, head_dim)`` tensors
# with 8 query and 2 key/value heads. ``torch._dynamo.explain``
# shows one graph and no break: the compiled graph calls the ops, which launch the
# kernels (one compiled kernel per weight shape serves every number of tokens).

weights = make_weights(cfg, device=device)
block = DecoderBlock(cfg, weights, impl="tvm_tirx")
x = torch.randn(2, 256, cfg.hidden, dtype=torch.bfloat16).to(device)
cos, sin = rope_tables(cfg, 256, device=device)
explanation = torch._dynamo.explain(block)(x, cos, sin)
graph = explanation.graphs[0].code
print(f"graphs: {explanation.graph_count}, breaks: {explanation.graph_break_count}, "
      f"tvm_tirx.linear calls: {graph.count('torch.ops.tvm_tirx.linear')} "
      f"({graph.count('torch.ops.tvm_tirx.linear_residual')} with a residual), "
      f"tvm_tirx.glu_linear calls: {graph.count('torch.ops.tvm_tirx.glu_linear')}, "
      f"tvm_tirx.attention calls: {graph.count('torch.ops.tvm_tirx.attention')}")

# %%
# Relax: the same block, offloaded
# --------------------------------
# ``relax_block`` writes the block with Relax operators and a symbolic batch and
# sequence; it repeats the 2 K/V heads to 8 before ``R.nn.attention``, because
# apache-tvm's own lowering of a grouped-query ``R.nn.attention`` computes wrong
# values (our offload reads K and V before the repeats, as grouped-query attention).
# ``partition_for_tvm_tirx`` rewrites its matmuls and its attention into ``R.call_tir`` of
# our kernels -- the SwiGLU's gate and up projections into one gated GEMM (the
# ``_silu_glu`` kernel, on a weight the module interleaves from the two), the residual
# adds into the output and down projections (the ``_residual`` kernels), the two
# RMSNorms into one ``rms_norm`` kernel and the rotary embeddings of q and k into
# ``rotary`` kernels -- (``skipped`` would list anything it left alone, with why); the
# module then builds with this package's pipelines for ``sm_90a``, whose last
# projection's output is returned as a view (no copy kernel for the final reshape).

skipped: list = []
offloaded = partition_for_tvm_tirx(relax_block(cfg), skipped=skipped)
print("kernels:", sorted(gv.name_hint for gv in offloaded.get_global_vars() if gv.name_hint != "main"))
print("left alone:", skipped)
target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
executable = tvm.compile(offloaded, target=target, relax_pipeline="tvm_tirx", tir_pipeline="tvm_tirx")
cubin = nvcc(testing.relax_cuda_source(executable), target, "cubin")
print(f"built for sm_90a; its CUDA assembles into a {len(cubin)}-byte cubin")

# %%
# On a GPU: both against float32 torch
# ------------------------------------
# The torch block on our ops (under ``torch.compile``) and the offloaded Relax
# module in the VM, each against the torch block computed in float32.

if ON_GPU:
    with torch.no_grad():
        reference = DecoderBlock(cfg, {n: w.float() for n, w in weights.items()})(x.float(), cos.float(), sin.float())
        ours = torch.compile(block)(x, cos, sin)
        vm = relax.VirtualMachine(executable, tvm.cuda(0))
        args = [x, cos, sin, *(weights[n] for n in WEIGHTS)]
        relax_out = torch.from_dlpack(vm["main"](*[tvm.runtime.from_dlpack(t.contiguous()) for t in args]))
        for name, y in (("torch.compile on tvm_tirx ops", ours), ("Relax offloaded", relax_out)):
            err = ((y.float() - reference).abs().max() / reference.abs().max()).item()
            assert err <= 5e-2, (name, err)
            print(f"{name}: max relative error {err:.1e}")
else:
    print("no Hopper GPU: traced, offloaded and built; run on an H100/H200 to check the results")
print("decoder_block: all kernels assembled")
