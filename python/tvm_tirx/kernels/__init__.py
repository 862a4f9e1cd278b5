"""Kernel generators written with tile operations, the same public API a user has.

* :mod:`.gemm` -- the warp-specialized Hopper GEMM (``make_gemm``): TMA loads into an
  mbarrier ring, ``wgmma`` consumers, bf16 / fp32 output, any (M, N, K), run-time M.
* :mod:`.attention` -- the fused attention forward (``make_attention``): a TMA producer,
  two ``wgmma`` consumers with the online softmax in registers, run-time lengths, GQA.
* :mod:`.attention_backward` -- its backward (``make_attention_backward``): key/value
  blocks outermost, dK / dV in registers, dQ added into a float32 buffer by TMA reduce-add.
"""

# First: importing tvm runs its tvm.backends hook (tvm_tirx._plugin), which imports
# modules of this package; none of them may be half-imported when it does.
import tvm  # noqa: F401  pylint: disable=unused-import
