"""Parse-time rules on one operand of a tile call: kind, state space, dtype,
static shape, atom shape, static offsets, contiguity of a memory atom.

Each rule is a small pure function returning a :class:`~tvm_tirx.TileError`
or ``None``; :func:`.static_rules.check_static` runs them.
"""

from __future__ import annotations

import itertools

from tvm.runtime import DataType

from ...errors import TileError, operand_label
from .emit import kind_takes_scalar
from ..ir.views import ViewMap, atom_of, group_coords, repeat_shape

__all__ = ["OPERAND_RULES", "rule_operand_count", "rule_contiguous_atom"]


def _dtype_bits(dtype: str) -> int:
    return DataType(dtype).bits


def rule_operand_count(opcode, roles, operands):
    """The call supplies exactly one operand per role of the form (keyword
    roles are checked by name: :func:`.static_rules.rule_keyword_roles`)."""
    positional = [r for r in roles if r.keyword is None]
    given = [o for o in operands if not isinstance(o.index, str)]
    if len(given) != len(positional):
        names = ", ".join(r.role for r in positional)
        return TileError(
            opcode,
            "operand count",
            expected=f"{len(positional)} operand(s) ({names})",
            found=f"{len(given)}",
        )
    return None


def rule_scalar_destination(opcode, role, op):
    """A scalar expression may only stand in for a read register operand, or
    for the one value an operand of a kind that takes one passes (a
    caller-encoded tensor map; :func:`.emit.kind_takes_scalar`)."""
    if op.kind != "scalar" or kind_takes_scalar(role.kind):
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
    if role.kind == "register":
        what = "register tensor"
    else:  # a descriptor's PTX operand is a register: no state space of its own
        what = f".{role.ptx.space} memory" if role.ptx.space else "tensor"
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
    widths = {_dtype_bits(d) for d in role.dtypes}
    rule = (
        "element bit width differs from the PTX type's"
        if _dtype_bits(dtype) not in widths
        else "dtype not accepted by the PTX type"
    )
    if len(widths) == 1:
        expected = f"{_dtype_bits(role.dtypes[0])}-bit {' / '.join(role.dtypes)}"
    else:  # ld/st of a narrow integer type also take 32-bit registers
        expected = " / ".join(f"{d} ({_dtype_bits(d)}-bit)" for d in role.dtypes)
    return TileError(
        opcode,
        rule,
        operand=operand_label(role.role, op.index),
        expected=expected,
        found=f"{dtype} ({_dtype_bits(dtype)}-bit); reinterpret with .view(dtype)",
    )


def rule_static_shape(opcode, role, op):
    """Repeat and atom extents are compile-time constants (unless the role
    takes run-time extents, :attr:`~..ir.contract.OperandRole.run_time_extents`)."""
    if op.kind == "tensor" and not role.run_time_extents and not all(isinstance(s, int) for s in op.shape):
        return TileError(
            opcode,
            "symbolic shape",
            operand=operand_label(role.role, op.index),
            expected="static extents",
            found=str(list(op.value.shape)),
        )
    return None


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


def rule_contiguous_atom(opcode, role, op, group):
    """Each row of a memory atom (its last axis) is consecutive in memory."""
    if op.kind != "tensor" or role.kind != "memory" or role.image:
        return None
    atom = atom_of(role, op)
    if atom[-1] == 1:
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


#: Per-operand rules, in the order they run: ``rule(opcode, role, op, group)``.
OPERAND_RULES = (
    lambda opcode, r, o, group: rule_scalar_destination(opcode, r, o),
    lambda opcode, r, o, group: rule_state_space(opcode, r, o),
    lambda opcode, r, o, group: rule_dtype(opcode, r, o),
    lambda opcode, r, o, group: rule_static_shape(opcode, r, o),
    rule_atom_shape,
    lambda opcode, r, o, group: rule_static_offsets(opcode, r, o),
)
