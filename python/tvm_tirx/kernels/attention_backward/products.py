"""The five matrix products of one iteration, as ``wgmma`` calls of a consumer warpgroup.

With ``c`` the consumer (its keys ``K_c``, ``V_c``: 64 rows of ``sk[c]``, ``sv[c]``) and
the stage's Q and dO blocks (64 rows each):

* ``S^T = K_c Q^T`` and ``dP^T = V_c dO^T`` (64 x 64, ss): A and B K-major, one call per
  64-column chunk of head_dim (4 k16 steps each), the first overwriting the accumulator;
* ``dV += P^T dO`` and ``dK += dS^T Q`` (64 x head_dim, rs): A the packed ``P^T`` /
  ``dS^T`` registers (a score accumulator's words are the A fragment of the same columns,
  PTX ISA 9.7.15.5.1.1), B the stage's dO / Q read N-major (the transpose immediate) --
  one instruction of N = head_dim per k16 step of the 64 queries;
* ``dQ = dS K_c`` (64 queries x head_dim, ss): A ``dS^T`` from ``sds[c]`` read M-major,
  B ``sk[c]`` read N-major (both transposed, PTX ISA 9.7.15.5.1.2).

Each macro issues its calls after a ``wgmma.fence`` and closes them into one group
(``commit_group``); the caller waits.
"""

from __future__ import annotations

from tvm.script import tirx as T

from .config import BackwardConfig

__all__ = ["make_products"]


def make_products(cfg: BackwardConfig):
    """``(scores, grads)``: the macros ``scores(smem, regs, s, c)`` (``S^T`` and ``dP^T``
    from stage ``s``) and ``grads(smem, regs, s, c, accumulate)`` (``dV``, ``dK`` -- added
    to when ``accumulate``, else overwritten -- and ``dQ``, always overwritten)
    (:class:`.state.Shared`, :class:`.state.Registers`)."""
    ops, chunks, head_dim = cfg.operands, cfg.chunks, cfg.head_dim
    kv, qdo, qdo_n, ds, k_n = ops["kv"], ops["qdo"], ops["qdo_n"], ops["ds"], ops["k_n"]

    @T.macro
    def scores(smem, regs, s, c):
        T.ptx["wgmma.fence.sync.aligned"]()
        for cc in T.unroll(chunks):
            T.cuda.tile.apply(T.ptx[cfg.mma_scores], regs.S, kv.mma_view(smem.sk.sub[c], cc, 0, kv.rows, 16),
                              qdo.mma_view(smem.sq.sub[s], cc, 0, qdo.rows, 16), scope="warpgroup", scale_d=cc > 0)
        for cc in T.unroll(chunks):
            T.cuda.tile.apply(T.ptx[cfg.mma_scores], regs.dP, kv.mma_view(smem.sv.sub[c], cc, 0, kv.rows, 16),
                              qdo.mma_view(smem.sdo.sub[s], cc, 0, qdo.rows, 16), scope="warpgroup", scale_d=cc > 0)
        T.ptx["wgmma.commit_group.sync.aligned"]()

    @T.macro
    def grads(smem, regs, s, c, accumulate):
        T.ptx["wgmma.fence.sync.aligned"]()
        T.cuda.tile.apply(T.ptx[cfg.mma_grads], regs.dV, regs.Pw, qdo_n.mma_view(smem.sdo, s, 0, head_dim, 16),
                          scope="warpgroup", scale_d=accumulate)
        T.cuda.tile.apply(T.ptx[cfg.mma_grads], regs.dK, regs.dSw, qdo_n.mma_view(smem.sq, s, 0, head_dim, 16),
                          scope="warpgroup", scale_d=accumulate)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        T.ptx["wgmma.fence.sync.aligned"]()
        T.cuda.tile.apply(T.ptx[cfg.mma_grads], regs.dQ, ds.mma_view(smem.sds, c, 0, ds.rows, 16),
                          k_n.mma_view(smem.sk, c, 0, head_dim, 16), scope="warpgroup", scale_d=False)
        T.ptx["wgmma.commit_group.sync.aligned"]()

    return scores, grads
