"""What a consumer warpgroup passes through shared memory: ``dS^T`` for the ``dQ`` product,
and its ``dQ`` block for the TMA reduce-add into ``dQacc``.

With ``dq_split="keys"`` (the default) both tiles are the warpgroup's own (``sds[c]``,
``sdq[c]``); named barrier ``1 + c`` joins its 128 threads (PTX ISA 9.7.13.1), and the
named-barrier family checks that exactly those threads use it.  With ``"columns"`` (and
``"rows"``, alike in all that follows but the ``dQ`` block's place) each
consumer's ``dQ`` product reads both consumers' ``dS^T`` (:mod:`.products`), so:

* ``share_ds`` ends at named barrier :data:`JOIN` = 3 over both consumer warpgroups (256
  threads) instead of ``1 + c``: after it, both tiles of the iteration are written and
  fenced.  Ids 1 and 2 stay the per-warpgroup barriers of ``reduce_dq`` (``sdq[c]`` is
  the warpgroup's own), 0 is ``__syncthreads``.
* the hazard: consumer ``c`` overwriting ``sds[c]`` in iteration ``g + 1`` while the other
  consumer's ``dQ`` wgmma of iteration ``g`` still reads it.  Named barriers
  :data:`FREE` + ``c`` (4 and 5, 256 threads each) order them: after the wait of iteration ``g``
  that retires its ``dQ`` (``wait_group 0``; ``wait_group 1`` in the ``overlap`` schedule,
  where only ``dK`` may still run: its wgmma reads of both tiles retired, PTX ISA 9.7.15.7) consumer
  ``c'`` arrives (``barrier.arrive``, not waiting) on ``FREE + (1 - c')``, the barrier of
  the other consumer's tile; consumer ``c`` syncs on ``FREE + c`` before it writes
  ``sds[c]`` in iteration ``g + 1``.  Each barrier completes once per iteration ``g >=
  1``: 128 arrivals of one warpgroup and 128 of the other (the count, 256); the last
  iteration does not arrive, the first does not sync (nothing was read yet).  Its own
  reads of ``sds[c]`` are behind the writer's own ``wait_group 0``.  Double-buffering
  ``sds`` by iteration parity instead (the :data:`JOIN` of ``g + 1`` then proves the
  reads of ``g`` retired) cost 16 KiB of shared memory and, at head_dim 128 causal, a
  4-byte spill (the parity-dependent addresses).
* ``sdq[c]`` holds ``64 x D/2`` float32 (``D / 64`` boxes) and consumer ``c``'s boxes go
  to ``dQacc[.., c D/2 + 32 i ..]``: half the boxes of ``"keys"`` per consumer, each
  ``dQacc`` element of the block added once per CTA instead of twice.

* ``share_ds``: each thread stores its ``dS^T`` words (``st.shared.b32``, the packed
  accumulator map) into the 128-byte swizzled ``sds[c]``, then ``fence.proxy.async``
  (the wgmma reads shared memory through the async proxy, PTX ISA 8.6 and
  9.7.13.4); thread 0 of the warpgroup waits until the previous iteration's reduce has
  read ``sdq[c]`` (``cp.async.bulk.wait_group.read 0``), and the barrier publishes both.
* ``reduce_dq``: each thread stores its ``dQ`` accumulators (``st.shared.v2.f32``) into
  ``sdq[c]`` (``head_dim / 32`` boxes of 64 rows x 128 bytes), ``fence.proxy.async``,
  the barrier, and thread 0 issues one ``cp.reduce.async.bulk.tensor.4d ... .add`` per
  box into ``dQacc[b, 64 qb .., h, 32 i ..]`` (``"rows"``: rows ``128 qb + 64 c ..``; PTX
  ISA 9.7.9.25.5.2) and commits the group.  The TMA skips the rows past ``seq_len``; the L2 adds the boxes of the CTAs
  working on the same query block in any order (not deterministic in the last bits).
* ``deterministic=True`` fixes that order (:func:`await_turn`, :func:`pass_turn`): before its reduce,
  thread 0 of consumer ``c`` of key block ``kb`` spins until the block's count in
  ``order`` is ``2 kb + c`` (``ld.acquire.gpu``), and after it waits until the reduce is
  complete (``cp.async.bulk.wait_group 0``) and adds 1 to the count
  (``red.release.gpu``); ``fence.proxy.async.global`` on both sides orders the TMA's
  (async proxy) accesses with the count's (generic proxy; PTX ISA 8.6, 8.7).  Each
  element of ``dQacc`` then receives its partial sums in key order on every run.  A CTA
  only waits for CTAs of lower key blocks of its own head and batch entry, which have
  lower linear block indices in either launch order (``longest_first`` or not), so the
  GPU launches them before it and the waits cannot close a cycle.

Why TMA rather than ``red.global.add.f32`` per element: one instruction per 64 x 32 box
instead of ``head_dim / 4`` vector reductions per thread and block, no guard per row
(the TMA clips at ``seq_len``), and the additions are done by the L2 in bulk, as
FlashAttention-3's backward does; it costs ``2 x 64 x head_dim x 4`` bytes of shared
memory.
"""

from __future__ import annotations

from tvm.script import tirx as T

from ...tile.fragments import accumulator_layout, accumulator_tile
from ..attention.config import CHUNK
from .config import CONSUMERS, DQ_BOX, DQ_ROWS, WG_K, BackwardConfig

__all__ = ["REDUCE", "JOIN", "FREE", "make_exchange"]

REDUCE = "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group"
#: the named barrier of both consumer warpgroups, after ``dS^T`` is shared (``"columns"``, ``"rows"``)
JOIN = 3
#: ``FREE + c``: consumer ``c``'s ``sds[c]`` is no longer read by the other (``"columns"``, ``"rows"``)
FREE = 4


def _make_barriers(cfg: BackwardConfig):
    """``(sync, publish, claim, release)``: the macros ``sync(c)`` (the warpgroup's barrier
    ``1 + c``), ``publish(c)`` (``sync``, or :data:`JOIN` with ``"columns"`` / ``"rows"``), and,
    with those, ``claim(c)`` (sync on ``FREE + c``) and ``release(c)`` (arrive on
    ``FREE + 1 - c``); 128-thread warpgroups, PTX ISA 9.7.13.1."""
    pair = T.uint32(128 * CONSUMERS)

    @T.macro
    def sync(c):
        T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.Cast("uint32", 1 + c), count=T.uint32(128))

    @T.macro
    def join(c):  # pylint: disable=unused-argument
        T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.uint32(JOIN), count=pair)

    @T.macro
    def claim(c):
        T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.Cast("uint32", FREE + c), count=pair)

    @T.macro
    def release(c):
        T.cuda.tile.apply(T.ptx["barrier.arrive.aligned"], id=T.Cast("uint32", FREE + 1 - c), count=pair)

    return sync, (join if cfg.shares_ds else sync), claim, release


@T.macro
def await_turn(count, seen, turn):
    """``deterministic`` (see the module docstring), run by thread 0 of a consumer
    warpgroup before its reduce: spin until the int32 ``count`` (a one-element global
    view) equals ``turn`` (``seen``: an int32 ``(1,)`` register array)."""
    T.cuda.tile.apply(T.ptx["ld.acquire.gpu.global.b32"], seen, count)
    while seen[0] != turn:
        T.cuda.tile.apply(T.ptx["ld.acquire.gpu.global.b32"], seen, count)
    T.ptx["fence.proxy.async.global"]()  # the reduce (async proxy) after the acquire


@T.macro
def pass_turn(count):
    """``deterministic``, after the reduce: wait until its additions are done, then add 1
    to ``count``."""
    T.ptx["cp.async.bulk.wait_group"](0)
    T.ptx["fence.proxy.async.global"]()
    T.cuda.tile.apply(T.ptx["red.release.gpu.global.add.s32"], count, T.int32(1))


def make_exchange(cfg: BackwardConfig):
    """``(share_ds, release_ds, reduce_dq, drain)``: the macros ``share_ds(smem, regs, step,
    place)``, ``release_ds(keys, step, place)`` (``"columns"`` / ``"rows"``: after the iteration's
    ``dQ`` retired), ``reduce_dq(outputs, smem, regs, keys, step, place)`` (:mod:`.state`'s
    named tuples: the block of batch entry ``keys.b``, query block ``step.qb`` of head
    ``step.h``) and ``drain(tid)`` (thread 0 of the warpgroup waits until its reduces are
    done, before the CTA exits)."""
    boxes, bq = cfg.dq_columns // DQ_BOX, cfg.block_q
    words = accumulator_layout(bq, packed=True)
    sync, publish, claim, release = _make_barriers(cfg)
    ordered = cfg.deterministic

    def origin(keys, step, c):
        """The ``dQacc`` coordinates of consumer ``c``'s ``dQ`` block: its query block's rows
        and columns ``c D/2 ..`` (``"columns"``), rows ``64 c ..`` of a 128-row block
        (``"rows"``), or the whole block (``"keys"``)."""
        row0 = step.qb * bq + c * DQ_ROWS if cfg.split_rows else step.qb * bq
        return (keys.b, row0, step.h, c * cfg.dq_columns if cfg.split_columns else 0)

    def ds_tile(sds, c):
        """Consumer ``c``'s ``dS^T`` tile as ``(64 keys, queries)``, or with two 64-query
        chunks (``"rows"``) ``(64 keys, 2, 64)``: the columns split row-major."""
        return sds.sub[c, 0] if bq == CHUNK else sds.sub[c].permute(1, 0, 2)

    def count(outputs, keys, step, c):
        """``deterministic``: the ``order`` count consumer ``c`` awaits, a one-element view."""
        ob = cfg.order_block(step.qb, c)
        return outputs.order.sub[keys.b, step.h, ob:ob + 1]

    @T.macro
    def share_ds(smem, regs, step, place):
        if cfg.shares_ds:
            if step.g > 0:
                claim(place.c)  # the other consumer's dQ of the previous iteration has read sds[c]
        T.cuda.tile.apply(T.ptx["st.shared.b32"],
                          *accumulator_tile(ds_tile(smem.sds, place.c), regs.dSw.view(WG_K, bq // 2, layout=words),
                                            "wgmma"), scope="warpgroup")
        T.ptx["fence.proxy.async.shared::cta"]()
        if place.tid % 128 == 0:
            T.ptx["cp.async.bulk.wait_group.read"](0)  # the previous reduce has read sdq[c]
        publish(place.c)

    @T.macro
    def release_ds(keys, step, place):
        if step.g + 1 < keys.steps:
            release(place.c)

    @T.macro
    def reduce_dq(outputs, smem, regs, keys, step, place):
        T.cuda.tile.apply(T.ptx["st.shared.v2.f32"], *accumulator_tile(smem.sdq.sub[place.c].permute(1, 0, 2),
                                                                       regs.dQ, "wgmma"), scope="warpgroup")
        T.ptx["fence.proxy.async.shared::cta"]()
        sync(place.c)
        if place.tid % 128 == 0:
            if ordered:
                await_turn(count(outputs, keys, step, place.c), regs.turn, cfg.turn(keys.kb, place.c))
            T.cuda.tile.apply(T.ptx[REDUCE], outputs.dQacc, smem.sdq.sub[place.c].view(boxes, 1, DQ_ROWS, 1, DQ_BOX),
                              coords=origin(keys, step, place.c), coord_steps=((0, 0, 0, DQ_BOX),), swizzle=3)
            T.ptx["cp.async.bulk.commit_group"]()
            if ordered:
                pass_turn(count(outputs, keys, step, place.c))

    @T.macro
    def drain(tid):
        if tid % 128 == 0:
            T.ptx["cp.async.bulk.wait_group"](0)

    return share_ds, release_ds, reduce_dq, drain
