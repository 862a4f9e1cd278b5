"""Accumulators packed into 16-bit pairs: the conversion the GEMM and attention kernels share."""

from __future__ import annotations

from tvm.script import tirx as T

__all__ = ["VECTOR", "PAIR_CONVERTS", "WIDEN_CONVERTS", "make_pack_pairs", "make_unpack_pairs"]

#: 16-bit elements in one 16-byte vector (``ld`` / ``st`` ``.v4.b32``: four words of pairs)
VECTOR = 8

#: output dtype -> the instruction rounding two f32 values into one b32 word of two 16-bit
#: halves (PTX ISA 9.7.9.21, ``cvt`` with ``.bf16x2`` / ``.f16x2``)
PAIR_CONVERTS = {"bfloat16": "cvt.rn.bf16x2.f32", "float16": "cvt.rn.f16x2.f32"}

#: 16-bit dtype -> the instruction widening one 16-bit value to f32, exactly (PTX ISA 9.7.10.24)
WIDEN_CONVERTS = {"bfloat16": "cvt.f32.bf16", "float16": "cvt.f32.f16"}


def make_pack_pairs(dtype: str, n: int):
    """The macro ``pack(words, values)``: ``n`` f32 registers ``values`` (a thread's
    ``.local()`` view) into ``n / 2`` b32 ``words``, word ``i`` holding value ``2 i`` in
    its low half and ``2 i + 1`` in its high half -- for a wgmma accumulator, the pair
    ``(row, 2 t + e)`` of a column block, the order the fragment maps of a packed
    accumulator and of the rs form's A both use (PTX ISA 9.7.15.5.1.1).

    Parameters
    ----------
    dtype : str
        ``"bfloat16"`` or ``"float16"`` (round to nearest even).
    n : int
        Values per thread, even.

    Raises
    ------
    KeyError
        ``dtype`` not in :data:`PAIR_CONVERTS`.
    """
    op = PAIR_CONVERTS[dtype]

    @T.macro
    def pack(words, values):
        pairs = values.view(n // 2, 2)
        T.cuda.tile.apply(T.ptx[op], words.view(n // 2, 1), pairs.sub[:, 1:2], pairs.sub[:, 0:1])

    return pack


def make_unpack_pairs(dtype: str, n: int):
    """The macro ``unpack(values, words)``, the inverse of :func:`make_pack_pairs`: ``n / 2``
    b32 ``words`` (a ``(n / 2, 1)`` register tensor or region) of 16-bit pairs into ``n``
    f32 registers ``values`` (``(n,)``), value ``2 i`` from the low half of word ``i``
    and ``2 i + 1`` from its high half -- the order of a 16-byte vector loaded from a
    row of 16-bit elements.  Emits per word one ``mov.b32 {lo, hi}, w`` (the unpack
    form, PTX ISA 9.7.10.4: the first element takes the low bits) and per value one exact
    ``cvt.f32.bf16`` / ``cvt.f32.f16``.

    Raises
    ------
    KeyError
        ``dtype`` not in :data:`WIDEN_CONVERTS`.
    """
    op = WIDEN_CONVERTS[dtype]

    @T.macro
    def unpack(values, words):
        halves = T.alloc_local((n // 2, 2), "uint16")
        T.cuda.tile.apply(T.ptx["mov.b32"], halves, words)
        T.cuda.tile.apply(T.ptx[op], values.view(n, 1), halves.view(n, 1))

    return unpack
