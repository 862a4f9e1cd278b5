"""Accumulator tiles: a memory tile and the accumulator registers, viewed thread by thread.

A ``wgmma`` or ``mma.sync`` accumulator is spread over the threads by the
ISA's fragment map (PTX ISA 9.7.15.5.1.1, "Matrix D" of wgmma; 9.7.14.5.8,
the C/D fragment of ``mma.m16n8``).  With ``g = lane / 4`` and ``t = lane % 4``
both maps read the same way: thread ``32 w + 4 g + t`` holds, of each tile of
``16 W`` rows (``W = 4`` warps for wgmma, 1 for mma.sync) and each block ``b``
of 8 columns,

* rows ``16 w + g`` and ``16 w + g + 8`` (``h = 0, 1``);
* columns ``8 b + 2 t`` and ``8 b + 2 t + 1`` (``e = 0, 1``), in register
  ``4 b + 2 h + e`` of the tile (f32 / s32 accumulators);
* or, packed two 16-bit values per b32 word (an f16 accumulator, or bf16x2 /
  f16x2 words converted from f32 ones), word ``4 b + t`` of rows ``h``, in
  register ``2 b + h``.

To store (or load) the accumulators, a tile call pairs each thread's registers
with the memory they belong to.  :func:`accumulator_tile` returns both sides,
seen as ``(*group, *repeat, *atom)`` the same way::

    acc = T.alloc_local((64, 256), "float32", layout=accumulator_layout(256))
    ...
    T.cuda.tile.apply(T.ptx["st.global.v2.f32"],
                      *accumulator_tile(C.sub[r0 : r0 + 64, c0 : c0 + 256], acc, "wgmma"),
                      scope="warpgroup")

The group is ``(warp, lane)`` for wgmma (``scope="warpgroup"``) and
``(lane,)`` for mma.sync (``scope="warp"``); the repeat axes are the
accumulator's tile axes, the column blocks ``b`` and the row halves ``h``; the
atom is the ``vector`` columns one instruction moves (2: ``.v2.f32`` of
``e = 0, 1``; 1: one element or one packed word).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm.runtime import DataType
from tvm.tirx.layout import Axis, S, TileLayout

from .families.wgmma import accumulator_col, accumulator_layout, accumulator_row
from .ir.views import int_or_none

__all__ = ["accumulator_layout", "mma_accumulator_layout", "accumulator_tile", "accumulator_registers",
           "accumulator_row", "accumulator_col"]


def mma_accumulator_layout(m_tiles: int | None = None, n_tiles: int | None = None, packed: bool = False):
    """The register layout of ``mma.sync`` m16n8 accumulators (PTX ISA 9.7.14.5.8).

    ``(16, 8)`` f32 (with ``packed``: ``(16, 4)`` b32 words), or ``(m_tiles,
    n_tiles, 16, 8)`` when either count is given: element ``(8 h + g, 2 t + e)``
    of tile ``(i, j)`` in register ``4 (n_tiles i + j) + 2 h + e`` of lane
    ``4 g + t`` (packed: word ``t`` in register ``2 (n_tiles i + j) + h``).

    Returns
    -------
    tvm.tirx.layout.TileLayout
    """
    lane = Axis.laneid
    if packed:
        extents, strides, regs = (2, 8, 4), (1, 4 @ lane, 1 @ lane), 2
    else:
        extents, strides, regs = (2, 8, 4, 2), (2, 4 @ lane, 1 @ lane, 1), 4
    if m_tiles is not None or n_tiles is not None:
        mt, nt = m_tiles or 1, n_tiles or 1
        extents, strides = (mt, nt, *extents), (regs * nt, regs, *strides)
    return TileLayout(S[extents:strides])


@dataclass(frozen=True)
class _Fragment:
    """How an accumulator tensor is spread: the tile axes, warps, column blocks, packing."""

    wgmma: bool
    m_tiles: int | None  # leading tile axis of the accumulator, if any
    blocks: int  # 8-column blocks per tile row (wgmma: N / 8; mma.sync: n_tiles)
    block_axis: bool  # whether the views have an axis for the blocks
    packed: bool

    @property
    def warps(self) -> int:
        return 4 if self.wgmma else 1

    @property
    def rows(self) -> int:
        """Rows of the memory tile."""
        return (self.m_tiles or 1) * 16 * self.warps

    @property
    def pair(self) -> int:
        """Columns of a thread per block and row half, as elements of the accumulator's dtype."""
        return 1 if self.packed else 2


def _layouts_of(fragment: str, acc):
    """``{_Fragment: layout}`` of every layout an accumulator of ``acc``'s shape may have."""
    shape = tuple(int(n) for n in acc.shape)
    out = {}
    if fragment == "wgmma" and len(shape) in (2, 3) and shape[-2] == 64:
        mt = shape[0] if len(shape) == 3 else None
        for packed, n in ((False, shape[-1]), (True, 2 * shape[-1])):
            if n % 8 == 0:
                out[_Fragment(True, mt, n // 8, True, packed)] = accumulator_layout(n, mt, packed)
    elif fragment == "mma.sync" and len(shape) in (2, 4) and shape[-2] == 16:
        mt, nt = (shape[0], shape[1]) if len(shape) == 4 else (None, None)
        for packed, cols in ((False, 8), (True, 4)):
            if shape[-1] == cols:
                out[_Fragment(False, mt, nt or 1, nt is not None, packed)] = mma_accumulator_layout(mt, nt, packed)
    return out


def _fragment(acc, fragment: str) -> _Fragment:
    """The :class:`_Fragment` of accumulator tensor ``acc``; ValueError unless its
    layout is one of the ISA's maps (:func:`accumulator_layout`, :func:`mma_accumulator_layout`)."""
    kind = "wgmma" if fragment.startswith("wgmma") else "mma.sync" if fragment.startswith("mma") else None
    if kind is None:
        raise ValueError(f"accumulator fragment {fragment!r}: expected 'wgmma' or 'mma.sync'")
    for spec, layout in _layouts_of(kind, acc).items():
        if tvm_ffi.structural_equal(acc.layout, layout):
            return spec
    maker = ("accumulator_layout(N[, m_tiles][, packed=True]) for (64, N) / (m_tiles, 64, N)" if kind == "wgmma" else
             "mma_accumulator_layout([m_tiles, n_tiles][, packed=True]) for (16, 8) / (m_tiles, n_tiles, 16, 8)")
    raise ValueError(
        f"accumulator {acc.name} {tuple(int(n) for n in acc.shape)} with layout {acc.layout} is not a {kind} "
        f"accumulator: allocate it with layout={maker} (tvm_tirx.tile.fragments)"
    )


def _vector(spec: _Fragment, vector) -> int:
    """The atom's columns: 2 (f32 pairs) or 1; packed words take 1."""
    allowed = (1,) if spec.packed else (1, 2)
    vector = allowed[-1] if vector is None else int(vector)
    if vector not in allowed:
        raise ValueError(f"vector={vector}: expected one of {allowed} for a {'packed' if spec.packed else 'f32'} accumulator")
    return vector


def _repeat(spec: _Fragment, vector: int) -> tuple:
    """The views' repeat and atom extents after the group axes."""
    out = (spec.m_tiles,) if spec.m_tiles is not None else ()
    out += (spec.blocks,) if spec.block_axis else ()
    out += (2,)  # the row halves h
    if spec.pair // vector > 1:
        out += (spec.pair // vector,)
    return out + (vector,)


def _group(spec: _Fragment) -> tuple:
    return (4, 32) if spec.wgmma else (32,)


def _register_layout(spec: _Fragment, vector: int):
    """The layout of the register view: each coordinate on its thread, in its register."""
    thread = Axis.tid_in_wg if spec.wgmma else Axis.laneid
    extents, strides = [8, 4], [4 @ thread, 1 @ thread]
    if spec.wgmma:
        extents, strides = [4, *extents], [32 @ thread, *strides]
    pair = spec.pair
    if spec.m_tiles is not None:
        extents.append(spec.m_tiles)
        strides.append(spec.blocks * 2 * pair)
    if spec.block_axis:
        extents.append(spec.blocks)
        strides.append(2 * pair)
    extents.append(2)
    strides.append(pair)
    if pair // vector > 1:
        extents.append(pair // vector)
        strides.append(vector)
    extents.append(vector)
    strides.append(1)
    return TileLayout(S[tuple(extents) : tuple(strides)])


def accumulator_registers(acc, fragment: str, *, vector: int | None = None):
    """The accumulator registers ``acc`` seen thread by thread: ``(*group, *repeat, vector)``.

    The register side of :func:`accumulator_tile` alone, e.g. to convert f32
    accumulators into packed words with ``cvt.rn.bf16x2.f32`` (the words'
    view takes ``e = 1`` and ``e = 0`` of the f32 view: ``.sub[..., 1:2]``,
    ``.sub[..., 0:1]``).  Made while the kernel is parsed (call it in the
    kernel's body or a ``T.macro``).

    Parameters
    ----------
    acc : Buffer
        The accumulators as allocated: ``(64, N)`` / ``(m_tiles, 64, N)`` with
        :func:`accumulator_layout` for ``"wgmma"``; ``(16, 8)`` / ``(m_tiles,
        n_tiles, 16, 8)`` with :func:`mma_accumulator_layout` for
        ``"mma.sync"``.  32-bit elements: f32 / s32 values, or b32 words of two
        16-bit values (the ``packed=True`` layouts, ``N / 2`` or 4 columns).
    fragment : str
        ``"wgmma"`` or ``"mma.sync"`` (or an opcode starting with either).
    vector : int | None
        Columns per instruction: 2 (default for f32: ``.v2`` pairs) or 1 (the
        only choice for packed words).

    Returns
    -------
    Buffer
        A view of ``acc``: group ``(4, 32)`` (warp in the warpgroup, lane) or
        ``(32,)`` (lane), then ``[m_tiles,] [blocks,] 2 [, 2], vector``.

    Raises
    ------
    ValueError
        ``acc``'s shape and layout are not a fragment of ``fragment``, or ``vector``
        is not allowed.
    """
    spec = _fragment(acc, fragment)
    vector = _vector(spec, vector)
    shape = (*_group(spec), *_repeat(spec, vector))
    return acc.view(*shape, layout=_register_layout(spec, vector))


def _memory_view(tile, spec: _Fragment, vector: int, acc_dtype: str):
    """``tile`` (rows, *column axes) cut into the register view's shape."""
    if any(int_or_none(n) is None for n in tile.shape):
        raise ValueError(
            f"accumulator tile {tile.name} {tuple(tile.shape)}: expected constant extents (a slice "
            "a:a+64 with a run-time a has a run-time extent; take the tile as C.view(M // 64, 64, N // 256, "
            "256).sub[bm, :, bn, :] instead)"
        )
    if DataType(str(tile.dtype)).bits != 32 and spec.packed:
        tile = tile.view(acc_dtype)  # 16-bit values seen as the words that pack them
    shape = tuple(int(n) for n in tile.shape)
    cols = spec.blocks * 4 * spec.pair
    width = 4 * spec.pair  # columns of one 8-column block, in the tile's elements
    if (len(shape) < 2 or shape[0] != spec.rows or _product(shape[1:]) != cols or shape[-1] % width
            or DataType(str(tile.dtype)).bits != 32):
        raise ValueError(
            f"accumulator tile {tile.name} {shape} {tile.dtype}: expected ({spec.rows}, {cols}) 32-bit elements "
            f"(or 16-bit ones for packed words), its columns possibly split over several axes"
        )
    rows = ((spec.m_tiles,) if spec.m_tiles is not None else ()) + ((4,) if spec.wgmma else ()) + (2, 8)
    split = tile.view(*rows, *shape[1:-1], shape[-1] // width, 4, spec.pair)
    r, c = len(rows), len(shape) - 1  # row axes; column axes (outer ones, block, t, e from r)
    mt = (0,) if spec.m_tiles is not None else ()
    w = (r - 3,) if spec.wgmma else ()
    order = (*w, r - 1, r + c, *mt, *range(r, r + c), r - 2, r + c + 1)
    return split.permute(*order).view(*_group(spec), *_repeat(spec, vector))


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def accumulator_tile(tile, acc, fragment: str, *, vector: int | None = None):
    """``(memory view, register view)``: a memory tile and accumulators ``acc``
    matched coordinate by coordinate, for one tile call that stores or loads them.

    ``T.cuda.tile.apply(T.ptx["st.global.v2.f32"], *accumulator_tile(C_tile, acc,
    "wgmma"), scope="warpgroup")`` stores a warpgroup's ``(64, N)`` f32
    accumulators; with packed bf16x2 words, ``st.global.b32`` (or
    ``st.shared.b32``) and ``vector=1``; with ``"mma.sync"``, ``scope="warp"``.
    Swap the pair for a load (``ld.global.v2.f32``: registers first).  Made while
    the kernel is parsed (call it in the kernel's body or a ``T.macro``).

    Parameters
    ----------
    tile : Buffer
        The memory the accumulators cover (global or shared, any view): ``(rows,
        cols)`` with rows ``m_tiles * 64`` (wgmma) or ``m_tiles * 16``
        (mma.sync) and cols the accumulator's columns (``N``; ``n_tiles * 8``;
        for packed words ``N / 2`` words, or ``N`` 16-bit values that are then
        seen as words).  The columns may be split over several axes, row-major:
        a shared tile cut into TMA boxes ``(boxes, rows, words)`` is passed as
        ``tile.permute(1, 0, 2)``, ``(rows, boxes, words)``.  Its layout is kept
        (a swizzled tile stays swizzled).
    acc : Buffer
        The accumulators, see :func:`accumulator_registers`.
    fragment : str
        ``"wgmma"`` or ``"mma.sync"``.
    vector : int | None
        Columns per instruction (see :func:`accumulator_registers`).

    Returns
    -------
    tuple[Buffer, Buffer]
        ``(memory view, register view)`` of the same shape ``(*group, *repeat,
        vector)``; the tile call checks alignment, bounds and ownership as usual.

    Raises
    ------
    ValueError
        The tile's shape or element width does not match the accumulators, or
        as :func:`accumulator_registers`.
    """
    regs = accumulator_registers(acc, fragment, vector=vector)
    spec = _fragment(acc, fragment)
    return _memory_view(tile, spec, int(regs.shape[-1]), str(acc.dtype)), regs

