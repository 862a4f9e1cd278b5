"""
Attention, step by step
=======================

``tvm_tirx.kernels.attention.make_attention`` is a fused attention forward for
Hopper written with tile operations only (python/tvm_tirx/kernels/attention/).
This tutorial takes its ideas one at a time, each checked as it is shown:

1. the online softmax -- one pass over the key blocks, a running maximum and sum;
2. the register identity that lets ``P`` go from the ``S = Q K^T`` accumulators
   into the next wgmma without shared memory;
3. the row maximum over the four lanes of an accumulator row;
4. the kernel: what it issues, and (on a GPU) its result against torch;
5. training: the backward, by blocks of query rows in torch and as a fused kernel;
6. sequences of different lengths packed in one call.

Run it with ``python tutorials/attention.py``. ``bench/attention.py`` times the
kernel against torch SDPA's cuDNN and FlashAttention-2 backends.
"""

# %%
# Setup
# -----

import importlib.util
import math

import numpy as np

from tvm_tirx import testing
from tvm_tirx.kernels.attention import make_attention
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.wgmma import a_fragment_coords, accumulator_coords

ON_GPU = testing.has_cuda()
ARCH = None if ON_GPU else "sm_90a"

# %%
# 1. The online softmax
# ---------------------
# A consumer sees the keys one block at a time. It keeps, per query row, the
# largest score so far ``m`` and the sum ``l`` of ``exp(s - m)``; when a block
# raises the maximum, what was accumulated is rescaled by ``alpha = exp(m_old -
# m_new)`` -- the sum and the output ``O`` alike. The kernel works in base 2
# (``exp2`` of ``s * scale * log2(e)``: one ``ex2.approx`` each); after the last
# block ``O / l`` is the softmax-weighted sum and ``m + log2(l)`` the
# log-sum-exp (times ``ln 2``). Here in numpy, against the two-pass softmax:

rng = np.random.default_rng(0)
scores = rng.standard_normal((4, 512))  # 4 query rows, 512 keys
values = rng.standard_normal((512, 8))
m, l, o = np.full(4, -np.inf), np.zeros(4), np.zeros((4, 8))
for j in range(0, 512, 128):  # blocks of 128 keys, as the kernel's
    s = scores[:, j : j + 128] * math.log2(math.e)
    m_new = np.maximum(m, s.max(axis=1))
    alpha = np.exp2(m - m_new)
    p = np.exp2(s - m_new[:, None])
    l = l * alpha + p.sum(axis=1)
    o = o * alpha[:, None] + p @ values[j : j + 128]
    m = m_new
weights = np.exp(scores - scores.max(axis=1, keepdims=True))
reference = (weights / weights.sum(axis=1, keepdims=True)) @ values
assert np.allclose(o / l[:, None], reference)
assert np.allclose((m + np.log2(l)) * math.log(2), np.log(np.exp(scores).sum(axis=1)))
print("online softmax: one pass over 4 blocks equals the two-pass softmax")

# %%
# 2. P stays in registers
# -----------------------
# ``S = Q K^T`` leaves each thread of the warpgroup two rows' worth of fp32
# accumulators (PTX ISA 9.7.15.5.1.1). Converted pairwise to bf16, they are 32-bit
# words -- and word ``w`` of a thread holds exactly the elements that the rs form of
# ``wgmma`` (A from registers) expects in its register ``w % 4`` of K-tile ``w //
# 4``. So ``P`` is packed with one ``cvt.rn.bf16x2.f32`` per pair and fed to ``O +=
# P V`` with no shuffle and no shared memory. Checked for every thread, from the
# fragment maps the wgmma family validates calls with:

BN = 128  # keys per block
packed = accumulator_coords(BN, packed=True)  # (row, word) of each packed S word
for position in range(128):
    words = packed(position)
    for k_tile in range(BN // 16):
        a_regs = [(row, k_tile * 8 + word) for row, word in a_fragment_coords(position)]
        assert words[4 * k_tile : 4 * k_tile + 4] == a_regs, position
print("the packed S words of every thread are its A fragment, K-tile by K-tile")

# %%
# 3. A row's maximum is four lanes' business
# ------------------------------------------
# Thread ``32 w + 4 g + t`` holds columns ``8 j + 2 t + e`` of rows ``16 w + g`` and
# ``16 w + g + 8``: a row lives in the four lanes ``4 g .. 4 g + 3``. Each thread
# takes the maximum over its own columns, then ``T.cuda.tile.reduce_lanes(
# T.ptx["max.f32"], rmax, lanes=4)`` combines the four lanes with two butterfly
# shuffles (lane masks 1 and 2). The same for the row sums, once, after the last
# block. A small kernel shows the calls it expands to:


@T.function
def row_max(A: T.Tensor((8, 16), "float32", align=16), M: T.Tensor((8,), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    x = T.alloc_local((2, 1), "float32")
    x[0, 0] = T.max(A[lane // 4, 4 * (lane % 4)], A[lane // 4, 4 * (lane % 4) + 1])
    x[1, 0] = T.max(A[lane // 4, 4 * (lane % 4) + 2], A[lane // 4, 4 * (lane % 4) + 3])
    x[0, 0] = T.max(x[0, 0], x[1, 0])
    T.cuda.tile.reduce_lanes(T.ptx["max.f32"], x, lanes=4)
    if lane % 4 == 0:
        M[lane // 4] = x[0, 0]


kernel = testing.compile_and_show(row_max, "shfl.sync.bfly", "max.f32", arch=ARCH)

# %%
# 4. The kernel
# -------------
# A CTA takes 128 query rows of one (batch, head). Warpgroup 0 loads Q once and
# streams K and V blocks into a two-stage ring with 4-d TMA boxes (the tensors stay
# in their ``(batch, seq, heads, head_dim)`` layout); warpgroups 1 and 2 each own 64
# rows and run, per block: ``S = Q K^T`` (ss wgmma), the online softmax of step 1
# (masked only in the blocks that cross the sequence's end or, causal, the
# diagonal), ``P`` packed as in step 2, ``O += P V`` (rs wgmma, V as the MN-major
# operand), and release the stage. One compiled kernel serves every batch and
# length. Its register split, and how many of each instruction the PTX holds (the
# compiler unrolls the loops, so the counts are per copy of the code, not per block):

func = make_attention(T.dynamic("B"), T.dynamic("L"), 8, 128, kv_heads=2, causal=True)
attention = testing.compile_and_show(func, "setmaxnreg", arch=ARCH)
for opcode in ("wgmma.mma_async", "shfl.sync.bfly", "ex2.approx", "cp.async.bulk.tensor.4d", "mbarrier.try_wait"):
    print(f"{opcode}: {attention.ptx.count(opcode)} in the PTX")

# %%
# On a GPU: against torch
# -----------------------
# Three lengths, one of them not a multiple of the 128-row block, from the same
# kernel; O against torch's SDPA in float32 (GQA: the K/V heads repeated).

if ON_GPU:
    import torch

    for seq_len in (64, 1000, 2048):
        q = torch.randn(2, seq_len, 8, 128, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(2, seq_len, 2, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        out = torch.empty_like(q)
        lse = torch.empty(2, 8, seq_len, device="cuda")
        attention(q, k, v, out, lse)
        qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
        ref = torch.nn.functional.scaled_dot_product_attention(
            qf, kf.repeat_interleave(4, 1), vf.repeat_interleave(4, 1), is_causal=True).transpose(1, 2)
        err = (out.float() - ref).abs().max().item()
        assert err <= 2e-2, err
        print(f"seq_len {seq_len}: max |O - reference| = {err:.1e}")
else:
    print("no GPU: the kernel was compiled and assembled for sm_90a; run on an H100/H200 to check it")

# %%
# 5. Training: the backward
# -------------------------
# ``ops.attention`` is differentiable. On an H200 its backward is a fused kernel,
# ``make_attention_backward`` (key/value blocks outermost, dQ added by TMA reduce-add;
# head_dim 64 and 128); other CUDA half-precision calls differentiate torch's SDPA.
# The rest (the CPU, float64, the LSE's gradient, deterministic mode) recompute the
# scores by blocks of query rows: a block holds
# whole rows, so ``P = softmax(S)`` is exact there, and ``dS = P (dP - rowsum(P dP))``
# needs nothing from the other blocks. Only one block's scores are alive at a time
# (``attention_blocks.SCORE_BYTES``), so memory grows with the length, not its square.
# Here the blocks are forced to 5 rows, and the gradients are checked against autograd
# of the whole score matrix (float64, on the CPU with ``fallback="torch"``).

from tvm_tirx.kernels.attention_backward import make_attention_backward  # noqa: E402

backward = testing.compile_and_show(make_attention_backward(T.dynamic("B"), T.dynamic("L"), 8, 128, kv_heads=2,
                                                            causal=True), "setmaxnreg", arch=ARCH)
print(f"the backward kernel: {backward.ptx.count('wgmma.mma_async')} wgmma, "
      f"{backward.ptx.count('cp.reduce.async.bulk.tensor')} TMA reduce-adds in the PTX")
HAS_TORCH = importlib.util.find_spec("torch") is not None  # the checks below need torch (a CPU build will do)
if HAS_TORCH:
    import torch

    from tvm_tirx import ops  # noqa: E402
    from tvm_tirx.ops import attention_blocks  # noqa: E402

    attention_blocks.SCORE_BYTES = 4 * 2 * 8 * 40 * 8 * 5  # blocks of 5 query rows for these shapes
    q = torch.randn(2, 40, 8, 16, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(2, 40, 2, 16, dtype=torch.float64, requires_grad=True) for _ in range(2))
    grads = torch.autograd.grad(ops.attention(q, k, v, causal=True, fallback="torch").square().sum(), (q, k, v))
    qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))
    dense = torch.nn.functional.scaled_dot_product_attention(qh, kh.repeat_interleave(4, 1), vh.repeat_interleave(4, 1),
                                                             is_causal=True).transpose(1, 2)
    for name, got, want in zip("qkv", grads, torch.autograd.grad(dense.square().sum(), (q, k, v))):
        assert torch.allclose(got, want), name
    print("backward by blocks of 5 rows: dq, dk, dv equal autograd of the whole score matrix")

# %%
# 6. Packed sequences
# -------------------
# ``ops.attention_varlen`` takes FlashAttention's varlen form: the sequences' rows one
# after another in ``(total, heads, head_dim)`` tensors and their cumulative lengths
# ``cu_seqlens`` (int32). The lengths are checked on the host; the whole batch is then
# one launch of ``make_attention(..., varlen=True)``, whose CTAs find their sequence in
# ``cu_seqlens`` and mask the next sequence's keys (with ``TVM_TIRX_ATTENTION_VARLEN=0``,
# or keys packed differently from queries, a launch of the kernel above per sequence).

varlen = testing.compile_and_show(make_attention(T.dynamic("N"), T.dynamic("T"), 8, 128, kv_heads=2, causal=True,
                                                 varlen=True), "setmaxnreg", arch=ARCH)
assert "int* __restrict__ CuSeqlens_ptr" in varlen.cuda_source  # read on the device; max_seqlen sizes the grid
print("the varlen kernel's CTAs read their sequence's rows from CuSeqlens")
if HAS_TORCH:
    lengths = [3, 17, 1, 9]
    cu = torch.tensor([0, *np.cumsum(lengths)], dtype=torch.int32)
    q, k, v = (torch.randn(sum(lengths), heads, 16, dtype=torch.float64) for heads in (8, 2, 2))
    out = ops.attention_varlen(q, k, v, cu, cu, max(lengths), max(lengths), causal=True, fallback="torch")
    for a, b in zip(cu.tolist(), cu.tolist()[1:]):
        alone = ops.attention(q[None, a:b], k[None, a:b], v[None, a:b], causal=True, fallback="torch")[0]
        assert torch.allclose(out[a:b], alone)
    print(f"one packed call of {len(lengths)} sequences equals a call per sequence")
print("attention: all kernels assembled")
