"""Proofs on memory operands, in bytes / elements of the root allocation:
each thread's atom address is aligned, and the view is not outside its tensor.

Alignment: the root tensor's declared ``align`` and the view's index
arithmetic over the ranges of the thread and loop variables must give every
atom address a multiple of the role's alignment (:attr:`OperandRole.align`,
by default the byte size of the atom's contiguous last axis); the address of
an image atom (:attr:`OperandRole.image`) is that of its first element.  Bounds: see
:func:`check_bounds`.
"""

from __future__ import annotations

from ..errors import TileError, operand_label
from .points import NOT_ENUMERATED, exact_range, exact_values
from .views import ViewMap, atom_of, int_or_none, offset_summary

__all__ = ["check_memory", "check_bounds", "alignment_of"]


def alignment_of(role, op) -> int:
    """Bytes the atom address of memory operand ``op`` must be aligned to: the
    role's ``align``, else the byte size of the atom's last axis."""
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel

    if role.align is not None:
        return role.align
    return atom_of(role, op)[-1] * DataType(op.value.dtype).bits // 8


def _proven_inside(facts, assumptions, lo_expr, hi_expr, extent):
    """Whether ``lo_expr >= 0`` and ``hi_expr < extent`` follow from the variable
    ranges and ``assumptions`` (guards, the predicate)."""
    import contextlib  # pylint: disable=import-outside-toplevel

    analyzer = facts.analyzer
    with contextlib.ExitStack() as stack:
        for cond in assumptions:
            try:
                stack.enter_context(analyzer.constraint_scope(cond))
            except Exception:  # pylint: disable=broad-except
                pass  # a condition the analyzer cannot take as a fact
        return analyzer.can_prove(lo_expr >= 0) and analyzer.can_prove(hi_expr < extent)


def check_bounds(facts, opcode, label, root, elem_offset, first, last, conds, pred):
    """The bounds rule for one memory view (elements ``first..last`` past ``elem_offset``).

    ``conds`` are the enclosing if-conditions; ``pred`` is the call's predicate when
    a false predicate leaves this operand untouched (else None).  Over the points
    that reach the call with a true predicate (:func:`.points.exact_values`):

    - provably inside the tensor: accepted (symbolic proofs see the guards and pred);
    - provably outside at some point: rejected, naming the point;
    - neither provable (an index or guard read from memory, a run-time size, too
      many points): accepted under ``pred=`` or an enclosing ``if`` -- the check is
      then the author's -- otherwise rejected, naming the index expression.
    """
    extent = facts.roots[root]
    assumptions = [*conds, *([pred] if pred is not None else [])]
    if _proven_inside(facts, assumptions, elem_offset + first, elem_offset + last, extent):
        return None
    exact = exact_range(facts, elem_offset, tuple(assumptions))
    n = int_or_none(extent)
    if exact == ():
        return None  # no thread reaches the call
    if exact is not None:
        lo, hi, at_lo, at_hi = exact
        if lo + first < 0 or (n is not None and hi + last >= n):
            where, found = (at_lo, lo + first) if lo + first < 0 else (at_hi, hi + last)
            return TileError(
                opcode,
                "view provably out of the tensor's bounds",
                operand=label,
                expected=f"elements within [0, {extent}) of {root.name}"
                + (" where the predicate holds" if pred is not None else ""),
                found=f"element {found} at {where or 'every thread'}",
            )
        if n is not None:
            return None
    if pred is not None or conds:
        return None
    return TileError(
        opcode,
        "view not provably within the tensor's bounds",
        operand=label,
        expected=(
            f"elements within [0, {extent}) of {root.name} for every thread, or pred= "
            "or an enclosing if (the bounds are then the author's responsibility)"
        ),
        found=f"element offset {facts.analyzer.simplify(elem_offset)} + [{first}, {last}] "
        f"(not checked point by point: {NOT_ENUMERATED})",
    )


def _check_alignment(facts, opcode, label, starts, elem_offset, elem_bytes, need, conds):
    """Every atom start (element offsets ``elem_offset + s`` for ``s`` in ``starts``)
    is a multiple of ``need`` bytes at every point that reaches the call."""
    from tvm.tirx import floormod  # pylint: disable=import-outside-toplevel

    analyzer = facts.analyzer
    for start in sorted(starts):
        addr = (elem_offset + start) * elem_bytes
        if analyzer.can_prove(floormod(addr, need) == 0):
            continue
        # Not provable for every thread: the threads that reach the call (under
        # their guards) may still all be aligned.
        exact = exact_values(facts, analyzer.simplify(addr), conds)
        if exact is not None and all(value % need == 0 for value, _ in exact):
            continue
        bad = next((p for p in exact or () if p[0] % need), None)
        found = f"byte offset {analyzer.simplify(addr)}"
        if bad is not None:
            found += f" = {bad[0]} at {bad[1]}"
        elif exact is None:
            found += f" (not checked point by point: {NOT_ENUMERATED})"
        return TileError(
            opcode,
            "vector atom not provably aligned",
            operand=label,
            expected=f"byte offset a multiple of {need}",
            found=found,
        )
    return None


def check_memory(facts, opcode, role, op, group, repeat, pred=None, conds=()):
    """Alignment and bounds of one memory operand; return a TileError or None.

    ``group`` holds the (guarded) group extents: every thread's atom address is
    the view's address at its group coordinate and each repeat coordinate.
    ``conds`` are the if-conditions enclosing the call and ``pred`` the
    predicate that skips this operand's access (or None); the bounds rule is
    :func:`check_bounds`.
    """
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel

    buf = op.value
    label = operand_label(role.role, op.index)
    root = facts.root_of(buf)
    if root is None:
        return TileError(
            opcode,
            "memory view without a known tensor",
            operand=label,
            expected="a view of a kernel parameter or an allocation",
            found=buf.name,
        )
    elem_bytes = DataType(buf.dtype).bits // 8
    atom = atom_of(role, op)
    need = alignment_of(role, op)
    base = int(root.data_alignment)
    if base % need != 0:
        return TileError(
            opcode,
            "vector atom not provably aligned",
            operand=label,
            expected=f"{need}-byte alignment (tensor {root.name} declared with align>={need})",
            found=f"{root.name} declared align={base}",
        )
    view = ViewMap(buf)
    box = [range(n) for n in (*group, *repeat, *atom[:-1])]
    # A vector atom: every row start is an address; an image: only its first element.
    heads = [range(n) for n in (*group, *repeat)] + [range(1)] * (len(atom) - 1) if role.image else box
    _, _, starts = offset_summary(view, heads + [range(1)], need // elem_bytes or 1)
    first, last, _ = offset_summary(view, box + [range(atom[-1])], 1)
    elem_offset = facts.expand_scalars(buf.elem_offset)
    conds = tuple(facts.expand_scalars(c) for c in conds)
    err = _check_alignment(facts, opcode, label, starts, elem_offset, elem_bytes, need, conds)
    # A carve-out's views count elements from the pool's start; its bounds are its
    # own, `root_start` elements in (alignment is the same either way: the pool is
    # 1024-byte aligned and each carve-out starts at a multiple of its align).
    root_start = facts.analyzer.simplify(facts.base_bytes.get(root, 0) // elem_bytes)
    return err or check_bounds(facts, opcode, label, root, elem_offset - root_start, first, last, conds, pred)
