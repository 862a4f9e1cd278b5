"""The kernel: shared memory, barriers, the producer and the two consumer warpgroups."""

from __future__ import annotations

from tvm.script import tirx as T

from ...tile.families.tma import swizzled_layout
from ...tile.families.wgmma import a_fragment_layout
from ...tile.fragments import accumulator_layout
from ..attention.config import CHUNK
from ..extents import MAX_ELEMENTS
from .config import (CONSUMER_REGISTERS, CONSUMERS, DQ_BOX, DQ_ROWS, FILLS, PRODUCER_REGISTERS, WG_K,
                     BackwardConfig)
from .consumer import make_consumer
from .epilogue import make_epilogue
from .gradients import first_key
from .producer import make_producer, make_row_copier
from .state import Barriers, Inputs, Keys, Outputs, Place, Registers, Shared

__all__ = ["make_attention_backward", "ELEMENTS_MESSAGE"]

#: the host's error for run-time sizes whose Q, dO and dQacc the kernel's int32 offsets cannot index
ELEMENTS_MESSAGE = (f"make_attention_backward: batch x seq_len x heads x head_dim elements of Q, dO and dQacc must "
                    f"be at most {MAX_ELEMENTS}: the kernel indexes them with int32 offsets")


def _keys(cfg: BackwardConfig, seq_len) -> Keys:
    """The CTA's block (call it after the launch): :meth:`.config.BackwardConfig.block` of
    its ``blockIdx``; within a (batch entry, key/value head) the longest causal walks (key
    block 0) have the lowest ids, so they start first."""
    b, hk, kb = cfg.block(*(T.cuda.block_idx(axis) for axis in "xyz"))
    return Keys(b, hk, kb, cfg.group * cfg.query_blocks(kb, seq_len))


def consumer_tiles(tile, chunks: int, dtype: str, chunk_major: bool):
    """A 128-byte swizzled tile ``(2, chunks, 64, 64)`` (consumer ``c``'s 64 keys, 64-column
    chunk ``cc``) by ``tile(shape, dtype, layout)``: stored in that order, or
    (``chunk_major``) the view of a ``(chunks, 2, 64, 64)`` tile, so that a chunk's 128 keys
    are one operand of ``dQ`` (:mod:`.products`).  ``sk`` (chunks of head_dim) takes the
    second form where each consumer's ``dQ`` reads all 128 keys (``dq_split`` ``"columns"``
    or ``"rows"``); ``sds`` (chunks of the query block) with ``"rows"``."""
    shape = (CONSUMERS, chunks, WG_K, CHUNK)
    if not chunk_major:
        return tile(shape, dtype, swizzled_layout(shape, dtype, 3))
    stored = (chunks, CONSUMERS, WG_K, CHUNK)
    return tile(stored, dtype, swizzled_layout(stored, dtype, 3)).permute(1, 0, 2, 3)


def _allocate_shared(cfg: BackwardConfig) -> tuple:
    """``(Shared, Barriers)``: the CTA's shared tiles (128-byte swizzled: the images the TMA
    writes and reads, ``dS^T`` as the M-major wgmma operand) and mbarriers.  Called while
    the kernel is parsed, in its body (the allocations go to the kernel's frame)."""
    stages, chunks, dtype, bq = cfg.stages, cfg.chunks, cfg.dtype, cfg.block_q
    kv_shape, ring_shape = (CONSUMERS, chunks, WG_K, CHUNK), (stages, chunks, bq, CHUNK)
    dq_shape = (CONSUMERS, cfg.dq_columns // DQ_BOX, DQ_ROWS, DQ_BOX)

    def tile(shape, dtype_, layout):
        return T.alloc_shared(shape, dtype_, scope="shared.dyn", align=1024, layout=layout)

    sk = consumer_tiles(tile, chunks, dtype, cfg.shares_ds)
    sv = tile(kv_shape, dtype, swizzled_layout(kv_shape, dtype, 3))
    sq = tile(ring_shape, dtype, swizzled_layout(ring_shape, dtype, 3))
    sdo = tile(ring_shape, dtype, swizzled_layout(ring_shape, dtype, 3))
    sds = consumer_tiles(tile, bq // CHUNK, dtype, cfg.split_rows)  # dS^T, keys x queries: the M-major A of dQ
    sdq = tile(dq_shape, "float32", swizzled_layout(dq_shape, "float32", 3))
    srows = T.alloc_shared((stages, 2, bq), "float32", scope="shared.dyn", align=16)
    bars = [T.alloc_shared((n, 1), "uint64", scope="shared.dyn", align=8) for n in (1, stages, stages)]
    return Shared(sk, sv, sq, sdo, sds, sdq, srows), Barriers(*bars)


def _allocate_registers(cfg: BackwardConfig) -> Registers:
    """A consumer thread's :class:`.state.Registers` (wgmma fragment layouts; ``dQ`` of
    ``cfg.dq_columns``; ``turn`` with ``cfg.deterministic``), allocated while the kernel
    is parsed, in its body."""
    acc, head_dim, dq_columns, bq = accumulator_layout, cfg.head_dim, cfg.dq_columns, cfg.block_q
    return Registers(S=T.alloc_local((WG_K, bq), "float32", layout=acc(bq)),
                     dP=T.alloc_local((WG_K, bq), "float32", layout=acc(bq)),
                     dV=T.alloc_local((WG_K, head_dim), "float32", layout=acc(head_dim)),
                     dK=T.alloc_local((WG_K, head_dim), "float32", layout=acc(head_dim)),
                     dQ=T.alloc_local((DQ_ROWS, dq_columns), "float32", layout=acc(dq_columns)),
                     Pw=T.alloc_local((1, bq // 16, WG_K, 8), "uint32", layout=a_fragment_layout(1, bq // 16)),
                     dSw=T.alloc_local((1, bq // 16, WG_K, 8), "uint32", layout=a_fragment_layout(1, bq // 16)),
                     W=T.alloc_local((WG_K, head_dim // 2), "uint32", layout=acc(head_dim, packed=True)),
                     turn=T.alloc_local((1,), "int32") if cfg.deterministic else None)


def specialised(cfg: BackwardConfig) -> bool:
    """Whether the kernel runs one copy of the consumer per warpgroup (consumer ``c`` a
    Python int): ``dq_split="columns"`` at head_dim 64, where consumer 1's half of K's
    64-column chunk starts inside a swizzle row, which the tile checker takes at a static
    offset only (:func:`.products._k_columns`)."""
    return cfg.split_columns and cfg.dq_columns < CHUNK


def _make_body(cfg: BackwardConfig):
    produce, copy_rows = make_producer(cfg), make_row_copier(cfg)
    consume, epilogue = make_consumer(cfg), make_epilogue(cfg)
    elements = T.Cast("int64", cfg.batch) * cfg.seq_len * cfg.heads * cfg.head_dim  # of Q, dO and dQacc
    run_time = not isinstance(cfg.batch, int) or not isinstance(cfg.seq_len, int)  # else checked when made
    launch = T.cuda.LaunchConfig(grid=cfg.grid, block=128 * (1 + CONSUMERS),
                                 min_blocks_per_sm=1, dynamic_smem_bytes=cfg.smem_bytes)

    @T.macro
    def consumer(outputs, smem, bars, regs, keys, place):
        consume(outputs, smem, bars, regs, keys, place)
        epilogue(outputs.dK, outputs.dV, regs, keys, first_key(keys.kb, place.c), place)

    @T.macro
    def body(inputs, outputs, seq_len):
        if run_time:  # on the host, before the launch: Q, dO and dQacc are indexed with int32 offsets
            assert elements <= T.int64(MAX_ELEMENTS), ("ValueError", [ELEMENTS_MESSAGE])
        T.device_entry(launch=launch)
        smem, bars = _allocate_shared(cfg)
        tid = T.cuda.thread_idx("x")
        wg = T.cuda.warp_id() // 4
        if tid == 0:
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bars.kv_full, count=T.uint32(1))
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bars.full, count=T.uint32(FILLS))
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bars.empty, count=T.uint32(CONSUMERS))
            T.ptx["fence.mbarrier_init.release.cluster"]()
        T.cuda.cta_sync()
        keys = _keys(cfg, seq_len)
        if wg == 0:  # the producer warpgroup: thread 0 issues the TMA loads, warp 1 copies LSE and Dsum
            T.cuda.tile.apply(T.ptx["setmaxnreg.dec.sync.aligned.u32"], scope="warpgroup", nreg=PRODUCER_REGISTERS)
            if tid == 0:
                produce(inputs, smem, bars, keys, seq_len)
            if tid // 32 == 1:
                copy_rows(inputs, smem.srows, bars, keys, Place(tid, 0, seq_len))
        else:  # consumer c = wg - 1: keys 128 kb + 64 c ..
            T.cuda.tile.apply(T.ptx["setmaxnreg.inc.sync.aligned.u32"], scope="warpgroup", nreg=CONSUMER_REGISTERS)
            if specialised(cfg):  # one copy of the consumer per warpgroup, c a Python int
                regs = T.meta_var(_allocate_registers(cfg))  # a Python tuple (turn may be None)
                if wg == 1:
                    consumer(outputs, smem, bars, regs, keys, Place(tid, 0, seq_len))
                else:
                    consumer(outputs, smem, bars, regs, keys, Place(tid, 1, seq_len))
            else:
                c = wg - 1
                regs = T.meta_var(_allocate_registers(cfg))  # a Python tuple (turn may be None)
                consumer(outputs, smem, bars, regs, keys, Place(tid, c, seq_len))

    return body


def make_attention_backward(batch, seq_len, heads: int, head_dim: int, kv_heads: int | None = None,
                            causal: bool = False, scale: float | None = None, dtype: str = "bfloat16",
                            stages: int = 2, dq_split: str = "keys", deterministic: bool = False,
                            overlap: bool = False, longest_first: bool = False, section: int | None = None,
                            scores_ahead: bool = False):
    """The fused attention backward: ``dQ``, ``dK`` and ``dV`` of ``O = softmax(scale * Q
    K^T [+ causal mask]) V`` from ``dO``, recomputing the probabilities from the forward's
    log-sum-exp (FlashAttention-2/3's algorithm, key/value blocks outermost): a
    ``T.function`` to pass to :func:`tvm_tirx.compile` (``arch="sm_90a"``).

    One CTA per (128-key block, key/value head, batch entry): a producer warpgroup loads
    the CTA's K and V once and streams the Q and dO blocks (64 rows, or 128 with ``"rows"``) of every query head
    of the key/value head's group into a ring (TMA); two consumer warpgroups (64 keys
    each) compute per query block ``S^T``, ``P^T``, ``dP^T``, ``dS^T`` and accumulate
    ``dV`` and ``dK`` in registers (so the group's heads are summed without atomics), and
    add their share of ``dQ`` into ``dQacc`` by TMA reduce-add (:mod:`.exchange`).
    Causal: the query blocks wholly before the CTA's first key are skipped.

    Parameters
    ----------
    batch, seq_len : int or tvm.tirx.Var
        Sizes of Q, K, V, dO ``(batch, seq_len, heads, head_dim)`` (K and V with
        ``kv_heads``): positive ints, or int32 run-time extents (``T.dynamic("L")``), taken
        from the tensors at each call.  At most 65535 batch entries (a grid axis).
    heads : int
        Query heads (1 .. 65535).
    head_dim : int
        64 or 128 elements (256 does not fit a thread's registers: see :mod:`.config`).
    kv_heads : int, optional
        Key/value heads, dividing ``heads`` (GQA / MQA); default ``heads``.
    causal : bool
        Query ``i`` attends to keys ``<= i`` only (the two sequences aligned at the start).
    scale : float, optional
        The softmax scale, default ``1 / sqrt(head_dim)``.
    dtype : str
        ``"bfloat16"`` or ``"float16"``: Q, K, V, dO, dK and dV.
    stages : int
        Q / dO blocks in flight in the shared ring (2 fits every head_dim; 3 and 4 at 64;
        3 at 128 with ``dq_split="columns"``).
    dq_split : str
        How the two consumer warpgroups share ``dQ`` (:mod:`.exchange`): ``"keys"`` (the
        default: each computes the whole ``64 x head_dim`` block over its 64 keys and
        reduces it into ``dQacc``) or ``"columns"`` (each computes ``head_dim / 2`` columns
        over all 128 keys and reduces only those: half the reduce traffic, half the ``dQ``
        registers and ``sdq``; a 256-thread barrier per iteration joins the consumers), or
        ``"rows"`` (head_dim 64 only: query blocks of 128 rows, and each consumer computes
        one 64-row half of the block's ``dQ`` over all 128 keys; the score products are
        64 x 128 per consumer, twice as wide; not with ``deterministic``).
    deterministic : bool
        Add the ``dQ`` partial sums of a query block in key order (:mod:`.exchange`), so
        that ``dQ`` is the same bits on every run; the kernel then takes ``Order``.  Its
        cost: each reduce waits for the previous key block's and for its own completion.
    overlap : bool
        Issue each iteration's products so that they run under the consumer's arithmetic
        and exchanges (:mod:`.consumer`); needs ``dq_split="columns"`` or ``"rows"`` (the
        operator's head_dim 64 plan, ``"rows"``, keeps the serial order: the overlapped one was
        built there on 2026-12-07 and has not been timed).
    longest_first : bool
        Launch the CTAs with the longest causal walks first (:meth:`.config.BackwardConfig.block`):
        the (batch entry, key/value head) pairs in sections of ``section`` key/value heads of
        one batch entry, and within a section key block 0 of every pair, then key block 1,
        ..., rather than each pair's key blocks together.  Its grid puts the key blocks on
        the y axis: at most 65535 (8,388,480 keys; a run-time length is checked before each
        launch, as every run-time grid is: :mod:`tvm_tirx.build.launch_sizes`).  Its first
        form, measured on an H100 (2026-12-06), put the key blocks slowest over every batch
        entry and head: 3% faster on the longest causal rows, 5-30% slower on shorter causal
        rows and 1.5-2.1x slower on full ones (the CTAs running together no longer shared Q
        and dO blocks in L2; docs/kernels.rst).  In sections a wave wide
        (:func:`.plans.wave_section`) it was 2-15% faster than the default order on three
        head_dim 128 causal rows and 2-3% on a head_dim 64 one (H100, 2026-12-07), and the
        operator takes it on causal calls (:data:`tvm_tirx.ops.attention_backward_kernels.SECTIONS`).
    section : int, optional
        With ``longest_first``: key/value heads per section, dividing ``kv_heads`` (default
        ``kv_heads``: one section per batch entry).  A section's Q and dO are what its CTAs
        read from L2 while they run; sections of about ``132 / key_blocks`` pairs keep a
        wave of CTAs within one or two sections.
    scores_ahead : bool
        With ``overlap``: issue the next query block's ``S^T`` while this block's ``dK``
        still runs, the previous ring stage released once both retired (:mod:`.consumer`).
        Off by default until an H100/H200 measures it (``bench/attention.py
        --backward-kernels``).

    Returns
    -------
    tvm.tirx.PrimFunc
        ``attention_backward(Q, K, V, dO, LSE, Dsum, dQacc, dK, dV)``: ``LSE`` ``(batch,
        heads, seq_len)`` float32 is the forward's (natural log of each row's sum of
        ``exp(scale * q.k)``); ``Dsum`` ``(batch, heads, seq_len)`` float32 is
        ``rowsum(dO * O)``, computed by the caller (in torch: ``(dO.float() *
        O.float()).sum(-1)``, transposed to ``(batch, heads, seq_len)``); ``dQacc``
        ``(batch, seq_len, heads, head_dim)`` float32 must be zeroed by the caller: the
        kernel adds ``dQ`` into it (the caller converts it to ``dtype``); ``dK`` and
        ``dV`` ``(batch, seq_len, kv_heads, head_dim)`` in ``dtype`` are overwritten
        (rows past ``seq_len`` are not written).  With ``deterministic`` a tenth
        parameter ``Order``, int32 ``(batch, heads, ceil(seq_len / 64))``, zeroed by the
        caller before each launch.  Every tensor 16-byte aligned and contiguous.

    Raises
    ------
    ValueError
        From :class:`.config.BackwardConfig`: a size, dtype or option it refuses.
    """
    kv_heads = heads if kv_heads is None else kv_heads
    cfg = BackwardConfig(batch, seq_len, heads, kv_heads, head_dim, dtype, causal, scale, stages, dq_split,
                         deterministic, overlap, longest_first, section, scores_ahead)
    return _prim_func(cfg, _make_body(cfg))


def _prim_func(cfg: BackwardConfig, body):
    """The ``T.function`` around ``body``: ``(Q, K, V, dO, LSE, Dsum, dQacc, dK, dV)``,
    and ``Order`` after them with ``cfg.deterministic`` (TVMScript reads a parameter list
    from the source, so each list is a function of its own)."""
    batch, seq_len, heads, kv_heads, head_dim, dtype = (cfg.batch, cfg.seq_len, cfg.heads, cfg.kv_heads,
                                                        cfg.head_dim, cfg.dtype)
    q_shape, kv_shape, rows = (batch, seq_len, heads, head_dim), (batch, seq_len, kv_heads, head_dim), \
        (batch, heads, seq_len)
    q_spec, do_spec = T.Tensor(q_shape, dtype, align=16), T.Tensor(q_shape, dtype, align=16)
    k_spec, v_spec = T.Tensor(kv_shape, dtype, align=16), T.Tensor(kv_shape, dtype, align=16)
    dk_spec, dv_spec = T.Tensor(kv_shape, dtype, align=16), T.Tensor(kv_shape, dtype, align=16)
    lse_spec, dsum_spec = T.Tensor(rows, "float32", align=16), T.Tensor(rows, "float32", align=16)
    dq_spec = T.Tensor(q_shape, "float32", align=16)

    if cfg.deterministic:
        order_spec = T.Tensor((batch, heads, cfg.query_blocks_total), "int32", align=16)

        @T.function
        def attention_backward_deterministic(Q: q_spec, K: k_spec, V: v_spec, dO: do_spec, LSE: lse_spec,
                                             Dsum: dsum_spec, dQacc: dq_spec, dK: dk_spec, dV: dv_spec,
                                             Order: order_spec):
            body(Inputs(Q, K, V, dO, LSE, Dsum), Outputs(dQacc, dK, dV, Order), seq_len)

        return attention_backward_deterministic

    @T.function
    def attention_backward(Q: q_spec, K: k_spec, V: v_spec, dO: do_spec, LSE: lse_spec, Dsum: dsum_spec,
                           dQacc: dq_spec, dK: dk_spec, dV: dv_spec):
        body(Inputs(Q, K, V, dO, LSE, Dsum), Outputs(dQacc, dK, dV), seq_len)

    return attention_backward
