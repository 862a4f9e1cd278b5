"""Which of the attention kernel's schedules to use, per head_dim, masking and row length.

:func:`~tvm_tirx.kernels.attention.make_attention` has three consumer schedules: serial
(each consumer's ``Q K^T``, softmax and ``P V`` in turn), ping-pong (the two consumers
take turns on named barriers, one's softmax under the other's products) and overlapped
(a consumer issues block ``j + 1``'s ``Q K^T`` before block ``j``'s softmax; it needs a
third stage, so ``head_dim`` 64 and 128 only, unless K and V have barriers of their own:
``v_ring``, :data:`V_RING`); ping-pong and overlapped combine.
:func:`choose_schedule` gives the fastest on the H200 in ``python bench/attention.py``
(December 2026, bf16, TFLOP/s, one run of every schedule) unless said otherwise:

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
  (``persistent_rows``): one CTA per tile past :data:`PERSISTENT_ROWS` keys.  O stored
  by TMA (H100, 2026-12-05, the table's schedule without -> with it): 415 -> 440 at 32 x
  16 x 512 (causal 260 -> 276), 440 -> 475 at 64 x 16 x 512 (causal 281 -> 296), 648 ->
  675 at 4 x 32 x 4096.  O staged in K's stage of the tile's last block rather than in Q's
  rows (``o_staging="kv"``, :mod:`.o_store`: Q's rows are released after the last ``Q
  K^T``, so the next tile's Q loads under the epilogue; H100, 2026-12-07, ``bench/attention.py
  --runs 20``, TFLOP/s, kv / q / cuDNN): 483 / 439 / 509 at 32 x 16 x 512 (causal 312 / 275 /
  324), 588 / 591 / 620 at 16 x 32 x 1024 (causal 457 / 422 / 453), 609 / 633 / 646 at 4 x 32 x
  2048 (causal 528 / 502 / 503), 635 / 675 / 680 at 4 x 32 x 4096 (causal 592 / 581 / 594): so
  with :data:`KV_STAGING` on (the default), causal rows on the persistent grid take it, and full rows of at
  most :data:`KV_STAGING_FULL_ROWS` keys;
* head_dim 64: overlapped, in three consumer warpgroups of 64
  query rows (``consumers=3``, 192 rows per CTA) where they win.  On an H100
  (2026-12-06, bf16, ``bench/attention.py --runs 10``): two consumers on the persistent
  grid (``2c, p``: the plan before), three on one CTA per tile (``3c``), three on the
  persistent grid (``3c, p``), the same with O stored by TMA (``3c, p, TMA``), and SDPA's
  cuDNN and FlashAttention-2 and JAX's Mosaic GPU (float16):

  ===============  ======  =====  ===  =====  ==========  =====  ===  ======
  B x H x L        causal  2c, p  3c   3c, p  3c, p, TMA  cuDNN  FA2  Mosaic
  ===============  ======  =====  ===  =====  ==========  =====  ===  ======
  4 x 32 x 4096    no      449    516  521    527         486    308  426
  4 x 32 x 4096    yes     418    398  393    405         435    285  388
  8 x 16 x 2048    no      421    456  469    477         452    292  380
  8 x 16 x 2048    yes     344    312  307    318         363    244  295
  16 x 16 x 16384  no      440    526  529    533         462    304  438
  16 x 16 x 16384  yes     437    481  447    458         457    309  397
  ===============  ======  =====  ===  =====  ==========  =====  ===  ======

  Full rows: three consumers on the persistent grid with O stored by TMA, at every
  length.  Causal rows known to be longer than :data:`TWO_CONSUMER_CAUSAL_ROWS` keys: three
  consumers on one CTA per tile with O stored per thread (481 against 437; the TMA store
  was not timed on that grid).  Other causal rows (at most :data:`TWO_CONSUMER_CAUSAL_ROWS` keys,
  or a length not known when the kernel is made) keep the plan before, two consumers on
  the persistent grid with O stored per thread, since three lose there: 398 against 418
  at 4 x 32 x 4096 and 312 against 344 at 8 x 16 x 2048 (cuDNN is faster than both on
  those rows).  The plan before came from the H200 (446 against 407 with ping-pong too on
  one CTA per tile, and 425 overlapped alone, at 4 x 32 x 4096; causal 415 / 355 / 358;
  O stored by TMA within 2% either way);
* head_dim 256 (no third stage fits): ping-pong on one CTA per tile (642 / 629 serial,
  causal 560 / 548; 479 / 450 on the persistent grid), in blocks of 80 keys
  (:data:`~.config.HEAD_DIMS`) with O stored by TMA (666 against 616 with blocks of 64
  and per-thread stores at 4 x 16 x 4096 on an H100, causal 598 / 545; H100, 2026-12-06,
  ping-pong without -> with the TMA store: 647 -> 666, causal 570 -> 598 at 4 x 16 x 4096;
  633 -> 660, causal 476 -> 498 at 2 x 8 x 4096).

Rerun the benchmark on another GPU and update the table.
"""

from __future__ import annotations

import os

from .config import HEAD_DIMS

__all__ = ["OVERLAP_HEAD_DIMS", "PERSISTENT_ROWS", "TWO_CONSUMER_CAUSAL_ROWS", "KV_STAGING", "KV_STAGING_FULL_ROWS",
           "V_RING", "choose_schedule"]

#: head_dims whose shared memory holds the overlapped schedule's three stages
OVERLAP_HEAD_DIMS = (64, 128)

#: the longest rows (keys per query) head_dim 128 runs on the persistent grid
PERSISTENT_ROWS = 4096
#: the longest causal rows head_dim 64 runs in two consumer warpgroups (three lost at 4096 keys
#: and won at 16384; no length between was measured)
TWO_CONSUMER_CAUSAL_ROWS = 4096
#: the longest full (not causal) rows head_dim 128 stages O in K's stage for (``o_staging="kv"``;
#: it won at 512 keys, tied at 768 and 1024 (552 / 555 and 591 / 585 TFLOP/s, H100), lost 4-6% at 2048 and 4096)
KV_STAGING_FULL_ROWS = 512
#: whether head_dim 128's plans stage O in K's stage (the rows above): on since its hand-over's
#: final form (two mbarriers per consumer) passed its GPU tests and memcheck (H100, 2026-12-07;
#: racecheck did not finish in 9 minutes) and lifted the 512-key rows of the op's table by 10-18% (one run each).
#: ``TVM_TIRX_ATTENTION_KV_STAGING=0`` in the environment (read at import) or setting it to False
#: turns it off (O in Q's rows, as before).
KV_STAGING = os.environ.get("TVM_TIRX_ATTENTION_KV_STAGING", "1") != "0"


#: whether head_dim 256's plan is FlashAttention-3's: ping-pong and overlapped on two stages, K's and V's halves
#: of a stage on barriers of their own (``v_ring``), instead of ping-pong alone: off until measured.
#: ``TVM_TIRX_ATTENTION_V_RING=1`` in the environment (read at import) or setting it to True turns it on.
V_RING = os.environ.get("TVM_TIRX_ATTENTION_V_RING", "0") == "1"


def choose_schedule(head_dim: int, causal: bool, seq_len: int | None = None) -> dict:
    """``make_attention`` options ``{"pingpong", "overlap", "stages", "persistent",
    "persistent_rows", "tma_store", "block_n", "consumers", "o_staging", "v_ring"}`` for
    ``head_dim`` (64, 128 or 256 elements), ``causal`` masking and ``seq_len`` (keys per query; ``None``: not known
    when the kernel is made); ``block_n`` is the head_dim's (:data:`~.config.HEAD_DIMS`).
    At head_dim 128 a known length picks the grid (persistent for at most
    :data:`PERSISTENT_ROWS` keys); an unknown one gets ``persistent_rows=PERSISTENT_ROWS``,
    so that the kernel picks it at launch; with :data:`KV_STAGING` on, O is staged in K's
    stage on the persistent grid for causal rows and for full rows known to be at most
    :data:`KV_STAGING_FULL_ROWS` keys long.  At head_dim 64 full rows take three consumer
    warpgroups, and so do causal rows known to be longer than
    :data:`TWO_CONSUMER_CAUSAL_ROWS` keys (the module's table).

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
    schedule = {64: _head_dim_64, 128: _head_dim_128, 256: _head_dim_256}[head_dim](causal, seq_len)
    return {"v_ring": False, **schedule, "block_n": HEAD_DIMS[head_dim]}


def _head_dim_128(causal: bool, seq_len: int | None) -> dict:
    """Ping-pong and overlapped, two consumers, O by TMA; persistent up to :data:`PERSISTENT_ROWS`
    keys (an unknown length: chosen at launch), O staged in K's stage there (with
    :data:`KV_STAGING` on) for causal rows and full rows of at most
    :data:`KV_STAGING_FULL_ROWS` keys, else in Q's rows."""
    known = seq_len is not None  # else the kernel picks its grid at launch
    persistent = not known or seq_len <= PERSISTENT_ROWS
    kv = KV_STAGING and persistent and (causal or (known and seq_len <= KV_STAGING_FULL_ROWS))
    return {"pingpong": True, "overlap": True, "stages": 3, "persistent": persistent,
            "persistent_rows": None if known else PERSISTENT_ROWS, "tma_store": True, "consumers": 2,
            "o_staging": "kv" if kv else None}


def _head_dim_64(causal: bool, seq_len: int | None) -> dict:
    """Overlapped: full rows in three consumers, persistent, O by TMA; causal rows known to be longer
    than :data:`TWO_CONSUMER_CAUSAL_ROWS` keys in three on one CTA per tile, O per thread; other causal rows in
    two, persistent, O per thread."""
    overlap = {"pingpong": False, "overlap": True, "stages": 3, "persistent_rows": None, "o_staging": None}
    if not causal:
        return {**overlap, "persistent": True, "tma_store": True, "consumers": 3}
    if seq_len is not None and seq_len > TWO_CONSUMER_CAUSAL_ROWS:
        return {**overlap, "persistent": False, "tma_store": False, "consumers": 3}
    return {**overlap, "persistent": True, "tma_store": False, "consumers": 2}


def _head_dim_256(causal: bool, seq_len: int | None) -> dict:
    """Ping-pong (no third stage fits) on one CTA per tile, two consumers, O by TMA; with :data:`V_RING`
    overlapped too, on K's and V's own barriers."""
    del causal, seq_len  # the same schedule for every row
    return {"pingpong": True, "overlap": V_RING, "stages": 2, "persistent": False, "persistent_rows": None,
            "tma_store": True, "consumers": 2, "o_staging": None, "v_ring": V_RING}
