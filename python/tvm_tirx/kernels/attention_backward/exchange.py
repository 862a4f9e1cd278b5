"""What a consumer warpgroup passes through shared memory: ``dS^T`` for the ``dQ`` product,
and its ``dQ`` block for the TMA reduce-add into ``dQacc``.

Both tiles are the warpgroup's own (``sds[c]``, ``sdq[c]``); named barrier ``1 + c``
joins its 128 threads (PTX ISA 9.7.13.1), and the named-barrier family checks that
exactly those threads use it.

* ``share_ds``: each thread stores its ``dS^T`` words (``st.shared.b32``, the packed
  accumulator map) into the 128-byte swizzled ``sds[c]``, then ``fence.proxy.async``
  (the wgmma reads shared memory through the async proxy, PTX ISA 8.6 and
  9.7.13.4); thread 0 of the warpgroup waits until the previous iteration's reduce has
  read ``sdq[c]`` (``cp.async.bulk.wait_group.read 0``), and the barrier publishes both.
* ``reduce_dq``: each thread stores its ``dQ`` accumulators (``st.shared.v2.f32``) into
  ``sdq[c]`` (``head_dim / 32`` boxes of 64 rows x 128 bytes), ``fence.proxy.async``,
  the barrier, and thread 0 issues one ``cp.reduce.async.bulk.tensor.4d ... .add`` per
  box into ``dQacc[b, 64 qb .., h, 32 i ..]`` (PTX ISA 9.7.9.25.5.2) and commits the
  group.  The TMA skips the rows past ``seq_len``; the L2 adds the boxes of the CTAs
  working on the same query block in any order (not deterministic in the last bits).

Why TMA rather than ``red.global.add.f32`` per element: one instruction per 64 x 32 box
instead of ``head_dim / 4`` vector reductions per thread and block, no guard per row
(the TMA clips at ``seq_len``), and the additions are done by the L2 in bulk, as
FlashAttention-3's backward does; it costs ``2 x 64 x head_dim x 4`` bytes of shared
memory.
"""

from __future__ import annotations

from tvm.script import tirx as T

from ...tile.fragments import accumulator_layout, accumulator_tile
from .config import BQ, DQ_BOX, WG_K, BackwardConfig

__all__ = ["REDUCE", "make_exchange"]

REDUCE = "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group"


def make_exchange(cfg: BackwardConfig):
    """``(share_ds, reduce_dq, drain)``: the macros ``share_ds(smem, regs, place)``,
    ``reduce_dq(dQacc, smem, regs, keys, step, place)`` (:mod:`.state`'s named tuples:
    the block of batch entry ``keys.b``, query block ``step.qb`` of head ``step.h``) and
    ``drain(tid)`` (thread 0 of the warpgroup waits until its reduces are done, before
    the CTA exits)."""
    boxes = cfg.head_dim // DQ_BOX
    words = accumulator_layout(BQ, packed=True)

    @T.macro
    def sync(c):
        T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.Cast("uint32", 1 + c), count=T.uint32(128))

    @T.macro
    def share_ds(smem, regs, place):
        T.cuda.tile.apply(T.ptx["st.shared.b32"],
                          *accumulator_tile(smem.sds.sub[place.c, 0], regs.dSw.view(WG_K, BQ // 2, layout=words),
                                            "wgmma"), scope="warpgroup")
        T.ptx["fence.proxy.async.shared::cta"]()
        if place.tid % 128 == 0:
            T.ptx["cp.async.bulk.wait_group.read"](0)  # the previous reduce has read sdq[c]
        sync(place.c)

    @T.macro
    def reduce_dq(dQacc, smem, regs, keys, step, place):
        T.cuda.tile.apply(T.ptx["st.shared.v2.f32"], *accumulator_tile(smem.sdq.sub[place.c].permute(1, 0, 2),
                                                                       regs.dQ, "wgmma"), scope="warpgroup")
        T.ptx["fence.proxy.async.shared::cta"]()
        sync(place.c)
        if place.tid % 128 == 0:
            T.cuda.tile.apply(T.ptx[REDUCE], dQacc, smem.sdq.sub[place.c].view(boxes, 1, BQ, 1, DQ_BOX),
                              coords=(keys.b, step.qb * BQ, step.h, 0), coord_steps=((0, 0, 0, DQ_BOX),), swizzle=3)
            T.ptx["cp.async.bulk.commit_group"]()

    @T.macro
    def drain(tid):
        if tid % 128 == 0:
            T.ptx["cp.async.bulk.wait_group"](0)

    return share_ds, reduce_dq, drain
