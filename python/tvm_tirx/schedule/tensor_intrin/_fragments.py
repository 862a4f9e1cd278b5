"""Register fragments of the warp-level matrix instructions, and views onto them.

A fragment is a ``rows x cols`` tile (rows and cols 8 or 16) spread over the
32 lanes of a warp, two consecutive elements of a row per 32-bit register: the
layout that ``ldmatrix`` produces from 8 x 8 blocks of 16-bit elements and
that ``mma.sync.m16n8k16`` reads (A: 16 x 16 of (m, k); B: n x 16 of (n, k);
C: 16 x n of (m, n), f32 values in place of element pairs).  PTX ISA
9.7.14.5.15 (``ldmatrix``: lane ``4*r + w`` receives word ``w`` of row ``r`` of
each 8 x 8 matrix) and 9.7.14.5.8 (m16n8k16 fragments: ``groupID = lane / 4``
is the row, ``lane % 4`` the element pair).

In a ``"warp"``-scope buffer a fragment is ``(32, rows * cols / 32)``: lane,
slot.  :func:`fragment_index` gives where element ``(i, j)`` lives.  The 8 x 8
blocks are numbered column-major (block ``b = (j / 8) * (rows / 8) + i / 8``)
and block ``b`` is 32-bit register ``b`` of each lane: for 16 x 16 tiles this is
apache-tvm's ``shared_16x16_to_ldmatrix_32x8_layout``, and for 16 x 16 A and B
it is the register order ``mma.sync`` m16n8k16 reads (a0..a7; b0..b3 of the two
8-wide halves of n).
"""

from __future__ import annotations

from tvm.runtime import DataType
from tvm.tirx.layout import Axis, S, TileLayout
from tvm.tirx.script import builder

__all__ = ["fragment_index", "slots", "register_view", "matrices", "mma_operand", "accumulator_rows"]


def fragment_index(rows: int, cols: int):
    """``(i, j) -> (lane, slot)`` of a ``rows x cols`` fragment (rows, cols in {8, 16}).

    Works on ints and on PrimExprs (descs use it as an index map).  Slot
    ``2 * b + j % 2`` of lane ``4 * (i % 8) + (j % 8) / 2``, ``b`` the 8 x 8 block.
    """

    # written term by term as apache-tvm writes its 16 x 16 map, so that the
    # indices of a schedule's transform_layout compare equal in tensorize
    def index(i, j):
        terms = [2 * (rows // 8) * (j // 8)] if cols == 16 else []
        terms += [(i // 8) * 2] if rows == 16 else []
        slot = terms[0] if terms else None
        for term in terms[1:] + [j % 2]:
            slot = term if slot is None else slot + term
        return 4 * (i % 8) + (j % 8) // 2, slot

    return index


def slots(rows: int, cols: int) -> int:
    """Values each lane holds of a ``rows x cols`` fragment (elements, not registers)."""
    return rows * cols // 32


def register_view(regs, shape, layout, dtype=None):
    """A view of the thread's registers ``regs`` (a ``local`` buffer, one lane's
    slots) with lane-distributed ``layout`` (a ``TileLayout`` with
    ``Axis.laneid`` strides), in ``dtype`` (default: ``regs``'s).  Declared in
    the current IRBuilder frame.

    Raises
    ------
    ValueError
        ``regs`` does not start on a whole ``dtype`` element.
    """
    dtype = dtype or str(regs.dtype)
    ratio = DataType(dtype).bits // DataType(str(regs.dtype)).bits
    offset = regs.elem_offset // ratio if ratio > 1 else regs.elem_offset
    return builder.decl_buffer(shape, dtype, regs.data, None, offset, None, "local", 0, 0, layout)


def _lanes(*pairs):
    """``TileLayout(S[extents : strides])``; ``("L", s)`` strides are lane strides."""
    extents = tuple(e for e, _ in pairs)
    strides = tuple(s[1] @ Axis.laneid if isinstance(s, tuple) else s for _, s in pairs)
    return TileLayout(S[extents:strides])


def matrices(regs, count: int):
    """``ldmatrix`` / ``stmatrix`` registers: ``(count, 8, 4)`` b32 words, word
    ``(m, r, w)`` in register ``m`` of lane ``4 * r + w`` (16-bit ``regs``)."""
    return register_view(regs, (count, 8, 4), _lanes((count, 1), (8, ("L", 4)), (4, ("L", 1))), "uint32")


def mma_operand(regs, n: int, role: str):
    """One k16 step's ``mma.sync`` m16n8k16 operand over a fragment's registers.

    ``n`` is the instruction pair's N (8 or 16).  ``role`` ``"a"``: a 16 x 16
    (m, k) fragment as ``(1, 1, 16, 8)`` b32 words
    (row ``8h + g``, word ``4q + t`` -> register ``2q + h``); ``"b"``: an
    ``n`` x 16 (n, k) fragment as ``(n / 8, 1, 8, 8)`` words (n ``8c + g``
    -> register ``(n / 8) * q + c``); ``"c"``: a 16 x ``n`` f32 (m, n)
    fragment as ``(1, n / 8, 16, 8)`` (column ``8c + 2t + e`` -> slot
    ``4c + 2h + e``).  Lane ``4g + t`` throughout.
    """
    blocks = n // 8
    if role == "a":
        layout = _lanes((2, 1), (8, ("L", 4)), (2, 2), (4, ("L", 1)))
        return register_view(regs, (1, 1, 16, 8), layout, "uint32")
    if role == "b":
        layout = _lanes((blocks, 1), (8, ("L", 4)), (2, blocks), (4, ("L", 1)))
        return register_view(regs, (blocks, 1, 8, 8), layout, "uint32")
    layout = _lanes((1, 0), (blocks, 4), (2, 2), (8, ("L", 4)), (4, ("L", 1)), (2, 1))
    return register_view(regs, (1, blocks, 16, 8), layout)


def accumulator_rows(regs, cols: int):
    """A 16 x ``cols`` f32 fragment as ``(32, cols / 8, 2, 2)``: (lane, 8-column
    block ``c``, row half ``h``, element ``e``) -> slot ``4c + 2h + e``; the
    register side of ``st.<space>.v2.f32`` at warp scope."""
    blocks = cols // 8
    layout = _lanes((8, ("L", 4)), (4, ("L", 1)), (blocks, 4), (2, 2), (2, 1))
    return register_view(regs, (32, blocks, 2, 2), layout)
