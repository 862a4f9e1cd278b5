"""A consumer warpgroup: per key/value block ``S = Q K^T``, the online softmax, ``O += P V``;
then the epilogue (``O / l`` and the log-sum-exp)."""

from __future__ import annotations

from tvm.script import tirx as T

from ..gemm.sync import release_stage, wait_phase
from .config import BM, CHUNK, WG_M, AttentionConfig
from .softmax import NEG_INF, make_softmax

__all__ = ["make_consumer", "make_epilogue"]

LN2 = 0.6931471805599453


def _needs_mask(cfg: AttentionConfig, j, row0, seq_len):
    """Whether block ``j`` holds keys past ``seq_len`` or, causal, past the first row."""
    last_key = j * cfg.bn + cfg.bn - 1
    past_end = last_key >= seq_len
    return T.Or(past_end, last_key > row0) if cfg.causal else past_end


def make_consumer(cfg: AttentionConfig):
    """The macro ``consume(sq, sk, sv, q_full, full, empty, S, P, O, m, l, alpha, rmax, qb,
    n_kv, seq_len, tid, c)``: consumer ``c`` (0 or 1) computes rows ``64 c ..`` of query
    block ``qb`` over key/value blocks ``0 .. n_kv - 1``.

    Per block: wait for the stage (``full``), ``S = Q K^T`` (``wgmma`` from shared memory,
    one call per 64 columns of head_dim), the online softmax (:mod:`.softmax`), ``P``
    packed to bf16/f16 pairs in the rs form's A registers (a score accumulator's words
    are the A fragment of the same columns, PTX ISA 9.7.15.5.1.1), ``O += P V`` (one rs
    ``wgmma`` per 64 columns of O; V is the MN-major B), then the stage is released.
    """
    stages, bn, chunks = cfg.stages, cfg.bn, cfg.chunks
    softmax = make_softmax(cfg)
    convert = "cvt.rn.bf16x2.f32" if cfg.dtype == "bfloat16" else "cvt.rn.f16x2.f32"
    take_turn, give_turn, first_turn = make_turns(cfg)

    @T.macro
    def consume(sq, sk, sv, q_full, full, empty, S, P, O, m, l, alpha, rmax, qb, n_kv, seq_len, tid, c):
        T.cuda.mbarrier_wait_phase(q_full.sub[0, :], 0)
        row = qb * BM + c * WG_M + tid % 128 // 32 * 16 + tid % 32 // 4
        for h in T.unroll(2):
            m[h] = T.float32(NEG_INF)
            l[h] = T.float32(0)
        first_turn(c)
        for j in T.serial(n_kv):
            s = j % stages
            wait_phase(full.sub[s, :], (j // stages) % 2, None, False)
            take_turn(c)
            T.ptx["wgmma.fence.sync.aligned"]()
            for cc in T.unroll(chunks):
                T.cuda.tile.apply(T.ptx[cfg.mma_qk], S,
                                  sq.sub[cc, c * WG_M : c * WG_M + WG_M, :].view(1, WG_M, CHUNK // 16, 16).permute(0, 2, 1, 3),
                                  sk.sub[s, cc].view(bn, CHUNK // 16, 16).permute(1, 0, 2), scope="warpgroup",
                                  scale_d=cc > 0)
            T.ptx["wgmma.commit_group.sync.aligned"]()
            give_turn(c, j, n_kv)
            T.ptx["wgmma.wait_group.sync.aligned"](0)
            if _needs_mask(cfg, j, qb * BM + c * WG_M, seq_len):
                softmax(S, O, m, l, alpha, rmax, j * bn, row, seq_len, tid % 4, True)
            else:
                softmax(S, O, m, l, alpha, rmax, j * bn, row, seq_len, tid % 4, False)
            pairs = S.local().view(bn // 8, 2, 2)
            T.cuda.tile.apply(T.ptx[convert], P.local().view(bn // 8, 2, 1), pairs.sub[:, :, 1:2], pairs.sub[:, :, 0:1])
            T.ptx["wgmma.fence.sync.aligned"]()
            for cc in T.unroll(chunks):
                T.cuda.tile.apply(T.ptx[cfg.mma_pv], O.sub[cc], P,
                                  sv.sub[s, cc].view(bn // 16, 16, CHUNK).permute(0, 2, 1), scope="warpgroup",
                                  scale_d=j > 0)
            T.ptx["wgmma.commit_group.sync.aligned"]()
            T.ptx["wgmma.wait_group.sync.aligned"](0)
            release_stage(empty, s, tid, 1)

    return consume


def make_turns(cfg: AttentionConfig):
    """The macros ``take_turn(c)``, ``give_turn(c, j, n_kv)`` and ``first_turn(c)`` of the
    ping-pong schedule (``pingpong=True``; empty macros otherwise).

    The two consumers issue their ``Q K^T`` wgmmas in turns, so that one's softmax runs
    while the other's products occupy the tensor cores (FlashAttention-3's inter-warpgroup
    overlap).  Consumer ``c`` waits for its turn on named barrier ``1 + c`` (``bar.sync``,
    256 threads: its own 128 and the other consumer's ``bar.arrive``) and hands the turn
    over after issuing, with ``bar.arrive`` on the other's barrier.  Consumer 1 grants the
    first turn; it hands over after every block but its last, consumer 0 after every
    block, so each barrier completes exactly ``n_kv`` times (PTX ISA 9.7.13.1).
    """
    count = T.uint32(256)

    @T.macro
    def take_turn(c):
        if cfg.pingpong:
            T.cuda.tile.apply(T.ptx["bar.sync"], id=T.Cast("uint32", 1 + c), count=count)

    @T.macro
    def give_turn(c, j, n_kv):
        if cfg.pingpong:
            if T.Or(c == 0, j < n_kv - 1):
                T.cuda.tile.apply(T.ptx["bar.arrive"], id=T.Cast("uint32", 2 - c), count=count)

    @T.macro
    def first_turn(c):
        if cfg.pingpong:
            if c == 1:
                T.cuda.tile.apply(T.ptx["bar.arrive"], id=T.uint32(1), count=count)

    return take_turn, give_turn, first_turn


def make_epilogue(cfg: AttentionConfig):
    """The macro ``epilogue(Out, LSE, O, W, m, l, rmax, b, h, qb, seq_len, tid, c)``: sums
    ``l`` over the row's four lanes, divides ``O`` by it, stores the rows ``< seq_len`` of
    ``O`` as bf16/f16 pairs (``st.global.b32``, one per register pair, under ``row <
    seq_len``) and, from lane ``t = 0`` of each row, ``LSE = ln(2) * (m + log2(l))``."""
    chunks, batch = cfg.chunks, cfg.batch
    convert = "cvt.rn.bf16x2.f32" if cfg.dtype == "bfloat16" else "cvt.rn.f16x2.f32"

    @T.macro
    def epilogue(Out, LSE, O, W, m, l, rmax, b, h, qb, seq_len, tid, c):
        for hh in T.unroll(2):
            rmax[hh, 0] = l[hh]
        T.cuda.tile.reduce_lanes(T.ptx["add.f32"], rmax, lanes=4)
        ol = O.local()
        for r in T.unroll(chunks * 32):
            ol[r] = ol[r] / rmax[r // 2 % 2, 0]
        pairs = ol.view(chunks * 8, 2, 2)
        T.cuda.tile.apply(T.ptx[convert], W.local().view(chunks * 8, 2, 1), pairs.sub[:, :, 1:2], pairs.sub[:, :, 0:1])
        words = Out.view("uint32")
        wl = W.local()
        for jj in T.unroll(chunks * 8):
            for hh in T.unroll(2):
                row = qb * BM + c * WG_M + tid % 128 // 32 * 16 + hh * 8 + tid % 32 // 4
                col = jj * 4 + tid % 4  # in words: columns 8 jj + 2 t
                if row < seq_len:
                    # b < batch (blockIdx.z) and row < seq_len: the prover does not multiply two
                    # run-time extents, so the product's bound is stated (checked with check_assumptions)
                    T.assume(b * seq_len + row < batch * seq_len)
                    T.cuda.tile.apply(T.ptx["st.global.b32"], words.sub[b, row, h, col : col + 1],
                                      wl.view(chunks * 8, 2, 1).sub[jj, hh, :])
        if tid % 4 == 0:
            for hh in T.unroll(2):
                row = qb * BM + c * WG_M + tid % 128 // 32 * 16 + hh * 8 + tid % 32 // 4
                if row < seq_len:
                    LSE[b, h, row] = (m[hh] + T.log2(rmax[hh, 0])) * T.float32(LN2)

    return epilogue
