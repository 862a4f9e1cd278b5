"""The five matrix products of one iteration, as ``wgmma`` calls of a consumer warpgroup.

With ``c`` the consumer (its keys ``K_c``, ``V_c``: 64 rows of ``sk[c]``, ``sv[c]``) and
the stage's Q and dO blocks (``BQ`` rows each: the config's ``block_q``, 64, or 128 with
``dq_split="rows"``):

* ``S^T = K_c Q^T`` and ``dP^T = V_c dO^T`` (64 x BQ, ss): A and B K-major, one call per
  64-column chunk of head_dim (4 k16 steps each), the first overwriting the accumulator;
* ``dV += P^T dO`` and ``dK += dS^T Q`` (64 x head_dim, rs): A the packed ``P^T`` /
  ``dS^T`` registers (a score accumulator's words are the A fragment of the same columns,
  PTX ISA 9.7.15.5.1.1), B the stage's dO / Q read N-major (the transpose immediate) --
  one instruction of N = head_dim per k16 step of the BQ queries; with ``scores_ahead``
  ``dK``'s A is ``dS^T`` as stored in ``sds[c]`` for ``dQ`` (ss, K-major: keys by queries),
  so that no register of ``dS^T`` stays live under ``dK`` (:mod:`.consumer`);
* ``dQ = dS K_c`` (64 queries x head_dim, ss): A ``dS^T`` from ``sds[c]`` read M-major,
  B ``sk[c]`` read N-major (both transposed, PTX ISA 9.7.15.5.1.2);
* or, ``dq_split="columns"``, ``dQ[:, c D/2 ..] = dS K[:, c D/2 ..]`` (64 queries x D/2
  over all 128 keys): one call of N = D/2 and K = 128 keys (8 k16 steps), A both
  ``sds`` tiles (adjacent: one 128-deep M-major operand), B columns ``c D/2 ..`` of K's
  128 keys -- ``sk`` is stored chunk-major then, so that a chunk's two 64-key halves are
  adjacent and one descriptor steps 2 KiB per k16 step through both;
* or, ``dq_split="rows"`` (query blocks of 128 rows, head_dim 64), ``dQ[64 c ..] = dS[64 c
  ..] K`` (64 queries x D over all 128 keys): one call of N = D and K = 128 keys, A query
  chunk ``c`` of both ``sds`` tiles (stored chunk-major, so that a chunk's 128 keys are
  adjacent), B all of K's 128 keys (chunk-major, as with ``"columns"``).

Each macro issues its calls after a ``wgmma.fence`` and closes them into groups
(``commit_group``): the default schedule's ``scores`` and ``grads``, and the pieces the
``overlap`` schedule issues apart (:mod:`.consumer`); the caller waits.
"""

from __future__ import annotations

from typing import NamedTuple

from tvm.script import tirx as T

from ..attention.config import CHUNK
from ..gemm.operands import Operand
from .config import BK, BQ, DQ_ROWS, BackwardConfig

__all__ = ["Products", "make_products"]


def _ds_all(cfg: BackwardConfig, sds):
    """Both consumers' ``dS^T`` as one M-major A of 128 keys, ``(1, 8, 64, 16)``: the two
    tiles are adjacent, and K steps of 16 keys are 2 KiB apart across the seam too."""
    return Operand("A", "m", BQ, BK, cfg.dtype).mma_view(sds.view(1, 1, BK, BQ), 0, 0, BQ, 16)


def _k_columns(cfg: BackwardConfig, sk, c):
    """Columns ``c D/2 ..`` of the CTA's 128 keys of K as the N-major B of ``dQ``, ``(8, D/2,
    16)``.  With ``"columns"`` ``sk`` is stored chunk-major (:func:`.kernel.consumer_tiles`): the
    two key halves of a 64-column chunk are adjacent, so one descriptor steps through the
    128 keys.  D 128: chunk ``c``; D 64: half of the one chunk, ``c`` a Python int (the
    tile checker takes a sub-view inside a swizzle row only at a static offset: the kernel
    runs one copy of the consumer per warpgroup, :func:`.kernel.specialised`; a branch or
    a predicate around the wgmma made ptxas serialise them, C7520).  Consumer 1's
    descriptor then starts 64 bytes into the 128-byte row, base offset 0: address bits
    7-9 of the start are those of the pattern's first row (PTX ISA 9.7.15.5.1.2).
    ``"rows"`` (head_dim 64) takes ``c = 0`` with ``dq_columns`` = 64: all of K."""
    half, chunks = cfg.dq_columns, cfg.chunks
    keys = sk.permute(1, 0, 2, 3).view(chunks, 1, BK, CHUNK)  # the stored order: (chunk, 128 keys, 64)
    if half >= CHUNK:
        return Operand("B", "n", half, BK, cfg.dtype).mma_view(keys, c, 0, half, 16)
    if not isinstance(c, int):
        raise TypeError("dq_split='columns' at head_dim 64: the consumer must be a Python int")
    cols = keys.sub[0, 0:1, :, c * half : c * half + half].view(1, BK // 16, 16, half)
    return cols.permute(1, 0, 3, 2).view(BK // 16, half, 16)


def _ds_rows(cfg: BackwardConfig, sds, c):
    """``"rows"``: queries ``64 c ..`` of both consumers' ``dS^T`` as one M-major A of 128
    keys, ``(1, 8, 64, 16)``: ``sds`` is stored chunk-major (:func:`.kernel.consumer_tiles`),
    so query chunk ``c``'s two 64-key tiles are adjacent."""
    stored = sds.permute(1, 0, 2, 3).view(cfg.block_q // CHUNK, 1, BK, CHUNK)
    return Operand("A", "m", DQ_ROWS, BK, cfg.dtype).mma_view(stored, c, 0, DQ_ROWS, 16)


def _make_dq(cfg: BackwardConfig):
    """The macro ``dq(smem, regs, c)``: ``regs.dQ`` = consumer ``c``'s ``dQ`` share of the
    iteration (overwritten), issued after a ``wgmma.fence``, not committed."""
    ds, k_n, head_dim = cfg.operands["ds"], cfg.operands["k_n"], cfg.head_dim

    @T.macro
    def dq_keys(smem, regs, c):
        T.cuda.tile.apply(T.ptx[cfg.mma_dq], regs.dQ, ds.mma_view(smem.sds, c, 0, ds.rows, 16),
                          k_n.mma_view(smem.sk, c, 0, head_dim, 16), scope="warpgroup", scale_d=False)

    @T.macro
    def dq_columns(smem, regs, c):
        T.cuda.tile.apply(T.ptx[cfg.mma_dq], regs.dQ, _ds_all(cfg, smem.sds), _k_columns(cfg, smem.sk, c),
                          scope="warpgroup", scale_d=False)

    @T.macro
    def dq_rows(smem, regs, c):
        T.cuda.tile.apply(T.ptx[cfg.mma_dq], regs.dQ, _ds_rows(cfg, smem.sds, c), _k_columns(cfg, smem.sk, 0),
                          scope="warpgroup", scale_d=False)

    return {"keys": dq_keys, "columns": dq_columns, "rows": dq_rows}[cfg.dq_split]


class Products(NamedTuple):
    """The product macros of :func:`make_products` (``smem`` a :class:`.state.Shared`,
    ``regs`` a :class:`.state.Registers`, ``step`` a :class:`.state.Step`, ``c`` the
    consumer)."""

    #: ``scores(smem, regs, s, c)``: ``S^T`` and ``dP^T`` from stage ``s``, one group
    scores: object
    #: ``grads(smem, regs, step, c)``: ``dV`` and ``dK`` (one group), waits, then ``dQ``
    grads: object
    #: ``scores_apart(smem, regs, s, c)``: ``S^T`` (a group), then ``dP^T`` (a group)
    scores_apart: object
    #: ``dv(smem, regs, step)``: ``dV`` alone, one group
    dv: object
    #: ``dq_dk(smem, regs, step, c)``: ``dQ`` (a group), then ``dK`` (a group)
    dq_dk: object
    #: ``scores_s(smem, regs, s, c)`` and ``scores_dp(smem, regs, s, c)``: ``S^T`` alone, ``dP^T``
    #: alone (a group each; ``scores_ahead`` issues them in different iterations)
    scores_s: object
    scores_dp: object


def make_products(cfg: BackwardConfig) -> Products:
    """The product macros of one iteration (:class:`Products`): ``dV`` and ``dK`` are added
    to after the first iteration (overwritten in it), ``dQ`` always overwritten.  Every
    macro issues its calls after a ``wgmma.fence`` and commits them; the caller waits."""
    ops, chunks, head_dim = cfg.operands, cfg.chunks, cfg.head_dim
    kv, qdo, qdo_n = ops["kv"], ops["qdo"], ops["qdo_n"]
    dq = _make_dq(cfg)

    @T.macro
    def score(acc, tiles, s, c, ring):
        for cc in T.unroll(chunks):
            T.cuda.tile.apply(T.ptx[cfg.mma_scores], acc, kv.mma_view(tiles.sub[c], cc, 0, kv.rows, 16),
                              qdo.mma_view(ring.sub[s], cc, 0, qdo.rows, 16), scope="warpgroup", scale_d=cc > 0)

    def scores_in(groups: int):
        """``S^T`` and ``dP^T`` in one group, or in two (``S^T`` first)."""

        @T.macro
        def scores(smem, regs, s, c):
            T.ptx["wgmma.fence.sync.aligned"]()
            score(regs.S, smem.sk, s, c, smem.sq)
            if groups == 2:
                T.ptx["wgmma.commit_group.sync.aligned"]()
            score(regs.dP, smem.sv, s, c, smem.sdo)
            T.ptx["wgmma.commit_group.sync.aligned"]()

        return scores

    def one_score(name: str):
        """``S^T`` (``"S"``, from K and Q) or ``dP^T`` (``"dP"``, from V and dO) alone, one group."""

        @T.macro
        def scores(smem, regs, s, c):
            T.ptx["wgmma.fence.sync.aligned"]()
            if name == "S":
                score(regs.S, smem.sk, s, c, smem.sq)
            else:
                score(regs.dP, smem.sv, s, c, smem.sdo)
            T.ptx["wgmma.commit_group.sync.aligned"]()

        return scores

    @T.macro
    def grad(acc, a, ring, step):
        T.cuda.tile.apply(T.ptx[cfg.mma_grads], acc, a, qdo_n.mma_view(ring, step.s, 0, head_dim, 16),
                          scope="warpgroup", scale_d=step.g > 0)

    steps = CHUNK // 16  # k16 steps of one 64-query chunk (a Python int: the view's extents stay static)

    @T.macro
    def dk_shared(smem, regs, step, c):
        """``dK += dS^T Q`` with A ``dS^T`` from ``sds[c]``, one call per 64-query chunk (two
        with ``"rows"``: ``sds[c]``'s chunks are apart, each its own K-major tile)."""
        q_n = qdo_n.mma_view(smem.sq, step.s, 0, head_dim, 16)  # (block_q / 16, head_dim, 16)
        for cc in T.unroll(cfg.block_q // CHUNK):
            T.cuda.tile.apply(T.ptx[cfg.mma_grads], regs.dK, kv.mma_view(smem.sds.sub[c], cc, 0, kv.rows, 16),
                              q_n.sub[cc * steps : cc * steps + steps, :, :], scope="warpgroup",
                              scale_d=T.Or(step.g > 0, cc > 0))

    @T.macro
    def grads(smem, regs, step, c):
        T.ptx["wgmma.fence.sync.aligned"]()
        grad(regs.dV, regs.Pw, smem.sdo, step)
        grad(regs.dK, regs.dSw, smem.sq, step)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        T.ptx["wgmma.fence.sync.aligned"]()
        dq(smem, regs, c)
        T.ptx["wgmma.commit_group.sync.aligned"]()

    @T.macro
    def dv(smem, regs, step):
        T.ptx["wgmma.fence.sync.aligned"]()
        grad(regs.dV, regs.Pw, smem.sdo, step)
        T.ptx["wgmma.commit_group.sync.aligned"]()

    @T.macro
    def dq_dk(smem, regs, step, c):
        T.ptx["wgmma.fence.sync.aligned"]()
        dq(smem, regs, c)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        if cfg.scores_ahead:  # dS^T from sds[c] (K-major, as K for S^T): the packed registers free at once
            dk_shared(smem, regs, step, c)
        else:
            grad(regs.dK, regs.dSw, smem.sq, step)
        T.ptx["wgmma.commit_group.sync.aligned"]()

    return Products(scores_in(1), grads, scores_in(2), dv, dq_dk, one_score("S"), one_score("dP"))
