"""The kernel: shared memory, barriers, the producer and the two (or three) consumer warpgroups."""

from __future__ import annotations

from typing import NamedTuple

from tvm.script import tirx as T

from ...tile.families.tma import swizzled_layout
from ...tile.families.wgmma import a_fragment_layout
from ...tile.fragments import accumulator_layout
from .config import CHUNK, CONSUMERS, MAX_ELEMENTS, SMS, WG_M, AttentionConfig
from .consumer import make_consumer
from .epilogue import make_epilogue
from .o_store import make_o_store
from .state import Barriers, Place, Registers, Shared, Tile
from .producer import make_producer
from .varlen import (SEQUENCES_MESSAGE, VARLEN_ELEMENTS_MESSAGE, as_batch, sequence_live, varlen_function, varlen_grid,
                     varlen_tile)

__all__ = ["make_attention", "ELEMENTS_MESSAGE"]

#: the host's error for run-time sizes whose Q and O the kernel's int32 offsets cannot index
ELEMENTS_MESSAGE = (f"make_attention: batch x seq_len x heads x head_dim elements of Q and O must be at most "
                    f"{MAX_ELEMENTS}: the kernel indexes them with int32 offsets")


def _kv_blocks(cfg: AttentionConfig, qb, seq_len):
    """Key/value blocks query block ``qb`` reads: all of them, or (causal) those up to the
    block holding its last row."""
    every = T.ceildiv(seq_len, cfg.bn)
    return T.min(every, T.ceildiv(qb * cfg.bm + cfg.bm, cfg.bn)) if cfg.causal else every


def _walk(cfg: AttentionConfig):
    """``(launch grid, rounds, tile)``: a CTA's ``i``-th tile is ``tile(i)``, ``(valid, last,
    qb, h, b)`` (``last``: the CTA has no later tile), for ``i < rounds`` (``tile`` reads
    the CTA ids: call it after the launch).

    One CTA per (query block, head, batch entry), query blocks fastest: the CTAs running
    together read the same heads' K and V (L2 reuse), each head's longest causal rows
    first.  (Heads fastest -- every head's longest block first -- measured slower on the
    H200: 604 against 650 TFLOP/s at 4 x 32 x 4096 x 128, 570 against 594 causal at 2 x
    16 x 16384: 32 heads' K and V do not stay in L2 together.)  With ``cfg.persistent``
    the :func:`_persistent_grid` CTAs walk the tiles of :func:`_tile_order` in rounds of
    ``grid`` tiles, as :func:`_round_robin` deals them.
    """
    q = cfg.q_blocks
    if not cfg.persistent:
        return (q, cfg.heads, cfg.batch), 1, lambda i: (True, True, q - 1 - T.cuda.block_idx("x"),
                                                        T.cuda.block_idx("y"), T.cuda.block_idx("z"))
    tiles, grid = cfg.tiles, _persistent_grid(cfg)
    rounds = -(-tiles // grid) if isinstance(grid, int) else T.ceildiv(tiles, grid)

    def tile(i):
        t = _round_robin(T.cuda.block_idx("x"), i, grid)
        qb, h, b = _tile_order(cfg, t)
        return t < tiles, _round_robin(T.cuda.block_idx("x"), i + 1, grid) >= tiles, qb, h, b

    return grid, rounds, tile


def _persistent_grid(cfg: AttentionConfig):
    """The persistent kernel's grid: ``min(ctas, tiles)``, or with ``persistent_rows`` one
    CTA per tile for rows longer than that (chosen at launch for a run-time ``seq_len``:
    the same code then walks one tile per CTA)."""
    tiles, rows = cfg.tiles, cfg.persistent_rows
    fill = min(cfg.ctas, tiles) if isinstance(tiles, int) else T.min(cfg.ctas, tiles)
    if rows is None:
        return fill
    if isinstance(cfg.seq_len, int):  # known when the kernel is made
        return fill if cfg.seq_len <= rows else tiles
    return T.Select(cfg.seq_len <= rows, fill, tiles)


def _round_robin(x, i, grid):
    """The tile CTA ``x`` of ``grid`` takes in round ``i``: round ``i`` deals tiles ``i *
    grid`` to ``i * grid + grid - 1``, in CTA order in even rounds and in reverse in odd
    ones.  Dealing back and forth evens out the CTAs' causal work: dealt in one direction,
    with 8 query blocks and 132 CTAs, CTA ``x`` got query blocks ``x`` and ``x + 4`` (mod 8)
    in turn, and the busiest CTAs had a third more key/value blocks than the mean."""
    return i * grid + T.if_then_else(i % 2 == 0, x, grid - 1 - x)


def _tile_order(cfg: AttentionConfig, t):
    """``(qb, h, b)`` of the persistent walk's tile ``t``: query blocks fastest (each
    head's longest causal rows first), then heads, then batch entries -- the order of the
    grid of one CTA per tile."""
    q = cfg.q_blocks
    return q - 1 - t % q, t // q % cfg.heads, t // (q * cfg.heads)


class _Cta(NamedTuple):
    """What the producer and consumer roles take of their CTA (built at each call).

    ``tid`` (``threadIdx.x``), ``wg`` (its warpgroup), ``done`` (``(1,)`` int32: key/value
    blocks of the CTA's earlier tiles), ``rounds`` and ``tile`` (:func:`_walk`), ``seq_len``
    (keys and queries of the tile's sequence, int32) and ``start`` (the sequence's first
    row in the packed tensors; 0 unless ``varlen``)."""

    tid: object
    wg: object
    done: object
    rounds: object
    tile: object
    seq_len: object
    start: object


def _make_roles(cfg: AttentionConfig):
    """The macros ``producer_role(Q, K, V, smem, bars, cta)`` and ``consumer_role(Out, LSE,
    smem, bars, cta)`` (a :class:`_Cta`): warpgroup 0 and warpgroups 1 .. ``cfg.consumers`` of the
    CTA, with ``cfg.producer_registers`` and ``cfg.consumer_registers`` registers per thread."""
    bn, chunks = cfg.bn, cfg.chunks
    produce, consume, epilogue = make_producer(cfg), make_consumer(cfg), make_epilogue(cfg)
    _, drain = make_o_store(cfg)

    @T.macro
    def producer_role(Q, K, V, smem, bars, cta):
        T.cuda.tile.apply(T.ptx["setmaxnreg.dec.sync.aligned.u32"], scope="warpgroup", nreg=cfg.producer_registers)
        if cta.tid == 0:
            if cfg.persistent:
                for i in T.serial(cta.rounds):
                    valid, _, qb, h, b = cta.tile(i)
                    if valid:
                        n_kv = _kv_blocks(cfg, qb, cta.seq_len)
                        produce(Q, K, V, smem, bars, Tile(b, h, qb, n_kv, i, cta.done[0], False))
                        cta.done[0] = cta.done[0] + n_kv
            else:  # one tile: no loop around it (the serial schedules measured 25% slower inside one)
                _v, _l, qb, h, b = cta.tile(0)
                produce(Q, K, V, smem, bars, Tile(b, h, qb, _kv_blocks(cfg, qb, cta.seq_len), 0, 0, True, cta.start))

    @T.macro
    def consumer_role(Out, LSE, smem, bars, cta):
        T.cuda.tile.apply(T.ptx["setmaxnreg.inc.sync.aligned.u32"], scope="warpgroup", nreg=cfg.consumer_registers)
        c = cta.wg - 1
        S = T.alloc_local((WG_M, bn), "float32", layout=accumulator_layout(bn))
        P = T.alloc_local((1, bn // 16, WG_M, 8), "uint32", layout=a_fragment_layout(1, bn // 16))
        O = T.alloc_local((chunks, WG_M, CHUNK), "float32", layout=accumulator_layout(CHUNK, chunks))
        W = T.alloc_local((chunks, WG_M, CHUNK // 2), "uint32", layout=accumulator_layout(CHUNK, chunks, packed=True))
        m = T.alloc_local((2,), "float32")
        l = T.alloc_local((2,), "float32")
        alpha = T.alloc_local((2,), "float32")
        rmax = T.alloc_local((2, 1), "float32")
        if cfg.persistent:
            for i in T.serial(cta.rounds):
                valid, last, qb, h, b = cta.tile(i)
                if valid:
                    n_kv = _kv_blocks(cfg, qb, cta.seq_len)
                    consume(smem, bars, Registers(S, P, O, W, m, l, alpha, rmax),
                            Tile(b, h, qb, n_kv, i, cta.done[0], last), Place(cta.tid, c, cta.seq_len))
                    epilogue(Out, LSE, smem, bars, Registers(S, P, O, W, m, l, alpha, rmax),
                             Tile(b, h, qb, n_kv, i, cta.done[0], last), Place(cta.tid, c, cta.seq_len))
                    cta.done[0] = cta.done[0] + n_kv
        else:
            _v, _l, qb, h, b = cta.tile(0)
            consume(smem, bars, Registers(S, P, O, W, m, l, alpha, rmax),
                    Tile(b, h, qb, _kv_blocks(cfg, qb, cta.seq_len), 0, 0, True, cta.start),
                    Place(cta.tid, c, cta.seq_len))
            epilogue(Out, LSE, smem, bars, Registers(S, P, O, W, m, l, alpha, rmax),
                     Tile(b, h, qb, None, 0, 0, True, cta.start), Place(cta.tid, c, cta.seq_len))
        if cfg.tma_store:
            drain(cta.tid)

    return producer_role, consumer_role


def _make_run(cfg: AttentionConfig):
    """The macro ``run(Q, K, V, Out, LSE, smem, bars, cta)``: thread 0 initialises the
    mbarriers, the CTA synchronises, then each warpgroup takes its role."""
    producer_role, consumer_role = _make_roles(cfg)

    @T.macro
    def run(Q, K, V, Out, LSE, smem, bars, cta):
        if cta.tid == 0:
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bars.q_full, count=T.uint32(1))
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bars.q_empty, count=T.uint32(1))
            cfg.ring.init(bars.full, bars.empty)  # with v_ring K's and V's barriers alike
            if cfg.o_tile == "kv":  # one arrival: thread 0 of the other consumer (.o_store)
                T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bars.k_read, count=T.uint32(1))
            T.ptx["fence.mbarrier_init.release.cluster"]()
        T.cuda.cta_sync()
        if cfg.persistent:
            cta.done[0] = 0
        if cta.wg == 0:  # the producer warpgroup
            producer_role(Q, K, V, smem, bars, cta)
        else:
            consumer_role(Out, LSE, smem, bars, cta)

    return run


def _make_body(cfg: AttentionConfig):  # pylint: disable=too-many-locals
    """The macro ``body(Q, K, V, Out, LSE, seq_len, packed)``: the host's checks, the
    launch, shared memory, then :func:`_make_run`'s CTA -- with ``cfg.varlen`` (``packed``
    a :class:`.varlen.Packed`) only where the CTA's query block holds rows of its
    sequence (:func:`.varlen.sequence_live`), every thread of the CTA alike."""
    stages, bn, chunks, dtype = cfg.stages, cfg.bn, cfg.chunks, cfg.dtype
    run = _make_run(cfg)
    q_layout = swizzled_layout((chunks, cfg.bm, CHUNK), dtype, 3)
    kv_layout = swizzled_layout((stages, chunks, bn, CHUNK), dtype, 3)
    if cfg.varlen:  # elements of Q and O: the packed rows, or the batch entries' rows
        elements, too_many = T.Cast("int64", cfg.seq_len) * cfg.heads * cfg.head_dim, VARLEN_ELEMENTS_MESSAGE
    else:
        elements, too_many = T.Cast("int64", cfg.batch) * cfg.seq_len * cfg.heads * cfg.head_dim, ELEMENTS_MESSAGE
    run_time = not isinstance(cfg.seq_len, int) or (not cfg.varlen and not isinstance(cfg.batch, int))
    count_at_run_time = cfg.varlen and not isinstance(cfg.batch, int)  # sequences: CuSeqlens' extent - 1
    grid, rounds, tile = _walk(cfg) if not cfg.varlen else (None, 1, None)
    own_o_tile, kv_o_tile = cfg.o_tile == "own", cfg.o_tile == "kv"

    def launch(packed):
        return T.cuda.LaunchConfig(grid=grid if packed is None else varlen_grid(cfg, packed),
                                   block=128 * (1 + cfg.consumers), min_blocks_per_sm=1,
                                   dynamic_smem_bytes=cfg.smem_bytes)

    @T.macro
    def body(Q, K, V, Out, LSE, seq_len, packed):
        if run_time:  # on the host, before the launch: Q and O are indexed with int32 offsets
            assert elements <= T.int64(MAX_ELEMENTS), ("ValueError", [too_many])
        if count_at_run_time:
            assert packed.cu_seqlens.shape[0] >= 2, ("ValueError", [SEQUENCES_MESSAGE])
        T.device_entry(launch=launch(packed))
        sq = T.alloc_shared((chunks, cfg.bm, CHUNK), dtype, scope="shared.dyn", align=1024, layout=q_layout)
        sk = T.alloc_shared((stages, chunks, bn, CHUNK), dtype, scope="shared.dyn", align=1024, layout=kv_layout)
        sv = T.alloc_shared((stages, chunks, bn, CHUNK), dtype, scope="shared.dyn", align=1024, layout=kv_layout)
        q_full = T.alloc_shared((cfg.consumers, 1), "uint64", scope="shared.dyn", align=8)  # per consumer's Q rows
        q_empty = T.alloc_shared((cfg.consumers, 1), "uint64", scope="shared.dyn", align=8)
        full = T.alloc_shared((cfg.rings * stages, 1), "uint64", scope="shared.dyn", align=8)  # with v_ring: V's
        empty = T.alloc_shared((cfg.rings * stages, 1), "uint64", scope="shared.dyn", align=8)  # from stages on
        done = T.alloc_local((1,), "int32")  # key/value blocks of this CTA's earlier tiles
        tid = T.cuda.thread_idx("x")
        wg = T.cuda.warp_id() // 4
        if cfg.varlen:
            start = packed.cu_seqlens[T.cuda.block_idx("z")]
            end = packed.cu_seqlens[T.cuda.block_idx("z") + 1]
            if sequence_live(packed, start, end):  # the same for every thread of the CTA
                run(as_batch(Q, packed), as_batch(K, packed), as_batch(V, packed), Out, LSE, Shared(sq, sk, sv),
                    Barriers(q_full, q_empty, full, empty),
                    _Cta(tid, wg, done, 1, varlen_tile(packed), end - start, start))
        elif own_o_tile:  # O's staging tile for the TMA store (.o_store), after the mbarriers
            so = T.alloc_shared((chunks, cfg.bm, CHUNK), dtype, scope="shared.dyn", align=1024, layout=q_layout)
            run(Q, K, V, Out, LSE, Shared(sq, sk, sv, so), Barriers(q_full, q_empty, full, empty),
                _Cta(tid, wg, done, rounds, tile, seq_len, 0))
        elif kv_o_tile:  # O staged in K's stage: the consumers' hand-over of it on k_read (.o_store)
            k_read = T.alloc_shared((2 * cfg.consumers, 1), "uint64", scope="shared.dyn", align=8)
            run(Q, K, V, Out, LSE, Shared(sq, sk, sv, sq), Barriers(q_full, q_empty, full, empty, k_read),
                _Cta(tid, wg, done, rounds, tile, seq_len, 0))
        else:  # with tma_store, O is staged in Q's rows (else Shared.so is not used)
            run(Q, K, V, Out, LSE, Shared(sq, sk, sv, sq), Barriers(q_full, q_empty, full, empty),
                _Cta(tid, wg, done, rounds, tile, seq_len, 0))

    return body


def make_attention(batch, seq_len, heads: int, head_dim: int, kv_heads: int | None = None, causal: bool = False,
                   scale: float | None = None, dtype: str = "bfloat16", stages: int = 2, pingpong: bool = False,
                   overlap: bool = False, persistent: bool = False, ctas: int = SMS,
                   persistent_rows: int | None = None, varlen: bool = False, tma_store: bool = False,
                   block_n: int | None = None, consumers: int = CONSUMERS, o_staging: str | None = None,
                   v_ring: bool = False):
    """The fused attention forward ``O = softmax(scale * Q K^T [+ causal mask]) V`` and the
    log-sum-exp of each row: a ``T.function`` to pass to :func:`tvm_tirx.compile`
    (``arch="sm_90a"``).

    Parameters
    ----------
    batch, seq_len : int or tvm.tirx.Var
        Sizes of Q, K, V and O ``(batch, seq_len, heads, head_dim)`` (K and V with
        ``kv_heads``): positive ints, or int32 run-time extents (``T.dynamic("L")``):
        one compiled kernel then serves every length, taken from the tensors at each call.
        At most 65535 batch entries unless ``persistent`` (the grid's z axis: a static
        batch past it is refused, a run-time one fails at launch with CUDA's
        invalid-value error).
    heads : int
        Query heads (1 .. 65535).
    head_dim : int
        64, 128 or 256 elements.
    kv_heads : int, optional
        Key/value heads, dividing ``heads`` (GQA / MQA); default ``heads``.
    causal : bool
        Query ``i`` attends to keys ``<= i`` only (the two sequences aligned at the start).
    scale : float, optional
        The softmax scale, default ``1 / sqrt(head_dim)``.
    dtype : str
        ``"bfloat16"`` or ``"float16"``: Q, K, V and O; accumulation in fp32.
    stages : int
        Key/value blocks in flight in the shared ring.
    pingpong : bool
        The two consumer warpgroups issue their ``Q K^T`` products in turns, handed over on
        named barriers 1 and 2 (:mod:`.turns`).
    overlap : bool
        Each consumer runs the softmax of block ``j`` while its ``P_{j-1} V_{j-1}`` wgmma
        runs (:mod:`.consumer`); wants ``stages=3`` (head_dim 64 and 128), or 2 with ``v_ring``.
    persistent : bool
        ``min(ctas, tiles)`` CTAs walk the (query block, head, batch entry) tiles instead
        of one CTA per tile: the key/value ring runs on from one tile to the next, and the
        producer loads the next tile's Q and first blocks while the consumers finish this
        tile's last ``P V`` and store its O (``q_empty``: each consumer releases Q once its
        last ``Q K^T`` retired).
    ctas : int
        The persistent grid, default 132 (the H100 / H200 SMs: one CTA per SM).
    persistent_rows : int, optional
        With ``persistent``: rows (keys per query) longer than this launch one CTA per
        tile instead, running the same code (chosen when the kernel is launched for a
        run-time ``seq_len``): the persistent grid gains on short rows and loses on long
        ones (:mod:`.schedules`).  ``None``: the persistent grid at every length.
    varlen : bool
        ``batch`` sequences of different lengths packed in one call (FlashAttention's
        varlen layout, :mod:`.varlen`): ``seq_len`` is then ``total``, the rows of all
        sequences together, and the kernel takes their cumulative lengths.  One CTA per
        tile only (``persistent=True`` is refused).
    tma_store : bool
        Each consumer writes its 64 x head_dim O rows into a 128-byte swizzled shared
        tile and one thread stores them by 4-d TMA boxes (:mod:`.o_store`), instead of
        ``st.global.b32`` per register pair under a row guard.  The tile is a buffer of
        its own where it fits (head_dim 64; 128 with 2 stages), else the consumer's rows
        of Q's buffer: on the persistent grid Q's rows are then released after the store
        has read them, not after the last ``Q K^T``.  Not with ``varlen``.
    block_n : int, optional
        Keys (and values) per block of the ring, a multiple of 16 up to 256; ``None``:
        :data:`~.config.HEAD_DIMS`'s for the head_dim (128, 128, 64).  Larger blocks
        amortise each block's softmax and synchronisation over more keys; they take
        ``3 block_n / 4`` registers of S and P per consumer thread and ``4 block_n
        head_dim`` bytes of shared memory per stage.
    consumers : int
        Consumer warpgroups, 2 (default) or 3: a CTA computes ``64 consumers`` query rows
        with ``128 (1 + consumers)`` threads (FlashAttention-3's layout at head_dim 64:
        three consumers of 160 registers, the producer 24).  3 takes head_dim 64 only and
        refuses ``pingpong`` and ``varlen``.
    o_staging : str, optional
        With ``tma_store``, where O is staged (:attr:`.config.AttentionConfig.o_tile`,
        :mod:`.o_store`): ``"own"``, ``"kv"`` (the K half of the tile's last block's stage;
        the persistent grid with ``pingpong``) or ``"q"`` (Q's rows); ``None``: ``"own"``
        where it fits, else ``"q"``.
    v_ring : bool
        K's and V's halves of each stage on barriers of their own (FlashAttention-3's two
        pipelines): a consumer releases K's half once its ``Q K^T`` retired and V's once its
        ``P V`` did, so the producer refills K a softmax and a ``P V`` earlier than it
        refills the whole stage (:mod:`.consumer`).  For two stages with ``overlap``.

    Returns
    -------
    tvm.tirx.PrimFunc
        ``attention(Q, K, V, O, LSE)``: ``LSE`` is ``(batch, heads, seq_len)`` float32, the
        natural log of each row's sum of ``exp(scale * q.k)``; rows past ``seq_len`` are
        not written.  Every tensor 16-byte aligned and contiguous.

        With ``varlen``: ``attention(Q, K, V, O, LSE, CuSeqlens, max_seqlen)``: Q and O
        ``(total, heads, head_dim)``, K and V ``(total, kv_heads, head_dim)``, LSE ``(heads,
        total)`` float32, ``CuSeqlens`` ``(batch + 1,)`` int32 (4-byte aligned; sequence
        ``i`` is rows ``CuSeqlens[i] .. CuSeqlens[i + 1] - 1`` of queries and keys, causal
        masks aligned at its first row), ``max_seqlen`` an int32 scalar, the longest
        sequence: it sizes the grid (``ceil(min(max_seqlen, total) / 128)`` query blocks
        per sequence, so rows of a longer sequence past them are not written).  Rows of
        no sequence are not written, nor those of a sequence whose entries are not ``0 <=
        CuSeqlens[i] <= CuSeqlens[i + 1] <= total``.

    Raises
    ------
    ValueError
        From :class:`.config.AttentionConfig`: a size, dtype or option it refuses
        (``varlen`` with ``persistent`` included).  At a call of a kernel of run-time
        sizes, before the launch: more elements in Q than int32 offsets reach, a varlen
        ``CuSeqlens`` of fewer than 2 entries.
    """
    kv_heads = heads if kv_heads is None else kv_heads
    cfg = AttentionConfig(batch, seq_len, heads, kv_heads, head_dim, dtype, causal, scale, stages, pingpong, overlap,
                          persistent, ctas, persistent_rows, varlen, tma_store, block_n, consumers, o_staging,
                          v_ring)
    body = _make_body(cfg)
    if varlen:
        return varlen_function(cfg, body)
    q_shape, kv_shape = (batch, seq_len, heads, head_dim), (batch, seq_len, cfg.kv_heads, head_dim)
    q_spec, o_spec = T.Tensor(q_shape, dtype, align=16), T.Tensor(q_shape, dtype, align=16)
    k_spec, v_spec = T.Tensor(kv_shape, dtype, align=16), T.Tensor(kv_shape, dtype, align=16)
    lse_spec = T.Tensor((batch, heads, seq_len), "float32", align=16)

    @T.function
    def attention(Q: q_spec, K: k_spec, V: v_spec, O: o_spec, LSE: lse_spec):
        body(Q, K, V, O, LSE, seq_len, None)

    return attention
