"""``P^T`` and ``dS^T`` of one iteration, in a consumer's registers.

A consumer thread holds, of its warpgroup's ``S^T`` and ``dP^T`` (64 keys x ``BQ``
queries, fp32; ``BQ`` the config's ``block_q``, 64 or 128), register ``r = 4 j + 2 h +
e``: key ``128 kb + 64 c + 16 w + 8 h + g`` (the row) and query ``BQ qb + 8 j + 2 t + e``
(the column), for warp ``w`` of the warpgroup and lane ``4 g + t`` (PTX ISA
9.7.15.5.1.1).  Its ``BQ / 4`` query columns do not depend on ``g``
or ``w``: it reads their ``LSE * log2(e)`` and ``Dsum`` values from the ring stage's
``srows`` (copied there by the producer, 0 past ``seq_len``).  Then

* ``P^T = exp2(S^T * scale * log2(e) - LSE * log2(e))`` (``ex2.approx.ftz.f32``, PTX ISA
  9.7.3; LSE is the natural log of the row sum, so this is the forward's softmax);
* blocks that cross ``seq_len`` or (causal) hold a key after a query: ``P^T = 0`` there,
  by selection, so that an overflowing ``exp2`` of a masked pair never reaches a product;
* ``dS^T = P^T * (dP^T - Dsum) * scale``: the softmax scale is folded into ``dS``, so
  that ``dK = sum dS^T Q`` and ``dQ = dS K`` come out scaled;
* both packed to 16-bit pairs, the rs wgmma's A fragments ``Pw`` and ``dSw``.

(Read from global memory by each thread instead, the 32 values were held in registers and
spilled: :mod:`.config`'s register budget.)
"""

from __future__ import annotations

from tvm.script import tirx as T

from ...tile.fragments import accumulator_col, accumulator_row
from ..pairs import make_pack_pairs
from .config import BK, WG_K, BackwardConfig

__all__ = ["make_gradients", "first_key", "register_offsets"]


def first_key(kb, c):
    """The first key of consumer ``c`` of key block ``kb``: ``128 kb + 64 c``."""
    return kb * BK + c * WG_K


def _needs_mask(cfg: BackwardConfig, k0, q0, seq_len):
    """Whether the block of 64 keys ``k0 ..`` and ``block_q`` queries ``q0 ..`` crosses
    ``seq_len`` or, causal, holds a key after a query (its last key after its first query)."""
    past_end = T.Or(k0 + WG_K > seq_len, q0 + cfg.block_q > seq_len)
    return T.Or(past_end, k0 + WG_K - 1 > q0) if cfg.causal else past_end


def _keep(causal: bool, key, query, seq_len):
    """Whether the pair (key, query) counts: both before ``seq_len`` and, causal, the key
    not after the query."""
    inside = T.And(key < seq_len, query < seq_len)
    return T.And(inside, key <= query) if causal else inside


def register_offsets(r):
    """``(key, query)``: how far register ``r = 4 j + 2 h + e`` of a score accumulator lies from
    the thread's first key and query (``8 h`` and ``8 j + e``; PTX ISA 9.7.15.5.1.1)."""
    return r // 2 % 2 * 8, r // 4 * 8 + r % 2


def _keep_at(causal: bool, room, key, query):
    """:func:`_keep` of the thread's key ``key0 + key`` and query ``query0 + query`` (``key``,
    ``query`` Python ints: the register's offsets ``8 h`` and ``8 j + e``) from ``room =
    (seq_len - key0, seq_len - query0, query0 - key0)``, computed once per block: each
    register's test compares a value with a constant, so that no per-register key or query
    index stays live across the loop."""
    keys_left, queries_left, lead = room
    inside = T.And(keys_left > key, queries_left > query)
    return T.And(inside, lead >= key - query) if causal else inside


def make_gradients(cfg: BackwardConfig):
    """``(probabilities, finish, gradients)``: the macros ``probabilities(regs, srows, k0,
    q0, place)`` (``regs.S`` becomes ``P^T``, in float32), ``finish(regs, srows, place)``
    (``regs.dP`` becomes ``dS^T`` times the scale, then both are packed into ``regs.Pw``
    and ``regs.dSw``) and ``gradients`` (both in turn, the arguments of
    ``probabilities``); ``regs`` a :class:`.state.Registers`, ``srows`` the stage's ``(2,
    block_q)`` float32 LSE / Dsum rows, ``k0`` the warpgroup's first key, ``q0`` the block's
    first query, ``place`` a :class:`.state.Place`.  Apart, a schedule computes ``P^T``
    while ``dP^T`` is still in flight (``overlap``, :mod:`.consumer`)."""
    scale, scale_log2, causal = cfg.softmax_scale, cfg.scale_log2, cfg.causal
    regs_per_thread = cfg.block_q * WG_K // 128  # S^T / dP^T registers of a thread
    pack = make_pack_pairs(cfg.dtype, regs_per_thread)

    @T.macro
    def mask(sl, k0, q0, place):
        key0 = accumulator_row(k0, place.tid, 0)
        query0 = accumulator_col(q0, place.tid, 0, 0)
        room = T.meta_var((place.seq_len - key0, place.seq_len - query0, query0 - key0))
        for r in T.unroll(regs_per_thread):  # register r = 4 j + 2 h + e: key0 + 8 h, query0 + 8 j + e
            sl[r] = T.if_then_else(_keep_at(causal, room, *register_offsets(r)), sl[r], T.float32(0))

    @T.macro
    def p_values(regs, srows, k0, q0, place):
        sl = regs.S.local()
        for r in T.unroll(regs_per_thread):  # column 8 j + 2 t + e of register r = 4 j + 2 h + e
            sl[r] = sl[r] * T.float32(scale_log2) - srows[0, accumulator_col(0, place.tid, r // 4, r % 2)]
        T.cuda.tile.apply(T.ptx["ex2.approx.ftz.f32"], sl.view(regs_per_thread, 1), sl.view(regs_per_thread, 1))
        if _needs_mask(cfg, k0, q0, place.seq_len):
            mask(sl, k0, q0, place)

    @T.macro
    def finish(regs, srows, place):  # packed last: S + dP + dV + dK is the peak (.config)
        sl, dl = regs.S.local(), regs.dP.local()
        for r in T.unroll(regs_per_thread):
            dl[r] = sl[r] * (dl[r] - srows[1, accumulator_col(0, place.tid, r // 4, r % 2)]) * T.float32(scale)
        pack(regs.Pw.local(), sl)
        pack(regs.dSw.local(), dl)

    @T.macro
    def gradients(regs, srows, k0, q0, place):
        p_values(regs, srows, k0, q0, place)
        finish(regs, srows, place)

    return p_values, finish, gradients
