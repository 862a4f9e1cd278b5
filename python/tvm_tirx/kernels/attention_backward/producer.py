"""The producer warpgroup: one thread loads the CTA's K and V once, then streams the Q and
dO blocks of every iteration into the ring by TMA; the 32 lanes of warp 1 copy the
block's LSE and Dsum values into the same ring stage."""

from __future__ import annotations

from tvm.script import tirx as T

from ..attention.config import CHUNK, LOG2E
from ..attention.producer import LOAD
from .config import CONSUMERS, WG_K, BackwardConfig

__all__ = ["make_producer", "make_row_copier"]


def _key_box(keys, c, cc) -> tuple:
    """The coordinates of the box of consumer ``c``'s 64 keys, columns ``64 cc ..``."""
    return (keys.b, keys.kb * (WG_K * CONSUMERS) + c * WG_K, keys.hk, cc * CHUNK)


def make_producer(cfg: BackwardConfig):
    """The macro ``produce(inputs, smem, bars, keys, seq_len)`` (a :class:`.state.Inputs`,
    a :class:`.state.Shared`, a :class:`.state.Barriers`, a :class:`.state.Keys`).

    Q, K, V and dO are ``(batch, seq_len, heads, head_dim)`` tensors (K and V with
    ``kv_heads``), read as 4-d TMA boxes ``(1, rows, 1, 64)`` (128-byte swizzle): first
    the 64 keys of each consumer ``c`` of K and V (keys ``128 kb + 64 c ..`` of head
    ``hk``) into ``sk[c]`` and ``sv[c]`` on ``kv_full``; then, per iteration ``g <
    steps``, the Q and dO rows of query block ``qb`` (``block_q`` rows) of head ``h``
    (:meth:`.config.BackwardConfig.step`) into stage ``g % stages``, once both consumers
    released it (:class:`~tvm_tirx.kernels.parts.Ring`).  Rows past ``seq_len`` are
    zero-filled and still count their bytes (PTX ISA 5.5.5), so each ``expect_tx`` is
    the whole box.
    """
    ring, chunks, bq = cfg.ring, cfg.chunks, cfg.block_q

    @T.macro
    def load_keys(K, V, smem, bars, keys):
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bars.kv_full.sub[0, :],
                          tx=T.uint32(cfg.kv_bytes))
        for c in T.unroll(CONSUMERS):
            for cc in T.unroll(chunks):
                T.cuda.tile.apply(T.ptx[LOAD], smem.sk.sub[c, cc].view(1, WG_K, 1, CHUNK), K,
                                  mbar=bars.kv_full.sub[0, :], coords=_key_box(keys, c, cc), swizzle=3)
                T.cuda.tile.apply(T.ptx[LOAD], smem.sv.sub[c, cc].view(1, WG_K, 1, CHUNK), V,
                                  mbar=bars.kv_full.sub[0, :], coords=_key_box(keys, c, cc), swizzle=3)

    @T.macro
    def produce(inputs, smem, bars, keys, seq_len):
        load_keys(inputs.K, inputs.V, smem, bars, keys)
        for g in T.serial(keys.steps):
            s = ring.slot(g)
            h, qb = cfg.step(g, keys.kb, keys.hk, seq_len)
            ring.acquire(bars.empty, s, g, None)
            ring.arm(bars.full, s, cfg.stage_bytes)
            for cc in T.unroll(chunks):
                T.cuda.tile.apply(T.ptx[LOAD], smem.sq.sub[s, cc].view(1, bq, 1, CHUNK), inputs.Q,
                                  mbar=bars.full.sub[s, :], coords=(keys.b, qb * bq, h, cc * CHUNK), swizzle=3,
                                  l2_promotion=3)
                T.cuda.tile.apply(T.ptx[LOAD], smem.sdo.sub[s, cc].view(1, bq, 1, CHUNK), inputs.dO,
                                  mbar=bars.full.sub[s, :], coords=(keys.b, qb * bq, h, cc * CHUNK), swizzle=3,
                                  l2_promotion=3)

    return produce


def make_row_copier(cfg: BackwardConfig):
    """The macro ``copy_rows(inputs, srows, bars, keys, place)`` of the 32 lanes of the
    producer's warp 1 (``place.tid`` 32..63): per iteration ``g``, once the consumers
    released stage ``s = g % stages`` (the same ``empty`` phase the TMA thread waits
    for), lane ``l`` writes ``LSE * log2(e)`` and ``Dsum`` of queries ``BQ qb + 32 i + l``
    (``BQ`` the config's ``block_q``, ``i < BQ / 32``) of head ``h`` (0 past ``seq_len``)
    into ``srows[s, 0, :]`` and
    ``srows[s, 1, :]``, then arrives on ``full[s]`` (``mbarrier.arrive`` releases the
    lane's stores at CTA scope, the consumers' wait acquires them: PTX ISA 9.7.15.16).
    ``full``'s count is therefore ``1 + 32`` (:data:`.config.FILLS`).

    Why not the TMA: a row of LSE is ``seq_len`` float32, and a tensor map's strides must
    be multiples of 16 bytes (PTX ISA 5.5.5), which a ``seq_len`` not a multiple of 4
    breaks; nor ``cp.async.bulk`` (16-byte aligned sources)."""
    ring, bq = cfg.ring, cfg.block_q

    @T.macro
    def copy_rows(inputs, srows, bars, keys, place):
        lane = place.tid % 32
        for g in T.serial(keys.steps):
            s = ring.slot(g)
            h, qb = cfg.step(g, keys.kb, keys.hk, place.seq_len)
            ring.acquire(bars.empty, s, g, None)
            for i in T.unroll(bq // 32):
                q = qb * bq + i * 32 + lane
                srows[s, 0, i * 32 + lane] = T.if_then_else(q < place.seq_len,
                                                            inputs.LSE[keys.b, h, q] * T.float32(LOG2E), T.float32(0))
                srows[s, 1, i * 32 + lane] = T.if_then_else(q < place.seq_len, inputs.Dsum[keys.b, h, q],
                                                            T.float32(0))
            T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], bars.full.sub[s, :])

    return copy_rows
