"""The named tuples the GEMM's producer and consumer macros take (so that none takes more
than a few arguments)."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Shared", "Work"]


class Shared(NamedTuple):
    """The CTA's shared memory (``T.alloc_shared``, ``shared.dyn``).

    Attributes
    ----------
    sa, sb : Buffer
        The ring's A and B stages (``in_dtype``, 128-byte swizzled, :mod:`.operands`).
    so : Buffer
        The bf16 output tiles, uint32 ``(2, out_block_n / 64, 64, 32)`` (a token
        ``(1, 1, 8, 32)`` for float32 output).
    full, empty : Buffer
        The ring's mbarriers, ``(stages, 1)`` uint64.
    """

    sa: object
    sb: object
    so: object
    full: object
    empty: object


class Work(NamedTuple):
    """A consumer's job: output tile ``t`` (int32), the ring iteration ``g0`` of its first K
    tile, the thread index ``tid``, the consumer warpgroup ``c`` (0 or 1), the CTA's split
    of K ``split`` (0 with one split), with splits the split-K
    :class:`~tvm_tirx.kernels.parts.split_k.Workspace` ``work`` (None with one split) and,
    with fp8 block scales, their :class:`~.block_scales.Scales` ``scales`` (else None)."""

    t: object
    g0: object
    tid: object
    c: object
    split: object = 0
    work: object = None
    scales: object = None
