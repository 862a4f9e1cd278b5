"""What the backward kernel's macros share, as named tuples: the shared-memory tiles, the
mbarriers, a consumer's registers, the CTA's block of keys, the query block of one
iteration and the thread computing it.

The kernel body (:mod:`.kernel`) allocates the buffers and fills these once per CTA (the
step once per iteration); the macros take them whole, so none takes more than a few
arguments (``tests/python/test_kernel_house.py``).
"""

from __future__ import annotations

from typing import NamedTuple

from ..attention.state import Place  # the thread, its consumer warpgroup (here: keys 64 c ..) and the length

__all__ = ["Inputs", "Outputs", "Shared", "Barriers", "Registers", "Keys", "Step", "Place"]


class Inputs(NamedTuple):
    """The kernel's inputs: Q, K, V, dO ``(batch, seq_len, heads or kv_heads, head_dim)``
    in ``dtype``; LSE and Dsum ``(batch, heads, seq_len)`` float32."""

    Q: object
    K: object
    V: object
    dO: object
    LSE: object
    Dsum: object


class Outputs(NamedTuple):
    """The kernel's outputs: dQacc ``(batch, seq_len, heads, head_dim)`` float32 (added
    to), dK and dV ``(batch, seq_len, kv_heads, head_dim)`` in ``dtype`` (written), and
    with ``deterministic`` ``order``, int32 ``(batch, heads, ceil(seq_len / 64))`` zeroed
    by the caller: per query block, the ``dQ`` reduces done into it so far (None
    otherwise)."""

    dQacc: object
    dK: object
    dV: object
    order: object = None


class Shared(NamedTuple):
    """The shared-memory tiles (128-byte swizzled, 64-column chunks of ``dtype`` unless said).

    Attributes
    ----------
    sk, sv : Buffer
        K and V of the CTA's 128 keys, ``(2, chunks, 64, 64)``: consumer ``c``'s 64 keys
        are ``sk[c]`` (with ``dq_split="columns"`` ``sk`` is the view of a chunk-major
        ``(chunks, 2, 64, 64)`` tile: :func:`.kernel.consumer_tiles`).
    sq, sdo : Buffer
        The ring of Q and dO blocks, ``(stages, chunks, block_q, 64)`` each.
    sds : Buffer
        ``dS^T`` of each consumer, ``(2, block_q / 64, 64 keys, 64 queries)``: the M-major A
        of ``dQ = dS K`` (with ``dq_split="rows"`` the view of a chunk-major tile, as ``sk``).
    sdq : Buffer
        float32 ``(2, dq_columns / 32, 64, 32)``: each consumer's ``dQ`` block (``dq_columns``
        = head_dim, or head_dim / 2 with ``"columns"``) in 128-byte boxes, the source of
        the TMA reduce-add into ``dQacc``.
    srows : Buffer
        float32 ``(stages, 2, block_q)``: the ring stage's ``LSE * log2(e)`` (row 0) and
        ``Dsum`` (row 1) of its ``block_q`` queries (64, or 128 with ``dq_split="rows"``).
    """

    sk: object
    sv: object
    sq: object
    sdo: object
    sds: object
    sdq: object
    srows: object


class Barriers(NamedTuple):
    """The mbarriers, ``uint64`` ``(n, 1)`` shared tensors.

    Attributes
    ----------
    kv_full : Buffer
        ``(1, 1)``: K and V loaded (one phase per kernel).
    full, empty : Buffer
        The Q / dO ring's stages loaded (``FILLS`` arrivals: the TMA thread and the 32
        lanes copying LSE and Dsum) / released (one arrival per consumer), ``(stages, 1)``
        (:class:`~tvm_tirx.kernels.parts.Ring`'s protocol).
    """

    kv_full: object
    full: object
    empty: object


class Registers(NamedTuple):
    """A consumer thread's registers (``T.alloc_local``, wgmma fragment layouts).

    Attributes
    ----------
    S, dP : Buffer
        float32 ``(64, block_q)`` accumulators of ``S^T = K Q^T`` and ``dP^T = V dO^T`` (keys x
        queries); ``S`` then holds ``P^T`` and ``dP`` holds ``dS^T`` (times the scale).
    dV, dK : Buffer
        float32 ``(64, head_dim)`` accumulators of the warpgroup's 64 keys.
    dQ : Buffer
        float32 ``(64, dq_columns)`` accumulators of the block's ``dQ`` share (64 queries).
    Pw, dSw : Buffer
        ``P^T`` and ``dS^T`` packed to 16-bit pairs, uint32 ``(1, block_q / 16, 64, 8)``: the rs
        wgmma's A fragment (and, seen through the packed accumulator layout, the words
        stored into ``sds``).
    W : Buffer
        uint32 ``(64, head_dim / 2)`` (the packed accumulator layout): ``dV`` or ``dK``
        rounded to 16-bit pairs for the store.
    turn : Buffer
        int32 ``(1,)``: with ``deterministic``, the ``order`` count thread 0 of the
        warpgroup last read (None otherwise).
    """

    S: object
    dP: object
    dV: object
    dK: object
    dQ: object
    Pw: object
    dSw: object
    W: object
    turn: object = None


class Keys(NamedTuple):
    """The CTA's block: keys ``128 kb ..`` of key/value head ``hk`` of batch entry ``b``.

    Attributes
    ----------
    b, hk, kb : PrimExpr
        Batch entry, key/value head, key block (int32).
    steps : PrimExpr
        The iterations the CTA walks: ``group x`` query blocks per head.
    """

    b: object
    hk: object
    kb: object
    steps: object


class Step(NamedTuple):
    """One iteration: query block ``qb`` of query head ``h``, ring iteration ``g`` in stage ``s``."""

    g: object
    s: object
    h: object
    qb: object
