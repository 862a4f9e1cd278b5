"""Operands of a tile call: view -> (group, repeat, atom), and the checks on them.

Every check is a small function that returns a :class:`~tvm_tirx.TileError` or
``None``; :func:`check_static` runs the ones that need only shapes, dtypes and
layouts (parse time) and :mod:`.lower` runs the ones that need the kernel
(alignment and bounds proofs).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..errors import TileError, operand_label

__all__ = [
    "Operand",
    "classify",
    "check_static",
    "layout_of",
    "ViewMap",
]


@dataclass(frozen=True)
class Operand:
    """One call operand after classification.

    Attributes
    ----------
    value : object
        The buffer view (``kind == "tensor"``) or scalar ``PrimExpr``.
    kind : str
        ``"tensor"`` or ``"scalar"``.
    index : int
        1-based position among the call's operands (the instruction is not counted).
    """

    value: object
    kind: str
    index: int

    @property
    def shape(self) -> tuple:
        """Static shape of a tensor operand (ints; a symbolic extent stays an Expr)."""
        return tuple(_static_int(s) for s in self.value.shape)


def _static_int(x):
    """``x`` as a Python int when it is (or simplifies to) a constant, else ``x``."""
    import tvm  # pylint: disable=import-outside-toplevel
    from tvm.tirx import IntImm  # pylint: disable=import-outside-toplevel

    if isinstance(x, int):
        return x
    if not isinstance(x, IntImm) and tvm.ir.is_prim_expr(x):
        x = tvm.sym.Analyzer().simplify(x)  # e.g. a slice w*32 : w*32 + 32
    if isinstance(x, IntImm):
        return int(x)
    return x


def classify(value, index: int, opcode: str) -> Operand:
    """Classify a call operand as a tensor view or a scalar expression.

    Raises
    ------
    TileError
        The operand is neither a buffer/view nor a typed scalar expression
        (e.g. a bare Python number, whose dtype is ambiguous).
    """
    import tvm  # pylint: disable=import-outside-toplevel

    value = getattr(value, "scalar", value)
    if tvm.tirx.is_buffer_var(value):
        return Operand(value, "tensor", index)
    if isinstance(value, bool | int | float):
        raise TileError(
            opcode,
            "untyped scalar",
            operand=f"operand {index}",
            expected="a typed scalar such as T.float32(0) or T.uint32(17)",
            found=repr(value),
        )
    if tvm.ir.is_prim_expr(value):
        return Operand(value, "scalar", index)
    raise TileError(
        opcode,
        "operand is not a tensor view or scalar expression",
        operand=f"operand {index}",
        expected="a Buffer view (X, X.sub[...], X.view(...)) or a PrimExpr",
        found=type(value).__name__,
    )


def layout_of(buf):
    """The TileLayout of buffer view ``buf`` (row-major when it has none)."""
    from tvm.tirx.layout import S, TileLayout  # pylint: disable=import-outside-toplevel

    if buf.layout is not None:
        return buf.layout
    return TileLayout(S[tuple(_static_int(s) for s in buf.shape)])


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
        self.shape = tuple(_static_int(s) for s in buf.shape)
        tile = getattr(self.layout, "tile_layout", self.layout)
        self.shard = tuple(_static_int(it.extent) for it in tile.shard)
        #: offset(c) is a sum of one term per view axis: a strided TileLayout
        #: whose shard splits the same row-major index at compatible points
        #: (every suffix product of one divides or is divided by every suffix
        #: product of the other, so no view axis carries into another's
        #: digits).  A swizzle is not.
        self.separable = tile is self.layout and _compatible_splits(self.shape, self.shard)
        self._terms = self._static_terms(tile) if tile is self.layout else None

    @staticmethod
    def _static_terms(tile):
        """``(iters, offsets)`` of a TileLayout with constant extents and strides,
        so offsets are computed here rather than through apache-tvm's
        ``Layout.apply`` (same arithmetic: each shard iter adds coordinate x
        stride to its axis; replicas add nothing to a single coordinate).
        None when anything is symbolic."""
        iters = []
        for it in tile.shard:
            extent, stride = _static_int(it.extent), _static_int(it.stride)
            if not isinstance(extent, int) or not isinstance(stride, int):
                return None
            iters.append((extent, stride, str(it.axis.name)))
        offsets = {}
        for axis, value in tile.offset.items():
            value = _static_int(value)
            if not isinstance(value, int):
                return None
            offsets[str(getattr(axis, "name", axis))] = value
        return iters, offsets

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
            out.append(flat % n if static else _floormod(flat, n))
            flat = flat // n if static else _floordiv(flat, n)
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


def _floormod(a, b):
    from tvm.tirx import floormod  # pylint: disable=import-outside-toplevel

    return floormod(a, b)


def _floordiv(a, b):
    from tvm.tirx import floordiv  # pylint: disable=import-outside-toplevel

    return floordiv(a, b)


def _dtype_bits(dtype: str) -> int:
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel

    return DataType(dtype).bits


# --------------------------------------------------------------------------
# The rules.  Each returns a TileError or None.
# --------------------------------------------------------------------------


def rule_operand_count(opcode, roles, operands):
    """The call supplies exactly one operand per role of the form."""
    if len(operands) != len(roles):
        names = ", ".join(r.role for r in roles)
        return TileError(
            opcode,
            "operand count",
            expected=f"{len(roles)} operand(s) ({names})",
            found=f"{len(operands)}",
        )
    return None


def rule_scalar_destination(opcode, role, op):
    """A scalar expression may only stand in for a read register operand."""
    if op.kind != "scalar":
        return None
    label = operand_label(role.role, op.index)
    if role.writes:
        return TileError(
            opcode,
            "scalar in a destination slot",
            operand=label,
            expected="a register tensor (T.alloc_local) the instruction can write",
            found=f"scalar expression {op.value}",
        )
    if role.kind == "memory":
        return TileError(
            opcode,
            "scalar in a memory slot",
            operand=label,
            expected="a tensor view in " + "/".join(role.scopes) + " memory",
            found=f"scalar expression {op.value}",
        )
    if tuple(role.atom) != (1,) or role.lane_coords is not None:
        return TileError(
            opcode,
            "scalar for a register group",
            operand=label,
            expected=f"a tensor with atom {role.atom} (a scalar covers one register)",
            found=f"scalar expression {op.value}",
        )
    return None


def rule_state_space(opcode, role, op):
    """A tensor's storage scope matches the role's state space."""
    if op.kind != "tensor":
        return None
    scope = op.value.scope()
    if scope in role.scopes:
        return None
    what = "register tensor" if role.kind == "register" else f".{role.ptx.space} memory"
    return TileError(
        opcode,
        "wrong state space for the opcode",
        operand=operand_label(role.role, op.index),
        expected=f"a {what} (storage scope {' / '.join(role.scopes)})",
        found=f"storage scope {scope!r}",
    )


def rule_dtype(opcode, role, op):
    """Element bit width equals the PTX type's, and the dtype is one the type accepts."""
    dtype = op.value.dtype if op.kind == "tensor" else op.value.ty.dtype
    if dtype in role.dtypes:
        return None
    token = role.ptx.ptx_type or role.ptx.space
    width = _dtype_bits(role.dtypes[0])
    rule = (
        "element bit width differs from the PTX type's"
        if _dtype_bits(dtype) != width
        else "dtype not accepted by the PTX type"
    )
    return TileError(
        opcode,
        rule,
        operand=operand_label(role.role, op.index),
        expected=f"{width}-bit {' / '.join(role.dtypes)}",
        found=f"{dtype} ({_dtype_bits(dtype)}-bit); reinterpret with .view(dtype)",
    )


def rule_static_shape(opcode, role, op):
    """Repeat and atom extents are compile-time constants."""
    if op.kind == "tensor" and not all(isinstance(s, int) for s in op.shape):
        return TileError(
            opcode,
            "symbolic shape",
            operand=operand_label(role.role, op.index),
            expected="static extents",
            found=str(list(op.value.shape)),
        )
    return None


def atom_of(role, op) -> tuple:
    """The operand's atom shape: the role's, with a ``None`` extent (any) read
    from the operand (cp.async's chunk)."""
    if None not in role.atom or op.kind != "tensor":
        return tuple(role.atom)
    tail = op.shape[len(op.shape) - len(role.atom) :]
    return tuple(t if a is None else a for a, t in zip(role.atom, tail))


def rule_atom_shape(opcode, role, op, group):
    """The trailing axes equal the instruction's atom, after the group axes."""
    if op.kind != "tensor":
        return None
    shape = op.shape
    n_lead = len(group)
    atom = atom_of(role, op)
    if len(shape) < n_lead + len(atom) or tuple(shape[len(shape) - len(atom) :]) != atom:
        return TileError(
            opcode,
            "wrong atom shape",
            operand=operand_label(role.role, op.index),
            expected=f"shape (*group{_fmt_group(group)}, *repeat, *{_fmt_atom(role.atom)})",
            found=f"shape {shape}",
        )
    if any(g is not None and g != n for g, n in zip(group, shape[:n_lead])):
        return TileError(
            opcode,
            "group shape does not match the scope",
            operand=operand_label(role.role, op.index),
            expected=f"leading group axes {tuple(group)}",
            found=f"shape {shape}",
        )
    return None


def _fmt_atom(atom) -> str:
    return "(" + ", ".join("n" if a is None else str(a) for a in atom) + ("," if len(atom) == 1 else "") + ")"


def _fmt_group(group) -> str:
    return "[" + ", ".join("?" if g is None else str(g) for g in group) + "]"


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
    role's ``repeat_axes`` (all of them when it has none)."""
    rank = contract.repeat_rank
    out = [None] * rank if rank is not None else None
    for role, op in zip(contract.roles, operands):
        if op.kind != "tensor":
            continue
        rep = repeat_shape(role, op, group)
        if rank is None:
            return rep
        for axis, n in zip(role.repeat_axes or range(rank), rep):
            out[axis] = n
    return tuple(1 if n is None else n for n in out) if out is not None else ()


def rule_same_repeat(opcode, contract, operands, group):
    """Every tensor operand has the same repeat shape, or, when operands carry
    subsets of the repeat axes (mma's M, N, K), the same extent per axis."""
    rank = contract.repeat_rank
    first = None
    extents = {}
    for role, op in zip(contract.roles, operands):
        if op.kind != "tensor":
            continue
        rep = repeat_shape(role, op, group)
        label = operand_label(role.role, op.index)
        if rank is None:
            if first is None:
                first = (label, rep)
            elif rep != first[1]:
                return TileError(
                    opcode,
                    "repeat shapes differ",
                    operand=label,
                    expected=f"repeat {first[1]} like {first[0]}",
                    found=f"repeat {rep}",
                )
            continue
        axes = tuple(role.repeat_axes if role.repeat_axes is not None else range(rank))
        if not rep:
            rep = (1,) * len(axes)  # an operand without repeat axes: extent 1 on each
        if len(rep) != len(axes):
            return TileError(
                opcode,
                "repeat shapes differ",
                operand=label,
                expected=f"{len(axes)} repeat axes (axes {axes} of {rank})",
                found=f"repeat {rep}",
            )
        for axis, n in zip(axes, rep):
            if axis in extents and extents[axis][0] != n:
                return TileError(
                    opcode,
                    "repeat shapes differ",
                    operand=label,
                    expected=f"extent {extents[axis][0]} on repeat axis {axis} like {extents[axis][1]}",
                    found=f"repeat {rep}",
                )
            extents.setdefault(axis, (n, label))
    return None


def coords(repeat: tuple, atom: tuple):
    """All ``(*repeat, *atom)`` coordinates in row-major order."""
    return itertools.product(*(range(n) for n in (*repeat, *atom)))


def rule_contiguous_atom(opcode, role, op, group):
    """Each row of a memory atom (its last axis) is consecutive in memory."""
    atom = atom_of(role, op)
    if op.kind != "tensor" or role.kind != "memory" or atom[-1] == 1:
        return None
    view = ViewMap(op.value)
    rows = list(itertools.product(*(range(n) for n in (*repeat_shape(role, op, group), *atom[:-1]))))
    # Strided layouts add one term per axis, so the origin of the group axes
    # decides; a swizzle does not, so every group coordinate is checked.
    for lead in group_coords(group, full=not view.separable):
        for row in rows:
            base = view.offset((*lead, *row, 0))
            for k in range(1, atom[-1]):
                off = view.offset((*lead, *row, k))
                if off != base + k:
                    return TileError(
                        opcode,
                        "vector atom not contiguous",
                        operand=operand_label(role.role, op.index),
                        expected=f"element {k} of the atom at element offset +{k}",
                        found=f"+{off - base} (at {row})",
                    )
    return None


def rule_static_offsets(opcode, role, op):
    """Every coordinate of a tensor view has a constant offset from the view's start.

    Offsets that vary with thread ids come from a sub-view of a swizzled tensor
    (``ComposeLayout``) that starts at a run-time element not on a whole swizzle
    period; contiguity and alignment cannot be proven for them.
    """
    if op.kind != "tensor":
        return None
    expr = ViewMap(op.value).symbolic_offset()
    if expr is None:
        return None
    return TileError(
        opcode,
        "view offsets not static",
        operand=operand_label(role.role, op.index),
        expected=(
            "offsets fixed at parse time: start a sub-view of a swizzled tensor at a "
            "multiple of its swizzle period, or view the whole tensor and index it "
            "with group axes"
        ),
        found=f"offset {expr}",
    )


def rule_register_overlap(opcode, role, op, group):
    """Distinct destination coordinates map to distinct register slots."""
    if op.kind != "tensor" or role.kind != "register" or not role.writes:
        return None
    view = ViewMap(op.value)
    rep = repeat_shape(role, op, group)
    if role.lane_coords is not None:
        # warp-collective: lane l writes the registers of its own coordinates
        per_thread = [[(*r, *c) for r in itertools.product(*(range(n) for n in rep)) for c in role.lane_coords(lane)] for lane in range(32)]
    else:
        per_thread = [list(coords(rep, atom_of(role, op)))]
    # Each thread writes the coordinates of its own group position.
    for lead in group_coords(group, full=not view.separable):
        for mine in per_thread:
            seen = {}
            for c in mine:
                slot = view.offset((*lead, *c))
                if slot in seen:
                    return TileError(
                        opcode,
                        "overlapping register destinations",
                        operand=operand_label(role.role, op.index),
                        expected="one register slot per destination coordinate",
                        found=f"coordinates {seen[slot]} and {c} both map to slot {slot}",
                    )
                seen[slot] = c
    return None


def rule_preserve_dst(opcode, contract, pred, preserve_dst):
    """``preserve_dst`` needs ``pred`` and a register destination."""
    if not preserve_dst:
        return None
    if pred is None:
        return TileError(
            opcode,
            "preserve_dst without pred",
            expected="pred=<runtime bool> together with preserve_dst=True",
            found="pred=None",
        )
    if not any(r.writes and r.kind == "register" for r in contract.roles):
        return TileError(
            opcode,
            "preserve_dst on an instruction without a register destination",
            expected="preserve_dst=False",
            found="preserve_dst=True",
        )
    return None


def rule_pred_dtype(opcode, pred):
    """``pred`` is a boolean expression."""
    if pred is None:
        return None
    ty = getattr(getattr(pred, "ty", None), "dtype", type(pred).__name__)
    if ty != "bool":
        return TileError(opcode, "pred must be a bool expression", expected="bool", found=str(ty))
    return None


def check_static(contract, operands, group, pred=None, preserve_dst=False):
    """Run every parse-time rule; return the first TileError found, or None.

    Parameters
    ----------
    contract : Contract
        The instruction form's contract.
    operands : list[Operand]
        The call's operands, classified.
    group : tuple[int, ...]
        The scope's group extents (``()`` at ``scope="thread"``).
    """
    opcode = contract.opcode
    roles = contract.roles
    err = rule_operand_count(opcode, roles, operands)
    if err:
        return err
    per_operand = (
        lambda r, o: rule_scalar_destination(opcode, r, o),
        lambda r, o: rule_state_space(opcode, r, o),
        lambda r, o: rule_dtype(opcode, r, o),
        lambda r, o: rule_static_shape(opcode, r, o),
        lambda r, o: rule_atom_shape(opcode, r, o, group),
        lambda r, o: rule_static_offsets(opcode, r, o),
    )
    for rule in per_operand:
        for role, op in zip(roles, operands):
            err = rule(role, op)
            if err:
                return err
    err = rule_same_repeat(opcode, contract, operands, group)
    if err:
        return err
    if contract.check is not None:
        err = contract.check(contract, operands)
        if err:
            return err
    for role, op in zip(roles, operands):
        err = rule_contiguous_atom(opcode, role, op, group) or rule_register_overlap(
            opcode, role, op, group
        )
        if err:
            return err
    return rule_pred_dtype(opcode, pred) or rule_preserve_dst(opcode, contract, pred, preserve_dst)


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
