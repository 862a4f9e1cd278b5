"""View arithmetic: the ``(group, repeat, atom)`` coordinates of a tile call's
tensor views, and the storage offsets (elements or register slots) they map to.
(What an operand is -- a view or a scalar -- is decided in :mod:`.operands`.)

Shared by the parse-time rules (:mod:`..rules.static_rules`), the proofs
(:mod:`..analysis.memory_proofs`, :mod:`..analysis.ownership`) and the emitter (:mod:`..rules.emit`).
"""

from __future__ import annotations

import itertools

import tvm
from tvm.runtime import DataType
from tvm.tirx import IntImm, floordiv, floormod
from tvm.tirx.layout import S, TileLayout

__all__ = [
    "static_int",
    "int_or_none",
    "layout_of",
    "ViewMap",
    "atom_of",
    "repeat_shape",
    "call_repeat",
    "role_axes",
    "repeat_rank",
    "coords",
    "group_coords",
    "offset_summary",
    "dtype_bytes",
    "xor_swizzle",
]


def static_int(x):
    """``x`` as a Python int when it is (or simplifies to) a constant, else ``x``
    (an int, an ``IntImm``, or any integer ``PrimExpr``)."""
    if isinstance(x, int):
        return x
    if not isinstance(x, IntImm) and tvm.ir.is_prim_expr(x):
        x = tvm.sym.Analyzer().simplify(x)  # e.g. a slice w*32 : w*32 + 32
    if isinstance(x, IntImm):
        return int(x)
    return x


def int_or_none(x) -> int | None:
    """``x`` as a Python int when it is (or simplifies to) a constant, else None."""
    try:
        value = static_int(x)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, int) else None


def dtype_bytes(dtype) -> int:
    """Bytes of one element of ``dtype``, every lane counted (``float32x4`` -> 16).
    Sub-byte dtypes count as one byte (no tile operand has them)."""
    dt = DataType(dtype)
    return max(dt.bits * dt.lanes // 8, 1)


def layout_of(buf):
    """The TileLayout of buffer view ``buf`` (row-major when it has none)."""
    if buf.layout is not None:
        return buf.layout
    return TileLayout(S[tuple(static_int(s) for s in buf.shape)])


class ViewMap:
    """Coordinates of a view -> offsets in its storage (elements or register slots).

    The view's layout may have other shard extents than the view's shape
    (``X.view(4, 1)`` keeps ``X``'s one-axis layout, ``Y.view(2, 4)`` of a
    ``(4, 2)`` tensor its ``(4, 2)`` layout); a coordinate is then linearised
    row-major over the view's shape and re-split over the layout's shard
    extents, which is how the layout reads it.
    """

    def __init__(self, buf):
        self.buf = buf
        self.layout = layout_of(buf)
        self.shape = tuple(static_int(s) for s in buf.shape)
        tile = getattr(self.layout, "tile_layout", self.layout)
        self.shard = tuple(static_int(it.extent) for it in tile.shard)
        #: offset(c) is a sum of one term per view axis: a strided TileLayout
        #: whose shard splits the same row-major index at compatible points
        #: (every suffix product of one divides or is divided by every suffix
        #: product of the other, so no view axis carries into another's
        #: digits).  A swizzle is not.
        self.separable = tile is self.layout and _compatible_splits(self.shape, self.shard)
        #: ``(per_element, swizzle_len, atom_len)`` of a ComposeLayout's XOR
        #: swizzle of the tile's storage offset, computed here like the tile's terms
        self._swizzle = _swizzle_of(self.layout) if tile is not self.layout else None
        static = tile is self.layout or self._swizzle is not None
        self._terms = self._static_terms(tile) if static else None

    @staticmethod
    def _static_terms(tile):
        """``(iters, offsets)`` of a TileLayout with constant extents and strides,
        so offsets are computed here rather than through apache-tvm's
        ``Layout.apply`` (same arithmetic: each shard iter adds coordinate x
        stride to its axis; replicas add nothing to a single coordinate).
        None when anything is symbolic."""
        iters = []
        for it in tile.shard:
            extent, stride = static_int(it.extent), static_int(it.stride)
            if not isinstance(extent, int) or not isinstance(stride, int):
                return None
            iters.append((extent, stride, str(it.axis.name)))
        offsets = {}
        for axis, value in tile.offset.items():
            value = static_int(value)
            if not isinstance(value, int):
                return None
            offsets[str(getattr(axis, "name", axis))] = value
        return iters, offsets

    @property
    def static_terms(self):
        """``(iters, offsets, swizzle)`` when :meth:`apply` computes offsets itself:
        ``iters`` one ``(extent, stride, axis name)`` per shard iter, ``offsets``
        the layout's constant ``{axis name: offset}``, ``swizzle`` the
        ``(per_element, swizzle_len, atom_len)`` of :func:`xor_swizzle` applied
        to ``"m"`` (or None); None when the layout is symbolic or not a
        (swizzled) TileLayout."""
        return None if self._terms is None else (*self._terms, self._swizzle)

    def coord(self, coord):
        """``coord`` re-expressed in the layout's own shard axes."""
        if self.shard == self.shape:
            return tuple(coord)
        flat = 0
        for c, n in zip(coord, self.shape):
            flat = flat * n + c
        out = []
        static = isinstance(flat, int)
        for n in reversed(self.shard):
            out.append(flat % n if static else floormod(flat, n))
            flat = flat // n if static else floordiv(flat, n)
        return tuple(reversed(out))

    def apply(self, coord) -> dict:
        """``{axis name: value}`` of ``coord`` (``"m"`` = storage offset; thread axes too)."""
        shard_coord = self.coord(coord)
        if self._terms is not None and all(isinstance(c, int) for c in shard_coord):
            iters, offsets = self._terms
            out = dict(offsets)
            out.setdefault("m", 0)
            for c, (_, stride, axis) in zip(shard_coord, iters):
                out[axis] = out.get(axis, 0) + c * stride
            if self._swizzle is not None:
                out["m"] = xor_swizzle(out["m"], *self._swizzle)
            return out
        return {str(k): v for k, v in self.layout.apply(*shard_coord).items()}

    def offset(self, coord) -> int:
        """Storage offset of ``coord`` (static coordinates only)."""
        return int(self.apply(coord)["m"])

    def symbolic_offset(self):
        """The first storage offset (at the view's first or last coordinate) that is
        an expression rather than a number, or None.  A view of a swizzled tensor
        that starts at a run-time element has such offsets: the swizzle does not
        commute with the start."""
        if not all(isinstance(n, int) for n in self.shape) or 0 in self.shape:
            return None
        for coord in (tuple(0 for _ in self.shape), tuple(n - 1 for n in self.shape)):
            value = self.apply(coord)["m"]
            try:
                int(value)
            except (TypeError, ValueError):
                return value
        return None

    def has_thread_axes(self) -> bool:
        """Whether the layout places values on threads (``laneid``, ``warpid`` ...)."""
        return any(k != "m" for k in self.apply(tuple(0 for _ in self.shape)))


def _swizzle_of(layout):
    """``(per_element, swizzle_len, atom_len)`` of a ``ComposeLayout`` that swizzles
    its tile's storage offset (``swizzle_inner``), else None."""
    if not bool(getattr(layout, "swizzle_inner", False)):
        return None
    return int(layout.per_element), int(layout.swizzle_len), int(layout.atom_len)


def xor_swizzle(offset: int, per_element: int, swizzle_len: int, atom_len: int) -> int:
    """apache-tvm's ``ComposeLayout`` swizzle of storage offset ``offset``: bits
    ``[per_element, per_element + swizzle_len)`` XOR the ``swizzle_len`` bits
    ``atom_len`` above them (an involution)."""
    mask = (1 << swizzle_len) - 1
    return offset ^ (((offset >> (per_element + atom_len)) & mask) << per_element)


def _suffix_products(extents):
    out, p = [], 1
    for n in reversed(extents):
        out.append(p)
        p *= n
    return out, p


def _compatible_splits(shape, shard) -> bool:
    if not all(isinstance(n, int) for n in (*shape, *shard)):
        return False
    ps, total_p = _suffix_products(shape)
    qs, total_q = _suffix_products(shard)
    if total_p != total_q:
        return False
    return all(p % q == 0 or q % p == 0 for p in ps for q in qs)


def atom_of(role, op) -> tuple:
    """The operand's atom shape: the role's, with a ``None`` extent (any) read
    from the operand (cp.async's chunk)."""
    if None not in role.atom or op.kind != "tensor":
        return tuple(role.atom)
    tail = op.shape[len(op.shape) - len(role.atom) :]
    return tuple(t if a is None else a for a, t in zip(role.atom, tail))


def group_coords(group, full: bool):
    """Group coordinates to check: all of them when ``full`` and the extents are
    known, else only the origin."""
    if full and all(g is not None for g in group):
        return itertools.product(*(range(g) for g in group))
    return [(0,) * len(group)]


def repeat_shape(role, op, group) -> tuple:
    """The repeat axes of a tensor operand (``()`` for a scalar)."""
    if op.kind != "tensor":
        return ()
    shape = op.shape
    return tuple(shape[len(group) : len(shape) - len(role.atom)])


def call_repeat(contract, operands, group) -> tuple:
    """The call's repeat extents: every tensor's repeat axes, placed by the
    role's ``repeat_axes`` (all of them, in order, when it has none); the rank
    is ``contract.repeat_rank`` or that of the first tensor operand.  An axis
    no operand carries has extent 1."""
    rank = repeat_rank(contract, operands, group)
    extents = {}
    for role, op in zip(contract.roles, operands):
        if op.kind != "tensor":
            continue
        rep = repeat_shape(role, op, group)
        for axis, n in zip(role_axes(role, rank), rep):
            extents.setdefault(axis, n)
    return tuple(extents.get(axis, 1) for axis in range(rank or 0))


def repeat_rank(contract, operands, group) -> int:
    """The call's number of repeat axes: ``contract.repeat_rank``, else that of
    the first tensor operand carrying all of them (a role without
    ``repeat_axes``), else of the first tensor operand (0 without one)."""
    if contract.repeat_rank is not None:
        return contract.repeat_rank
    tensors = [(r, o) for r, o in zip(contract.roles, operands) if o.kind == "tensor"]
    for role, op in sorted(tensors, key=lambda ro: ro[0].repeat_axes is not None):
        return len(repeat_shape(role, op, group))
    return 0


def role_axes(role, rank: int) -> tuple:
    """The call repeat axes operand ``role`` carries, in its own order."""
    return tuple(role.repeat_axes) if role.repeat_axes is not None else tuple(range(rank))


def coords(repeat: tuple, atom: tuple):
    """All ``(*repeat, *atom)`` coordinates in row-major order."""
    return itertools.product(*(range(n) for n in (*repeat, *atom)))


def axis_terms(view: ViewMap, ranges) -> list:
    """Per axis, the offsets ``offset(c_i * e_i) - offset(0)`` for each value in ``ranges[i]``.

    Only meaningful for a separable view, whose offset is ``offset(0)`` plus the
    sum of these terms.
    """
    zero = [0] * len(view.shape)
    base = view.offset(tuple(zero))
    out = []
    for axis, values in enumerate(ranges):
        terms = []
        for v in values:
            c = list(zero)
            c[axis] = v
            terms.append(view.offset(tuple(c)) - base)
        out.append(terms)
    return out


def offset_summary(view: ViewMap, ranges, modulus: int):
    """``(min, max, residues mod modulus)`` of ``view.offset`` over the box ``ranges``."""
    if view.separable:
        zero = view.offset(tuple(0 for _ in view.shape))
        terms = axis_terms(view, ranges)
        lo = zero + sum(min(t) for t in terms)
        hi = zero + sum(max(t) for t in terms)
        residues = {zero % modulus}
        for t in terms:
            residues = {(r + x) % modulus for r in residues for x in set(t)}
        return lo, hi, residues
    offs = [view.offset(c) for c in itertools.product(*ranges)]
    return min(offs), max(offs), {o % modulus for o in offs}
