"""What the torch operator asks of the backward kernel: the measured options per head_dim
(:data:`PLANS`, :data:`DETERMINISTIC_PLANS`) and the size of the sections of the
longest-first launch order (:func:`wave_section`)."""

from __future__ import annotations

from ..attention.config import SMS
from .config import BK

__all__ = ["PLANS", "DETERMINISTIC_PLANS", "wave_section"]

#: head_dim -> the ``dq_split``, ``stages`` and ``overlap`` the torch operator's kernels take.
#: Measured on an H100 (2026-12-05, ``bench/attention.py --backward-kernels``, the kernel alone, us):
#: head_dim 128 "keys"/2 -> "columns"/2: 3177 -> 3107 (1,32,32,8192 causal), 1155 -> 1038
#: (4,32,8,2048 causal), 6210 -> 5478 (4,32,32,4096); 3 stages mixed (3084, 1038, 5730).
#: head_dim 64 "keys"/2 -> "columns"/4: 1089 -> 949 (8,16,16,2048), 2276 -> 2160
#: (4,32,32,4096 causal).
#: ``overlap`` (H100, 2026-12-06, the same benchmark, "columns", us): head_dim 128 2 stages 3050 ->
#: 2905, 1012 -> 960, 5462 -> 5234 (3 stages overlapped: 2790, 966, 5389); head_dim 64 4 stages
#: 930 -> 945, 2128 -> 2127 (no gain: not taken).
#: ``longest_first`` in its first form, the key blocks slowest over every batch entry and head (since
#: replaced by sections; H100, 2026-12-06, the same benchmark, us): 2879 -> 2794 (1,32,32,8192,128 causal),
#: 956 -> 1007 (4,32,8,2048,128 causal), 2119 -> 2757 (4,32,32,4096,64 causal), 5099 -> 10674 and
#: 927 -> 1370 on the full rows (L2 locality lost): not taken.
#: head_dim 64 "columns"/4 -> "rows"/2 (H100, 2026-12-07, the same benchmark, us): 921 -> 858 (8,16,16,2048),
#: 2056 -> 1770 (4,32,32,4096 causal); "rows"/3 880 and 1783.
PLANS = {128: {"dq_split": "columns", "stages": 2, "overlap": True}, 64: {"dq_split": "rows", "stages": 2}}
#: head_dim -> what the deterministic kernel takes instead of :data:`PLANS` (``"rows"`` has no deterministic form,
#: :class:`.config.BackwardConfig`)
DETERMINISTIC_PLANS = {64: {"dq_split": "columns", "stages": 4}}


def wave_section(kv_heads: int, seq_len: int, sms: int = SMS) -> int:
    """The ``section`` of ``longest_first`` whose CTAs fill at most one wave: the largest
    divisor ``s`` of ``kv_heads`` (an int >= 1) with ``s x ceil(seq_len / 128) <= sms``
    (the CTAs of one section, one per SM), and 1 where even one head's key blocks are
    more.  ``seq_len`` a positive int (keys).  A simulation of ``sms`` SMs filled in launch
    order, each CTA's time its query blocks, puts 4 x 32 x 8 x 2048 causal (GQA 4) at 1.29x
    its balanced time in the default order and at 1.03x in sections of 8 key/value heads
    (1.06 -> 1.00 at 1 x 32 x 32 x 8192 in sections of 2, 1.09 -> 1.06 at 2 x 32 x 32 x
    3000 in sections of 4); the simulation knows nothing of L2, which is why the sections
    are a wave wide rather than all the heads (docs/kernels.rst)."""
    blocks = -(-seq_len // BK)
    fits = [s for s in range(1, kv_heads + 1) if kv_heads % s == 0 and s * blocks <= sms]
    return max(fits, default=1)
