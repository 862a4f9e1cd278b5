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

The staging tile is :attr:`.config.AttentionConfig.o_tile`: a buffer of its own where it
fits, else the consumer's own 64 rows of Q's buffer.  Q's rows of consumer ``c`` are
read by its ``Q K^T`` wgmmas only, all retired before the epilogue (``wgmma.wait_group
0``, and step 1's barrier for the other warps).  One CTA per tile never loads Q again.
On the persistent grid the producer loads the next tile's Q rows once ``q_empty[c]``
completes: with Q's rows as the staging tile the consumer arrives on it only here, after
``wait_group.read 0`` (the store has read the rows) -- not after its last ``Q K^T`` as
otherwise -- so the next load cannot overwrite O before the TMA has read it, and the
writes of step 2 are ordered before that load by the fence, the barrier and the
arrive's release.  The price: the producer, which loads a tile's Q before its first
key/value block, then starts the next tile only after both consumers' epilogues
(measure it against the per-thread store before a plan takes it).
"""

from __future__ import annotations

from tvm.script import tirx as T

from ...tile.fragments import accumulator_layout
from ..parts.epilogue.stores import stage_tile
from ..parts.ring import release_stage
from .config import CHUNK, WG_M, AttentionConfig

__all__ = ["STORE", "BARRIER_BASE", "make_o_store"]

STORE = "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group"
#: consumer ``c`` joins its 128 threads on named barrier ``BARRIER_BASE + c``
BARRIER_BASE = 3


def make_o_store(cfg: AttentionConfig):
    """``(store_o, drain)``: the macros ``store_o(Out, smem, bars, regs, tile, place)`` (steps
    1 to 3 of the module docstring: ``regs.W``, O's ``(chunks, 64, 32)`` packed words, into
    ``smem.so``'s rows ``64 c ..``, ``(chunks, bm, 64)`` ``dtype``, then to ``Out[b, rows,
    h, :]``; with Q's buffer as the tile on the persistent grid it also releases Q's rows
    on ``bars.q_empty[c]``) and ``drain(tid)`` (step 4)."""
    chunks, head_dim = cfg.chunks, cfg.head_dim
    words = accumulator_layout(head_dim, packed=True)
    release_after_store = cfg.persistent and cfg.o_tile == "q"

    @T.macro
    def store_o(Out, smem, bars, regs, tile, place):
        rows = smem.so.view(chunks, cfg.consumers, WG_M, CHUNK).sub[:, place.c, :, :]  # (chunks, 64, 64)
        stage_tile(rows.permute(1, 0, 2), regs.W.view(WG_M, head_dim // 2, layout=words), place.tid,
                   T.Cast("uint32", BARRIER_BASE + place.c))
        if place.tid % 128 == 0:
            for k in T.unroll(chunks):
                T.cuda.tile.apply(T.ptx[STORE], Out, rows.sub[k].view(1, WG_M, 1, CHUNK),
                                  coords=(tile.b, tile.qb * cfg.bm + place.c * WG_M, tile.h, k * CHUNK), swizzle=3)
            T.ptx["cp.async.bulk.commit_group"]()
            if release_after_store:
                T.ptx["cp.async.bulk.wait_group.read"](0)  # O has left Q's rows: the producer may reload them
        if release_after_store:
            release_stage(bars.q_empty, place.c, place.tid, 1)

    @T.macro
    def drain(tid):
        if tid % 128 == 0:
            T.ptx["cp.async.bulk.wait_group"](0)  # every store of this warpgroup has completed

    return store_o, drain
