"""Which of the attention kernel's schedules to use, per head_dim and masking.

:func:`~tvm_tirx.kernels.attention.make_attention` has three consumer schedules: serial
(each consumer's ``Q K^T``, softmax and ``P V`` in turn), ping-pong (the two consumers
take turns on named barriers, one's softmax under the other's products) and overlapped
(a consumer issues block ``j + 1``'s ``Q K^T`` before block ``j``'s softmax; it needs a
third stage, so ``head_dim`` 64 and 128 only).  :func:`choose_schedule` gives the
fastest on the H200 in ``python bench/attention.py`` (December 2026, bf16, TFLOP/s):

* full attention: overlapped, 650 against 574 ping-pong at 4 x 32 x 4096 x 128, 638
  against 568 at 2 x 16 x 16384 x 128, 425 against 391 at head_dim 64;
* causal: ping-pong (510 / 517 overlapped at 4096 rows, 594 / 582 at 16384, 345 / 327
  at 1024); head_dim 256: ping-pong (629 against 629 serial, 555 / 547 causal).

Rerun the benchmark on another GPU and update the table.
"""

from __future__ import annotations

from .config import HEAD_DIMS

__all__ = ["OVERLAP_HEAD_DIMS", "choose_schedule"]

#: head_dims whose shared memory holds the overlapped schedule's three stages
OVERLAP_HEAD_DIMS = (64, 128)


def choose_schedule(head_dim: int, causal: bool) -> dict:
    """``make_attention`` options ``{"pingpong", "overlap", "stages"}`` for ``head_dim``
    (64, 128 or 256 elements) and ``causal`` masking.

    Raises
    ------
    ValueError
        ``head_dim`` not one of 64, 128, 256, or ``causal`` not a bool.
    """
    if type(head_dim) is not int or head_dim not in HEAD_DIMS:  # noqa: E721  (not bool, not float)
        raise ValueError(f"choose_schedule: head_dim must be one of {sorted(HEAD_DIMS)}, found {head_dim!r}")
    if not isinstance(causal, bool):
        raise ValueError(f"choose_schedule: causal must be a bool, found {causal!r}")
    if not causal and head_dim in OVERLAP_HEAD_DIMS:
        return {"pingpong": False, "overlap": True, "stages": 3}
    return {"pingpong": True, "overlap": False, "stages": 2}
