"""Shared-memory matrix descriptors of ``wgmma``, derived from a view's layout.

A ``wgmma`` operand in shared memory is named by a 64-bit matrix descriptor:
its start address, a leading and a stride byte offset (LBO, SBO), a swizzle
mode and a base offset (PTX ISA 9.7.15.5.1.2, "Shared Memory Matrix Layout"
and its "Matrix Descriptor" subsection; 9.7.17.5.1.2 in the numbering of
apache-tvm 0.27's PTX table).  The descriptor describes one of eight
*canonical layouts* of the operand's ``(MN, K)`` tile, counted in 16-byte
chunks (``T = 16 / element bytes`` elements each):

=============  ====================================================================
K-major        rows of the tile (M or N) are 8-row groups of core matrices;
               the instruction's K (always 32 bytes: k16 of 16-bit, k8 of tf32,
               k32 of 8-bit types) is two chunks
  no swizzle   core matrix = 8 rows x 16 bytes, 128 contiguous bytes; next chunk
               along K at LBO, next 8-row group at SBO
  32/64/128B   rows of 32/64/128 bytes (2/4/8 chunks, the instruction reads two
               of them), 8 rows per swizzle atom; next 8-row group at SBO; LBO
               unused (encoded as 1)
MN-major       (16-bit types only: they have the transpose immediates)
  no swizzle   core matrix = 8 K-rows x 16 bytes of MN, 128 contiguous bytes;
               next MN chunk at SBO, next 8-K group at LBO
  32/64/128B   K-rows of 32/64/128 bytes of MN, 8 K-rows per swizzle atom; next
               atom along MN at LBO, next 8-K group at SBO
=============  ====================================================================

A swizzled mode XORs address bits ``[4, 4 + b)`` with bits ``[7, 7 + b)``
(``b`` = 1, 2, 3 for 32, 64, 128 bytes): the pattern repeats every 256, 512,
1024 bytes, and with base offset 0 (all we encode: apache-tvm's encoder fixes
it) the pattern starts on such a boundary.  apache-tvm's ``ComposeLayout(p, b,
3, tile)`` over elements of ``2**p`` per 16 bytes is the same swizzle.

:func:`analyse` finds the mode, LBO and SBO that reproduce the view's layout
(element for element, at every group and repeat coordinate of a call) or
says why none does.  Facts from the PTX ISA sections above; the canonical
forms as CUTLASS states them in ``cute/atom/mma_traits_sm90_gmma.hpp``.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from .. import axis_table, ViewMap

__all__ = ["Canonical", "Analysis", "analyse", "canonical_at_origin", "ACCEPTED", "hardware_offset"]

#: Swizzle bytes -> (XOR bit count b, apache-tvm encoder's code in tensor-map order).
SWIZZLES = {0: (0, 0), 32: (1, 1), 64: (2, 2), 128: (3, 3)}
#: Largest LBO/SBO: a 14-bit field of 16-byte units.
_FIELD_LIMIT = 1 << 18

#: What a user may write, for messages.
ACCEPTED = (
    "a canonical wgmma layout (PTX ISA 9.7.15.5.1.2): K-major with no swizzle "
    "(core matrices of 8 rows x 16 bytes, 128 contiguous bytes each) or with the "
    "32/64/128-byte swizzle (rows of 32/64/128 bytes, ComposeLayout(p, 1/2/3, 3, ...) "
    "with 2**p elements per 16 bytes){mn}, starting on a 16-byte boundary (a swizzled "
    "layout: on its 256/512/1024-byte pattern boundary)"
)
_MN_TEXT = "; for 16-bit types also MN-major with no swizzle or the 32/64/128-byte swizzle"


@dataclass(frozen=True)
class Canonical:
    """One canonical layout: ``major`` ``"K"`` or ``"MN"``, ``swizzle`` bytes (0 = none),
    ``lbo``/``sbo`` in bytes (multiples of 16)."""

    major: str
    swizzle: int
    lbo: int
    sbo: int

    @property
    def bits(self) -> int:
        """XOR bit count of the swizzle (0 without)."""
        return SWIZZLES[self.swizzle][0]

    @property
    def period(self) -> int:
        """Bytes a tile must be aligned to: the swizzle pattern's period, or 16."""
        return 128 << self.bits if self.swizzle else 16

    @property
    def code(self) -> int:
        """The ``swizzle`` argument of ``T.cuda.wgmma.encode_matrix_descriptor``."""
        return SWIZZLES[self.swizzle][1]

    def describe(self) -> str:
        """``"K-major, 128-byte swizzle, LBO 16, SBO 1024"``."""
        mode = f"{self.swizzle}-byte swizzle" if self.swizzle else "no swizzle"
        return f"{self.major}-major, {mode}, LBO {self.lbo} B, SBO {self.sbo} B"


def _swz(address: int, bits: int) -> int:
    """The swizzle of byte ``address`` (relative to a pattern-aligned base)."""
    return address ^ (((address >> 7) & ((1 << bits) - 1)) << 4) if bits else address


def hardware_offset(c: Canonical, start: int, mn, k, elem_bytes: int):
    """Byte offset (from a pattern-aligned base) the hardware reads for element
    ``(mn, k)`` of a tile whose descriptor starts at byte ``start``.

    ``mn`` and ``k`` are ints, or integer numpy arrays of one shape (the
    offsets of those elements, elementwise)."""
    chunk = 16 // elem_bytes
    width = max(c.swizzle // 16, 1)  # chunks per swizzle row
    if c.major == "K":
        row, group = mn % 8, mn // 8
        col, e = divmod(k, chunk)
        if c.swizzle:
            addr = start + 16 * width * row + c.sbo * group + 16 * col
        else:
            addr = start + 16 * row + c.sbo * group + c.lbo * col
    else:
        j, e = divmod(mn, chunk)
        krow, kgroup = k % 8, k // 8
        if c.swizzle:
            addr = start + 16 * (j % width) + c.lbo * (j // width) + 16 * width * krow + c.sbo * kgroup
        else:
            addr = start + c.sbo * j + 16 * krow + c.lbo * kgroup
    return _swz(addr, c.bits) + e * elem_bytes


def _probe(offsets, c_bits, start, mn, k, rows, cols):
    """Unswizzled byte distance from the start to element ``(mn, k)``, or 0 when it is outside the tile."""
    if mn >= rows or k >= cols:
        return 0
    return _swz(int(offsets[mn][k]), c_bits) - start


def _candidate(major, swizzle, offsets, elem_bytes):
    """The :class:`Canonical` of ``major``/``swizzle`` whose LBO/SBO the tile's
    probe elements give (not yet verified), or None when they cannot be encoded."""
    bits, _ = SWIZZLES[swizzle]
    rows, cols = len(offsets), len(offsets[0])
    chunk, width = 16 // elem_bytes, max(swizzle // 16, 1)
    start = int(offsets[0][0])
    if major == "K":
        sbo = _probe(offsets, bits, start, 8, 0, rows, cols)
        lbo = 16 if swizzle else _probe(offsets, bits, start, 0, chunk, rows, cols)
    elif swizzle:
        lbo = _probe(offsets, bits, start, chunk * width, 0, rows, cols)
        sbo = _probe(offsets, bits, start, 0, 8, rows, cols)
    else:
        sbo = _probe(offsets, bits, start, chunk, 0, rows, cols)
        lbo = _probe(offsets, bits, start, 0, 8, rows, cols)
    if any(x < 0 or x % 16 or x >= _FIELD_LIMIT for x in (lbo, sbo)):
        return None
    return Canonical(major, swizzle, lbo, sbo)


def _mismatch(c, offsets, elem_bytes):
    """``(matched, (mn, k, found, expected))`` of the first element of the tile
    (row-major) that canonical layout ``c`` does not place where ``offsets`` has it;
    ``(count, None)`` when every element matches.  Every element is compared
    (``offsets``: a ``(rows, cols)`` int array)."""
    start = int(offsets[0, 0])
    if start % 16:  # the descriptor's start address counts 16-byte units
        return 0, (0, 0, start, start - start % 16)
    mn, k = np.indices(offsets.shape, dtype=np.int64)
    want = hardware_offset(c, start, mn, k, elem_bytes)
    wrong = np.flatnonzero(want != offsets)  # row-major order
    if wrong.size == 0:
        return offsets.size, None
    first = int(wrong[0])
    mn, k = divmod(first, offsets.shape[1])
    return first, (mn, k, int(offsets[mn, k]), int(want[mn, k]))


def _tile_offsets(buf, lead, rows, cols, elem_bytes):
    """Byte offsets of view ``buf``'s ``(rows, cols)`` tile at leading coordinate
    ``lead``: a ``(rows, cols)`` int64 array."""
    table = axis_table(buf)
    if table is not None and table["m"].shape[len(lead) :] == (rows, cols):
        return table["m"][tuple(lead)] * elem_bytes
    view = ViewMap(buf)
    return np.array(
        [[view.offset((*lead, mn, k)) * elem_bytes for k in range(cols)] for mn in range(rows)], dtype=np.int64
    )


def _fit(offsets, elem_bytes, allow_mn):
    """``(Canonical, None)`` for the first canonical layout that reproduces
    ``offsets``; else ``(None, closest)`` with the candidate that matched most
    elements and its first mismatch."""
    best = (None, -1, None)
    for major in ("K", "MN") if allow_mn else ("K",):
        for swizzle in (128, 64, 32, 0):
            c = _candidate(major, swizzle, offsets, elem_bytes)
            if c is None:
                continue
            matched, miss = _mismatch(c, offsets, elem_bytes)
            if miss is None:
                return c, None
            if matched > best[1]:
                best = (c, matched, miss)
    return None, best


def accepted(allow_mn: bool) -> str:
    """The canonical layouts a tile of this operand may have, for messages."""
    return ACCEPTED.format(mn=_MN_TEXT if allow_mn else " (MN-major only for 16-bit types)")


def _closest_text(best, lead, offsets, elem_bytes) -> str:
    c, _, miss = best
    if c is None:
        chunk = 16 // elem_bytes
        offsets = offsets.tolist()
        row8 = offsets[8][0] - offsets[0][0] if len(offsets) > 8 else None
        col = offsets[0][chunk] - offsets[0][0] if len(offsets[0]) > chunk else None
        return (
            f"the tile at {tuple(lead)}: element (8, 0) at byte +{row8}, element (0, {chunk}) at +{col} "
            f"from element (0, 0), element (0, 1) at +{offsets[0][1] - offsets[0][0]}: no canonical "
            "layout places them so (LBO/SBO are multiples of 16 bytes below 256 KiB)"
        )
    mn, k, found, want = miss
    return (
        f"element ({mn}, {k}) of the tile at {tuple(lead)} lies at byte +{found}; the closest "
        f"canonical layout ({c.describe()}) places it at +{want}"
    )


@functools.lru_cache(maxsize=512)
def canonical_at_origin(buf, lead_rank: int, rows: int, cols: int, elem_bytes: int, allow_mn: bool):
    """The :class:`Canonical` of view ``buf``'s tile at leading coordinate 0, or
    a reason string (for messages) when no descriptor describes it."""
    lead = (0,) * lead_rank
    offsets = _tile_offsets(buf, lead, rows, cols, elem_bytes)
    c, best = _fit(offsets, elem_bytes, allow_mn)
    return c if c is not None else _closest_text(best, lead, offsets, elem_bytes)


@dataclass(frozen=True)
class Analysis:
    """A view's descriptor for every coordinate of one call.

    Attributes
    ----------
    canonical : Canonical
        Mode, LBO and SBO (the same at every coordinate).
    steps : tuple[int, ...]
        Bytes the start moves per unit of each repeat axis of the operand.
    first, last : int
        Smallest and largest element offset the call reads (from the view's start).
    """

    canonical: Canonical
    steps: tuple
    first: int
    last: int


def _starts(buf, group, repeat, rows, cols, elem_bytes, canonical):
    """``{(g, r): start byte}`` after verifying the tile at every coordinate, or a reason."""
    starts, lo, hi = {}, None, None
    for g in itertools.product(*(range(n) for n in group)):
        for r in itertools.product(*(range(n) for n in repeat)):
            offsets = _tile_offsets(buf, (*g, *r), rows, cols, elem_bytes)
            _, miss = _mismatch(canonical, offsets, elem_bytes)
            if miss is not None:
                mn, k, found, want = miss
                return (
                    f"at group {g}, repeat {r}: element ({mn}, {k}) lies at byte +{found}, "
                    f"{canonical.describe()} (the layout at the origin) places it at +{want}"
                )
            starts[(g, r)] = int(offsets[0, 0])
            lo = int(offsets.min()) if lo is None else min(lo, int(offsets.min()))
            hi = int(offsets.max()) if hi is None else max(hi, int(offsets.max()))
    return starts, lo // elem_bytes, hi // elem_bytes


def _steps(starts, repeat):
    """Per-axis byte steps of the start over the repeat coordinates (group 0), or a
    reason when the start is not ``origin + sum(step * coordinate)``."""
    g0 = next(iter(starts))[0]
    origin = starts[(g0, (0,) * len(repeat))]
    steps = []
    for axis, n in enumerate(repeat):
        unit = tuple(int(a == axis) for a in range(len(repeat)))
        steps.append(starts[(g0, unit)] - origin if n > 1 else 0)
    for (g, r), start in starts.items():
        if g == g0 and start != origin + sum(s * x for s, x in zip(steps, r)):
            return f"the tile at repeat {r} starts at byte +{start - origin}, not a constant step per repeat axis"
    return tuple(steps)


@functools.lru_cache(maxsize=512)
def analyse(buf, group: tuple, repeat: tuple, rows: int, cols: int, elem_bytes: int, allow_mn: bool):
    """The :class:`Analysis` of view ``buf`` (shape ``(*group, *repeat, rows, cols)``)
    or a reason string: why no one descriptor plus a constant offset per
    repeat step describes every tile of the call."""
    c = canonical_at_origin(buf, len(group) + len(repeat), rows, cols, elem_bytes, allow_mn)
    if isinstance(c, str):
        return c
    found = _starts(buf, group, repeat, rows, cols, elem_bytes, c)
    if isinstance(found, str):
        return found
    starts, first, last = found
    steps = _steps(starts, repeat)
    if isinstance(steps, str):
        return steps
    return Analysis(c, steps, first, last)
