"""O's store through shared memory and the TMA (``make_attention(..., tma_store=True)``).

The default epilogue stores each consumer thread's O words with ``st.global.b32``, one
4-byte word per register pair under a ``row < seq_len`` guard: a 64 x head_dim tile
leaves the SM as ``head_dim / 8`` scattered stores per thread.  With ``tma_store`` each
consumer warpgroup ``c`` instead, per tile:

1. (steps 1 and 2 are the epilogue chain's
   :func:`tvm_tirx.kernels.parts.epilogue.stores.stage_tile`, which the GEMM's TMA store
   uses too) thread ``128 c + 128`` (the warpgroup's first) waits until its previous TMA
   store has read the staging tile (``cp.async.bulk.wait_group.read 0``, the bulk async-group
   instructions beside PTX ISA 9.7.9.25.5.1; the tile checker's bulk-store rule), and
   named barrier ``3 + c`` (128 threads, PTX ISA 9.7.13.1; ids 1 and 2 are the
   ping-pong turns of :mod:`.turns`, 0 is ``__syncthreads``) publishes that to the
   warpgroup, and the retirement of every warp's last ``wgmma`` (when the tile is Q's
   rows, which those wgmmas read);
2. each thread writes its bf16/f16 words into the 128-byte swizzled staging tile
   (``st.shared.b32`` over the wgmma accumulator map, ``(64, head_dim)`` cut into
   ``head_dim / 64`` boxes of 64 x 128 bytes), then ``fence.proxy.async.shared::cta``
   (PTX ISA 8.6 and 9.7.13.4: the TMA reads shared memory through the async proxy);
3. barrier ``3 + c`` again; the first thread issues one 4-d
   ``cp.async.bulk.tensor`` store per box, ``O[b, 128 qb + 64 c .. +64, h, 64 k .. +64]``
   (PTX ISA 9.7.9.25.5.1), and commits them as one bulk group.  The tensor map's extent
   along L is ``seq_len``: the TMA skips the rows past it, so no row guard is needed;
4. before the CTA exits, that thread waits for its stores (``cp.async.bulk.wait_group 0``).

The staging tile is :attr:`.config.AttentionConfig.o_tile`:

* ``"own"``: a buffer of its own, where it fits;
* ``"kv"`` (``o_staging="kv"``: the persistent grid with ping-pong; the planner's choice at
  head_dim 128 where it measured faster, :mod:`.schedules`): the K half of the ring stage
  that held the tile's last key/value block, consumer ``c`` in its key rows ``64 c ..``.
  Every consumer's ``Q K^T`` reads all of K, so before its step 2 consumer ``c`` waits on
  an mbarrier of :attr:`.state.Barriers.k_read` (:func:`k_read_barrier`: two per consumer,
  by the tile's parity) for the other consumer's arrive, given once that consumer's last
  ``Q K^T`` has retired (:mod:`.consumer`); its own retired before its ``P V``.  The
  consumer releases that stage after the store has read it (``wait_group.read 0``, then
  the ``empty`` arrive), not after its last ``P V``; its Q rows are released after its
  last ``Q K^T``, so the producer loads the next tile's Q during this tile's last ``P V``
  and epilogue;
* ``"q"``: the consumer's own 64 rows of Q's buffer.  Q's rows of consumer ``c`` are read
  by its ``Q K^T`` wgmmas only, all retired before the epilogue (``wgmma.wait_group 0``,
  and step 1's barrier for the other warps).  One CTA per tile never loads Q again.  On
  the persistent grid the producer loads the next tile's Q rows once ``q_empty[c]``
  completes: with Q's rows as the staging tile the consumer arrives on it only here,
  after ``wait_group.read 0`` (the store has read the rows) -- not after its last ``Q
  K^T`` as otherwise -- so the next load cannot overwrite O before the TMA has read it,
  and the writes of step 2 are ordered before that load by the fence, the barrier and the
  arrive's release.  The price: the producer, which loads a tile's Q before its first
  key/value block, then starts the next tile only after both consumers' epilogues.
"""

from __future__ import annotations

from tvm.script import tirx as T

from ...tile.fragments import accumulator_layout
from ..parts.epilogue.stores import stage_tile
from ..parts.ring import release_stage
from .config import CHUNK, WG_M, AttentionConfig

__all__ = ["STORE", "BARRIER_BASE", "k_read_barrier", "make_o_store", "make_signal_k_read"]

STORE = "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group"
#: consumer ``c`` joins its 128 threads on named barrier ``BARRIER_BASE + c``
BARRIER_BASE = 3
def k_read_barrier(c, i):
    """The entry of :attr:`.state.Barriers.k_read` on which consumer ``c`` waits, in its CTA's
    tile ``i``, for the other consumer's hand-over of K's stage: ``2 c + i % 2``, in phase
    ``(i // 2) % 2``.  Two per consumer, by the tile's parity: the first consumer, whose turn
    for the next tile comes with the second's last issue of this one, may finish a next tile
    of one key/value block and arrive again before the second has waited here (on one
    barrier the second would then wait for a phase that has passed); an arrive two tiles
    later needs the second consumer's turn of the tile between, given after its wait
    (:mod:`.turns`)."""
    return 2 * c + i % 2


def make_signal_k_read(cfg: AttentionConfig):
    """The macro ``signal_k_read(bars, c, i, tid)``: with O staged in K's stage (``cfg.o_tile ==
    "kv"``), thread 0 of consumer ``c`` arrives on the other consumer's
    :func:`k_read_barrier` of tile ``i`` once its last ``Q K^T`` of the tile has retired
    (``mbarrier.arrive``, release: its reads of K are ordered before the other's writes);
    nothing otherwise."""
    kv = cfg.o_tile == "kv"

    @T.macro
    def signal_k_read(bars, c, i, tid):
        if kv:
            release_stage(bars.k_read, k_read_barrier(1 - c, i), tid, 1)

    return signal_k_read


def make_o_store(cfg: AttentionConfig):
    """``(store_o, drain)``: the macros ``store_o(Out, smem, bars, regs, tile, place)`` (steps
    1 to 3 of the module docstring: ``regs.W``, O's ``(chunks, 64, 32)`` packed words, into
    the staging tile's rows of consumer ``c`` (:attr:`~.config.AttentionConfig.o_tile`),
    then to ``Out[b, rows, h, :]``; where the staging tile is Q's rows on the persistent
    grid, or K's stage, it also releases them, on ``bars.q_empty[c]`` or ``bars.empty``)
    and ``drain(tid)`` (step 4)."""
    chunks, head_dim, staging = cfg.chunks, cfg.head_dim, cfg.o_tile
    words = accumulator_layout(head_dim, packed=True)
    release_after_store = (cfg.persistent and staging == "q") or staging == "kv"

    def staging_rows(smem, tile, c):
        if staging == "kv":  # the K rows 64 c .. of the tile's last block's stage
            stage = smem.sk.sub[cfg.ring.slot(tile.done + tile.n_kv - 1)]
            return stage.view(chunks, cfg.bn // WG_M, WG_M, CHUNK).sub[:, c, :, :]
        return smem.so.view(chunks, cfg.consumers, WG_M, CHUNK).sub[:, c, :, :]  # (chunks, 64, 64)

    @T.macro
    def release(bars, tile, place):
        if staging == "kv":
            release_stage(bars.empty, cfg.ring.slot(tile.done + tile.n_kv - 1), place.tid, 1)
        elif release_after_store:
            release_stage(bars.q_empty, place.c, place.tid, 1)

    @T.macro
    def store_o(Out, smem, bars, regs, tile, place):
        rows = staging_rows(smem, tile, place.c)
        if staging == "kv":  # the other consumer's Q K^T products no longer read K's stage
            T.cuda.mbarrier_wait_phase(bars.k_read.sub[k_read_barrier(place.c, tile.i), :], tile.i // 2 % 2)
        stage_tile(rows.permute(1, 0, 2), regs.W.view(WG_M, head_dim // 2, layout=words), place.tid,
                   T.Cast("uint32", BARRIER_BASE + place.c))
        if place.tid % 128 == 0:
            for k in T.unroll(chunks):
                T.cuda.tile.apply(T.ptx[STORE], Out, rows.sub[k].view(1, WG_M, 1, CHUNK),
                                  coords=(tile.b, tile.qb * cfg.bm + place.c * WG_M, tile.h, k * CHUNK), swizzle=3)
            T.ptx["cp.async.bulk.commit_group"]()
            if release_after_store:
                T.ptx["cp.async.bulk.wait_group.read"](0)  # O has left the staging rows: the producer may reload them
        release(bars, tile, place)

    @T.macro
    def drain(tid):
        if tid % 128 == 0:
            T.ptx["cp.async.bulk.wait_group"](0)  # every store of this warpgroup has completed

    return store_o, drain
