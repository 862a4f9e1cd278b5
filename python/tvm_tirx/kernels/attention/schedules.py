"""Which of the attention kernel's schedules to use, per head_dim, masking and row length.

:func:`~tvm_tirx.kernels.attention.make_attention` has three consumer schedules: serial
(each consumer's ``Q K^T``, softmax and ``P V`` in turn), ping-pong (the two consumers
take turns on named barriers, one's softmax under the other's products) and overlapped
(a consumer issues block ``j + 1``'s ``Q K^T`` before block ``j``'s softmax; it needs a
third stage, so ``head_dim`` 64 and 128 only); ping-pong and overlapped combine.
:func:`choose_schedule` gives the fastest on the H200 in ``python bench/attention.py``
(December 2026, bf16, TFLOP/s, one run of every schedule):

* head_dim 128: ping-pong and overlapped together (``pingpong=True, overlap=True,
  stages=3``: FlashAttention-3's two overlaps), full and causal: 655 / 650 overlapped /
  570 ping-pong at 4 x 32 x 4096 x 128, causal 547 / 512 / 506; 639 / 621 / 548 at 2 x
  16 x 16384, causal 604 / 565 / 555; 523 / 511 at 16 x 32 x 1024, causal 356 / 326 /
  342; grouped-query causal (32 query heads, 8 K/V heads) 483 / 455 / 451 at 1 x 4096
  and 471 / 434 / 441 at 8 x 2048.  On the persistent grid when the rows are at most
  :data:`PERSISTENT_ROWS` long (one CTA per SM walking the tiles: the next tile's Q
  loads under this tile's epilogue): 541 / 526 at 16 x 32 x 1024, causal 392 / 357; 638
  / 656 at 4 x 32 x 4096, causal 557 / 546; but not for longer rows (604 / 628 at 2 x
  16 x 16384, causal 602 / 625).  For rows whose length is not known when the kernel is
  made (a run-time ``seq_len``) the persistent kernel picks its grid at launch
  (``persistent_rows``): one CTA per tile past :data:`PERSISTENT_ROWS` keys;
* head_dim 64: overlapped on the persistent grid (446 against 407 with ping-pong too on
  one CTA per tile, and 425 overlapped alone, at 4 x 32 x 4096; causal 415 / 355 / 358);
* head_dim 256 (no third stage fits): ping-pong on one CTA per tile (642 / 629 serial,
  causal 560 / 548; 479 / 450 on the persistent grid), in blocks of 80 keys
  (:data:`~.config.HEAD_DIMS`) with O stored by TMA (666 against 616 with blocks of 64
  and per-thread stores at 4 x 16 x 4096 on an H100, causal 598 / 545).

Rerun the benchmark on another GPU and update the table.
"""

from __future__ import annotations

from .config import HEAD_DIMS

__all__ = ["OVERLAP_HEAD_DIMS", "PERSISTENT_ROWS", "choose_schedule"]

#: head_dims whose shared memory holds the overlapped schedule's three stages
OVERLAP_HEAD_DIMS = (64, 128)

#: the longest rows (keys per query) head_dim 128 runs on the persistent grid
PERSISTENT_ROWS = 4096
#: head_dim -> whether its plan stores O by TMA (``tma_store``).  128: measured on an H100
#: (2026-12-05, ``bench/attention.py`` with the TMA-store schedules, the table's schedule with
#: and without it): 415 -> 440 TFLOP/s (32,16,512 full), 260 -> 276 (causal), 440 -> 475 and
#: 281 -> 296 (64,16,512), 648 -> 675 (4,32,4096 full).  256 (blocks of 80 keys, H100,
#: 2026-12-06, ping-pong): 647 -> 666 (4,16,4096), 570 -> 598 (causal), 633 -> 660 (2,8,4096),
#: 476 -> 498 (causal).  64: within 2% either way (persistent overlap 451 / 450 at 4,32,4096).
TMA_STORE_HEAD_DIMS = {64: False, 128: True, 256: True}


def choose_schedule(head_dim: int, causal: bool, seq_len: int | None = None) -> dict:
    """``make_attention`` options ``{"pingpong", "overlap", "stages", "persistent",
    "persistent_rows", "tma_store", "block_n"}`` (``tma_store``: :data:`TMA_STORE_HEAD_DIMS`;
    ``block_n``: :data:`~.config.HEAD_DIMS`) for
    ``head_dim`` (64, 128 or 256 elements), ``causal`` masking and
    ``seq_len`` (keys per query; ``None``: not known when the kernel is made).  At head_dim
    128 a known length picks the grid (persistent for at most :data:`PERSISTENT_ROWS`
    keys); an unknown one gets ``persistent_rows=PERSISTENT_ROWS``, so that the kernel
    picks it at launch.

    Raises
    ------
    ValueError
        ``head_dim`` not one of 64, 128, 256, ``causal`` not a bool, or ``seq_len`` neither
        ``None`` nor a non-negative int.
    """
    if type(head_dim) is not int or head_dim not in HEAD_DIMS:  # noqa: E721  (not bool, not float)
        raise ValueError(f"choose_schedule: head_dim must be one of {sorted(HEAD_DIMS)}, found {head_dim!r}")
    if not isinstance(causal, bool):
        raise ValueError(f"choose_schedule: causal must be a bool, found {causal!r}")
    if seq_len is not None and (type(seq_len) is not int or seq_len < 0):  # noqa: E721
        raise ValueError(f"choose_schedule: seq_len must be None or a non-negative int, found {seq_len!r}")
    return {**_schedule(head_dim, seq_len), "tma_store": TMA_STORE_HEAD_DIMS[head_dim], "block_n": HEAD_DIMS[head_dim]}


def _schedule(head_dim: int, seq_len: int | None) -> dict:
    """:func:`choose_schedule`'s options but ``tma_store`` and ``block_n``."""
    if head_dim == 128:
        known = seq_len is not None  # else the kernel picks its grid at launch
        return {"pingpong": True, "overlap": True, "stages": 3, "persistent": not known or seq_len <= PERSISTENT_ROWS,
                "persistent_rows": None if known else PERSISTENT_ROWS}
    if head_dim in OVERLAP_HEAD_DIMS:
        return {"pingpong": False, "overlap": True, "stages": 3, "persistent": True, "persistent_rows": None}
    return {"pingpong": True, "overlap": False, "stages": 2, "persistent": False, "persistent_rows": None}
