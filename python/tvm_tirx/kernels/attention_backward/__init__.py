"""Fused attention backward on Hopper (sm_90a), FlashAttention-2/3's algorithm with the
key/value blocks outermost.

One CTA owns 128 keys of one (key/value head, batch entry) and walks every query block
(64 rows; 128 with ``dq_split="rows"``) of every query head of the key/value head's group, with three warpgroups:

* warpgroup 0, the **producer** (:mod:`.producer`), gives up registers and one thread
  loads the CTA's K and V once and streams the Q and dO blocks into a ring of ``stages``
  shared buffers by 4-d TMA boxes (128-byte swizzle), guarded by ``full`` / ``empty``
  mbarriers (:class:`~tvm_tirx.kernels.parts.Ring`);
* warpgroups 1 and 2, the **consumers** (:mod:`.consumer`), 64 keys each: per query
  block ``S^T = K Q^T`` and ``dP^T = V dO^T`` (``wgmma`` ss), ``P^T`` from the forward's
  log-sum-exp and ``dS^T = P^T (dP^T - Dsum)`` in registers (:mod:`.gradients`),
  ``dV += P^T dO`` and ``dK += dS^T Q`` (``wgmma`` rs, the packed probabilities as A),
  ``dQ = dS K`` (``wgmma`` ss from ``dS^T`` staged in shared memory) added into the
  float32 ``dQacc`` by TMA reduce-add (:mod:`.exchange`); or (``dq_split="columns"``)
  each consumer computes ``dQ``'s half of head_dim over all 128 keys from both
  consumers' ``dS^T`` and reduces only those columns;
* the **epilogue** (:mod:`.epilogue`): ``dV`` and ``dK`` stored under ``key < seq_len``.

Budgets (registers, shared memory per head_dim) are in :mod:`.config`.  Hardware facts:
PTX ISA 9.7.15 (wgmma; fragments 9.7.15.5.1.1, descriptors 9.7.15.5.1.2),
9.7.9.25.5.1-2 (TMA load, reduce), 9.7.15.16 (mbarrier), 9.7.13.1 (named barriers),
9.7.19.5 (setmaxnreg).
"""

import tvm  # noqa: F401  pylint: disable=unused-import

from .config import BK, BQ, DQ_SPLITS, HEAD_DIMS, BackwardConfig
from .plans import DETERMINISTIC_PLANS, PLANS, wave_section
from .kernel import make_attention_backward

__all__ = ["BK", "BQ", "DETERMINISTIC_PLANS", "DQ_SPLITS", "HEAD_DIMS", "PLANS", "BackwardConfig",
           "make_attention_backward", "wave_section"]
