"""The producer: one thread streams the K tiles of A and B into the shared ring by TMA."""

from __future__ import annotations

import tvm
from tvm.script import tirx as T

from .config import BK_BYTES, GemmConfig
from .order import tile_order

__all__ = ["LOAD", "LOAD_MC", "make_producer"]

LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
LOAD_MC = LOAD + ".multicast::cluster"


def _as(tensor, dtype: str):
    """``tensor`` seen as ``dtype`` for the TMA (fp8 moves as bytes).  A tensor with a
    run-time extent that already has that type is passed as itself: a ``.view`` of it
    loses its strided form (the TMA family refuses it).  The static kernels keep the
    view, which keeps their generated code as it was (the view's data pointer stays a
    kernel parameter)."""
    static = all(isinstance(extent, int | tvm.tirx.IntImm) for extent in tensor.shape)
    return tensor if str(tensor.dtype) == dtype and not static else tensor.view(dtype)


def make_producer(cfg: GemmConfig):
    """The macro ``produce_tile(A, B, smem, flag, t, g0, rank, split)`` of ``cfg``: ``smem`` a
    :class:`.shared.Shared` (the ring's ``sa``, ``sb``, ``full``, ``empty``), ``flag`` the
    ring's wait flag, ``rank`` the CTA's rank in its cluster, ``split`` its split of K.

    Thread 0 of the producer warpgroup loads the K tiles of output tile ``t`` (those of
    split ``split``: ``split * split_tiles ..``, all of them with one split) into ring
    iterations ``g0 ..`` (stage ``g % stages``, phase ``g // stages``): it waits until
    the consumers released the stage (``empty``), arms ``full`` with the stage's bytes
    and issues the TMA loads of A (``block_m`` x 128 bytes) and B (``block_n`` x 128 bytes; with
    ``cluster=2`` half of one of them, multicast to both CTAs: :attr:`~.config.GemmConfig.multicast`),
    one box per stage of a K-major operand and one per 64-element chunk of an MN-major one
    (:mod:`.operands`).  Boxes past the edge of A or B (the M, N and K tails) are
    zero-filled by the TMA and still count all their bytes (PTX ISA 5.5.5), so a K tail
    contributes zeros to the products.
    """
    tiles_m, tiles_n, group_m, k_tiles = cfg.tiles_m, cfg.tiles_n, cfg.group_m, cfg.split_tiles
    ring, tma_dtype = cfg.ring, cfg.tma_dtype
    bn_cols, bm_rows = cfg.block_n, cfg.block_m
    stage_bytes = (bm_rows + bn_cols) * BK_BYTES
    load_a = _make_load(cfg.operand_a, bm_rows, cfg.multicast == "A", tma_dtype)
    load_b = _make_load(cfg.operand_b, bn_cols, cfg.multicast == "B", tma_dtype)

    @T.macro
    def produce_tile(A, B, smem, flag, t, g0, rank, split):
        bm = tile_order(t, tiles_m, tiles_n, group_m)[0]
        bn = tile_order(t, tiles_m, tiles_n, group_m)[1]
        for kt in T.serial(k_tiles):
            s = ring.slot(g0 + kt)
            ring.acquire(smem.empty, s, g0 + kt, flag)
            ring.arm(smem.full, s, stage_bytes)
            load_a(A, smem.sa, smem.full, s, bm * bm_rows, split * k_tiles + kt, rank)
            load_b(B, smem.sb, smem.full, s, bn * bn_cols, split * k_tiles + kt, rank)

    return produce_tile


def _make_load(op, rows: int, shared: bool, tma_dtype: str):
    """The macro ``load(tensor, ring, full, s, first, kt, rank)`` of operand ``op``: the TMA
    loads of its ``rows`` MN-rows from ``first`` at K tile ``kt`` into stage ``s`` of
    ``ring``, completing on ``full[s]``; with ``shared`` (a 2-CTA cluster's multicast
    operand) the CTA of rank ``rank`` loads half of them, rows ``rank * rows / 2 ..``,
    into that place of both CTAs' rings (``.multicast::cluster``, CTA mask ``0b11``)."""
    if shared:
        half = rows // 2

        @T.macro
        def load(tensor, ring, full, s, first, kt, rank):
            for j in T.unroll(op.boxes(half)):
                T.cuda.tile.apply(T.ptx[LOAD_MC], op.box(ring, s, rank * half, half, j).view(tma_dtype),
                                  _as(tensor, tma_dtype), mbar=full.sub[s, :],
                                  coords=op.coords(first, rank * half, kt, j), swizzle=3, l2_promotion=3,
                                  cta_mask=T.uint16(3))

        return load

    @T.macro
    def load(tensor, ring, full, s, first, kt, rank):  # pylint: disable=unused-argument
        for j in T.unroll(op.boxes(rows)):
            T.cuda.tile.apply(T.ptx[LOAD], op.box(ring, s, 0, rows, j).view(tma_dtype), _as(tensor, tma_dtype),
                              mbar=full.sub[s, :], coords=op.coords(first, 0, kt, j), swizzle=3, l2_promotion=3)

    return load
