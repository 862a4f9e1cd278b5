"""Kernel rule of the wgmma family: no register of a wgmma is written between the
``wgmma.fence`` before it and the call.

``wgmma.fence`` orders a warpgroup's earlier register accesses before the
``wgmma.mma_async`` that follow it; the ISA requires it between any write of
the accumulator (or of an ``rs`` call's A fragment) and the wgmma that reads
those registers, except between wgmma calls accumulating into the same
registers (PTX ISA 9.2, the ``wgmma.fence`` section, 9.7.15.7.1 in the 8.x
numbering: "must be used ... before the first wgmma.mma_async and between a
register access by a thread in the warpgroup and any wgmma.mma_async that
accesses the same registers").  A ``mov`` that zeroes the accumulators after
the fence races with the asynchronous read of them.

From each wgmma tile call the rule walks program order backward
(:meth:`tvm_tirx.tile.kernel.order.Program.backward`, loops wrapping) to the nearest
``wgmma.fence`` on each path, and refuses a statement in between that writes
one of the call's register operands: a store, a tile call's written operand,
a raw ``T.ptx`` call's destination.  Other wgmma calls are skipped; a path
with no fence before the call, and a statement no PTX form describes, say
nothing.
"""

from __future__ import annotations

from tvm import tirx

from .. import TileError, protocol_of, raw_operands
from ..ir.ptx_table import opcode_of_call
from ..kernel.kernel_calls import raw_call_targets
from ..kernel.sites import call_key
from ._wgmma_groups import is_mma

__all__ = ["registers_written_after_fence"]

_FENCE = "tirx.ptx.wgmma_fence"


def _is_fence(leaf) -> bool:
    return getattr(getattr(getattr(leaf.stmt, "value", None), "op", None), "name", "").startswith(_FENCE)


def _written(view, leaf) -> list:
    """The buffers ``leaf`` writes, as far as its form says (empty when unknown)."""
    stmt = leaf.stmt
    if isinstance(stmt, tirx.BufferStore):
        return [stmt.buffer]
    call = view.calls.get(call_key(stmt))
    if call is not None:
        return [op.value for role, op in zip(call.contract.roles, call.operands) if role.writes and op.kind == "tensor"]
    if view.facts.calls.tile_call(stmt) is not None:
        return []  # a call that failed its own checks: reported there
    raw = raw_operands(stmt.value)
    if raw is None:
        return []
    form, args = raw
    return [b for op in form.operands if op.writes for arg in args[op.name] for b in raw_call_targets(arg)]


def _is_wgmma(facts, leaf) -> bool:
    return isinstance(leaf.stmt, tirx.Evaluate) and is_mma(facts.calls.tile_call(leaf.stmt))


def _register_roots(facts, call) -> dict:
    """``{hash(root): (operand index, name)}`` of the call's register operands (D, and an rs call's A)."""
    out = {}
    for index, op in enumerate(call.operands[:2]):
        if op.kind == "tensor" and op.value.scope() == "local":
            root = facts.root_of(op.value)
            if root is not None:
                out.setdefault(hash(root), (index, root.name or op.value.name))
    return out


def _first_write(view, roots, leaf):
    """``(writer leaf, fence leaf, (index, name))``: a write of ``roots`` between the nearest
    fence before ``leaf`` and ``leaf``, on some path; None when there is none."""
    facts = view.facts
    for path in protocol_of(view).program.backward(leaf, _is_fence):
        if path.stop is None:
            continue
        for writer in path.between:
            if _is_wgmma(facts, writer):
                continue
            for buf in _written(view, writer):
                root = facts.root_of(buf)
                if root is not None and hash(root) in roots:
                    return writer, path.stop, roots[hash(root)]
    return None


def registers_written_after_fence(view):
    """No register operand of a wgmma is written between the ``wgmma.fence`` before it
    and the call (see the module)."""
    facts, errors = view.facts, []
    program = protocol_of(view).program
    leaves = {call_key(leaf.stmt): leaf for leaf in program.leaves if isinstance(leaf.stmt, tirx.Evaluate)}
    for key, call in view.calls.items():
        leaf = leaves.get(key)
        if leaf is None or not is_mma(call):
            continue
        found = _first_write(view, _register_roots(facts, call), leaf)
        if found is not None:
            errors.append(_fence_error(call, leaf, *found))
    return errors


def _what(facts, leaf) -> str:
    """The instruction or statement of ``leaf``, for messages."""
    stmt = leaf.stmt
    if isinstance(stmt, tirx.BufferStore):
        return f"store to {stmt.buffer.name}"
    tile = facts.calls.tile_call(stmt)
    if tile is not None:
        return tile.opcode
    return opcode_of_call(stmt.value) or str(stmt.value.op.name)


def _fence_error(call, leaf, writer, fence, operand) -> TileError:
    index, name = operand
    return TileError(
        call.opcode,
        "registers written between wgmma.fence and the wgmma",
        operand=call.label(index),
        expected=f"wgmma.fence after the last write of {name} before this wgmma (the fence at "
        f"{fence.location or '?'} comes before the write; PTX ISA wgmma.fence)",
        found=f"{_what(call.facts, writer)} writing {name} at {writer.location or '?'}, after the fence at "
        f"{fence.location or '?'} and before this wgmma at {leaf.location or '?'}",
    ).at(leaf.location)
