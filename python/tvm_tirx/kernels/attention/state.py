"""What the attention kernel's macros share, as named tuples: the shared-memory tiles, the
mbarriers, a consumer's registers, the tile being computed and the thread computing it.

The kernel body (:mod:`.kernel`) allocates the buffers and fills these once per CTA (the
tile once per tile); the producer, the consumer schedules, the softmax and the epilogue
take them whole, so no macro takes more than a few arguments.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Shared", "Barriers", "Registers", "Tile", "Place"]


class Shared(NamedTuple):
    """The shared-memory tiles (``dtype``, 128-byte swizzled, 64-column chunks).

    Attributes
    ----------
    sq : Buffer
        Q's block, ``(chunks, bm, 64)`` (``bm``: 64 rows per consumer warpgroup).
    sk, sv : Buffer
        The ring of K and V blocks, ``(stages, chunks, bn, 64)`` each.
    so : Buffer | None
        With ``tma_store``, O's staging tile ``(chunks, bm, 64)`` (consumer ``c``'s rows
        ``64 c ..``): a buffer of its own, or ``sq`` itself (:mod:`.o_store`; with O staged
        in K's stage ``sq`` too, unused); else None.
    """

    sq: object
    sk: object
    sv: object
    so: object = None


class Barriers(NamedTuple):
    """The mbarriers, ``uint64`` ``(n, 1)`` shared tensors.

    Attributes
    ----------
    q_full, q_empty : Buffer
        Q's rows loaded / released, one per consumer ``(consumers, 1)`` (one-tile kernels
        use ``q_full[0]`` for all ``bm`` rows, and no ``q_empty``).
    full, empty : Buffer
        The key/value ring's stages loaded / released, ``(stages, 1)``
        (:class:`~tvm_tirx.kernels.parts.Ring`); with ``v_ring`` ``(2 stages, 1)``: entry ``s``
        K's half of stage ``s``, entry ``stages + s`` V's half.
    k_read : Buffer | None
        With O staged in K's stage (``o_staging="kv"``), ``(2 consumers, 1)``: entry ``2 c + i
        % 2`` completes, in the CTA's tile ``i``, when the other consumer's last ``Q K^T``
        has retired (:func:`~.o_store.k_read_barrier`); else None.
    """

    q_full: object
    q_empty: object
    full: object
    empty: object
    k_read: object = None


class Registers(NamedTuple):
    """A consumer thread's registers (``T.alloc_local``, wgmma fragment layouts).

    Attributes
    ----------
    S : Buffer
        A block's scores, float32 ``(64, bn)`` accumulators.
    P : Buffer
        The block's probabilities packed into the rs wgmma's A fragment, uint32.
    O : Buffer
        The output accumulators, float32 ``(chunks, 64, 64)``.
    W : Buffer
        ``O`` packed to 16-bit pairs for the store, uint32 ``(chunks, 64, 32)``.
    m, l, alpha : Buffer
        Per row half (``(2,)`` float32): the running maximum (log2 domain), the running
        sum, the rescale factor (the epilogue reuses it for ``1 / l``).
    rmax : Buffer
        ``(2, 1)`` float32: a row's maximum (or sum) reduced over its four lanes.
    """

    S: object
    P: object
    O: object
    W: object
    m: object
    l: object
    alpha: object
    rmax: object


class Tile(NamedTuple):
    """The tile a CTA computes: query block ``qb`` of head ``h`` of batch entry ``b``.

    Attributes
    ----------
    b, h, qb : PrimExpr
        Batch entry, query head, query block (``bm`` rows), int32.  With ``varlen`` the
        packed tensors are one batch entry (``b`` is 0) and ``qb`` counts the blocks of
        the tile's sequence, from its first row ``start``.
    n_kv : PrimExpr
        The key/value blocks the tile reads (int32; fewer under the causal mask).
    i : PrimExpr | int
        The CTA's tile count so far (0 for a one-tile CTA).
    done : PrimExpr | int
        Key/value blocks the CTA loaded for its earlier tiles: block ``j`` of this tile
        is in ring stage ``(done + j) % stages``.
    last : PrimExpr | bool
        Whether this is the CTA's last tile (the ping-pong turns stop after it).
    start : PrimExpr | int
        The row of the packed ``(total, heads, head_dim)`` tensors where the tile's
        sequence starts (``varlen``: ``CuSeqlens[sequence]``, int32); 0 otherwise.  Rows
        and keys of the tile are counted from it: query row ``r`` of the tile is tensor
        row ``start + r``.
    """

    b: object
    h: object
    qb: object
    n_kv: object
    i: object
    done: object
    last: object
    start: object = 0


class Place(NamedTuple):
    """The thread and the row length.

    Attributes
    ----------
    tid : PrimExpr
        ``threadIdx.x``.
    c : PrimExpr
        The consumer warpgroup, 0 .. ``consumers - 1`` (rows ``64 c ..`` of the tile).
    seq_len : PrimExpr
        Keys (and queries) of the tile's sequence, int32: ``seq_len``, or with
        ``varlen`` the sequence's own length ``CuSeqlens[i + 1] - CuSeqlens[i]``.
    """

    tid: object
    c: object
    seq_len: object
