"""The ``descriptor`` operand kind: a shared-memory tile a ``wgmma`` names by a
64-bit matrix descriptor (PTX ISA 9.7.15.5.1.2, "Matrix Descriptor").

One job: the hooks of that operand kind, on top of :mod:`._matrix_descriptor`
(which finds the canonical layout of a view):

* :func:`shared_role`, the role of such an operand;
* :func:`check_layouts`, the parse-time rule (the tile at the origin has a
  descriptor) and :func:`transpose`, the ``imm-trans`` operand its layout
  implies;
* the kernel-level proof (a descriptor for every tile of the call, the
  pattern-aligned start, the bounds), the encoding before the loops, and the
  per-repeat descriptor argument, registered as operand kind ``"descriptor"``.

Not a family itself (the leading ``_`` keeps it out of the registry's module
scan); imported by :mod:`.wgmma`.
"""

from __future__ import annotations

from tvm import tirx
from tvm.backend.cuda.op import cuda_wgmma_encode_matrix_descriptor
from tvm.runtime import DataType
from tvm.tirx import floormod

from .. import (
    check_bounds,
    exact_values,
    operand_label,
    operand_repeat,
    OperandKind,
    OperandRole,
    proves,
    repeat_shape,
    root_or_error,
    TileError,
)
from . import _matrix_descriptor as md

__all__ = ["KIND", "KINDS", "shared_role", "check_layouts", "transpose", "element_bytes"]

#: The operand kind this module defines (:data:`KINDS`: the wgmma family's ``kinds``).
KIND = "descriptor"


def element_bytes(role) -> int:
    """Bytes of one element of ``role``'s (single) dtype."""
    return DataType(role.dtypes[0]).bits // 8


def _descriptor_analysis(role, op, group):
    """:func:`_matrix_descriptor.analyse` of a shared operand over the call's coordinates."""
    rows, cols = role.atom
    eb = element_bytes(role)
    return md.analyse(op.value, tuple(group), repeat_shape(role, op, group), rows, cols, eb, eb == 2)


def _no_descriptor(opcode, role, op, reason):
    return TileError(
        opcode,
        "shared-memory layout has no matrix descriptor",
        operand=operand_label(role.role, op.index),
        expected=md.accepted(element_bytes(role) == 2),
        found=reason,
    )


def _aligned_start(facts, opcode, label, root, elem_offset, elem_bytes, need, conds):
    """The tile's first element is ``need``-byte aligned at every point that reaches the call."""
    base = int(root.data_alignment)
    addr = facts.analyzer.simplify(elem_offset * elem_bytes)
    if base % need == 0 and proves(facts.analyzer, floormod(addr, need) == 0, facts.known(conds)):
        return None
    exact = exact_values(facts, addr, conds) if base % need == 0 else None
    if exact is not None and all(value % need == 0 for value, _ in exact):
        return None
    found = f"{root.name} declared align={base}" if base % need else f"byte offset {addr} in {root.name}"
    return TileError(
        opcode,
        "matrix tile not provably aligned for its descriptor",
        operand=label,
        expected=f"a tile starting on a {need}-byte boundary ({root.name} declared with align>={need})",
        found=found,
    )


def _descriptor_prove(call, index):
    """The kernel-level rules of a shared operand: a descriptor for every tile of
    the call, the pattern-aligned start, and the bounds."""
    facts, opcode = call.facts, call.opcode
    role, op, label = call.role(index), call.operands[index], call.label(index)
    pred = facts.expand_scalars(call.pred) if call.pred is not None and role.pred_skips else None
    conds = call.site.facts
    found = _descriptor_analysis(role, op, call.group)
    if isinstance(found, str):
        return _no_descriptor(opcode, role, op, found)
    buf = op.value
    root, err = root_or_error(facts, opcode, label, buf, "a view of a shared-memory allocation")
    if err is not None:
        return err
    elem_bytes = DataType(buf.dtype).bits // 8
    elem_offset = facts.expand_scalars(buf.elem_offset)
    conds = tuple(facts.expand_scalars(c) for c in conds)
    err = _aligned_start(facts, opcode, label, root, elem_offset, elem_bytes, found.canonical.period, conds)
    root_start = facts.analyzer.simplify(facts.base_bytes.get(root, 0) // elem_bytes)
    return err or check_bounds(facts, opcode, label, root, elem_offset - root_start, found.first, found.last, conds, pred)


def _descriptor_setup(call, index):
    """Before the loops: a ``uint64`` local and its encoding for the tile at the
    thread's group coordinate and repeat 0.  The value the arguments then see is
    ``(descriptor buffer, byte step per repeat axis)``."""
    role, op = call.role(index), call.operands[index]
    found = _descriptor_analysis(role, op, call.group)
    c = found.canonical
    desc = tirx.decl_buffer((1,), "uint64", name=f"{role.role}_desc", scope="local")
    lead = [*call.group_coord, *([0] * (len(op.value.shape) - len(call.group_coord) - 2)), 0, 0]
    encode = cuda_wgmma_encode_matrix_descriptor(
        tirx.address_of(desc[0]), op.value.ptr_to(lead), c.lbo >> 4, c.sbo >> 4, c.code
    )
    return [tirx.AllocBuffer(desc), tirx.Evaluate(encode)], (desc, found.steps)


def _descriptor_args(call, index):
    """The descriptor at the call's repeat coordinate: the base plus ``sum(rep * step) / 16``."""
    desc, steps = call.value(index)
    rep = operand_repeat(call, index)
    terms = [r * (s >> 4) for r, s in zip(rep, steps) if s]
    if not terms:
        return [desc[0]]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return [desc[0] + tirx.Cast("uint64", total)]


#: ``register_family(kinds=...)`` of the wgmma family: how a descriptor operand is emitted and proven.
KINDS = {KIND: OperandKind(_descriptor_args, setup=_descriptor_setup, prove=_descriptor_prove)}


def transpose(index, role):
    """``imm-trans``: 1 when operand ``index``'s tile is MN-major (its layout says so)."""

    def derive(call):
        op = call.operands[index]
        rows, cols = role.atom
        found = md.canonical_at_origin(op.value, len(op.shape) - 2, rows, cols, element_bytes(role), True)
        return int(not isinstance(found, str) and found.major == "MN")

    return derive


def check_layouts(call):
    """Parse time: each shared operand's tile at the origin has a descriptor."""
    contract = call.contract
    for role, op in zip(contract.roles, call.operands):
        if role.kind != KIND or op.kind != "tensor":
            continue
        rows, cols = role.atom
        eb = element_bytes(role)
        found = md.canonical_at_origin(op.value, len(op.shape) - 2, rows, cols, eb, eb == 2)
        if isinstance(found, str):
            return _no_descriptor(contract.opcode, role, op, found)
    return None


def shared_role(name, ptx, dtype, atom, repeat_axes):
    """A shared-memory operand named by a matrix descriptor."""
    return OperandRole(
        role=name,
        ptx=ptx,
        kind=KIND,
        atom=atom,
        dtypes=(dtype,),
        writes=False,
        scopes=("shared", "shared.dyn"),
        repeat_axes=repeat_axes,
        async_proxy=True,
    )
