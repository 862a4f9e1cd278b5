"""The online softmax of one block of scores, in a consumer's registers.

A consumer thread holds, of its warpgroup's ``S (64, bn)`` fp32 scores, register ``r =
4 jj + 2 h + e``: row ``16 w + 8 h + g`` and column ``8 jj + 2 t + e`` (warp ``w``, lane
``4 g + t``; PTX ISA 9.7.15.5.1.1).  A row is spread over the four lanes ``4 g .. 4 g + 3``,
so a row maximum is the thread's own maximum reduced over those lanes
(``T.cuda.tile.reduce_lanes``, two ``shfl.sync.bfly``).  Scores are kept in the log2
domain (``s * scale * log2(e)``), exponentiated with ``exp2``; the running maximum ``m``
and sum ``l`` are per thread and row half, ``l`` summed over the lanes only at the end.
"""

from __future__ import annotations

from tvm.script import tirx as T

from .config import AttentionConfig

__all__ = ["make_softmax"]

NEG_INF = -float("inf")


def make_softmax(cfg: AttentionConfig):
    """The macros ``softmax(regs, key0, row, seq_len, t, masked)`` and ``rescale(regs)``
    (``regs`` a :class:`.state.Registers`).

    ``S`` holds block scores, ``O`` the output accumulators ``(chunks, 64, 64)``; ``m``,
    ``l``, ``alpha`` are ``(2,)`` float32 registers (row halves), ``rmax`` ``(2, 1)``.
    ``key0`` is the block's first key, ``row`` the thread's first query row (``row + 8``
    is the other half).  With ``masked`` (a Python bool: the block crosses ``seq_len`` or,
    causal, the diagonal) scores of keys ``>= seq_len`` (or ``> row``) become ``-inf``.
    Afterwards ``S`` holds ``exp2(s * scale_log2 - m)``, ``l`` the running sums and
    ``alpha = exp2(m_old - m)``, by which ``rescale`` multiplies ``O`` -- a step of its
    own, so that a schedule can run the softmax while a ``P V`` wgmma still writes ``O``.
    """
    n_regs, o_regs, scale, causal = cfg.bn // 2, cfg.chunks * 32, cfg.scale_log2, cfg.causal

    @T.macro
    def mask(sl, key0, row, seq_len, t):
        for r in T.unroll(n_regs):
            key = key0 + r // 4 * 8 + t * 2 + r % 2
            if causal:
                sl[r] = T.if_then_else(T.And(key < seq_len, key <= row + r // 2 % 2 * 8), sl[r], T.float32(NEG_INF))
            else:
                sl[r] = T.if_then_else(key < seq_len, sl[r], T.float32(NEG_INF))

    @T.macro
    def softmax(regs, key0, row, seq_len, t, masked):
        sl = regs.S.local()
        if masked:
            mask(sl, key0, row, seq_len, t)
        for h in T.unroll(2):
            regs.rmax[h, 0] = T.float32(NEG_INF)
            for r in T.unroll(n_regs // 2):
                regs.rmax[h, 0] = T.max(regs.rmax[h, 0], sl[r // 2 * 4 + 2 * h + r % 2])
        T.cuda.tile.reduce_lanes(T.ptx["max.f32"], regs.rmax, lanes=4)
        for h in T.unroll(2):
            regs.alpha[h] = T.max(regs.m[h], regs.rmax[h, 0] * T.float32(scale))  # the new maximum, for now
            regs.rmax[h, 0] = regs.alpha[h]
            regs.alpha[h] = T.exp2(regs.m[h] - regs.alpha[h])
            regs.m[h] = regs.rmax[h, 0]
        for r in T.unroll(n_regs):
            sl[r] = sl[r] * T.float32(scale) - regs.m[r // 2 % 2]
        T.cuda.tile.apply(T.ptx["ex2.approx.ftz.f32"], sl.view(n_regs, 1), sl.view(n_regs, 1))
        for h in T.unroll(2):
            regs.l[h] = regs.l[h] * regs.alpha[h]
            for r in T.unroll(n_regs // 2):
                regs.l[h] = regs.l[h] + sl[r // 2 * 4 + 2 * h + r % 2]

    @T.macro
    def rescale(regs):
        ol = regs.O.local()
        for r in T.unroll(o_regs):
            ol[r] = ol[r] * regs.alpha[r // 2 % 2]

    return softmax, rescale
