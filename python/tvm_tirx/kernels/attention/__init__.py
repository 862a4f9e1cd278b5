"""Fused attention forward on Hopper (sm_90a), FlashAttention-style.

One CTA computes 128 query rows of one (batch, head) with three warpgroups (with
``consumers=3``, head_dim 64: 192 rows, a third consumer warpgroup):

* warpgroup 0, the **producer** (:mod:`.producer`), gives up registers and one thread
  loads the Q block once and streams the key/value blocks into a ring of ``stages``
  shared buffers by 4-d TMA boxes (128-byte swizzle), guarded by ``full`` / ``empty``
  mbarriers;
* warpgroups 1 and 2 (and 3), the **consumers** (:mod:`.consumer`), 64 query rows each: per
  block ``S = Q K^T`` (``wgmma`` ss), the online softmax in registers (:mod:`.softmax`:
  row maxima over the four lanes of an accumulator row, ``exp2``, the running sum, ``O``
  rescaled), ``P`` packed to 16-bit pairs straight into the rs form's A registers and
  ``O += P V`` (``wgmma`` rs, V as the MN-major B);
* the **epilogue**: ``O / l`` stored under ``row < seq_len`` and the log-sum-exp (with
  ``tma_store``, O through a swizzled shared tile and TMA stores: :mod:`.o_store`).

Hardware facts: PTX ISA 9.7.15 (wgmma; fragments 9.7.15.5.1.1), 9.7.9.25.5.1 (TMA),
9.7.13.15 (mbarrier), 9.7.9.x (shfl.sync), 9.7.19.5 (setmaxnreg).
"""

import tvm  # noqa: F401  pylint: disable=unused-import

from .config import BM, HEAD_DIMS, AttentionConfig
from .kernel import make_attention
from .planner import AttentionPlan, choose_attention
from .schedules import choose_schedule

__all__ = ["BM", "HEAD_DIMS", "AttentionConfig", "make_attention", "choose_schedule", "AttentionPlan",
           "choose_attention"]
