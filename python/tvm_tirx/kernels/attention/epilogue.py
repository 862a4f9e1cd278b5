"""The epilogue of a consumer: ``O / l`` stored under ``row < seq_len``, and the log-sum-exp."""

from __future__ import annotations

from tvm.script import tirx as T

from ..pairs import make_pack_pairs
from .config import AttentionConfig, first_row
from .o_store import make_o_store

__all__ = ["make_epilogue", "packed_row_stored"]

LN2 = 0.6931471805599453


def packed_row_stored(row, start, length, total):
    """Whether query row ``row`` (int32, counted from the sequence's first row ``start``)
    of a packed (``varlen``) tile is stored: a row of the sequence (``row < length``)
    that is a row of the tensors (``start + row < total``, written so that it cannot
    overflow: ``0 <= start < total - row``).  With well-formed ``CuSeqlens`` the second
    test follows from the first; with a malformed one it drops the row rather than
    write outside O or LSE, and it is what lets the tile checker prove the store in
    bounds without an assumption on the contents of ``CuSeqlens``."""
    return T.And(row < length, T.And(0 <= start, start < total - row))


def make_epilogue(cfg: AttentionConfig):
    """The macro ``epilogue(Out, LSE, smem, bars, regs, tile, place)`` (a
    :class:`.state.Shared`, a :class:`.state.Barriers`, a :class:`.state.Registers`, a
    :class:`.state.Tile`, a :class:`.state.Place`; ``b``, ``h``, ``qb`` are the tile's,
    ``seq_len``, ``tid``, ``c`` the place's): sums ``l`` over the row's four lanes into
    ``rmax`` ((2, 1) float32), multiplies ``O`` by its reciprocal (into ``alpha``, (2,)
    float32), stores the rows ``< seq_len`` of
    ``O`` as bf16/f16 pairs (``st.global.b32``, one per register pair, under ``row <
    seq_len``) and, from lane ``t = 0`` of each row, ``LSE = ln(2) * (m + log2(l))``.
    With ``cfg.tma_store`` O goes through ``smem.so`` and TMA stores instead
    (:mod:`.o_store`; ``smem`` and ``bars`` are used for nothing else).

    With ``cfg.varlen`` ``Out`` is ``(total, heads, head_dim)`` and ``LSE`` ``(heads,
    total)`` float32: row ``row`` of the tile goes to tensor row ``tile.start + row``,
    under :func:`packed_row_stored` (``seq_len`` is then the sequence's length), the LSE
    too by ``st.global.f32`` (from ``alpha``): both stores are tile operations, whose
    bounds the tile checker proves (a plain store it does not check)."""
    chunks = cfg.chunks
    pack_pairs = make_pack_pairs(cfg.dtype, chunks * 32)
    store_o, store_lse = _make_stores(cfg)
    store_o_tma, _ = make_o_store(cfg)

    @T.macro
    def epilogue(Out, LSE, smem, bars, regs, tile, place):
        for hh in T.unroll(2):
            regs.rmax[hh, 0] = regs.l[hh]
        T.cuda.tile.reduce_lanes(T.ptx["add.f32"], regs.rmax, lanes=4)
        ol = regs.O.local()
        for hh in T.unroll(2):
            regs.alpha[hh] = T.float32(1) / regs.rmax[hh, 0]  # one division per row, then products
        for r in T.unroll(chunks * 32):
            ol[r] = ol[r] * regs.alpha[r // 2 % 2]
        pack_pairs(regs.W.local(), ol)
        if cfg.tma_store:
            store_o_tma(Out, smem, bars, regs, tile, place)
        else:
            store_o(Out, regs, tile, place)
        store_lse(LSE, regs, tile, place)

    return epilogue


def _make_stores(cfg: AttentionConfig):
    """The macros ``store_o(Out, regs, tile, place)`` (``O``'s words packed in ``regs.W``)
    and ``store_lse(LSE, regs, tile, place)``, for the batched or the packed layout."""
    chunks, batch, varlen = cfg.chunks, cfg.batch, cfg.varlen

    @T.macro
    def store_o(Out, regs, tile, place):
        words = Out.view("uint32")
        wl = regs.W.local()
        for jj in T.unroll(chunks * 8):
            for hh in T.unroll(2):
                row = first_row(tile.qb, place.c, place.tid, cfg.bm) + hh * 8
                col = jj * 4 + place.tid % 4  # in words: columns 8 jj + 2 t
                if varlen:
                    if packed_row_stored(row, tile.start, place.seq_len, Out.shape[0]):
                        T.cuda.tile.apply(T.ptx["st.global.b32"], words.sub[tile.start + row, tile.h, col : col + 1],
                                          wl.view(chunks * 8, 2, 1).sub[jj, hh, :])
                elif row < place.seq_len:
                    # b < batch (blockIdx.z) and row < seq_len: the prover does not multiply two
                    # run-time extents, so the product's bound is stated (checked with check_assumptions)
                    T.assume(tile.b * place.seq_len + row < batch * place.seq_len)
                    T.cuda.tile.apply(T.ptx["st.global.b32"], words.sub[tile.b, row, tile.h, col : col + 1],
                                      wl.view(chunks * 8, 2, 1).sub[jj, hh, :])

    @T.macro
    def store_lse(LSE, regs, tile, place):
        if place.tid % 4 == 0:
            for hh in T.unroll(2):
                row = first_row(tile.qb, place.c, place.tid, cfg.bm) + hh * 8
                if varlen:  # by st.global, so that the checker proves it (alpha is free after O's scaling)
                    if packed_row_stored(row, tile.start, place.seq_len, LSE.shape[1]):
                        regs.alpha[hh] = (regs.m[hh] + T.log2(regs.rmax[hh, 0])) * T.float32(LN2)
                        T.cuda.tile.apply(T.ptx["st.global.f32"],
                                          LSE.sub[tile.h, tile.start + row : tile.start + row + 1],
                                          regs.alpha.sub[hh : hh + 1])
                elif row < place.seq_len:
                    LSE[tile.b, tile.h, row] = (regs.m[hh] + T.log2(regs.rmax[hh, 0])) * T.float32(LN2)

    return store_o, store_lse
