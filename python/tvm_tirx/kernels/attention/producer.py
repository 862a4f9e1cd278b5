"""The producer: one thread loads Q once and streams the K and V blocks into the ring by TMA."""

from __future__ import annotations

from tvm.script import tirx as T

from ..parts.ring import wait_phase
from .config import CHUNK, WG_M, AttentionConfig

__all__ = ["LOAD", "make_producer"]

LOAD = "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"


def make_producer(cfg: AttentionConfig):
    """The macro ``produce(Q, K, V, smem, bars, tile)`` (a :class:`.state.Shared`, a
    :class:`.state.Barriers`, a :class:`.state.Tile`; ``sq`` below is ``smem.sq``, ``b``
    is ``tile.b``, and so on).

    Q, K and V are ``(batch, seq_len, heads, head_dim)`` tensors, read as 4-d TMA boxes
    ``(1, rows, 1, 64)`` (128-byte swizzle): Q's ``bm`` rows of query block ``qb`` into
    ``sq`` (on ``q_full[0]``; with ``cfg.persistent`` the 64 rows of consumer ``w`` on
    ``q_full[w]``), then per key/value block ``j < n_kv`` the 64-column boxes of
    K and V of key/value head ``h // group`` into stage ``(done + j) % stages`` (on
    ``full``), after the consumers released it (``empty``).  Rows past ``seq_len`` are
    zero-filled and still count their bytes (PTX ISA 5.5.5), so each stage's
    ``expect_tx`` is the whole box.  Rows are counted from ``tile.start`` (0, or with
    ``varlen`` the sequence's first row in the packed tensors, seen as ``(1, total,
    heads, head_dim)``): a box may start at any row, and its rows past the sequence
    belong to the next one (the consumers mask those keys) or past ``total`` (zeros).

    ``i`` is the CTA's tile count so far and ``done`` the key/value blocks it loaded
    before this tile: the ring runs on across the tiles of a persistent CTA.  With
    ``cfg.persistent`` the producer first waits until consumer ``w`` released its rows of
    ``sq`` (``q_empty[w]``'s phase of the previous tile; at ``i = 0`` the fresh barrier's
    parity 1 passes at once: PTX ISA, ``mbarrier.try_wait.parity``).  With ``cfg.v_ring`` V's
    half of stage ``s`` is loaded on ``full[stages + s]``, after the consumers released it on
    ``empty[stages + s]``.
    """
    ring, bn, chunks, stages = cfg.ring, cfg.bn, cfg.chunks, cfg.stages
    q_bytes, kv_bytes, group, bm, consumers = cfg.q_bytes, cfg.kv_bytes, cfg.group, cfg.bm, cfg.consumers

    @T.macro
    def load_block(X, buf, full, s, tile, j, bar):  # block j of K or V (head h // group) into stage s, on full[bar]
        for c in T.unroll(chunks):
            T.cuda.tile.apply(T.ptx[LOAD], buf.sub[s, c].view(1, bn, 1, CHUNK), X, mbar=full.sub[bar, :],
                              coords=(tile.b, tile.start + j * bn, tile.h // group, c * CHUNK), swizzle=3,
                              l2_promotion=3)

    @T.macro
    def produce(Q, K, V, smem, bars, tile):
        if not cfg.persistent:  # all bm rows on q_full[0] (one barrier measured 25% faster for the serial schedules)
            T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bars.q_full.sub[0, :],
                              tx=T.uint32(q_bytes))
            for c in T.unroll(chunks):
                T.cuda.tile.apply(T.ptx[LOAD], smem.sq.sub[c].view(1, bm, 1, CHUNK), Q, mbar=bars.q_full.sub[0, :],
                                  coords=(tile.b, tile.start + tile.qb * bm, tile.h, c * CHUNK), swizzle=3)
        # each consumer's 64 rows on its own barrier; one-tile kernels keep a loop of 0 consumers here (as
        # they always had), but varlen ones have none: guarded by loads of CuSeqlens, the dead call's bounds
        # would have to be proved symbolically (the checker proves them for no point only without loads)
        if cfg.persistent or not cfg.varlen:
            for w in T.unroll(consumers if cfg.persistent else 0):
                wait_phase(bars.q_empty.sub[w, :], (tile.i + 1) % 2, None, False)
                T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bars.q_full.sub[w, :],
                                  tx=T.uint32(q_bytes // consumers))
                for c in T.unroll(chunks):
                    rows = smem.sq.sub[c, w * WG_M : w * WG_M + WG_M, :]
                    T.cuda.tile.apply(T.ptx[LOAD], rows.view(1, WG_M, 1, CHUNK), Q, mbar=bars.q_full.sub[w, :],
                                      coords=(tile.b, tile.start + tile.qb * bm + w * WG_M, tile.h, c * CHUNK),
                                      swizzle=3)
        for j in T.serial(tile.n_kv):
            s = ring.slot(tile.done + j)
            ring.acquire(bars.empty, s, tile.done + j, None)
            ring.arm(bars.full, s, kv_bytes // cfg.rings)
            load_block(K, smem.sk, bars.full, s, tile, j, s)
            if cfg.v_ring:  # V's half on its own barriers, once the consumers' P V of its last lap retired
                ring.acquire(bars.empty, s + stages, tile.done + j, None)
                ring.arm(bars.full, s + stages, kv_bytes // 2)
                load_block(V, smem.sv, bars.full, s, tile, j, s + stages)
            else:
                load_block(V, smem.sv, bars.full, s, tile, j, s)

    return produce
