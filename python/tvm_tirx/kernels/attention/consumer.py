"""A consumer warpgroup's main loop over the key/value blocks, in one of two schedules.

Per block ``j`` a consumer computes ``S = Q K_j^T`` (``wgmma`` from shared memory, one
call per 64 columns of head_dim), the online softmax (:mod:`.softmax`), packs ``P_j`` to
bf16/f16 pairs straight into the rs form's A registers (a score accumulator's words are
the A fragment of the same columns, PTX ISA 9.7.15.5.1.1), rescales ``O`` and adds
``P_j V_j`` (one rs ``wgmma`` of N = head_dim per k16 step; V is the MN-major B, its
64-column chunks one descriptor apart).

* serial (``overlap=False``): the block's two products one after the other, each
  waited for (``wait_group 0``); the stage is released after ``P_j V_j``;
* overlapped (``overlap=True``): ``Q K_j^T`` and ``P_{j-1} V_{j-1}`` are issued as two
  groups; ``wait_group 1`` retires the first and the softmax of block ``j`` runs while
  the second still multiplies; ``wait_group 0``, release stage ``j - 1``, rescale, pack.
  The stage of block ``j - 1`` is then released one softmax later than in the serial
  schedule, so it wants a third stage (``stages=3``) to keep the TMA ahead.

With O staged in K's stage (``o_staging="kv"``, :mod:`.o_store`) the last block's stage is
released by the epilogue, after O's store has read it, and the consumer hands K's stage
over to the other consumer (and Q's rows to the producer) as soon as its last ``Q K^T``
has retired.

With ``v_ring`` K's and V's halves of a stage have barriers of their own: a consumer waits
for V's half just before its ``P V`` and releases K's half as soon as its ``Q K^T`` has
retired (but the tile's last with O staged in K's stage), so the producer refills K while
the softmax and ``P V`` of the block still run (FlashAttention-3's two pipelines; two
stages then keep the overlapped schedule fed).
"""

from __future__ import annotations

from types import SimpleNamespace

from tvm.script import tirx as T

from ...tile.fragments import accumulator_layout
from ..gemm.operands import Operand
from ..parts.ring import release_stage
from ..pairs import make_pack_pairs
from .config import CHUNK, WG_M, AttentionConfig, first_row
from .o_store import make_signal_k_read
from .softmax import NEG_INF, make_softmax
from .turns import make_turns

__all__ = ["make_consumer"]


def _needs_mask(cfg: AttentionConfig, j, row0, seq_len):
    """Whether block ``j`` holds keys past ``seq_len`` or, causal, past the first row."""
    last_key = j * cfg.bn + cfg.bn - 1
    past_end = last_key >= seq_len
    return T.Or(past_end, last_key > row0) if cfg.causal else past_end


def _make_products(cfg: AttentionConfig):
    """``issue_qk(S, sq, sk, s, c)`` and ``issue_pv(O, P, sv, s, accumulate)``:
    ``wgmma.fence``, the calls of one product, ``commit_group``."""
    bn, chunks, head_dim = cfg.bn, cfg.chunks, cfg.head_dim
    v_operand = Operand("B", "n", head_dim, bn, cfg.dtype)  # V (keys, head_dim): K = keys, N = head_dim

    @T.macro
    def issue_qk(S, sq, sk, s, c):
        T.ptx["wgmma.fence.sync.aligned"]()
        for cc in T.unroll(chunks):
            T.cuda.tile.apply(T.ptx[cfg.mma_qk], S,
                              sq.sub[cc, c * WG_M : c * WG_M + WG_M, :].view(1, WG_M, CHUNK // 16, 16).permute(0, 2, 1, 3),
                              sk.sub[s, cc].view(bn, CHUNK // 16, 16).permute(1, 0, 2), scope="warpgroup", scale_d=cc > 0)
        T.ptx["wgmma.commit_group.sync.aligned"]()

    @T.macro
    def issue_pv(O, P, sv, s, accumulate):
        # O's (chunks, 64, 64) registers are those of one (64, head_dim) accumulator, and
        # V's stage (chunks, bn, 64) is the GEMM's N-major B (.gemm.operands): one wgmma per k16
        T.ptx["wgmma.fence.sync.aligned"]()
        T.cuda.tile.apply(T.ptx[cfg.mma_pv], O.view(WG_M, head_dim, layout=accumulator_layout(head_dim)), P,
                          v_operand.mma_view(sv, s, 0, head_dim, 16), scope="warpgroup", scale_d=accumulate)
        T.ptx["wgmma.commit_group.sync.aligned"]()

    return issue_qk, issue_pv


def _make_steps(cfg: AttentionConfig) -> SimpleNamespace:
    """The steps both schedules use: the products, ``scores`` (the softmax of block
    ``j``, masked where it must be), ``rescale`` and ``pack``, the ping-pong turns."""
    bn = cfg.bn
    softmax, rescale = make_softmax(cfg)
    pack_pairs = make_pack_pairs(cfg.dtype, bn // 2)
    issue_qk, issue_pv = _make_products(cfg)
    take_turn, give_turn, first_turn = make_turns(cfg)

    @T.macro
    def scores(regs, j, row, tile, place):
        if _needs_mask(cfg, j, tile.qb * cfg.bm + place.c * WG_M, place.seq_len):
            softmax(regs, j * bn, row, place.seq_len, place.tid % 4, True)
        else:
            softmax(regs, j * bn, row, place.seq_len, place.tid % 4, False)

    @T.macro
    def pack(regs):
        pack_pairs(regs.P.local(), regs.S.local())

    @T.macro
    def start(bars, regs, tile, place):
        if cfg.persistent:  # this consumer's Q rows, of the CTA's tile i
            T.cuda.mbarrier_wait_phase(bars.q_full.sub[place.c, :], tile.i % 2)
        else:  # all of Q, on one barrier
            T.cuda.mbarrier_wait_phase(bars.q_full.sub[0, :], 0)
        for h in T.unroll(2):
            regs.m[h] = T.float32(NEG_INF)
            regs.l[h] = T.float32(0)
        first_turn(place.c, tile.i)

    release_here = cfg.persistent and cfg.o_tile != "q"  # else after O's TMA store has read Q's rows (.o_store)
    signal_k_read = make_signal_k_read(cfg)
    ring, keep_last = cfg.ring, cfg.o_tile == "kv"  # "kv": the last block's stage stages O (.o_store)

    @T.macro
    def release_q(bars, tile, place):
        if release_here:  # this consumer's Q K^T products have retired: the producer may load its next Q rows
            release_stage(bars.q_empty, place.c, place.tid, 1)
        signal_k_read(bars, place.c, tile.i, place.tid)  # ... nor K's stage, where the other consumer stages O

    @T.macro
    def release_kv(bars, tile, j, tid):  # the stage of block j, or with v_ring K's half of it
        if keep_last:  # the last block's stage (K's half) is released by the epilogue, after O's store read it
            if j < tile.n_kv - 1:
                ring.release(bars.empty, ring.slot(tile.done + j), tid)
        else:
            ring.release(bars.empty, ring.slot(tile.done + j), tid)

    v_ring = cfg.v_ring
    v_bar = cfg.stages if v_ring else 0  # V's half of stage s: barriers stages + s (else the stage's own)

    @T.macro
    def release_k(bars, tile, j, tid):  # after block j's Q K^T retired
        if v_ring:
            release_kv(bars, tile, j, tid)

    @T.macro
    def release_v(bars, tile, j, tid):  # after block j's P V retired (not the tile's last block without v_ring)
        ring.release(bars.empty, ring.slot(tile.done + j) + v_bar, tid)

    @T.macro
    def release_block(bars, tile, j, tid):  # after block j's P V retired, j possibly the tile's last
        if v_ring:
            release_v(bars, tile, j, tid)
        else:
            release_kv(bars, tile, j, tid)

    @T.macro
    def wait_v(bars, tile, j):  # before block j's P V (with v_ring: V's half; else the stage was waited for)
        if v_ring:
            ring.wait(bars.full, ring.slot(tile.done + j) + v_bar, tile.done + j, None)

    return SimpleNamespace(issue_qk=issue_qk, issue_pv=issue_pv, scores=scores, rescale=rescale, pack=pack,
                           start=start, release_q=release_q, release_k=release_k, release_v=release_v,
                           release_block=release_block, wait_v=wait_v, take_turn=take_turn, give_turn=give_turn)


def _serial(cfg: AttentionConfig, st: SimpleNamespace):
    ring = cfg.ring

    @T.macro
    def consume(smem, bars, regs, tile, place):
        st.start(bars, regs, tile, place)
        row = first_row(tile.qb, place.c, place.tid, cfg.bm)
        for j in T.serial(tile.n_kv):
            ring.wait(bars.full, ring.slot(tile.done + j), tile.done + j, None)
            st.take_turn(place.c)
            st.issue_qk(regs.S, smem.sq, smem.sk, ring.slot(tile.done + j), place.c)
            st.give_turn(place.c, j, tile.n_kv, tile.last)
            T.ptx["wgmma.wait_group.sync.aligned"](0)
            st.release_k(bars, tile, j, place.tid)
            st.scores(regs, j, row, tile, place)
            st.rescale(regs)  # at j = 0 O is not yet written: the first P V has scale_d false
            st.pack(regs)
            st.wait_v(bars, tile, j)
            st.issue_pv(regs.O, regs.P, smem.sv, ring.slot(tile.done + j), j > 0)
            T.ptx["wgmma.wait_group.sync.aligned"](0)
            st.release_block(bars, tile, j, place.tid)
        st.release_q(bars, tile, place)

    return consume


def _overlapped(cfg: AttentionConfig, st: SimpleNamespace):
    ring = cfg.ring

    @T.macro
    def consume(smem, bars, regs, tile, place):
        st.start(bars, regs, tile, place)
        row = first_row(tile.qb, place.c, place.tid, cfg.bm)
        ring.wait(bars.full, ring.slot(tile.done), tile.done, None)
        st.take_turn(place.c)
        st.issue_qk(regs.S, smem.sq, smem.sk, ring.slot(tile.done), place.c)
        st.give_turn(place.c, 0, tile.n_kv, tile.last)
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        st.release_k(bars, tile, 0, place.tid)
        if tile.n_kv == 1:
            st.release_q(bars, tile, place)  # the tile's one Q K^T has retired
        st.scores(regs, 0, row, tile, place)
        st.pack(regs)
        for j in T.serial(1, tile.n_kv):
            ring.wait(bars.full, ring.slot(tile.done + j), tile.done + j, None)
            st.take_turn(place.c)
            st.issue_qk(regs.S, smem.sq, smem.sk, ring.slot(tile.done + j), place.c)
            st.wait_v(bars, tile, j - 1)
            st.issue_pv(regs.O, regs.P, smem.sv, ring.slot(tile.done + j - 1), j > 1)
            st.give_turn(place.c, j, tile.n_kv, tile.last)
            T.ptx["wgmma.wait_group.sync.aligned"](1)  # Q K_j^T retired; P_{j-1} V_{j-1} may still run
            st.release_k(bars, tile, j, place.tid)
            if j == tile.n_kv - 1:
                st.release_q(bars, tile, place)  # the tile's last Q K^T has retired
            st.scores(regs, j, row, tile, place)
            T.ptx["wgmma.wait_group.sync.aligned"](0)
            st.release_v(bars, tile, j - 1, place.tid)
            st.rescale(regs)
            st.pack(regs)
        st.wait_v(bars, tile, tile.n_kv - 1)
        st.issue_pv(regs.O, regs.P, smem.sv, ring.slot(tile.done + tile.n_kv - 1), tile.n_kv > 1)
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        st.release_block(bars, tile, tile.n_kv - 1, place.tid)

    return consume


def make_consumer(cfg: AttentionConfig):
    """The macro ``consume(smem, bars, regs, tile, place)`` (:mod:`.state`'s
    :class:`~.state.Shared`, :class:`~.state.Barriers`, :class:`~.state.Registers`,
    :class:`~.state.Tile`, :class:`~.state.Place`; ``qb`` below is ``tile.qb``, ``c`` is
    ``place.c``, and so on): consumer ``c`` (0 .. ``cfg.consumers - 1``) computes rows
    ``64 c ..`` of query block ``qb`` over key/value blocks ``0 .. n_kv - 1``, in the
    schedule ``cfg.overlap`` names (see the module docstring); with ``cfg.pingpong`` the
    consumers issue their products in turns (:mod:`.turns`; ``last``: this is the CTA's
    last tile).  It is the CTA's tile ``i`` (persistent: its Q rows' phase ``i % 2`` on
    ``q_full[c]``; else Q on ``q_full[0]``);
    block ``j`` is in stage ``(done + j) % stages`` of the ring.  With ``cfg.persistent``
    each consumer arrives on ``q_empty[c]`` once its last ``Q K^T`` has retired, so the
    producer loads its next tile's Q rows during this tile's last ``P V`` and epilogue."""
    steps = _make_steps(cfg)
    return _overlapped(cfg, steps) if cfg.overlap else _serial(cfg, steps)
