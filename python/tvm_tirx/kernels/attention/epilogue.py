"""The epilogue of a consumer: ``O / l`` stored under ``row < seq_len``, and the log-sum-exp."""

from __future__ import annotations

from tvm.script import tirx as T

from ..pairs import make_pack_pairs
from .config import AttentionConfig, first_row

__all__ = ["make_epilogue"]

LN2 = 0.6931471805599453


def make_epilogue(cfg: AttentionConfig):
    """The macro ``epilogue(Out, LSE, regs, tile, place)`` (a :class:`.state.Registers`, a
    :class:`.state.Tile`, a :class:`.state.Place`; ``b``, ``h``, ``qb`` are the tile's,
    ``seq_len``, ``tid``, ``c`` the place's): sums ``l`` over the row's four lanes into
    ``rmax`` ((2, 1) float32), multiplies ``O`` by its reciprocal (into ``alpha``, (2,)
    float32), stores the rows ``< seq_len`` of
    ``O`` as bf16/f16 pairs (``st.global.b32``, one per register pair, under ``row <
    seq_len``) and, from lane ``t = 0`` of each row, ``LSE = ln(2) * (m + log2(l))``."""
    chunks, batch = cfg.chunks, cfg.batch
    pack_pairs = make_pack_pairs(cfg.dtype, chunks * 32)

    @T.macro
    def epilogue(Out, LSE, regs, tile, place):
        for hh in T.unroll(2):
            regs.rmax[hh, 0] = regs.l[hh]
        T.cuda.tile.reduce_lanes(T.ptx["add.f32"], regs.rmax, lanes=4)
        ol = regs.O.local()
        for hh in T.unroll(2):
            regs.alpha[hh] = T.float32(1) / regs.rmax[hh, 0]  # one division per row, then products
        for r in T.unroll(chunks * 32):
            ol[r] = ol[r] * regs.alpha[r // 2 % 2]
        pack_pairs(regs.W.local(), ol)
        words = Out.view("uint32")
        wl = regs.W.local()
        for jj in T.unroll(chunks * 8):
            for hh in T.unroll(2):
                row = first_row(tile.qb, place.c, place.tid) + hh * 8
                col = jj * 4 + place.tid % 4  # in words: columns 8 jj + 2 t
                if row < place.seq_len:
                    # b < batch (blockIdx.z) and row < seq_len: the prover does not multiply two
                    # run-time extents, so the product's bound is stated (checked with check_assumptions)
                    T.assume(tile.b * place.seq_len + row < batch * place.seq_len)
                    T.cuda.tile.apply(T.ptx["st.global.b32"], words.sub[tile.b, row, tile.h, col : col + 1],
                                      wl.view(chunks * 8, 2, 1).sub[jj, hh, :])
        if place.tid % 4 == 0:
            for hh in T.unroll(2):
                row = first_row(tile.qb, place.c, place.tid) + hh * 8
                if row < place.seq_len:
                    LSE[tile.b, tile.h, row] = (regs.m[hh] + T.log2(regs.rmax[hh, 0])) * T.float32(LN2)

    return epilogue
