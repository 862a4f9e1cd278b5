"""Sequences of different lengths in one call (``make_attention(..., varlen=True)``).

FlashAttention's varlen layout: the sequences are packed one after the other, Q and O
``(total, heads, head_dim)``, K and V ``(total, kv_heads, head_dim)``, and ``CuSeqlens``
``(batch + 1,)`` int32 holds their cumulative lengths (sequence ``i`` is rows
``CuSeqlens[i] .. CuSeqlens[i + 1] - 1``, of queries and keys alike: self-attention,
causal masks aligned at each sequence's first row).  ``max_seqlen`` (an int32 scalar)
sizes the grid.

One CTA per (query block ``qb``, head ``h``, sequence ``i``), query blocks fastest and
longest causal rows first, as the batched kernel.  A CTA reads ``start = CuSeqlens[i]``
and ``end = CuSeqlens[i + 1]`` and runs only where :func:`sequence_live` holds (the
block holds rows of a well-formed sequence); otherwise every thread of it leaves before
the mbarriers are initialised, so no barrier is left waiting.  The producer reads the
packed tensors as one batch entry ``(1, total, heads, head_dim)`` (:func:`as_batch`):
its TMA boxes start at row ``start + qb * 128`` (Q) and ``start + j * bn`` (K and V),
unchanged otherwise.  The consumers count queries and keys from ``start`` and mask the
keys ``>= end - start`` -- the rows of the next sequence a box reaches into -- as the
batched kernel masks those past ``seq_len``.  The epilogue stores row ``r`` of the tile
at tensor row ``start + r`` under :func:`.epilogue.packed_row_stored`.
"""

from __future__ import annotations

from typing import NamedTuple

import tvm
from tvm.script import tirx as T
from tvm.tirx.layout import S, TileLayout

from .config import BM, MAX_ELEMENTS, AttentionConfig

__all__ = ["Packed", "SEQUENCES_MESSAGE", "VARLEN_ELEMENTS_MESSAGE", "as_batch", "query_blocks", "sequence_live",
           "varlen_function", "varlen_grid", "varlen_tile"]

#: the host's error for a run-time CuSeqlens of fewer than two entries (no sequence)
SEQUENCES_MESSAGE = ("make_attention(varlen=True): CuSeqlens must have at least 2 entries (batch + 1, one "
                     "sequence or more)")
#: the host's error for a run-time total whose Q and O the kernel's int32 offsets cannot index
VARLEN_ELEMENTS_MESSAGE = (f"make_attention(varlen=True): total x heads x head_dim elements of Q and O must be at "
                           f"most {MAX_ELEMENTS}: the kernel indexes them with int32 offsets")


class Packed(NamedTuple):
    """A varlen kernel's parameters beyond the tensors (built at the call).

    Attributes
    ----------
    cu_seqlens : Buffer
        ``CuSeqlens``, ``(batch + 1,)`` int32.
    max_seqlen : Var
        The longest sequence (rows), int32.
    total : PrimExpr | int
        Rows of the packed tensors (``seq_len`` of ``make_attention``), int32.
    """

    cu_seqlens: object
    max_seqlen: object
    total: object


def query_blocks(packed: Packed):
    """Query blocks per sequence, the grid's x extent: ``ceil(min(max_seqlen, total) /
    128)``, at least 1.  No well-formed sequence is longer than ``total``, so a larger
    ``max_seqlen`` only launches CTAs that would leave; clamping it keeps ``qb * 128``
    within int32, and the grid valid for a ``max_seqlen`` of 0 or less (every CTA of a
    block past a sequence leaves).  Rows of a sequence longer than ``max_seqlen``, past
    its blocks, are not written."""
    return T.max(T.ceildiv(T.min(packed.max_seqlen, packed.total), BM), 1)


def varlen_grid(cfg: AttentionConfig, packed: Packed):
    """``(query blocks, heads, sequences)``; sequences: ``CuSeqlens``' extent minus 1."""
    return query_blocks(packed), cfg.heads, packed.cu_seqlens.shape[0] - 1


def varlen_tile(packed: Packed):
    """The walk's ``tile(i)`` (:func:`.kernel._walk`) of a varlen CTA, its one tile: ``(valid,
    last, qb, h, b)`` with ``qb = query_blocks - 1 - blockIdx.x`` (the longest causal rows
    first), ``h = blockIdx.y`` and ``b = 0`` (the packed tensors are one batch entry; the
    sequence is ``blockIdx.z`` and its first row the tile's ``start``)."""
    q = query_blocks(packed)
    return lambda i: (True, True, q - 1 - T.cuda.block_idx("x"), T.cuda.block_idx("y"), 0)


def sequence_live(packed: Packed, start, end):
    """Whether the CTA runs: its sequence's rows ``start .. end - 1`` (int32, from
    ``CuSeqlens``) are well formed, ``0 <= start <= end <= total`` (tested in that order,
    so ``end - start`` cannot overflow), and its query block starts before ``end``.
    It depends on the CTA's ids and two loads of the same addresses only: every thread of
    the CTA takes the same branch.  A live tile has ``n_kv >= 1`` key/value blocks (the
    overlapped schedule reads block 0 unconditionally) and at most ``ceil(total / bn)``."""
    qb = varlen_tile(packed)(0)[2]
    return T.And(T.And(0 <= start, start <= end), T.And(end <= packed.total, qb * BM < end - start))


def as_batch(tensor, packed: Packed):
    """A packed ``(total, heads, head_dim)`` tensor as the batched kernel's ``(1, total,
    heads, head_dim)`` (a view: the TMA map the producer's loads encode).  Its layout
    states all four axes, the unit one with the stride it would have if contiguous
    (the TMA rules read a run-time view's strides from its layout, one axis per
    dimension)."""
    total, heads, head_dim = packed.total, tensor.shape[1], tensor.shape[2]
    row = heads * head_dim
    layout = TileLayout(S[(1, total, heads, head_dim) : (total * row, row, head_dim, 1)])
    return tensor.view(1, total, heads, head_dim, layout=layout)


def varlen_function(cfg: AttentionConfig, body):
    """The ``T.function`` ``attention(Q, K, V, O, LSE, CuSeqlens, max_seqlen)`` around the
    kernel's ``body`` macro (:func:`.kernel._make_body`).

    ``cfg.seq_len`` is ``total`` (an int or a run-time extent), ``cfg.batch`` the number of
    sequences: an int (``CuSeqlens`` is ``(batch + 1,)``) or a run-time extent, whose
    ``CuSeqlens`` extent is then a run-time extent of its own, named ``<batch>_plus_1``
    (a size is read from an extent that is a variable alone)."""
    total, batch, dtype = cfg.seq_len, cfg.batch, cfg.dtype
    count = batch + 1 if isinstance(batch, int) else tvm.tirx.Var(f"{batch.name}_plus_1", "int32")
    q_shape, kv_shape = (total, cfg.heads, cfg.head_dim), (total, cfg.kv_heads, cfg.head_dim)
    q_spec, o_spec = T.Tensor(q_shape, dtype, align=16), T.Tensor(q_shape, dtype, align=16)
    k_spec, v_spec = T.Tensor(kv_shape, dtype, align=16), T.Tensor(kv_shape, dtype, align=16)
    lse_spec = T.Tensor((cfg.heads, total), "float32", align=16)
    cu_spec = T.Tensor((count,), "int32", align=4)

    @T.function
    def attention(Q: q_spec, K: k_spec, V: v_spec, O: o_spec, LSE: lse_spec, CuSeqlens: cu_spec,
                  max_seqlen: T.int32):
        body(Q, K, V, O, LSE, total, Packed(CuSeqlens, max_seqlen, total))

    return attention
