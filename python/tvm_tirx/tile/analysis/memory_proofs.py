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

from ...errors import TileError, operand_label
from .points import NOT_ENUMERATED, exact_range, exact_values
from .machine_ints import MachineInts, index_overflow, wrapped_note
from .prover import proves, show
from ..ir.views import ViewMap, atom_of, dtype_bytes, int_or_none, offset_summary

__all__ = ["check_memory", "check_bounds", "check_dtype_views", "alignment_of", "root_or_error"]


def alignment_of(role, op) -> int:
    """Bytes the atom address of memory operand ``op`` must be aligned to: the
    role's ``align``, else the byte size of the atom's last axis."""
    if role.align is not None:
        return role.align
    return atom_of(role, op)[-1] * dtype_bytes(op.value.dtype)


def _unproven_bound(facts, machine, given, lo_expr, hi_expr, extent, wrapped=False):
    """Which of ``lo_expr >= 0`` and ``hi_expr < extent`` (byte offsets, compared
    in int64: a 32-bit sum would wrap past 2 GiB) does not follow from the
    ranges and the facts ``given`` (:func:`.prover.proves`), the casts of the
    offsets read as the kernel computes them (:class:`.machine_ints.MachineInts`):
    ``"lo"``, ``"hi"`` or None.  ``wrapped``: integer arithmetic that may wrap
    read as any value of its type too."""
    from tvm.tirx import Cast  # pylint: disable=import-outside-toplevel

    lo_expr, hi_expr = (machine.rewrite(e, given, arithmetic=wrapped) for e in (lo_expr, hi_expr))
    lo_expr, hi_expr = (e if str(e.ty.dtype) == "int64" else Cast("int64", e) for e in (lo_expr, hi_expr))
    known = machine.known(given)
    if not proves(facts.analyzer, lo_expr >= 0, known):
        return "lo"
    if not proves(facts.analyzer, hi_expr < extent, known):
        return "hi"
    return None


def _unless_inside_anyway(facts, machine, given, overflow, bound):
    """``overflow`` (a TileError), or None when the view is inside its tensor whatever
    value the wrapping arithmetic takes (an index modulo a stage count); ``bound`` is
    ``(lo_expr, hi_expr, extent)`` of :func:`_unproven_bound`."""
    return overflow if _unproven_bound(facts, machine, given, *bound, wrapped=True) else None


def _shown_extent(facts, root, nbytes):
    """The root's byte size for messages: a run-time size in the tensor's own (int32) terms."""
    shown = int_or_none(nbytes)
    return facts.analyzer.simplify(facts.roots[root] * dtype_bytes(root.dtype)) if shown is None else shown


def check_bounds(facts, opcode, label, root, start, first, end, conds, pred, index=None):
    """The bounds rule for one memory view, in bytes of its root allocation: the
    view touches bytes ``start + first .. start + end - 1``, where ``start`` is
    the byte offset of the view's storage origin from the root's first byte (an
    expression) and ``[first, end)`` the bytes its accesses span past it.

    Bytes, not elements: a dtype view or an alias of another width reads as
    many bytes as it says, whatever the root's element type.  ``conds`` are the
    facts of the call's site (enclosing if-conditions, ``T.assume`` facts);
    ``pred`` is the call's predicate when a false predicate leaves this
    operand untouched (else None); ``index`` is the element offset the kernel
    computes the view's address from (its integer arithmetic must not wrap).
    Integers are the kernel's (:mod:`.machine_ints`).  Over the points that
    reach the call with a true predicate:

    - provably inside the allocation (:func:`.prover.proves`, with the loop
      and id ranges, the guards, assumptions and pred as facts, run-time
      extents included): accepted;
    - provably outside at some point (:func:`.points.exact_values`, when the
      points can be enumerated): rejected, naming the point;
    - otherwise rejected, naming the bound that could not be shown.  A fact
      the prover cannot derive (an index read from memory) is stated with
      ``T.assume(cond)``, which a ``check_assumptions=True`` build checks at
      run time.

    A view provably inside whose ``index`` arithmetic may wrap its dtype is
    rejected, naming the operation (:func:`.machine_ints.index_overflow`),
    unless it is inside whatever value the wrapping operations take.
    """
    nbytes = facts.root_bytes(root)
    assumptions = (*conds, *([pred] if pred is not None else []))
    machine = MachineInts(facts.analyzer, facts.range_facts, facts.ranges)
    given = machine.facts(*facts.split_assumed(assumptions))
    overflow = index_overflow(facts, machine, opcode, label, index, given, assumptions)
    shown = _shown_extent(facts, root, nbytes)
    within = f"bytes within [0, {shown}) of {root.name} ({facts.roots[root]} x {root.dtype})"
    bound = (start + first, start + end - 1, nbytes)
    unproven = _unproven_bound(facts, machine, given, *bound)
    if unproven is None:
        return overflow and _unless_inside_anyway(facts, machine, given, overflow, bound)
    exact = exact_range(facts, start, assumptions) if not machine.opaque else None
    n = int_or_none(nbytes)
    if exact == ():
        return None  # no thread reaches the call
    if exact is not None:
        lo, hi, at_lo, at_hi = exact
        if lo + first < 0 or (n is not None and hi + end > n):
            where, base = (at_lo, lo) if lo + first < 0 else (at_hi, hi)
            return TileError(
                opcode,
                "view provably out of the tensor's bounds",
                operand=label,
                expected=within + (" where the predicate holds" if pred is not None else ""),
                found=f"bytes [{base + first}, {base + end}) at {where or 'every thread'}",
            )
        if n is not None:
            return overflow and _unless_inside_anyway(facts, machine, given, overflow, bound)
    return _not_provable(facts, machine, opcode, label, (start, first, end, shown), unproven, within, assumptions, overflow)


def _not_provable(facts, machine, opcode, label, view, unproven, within, assumptions, overflow):
    """The TileError of a view neither provably inside nor provably outside its
    tensor: ``view`` is ``(start, first, end, shown extent)`` of :func:`check_bounds`,
    ``unproven`` the side that does not follow (``"lo"`` / ``"hi"``)."""
    start, first, end, shown = view
    simplify = facts.analyzer.simplify
    bound = (
        f"{facts.display(simplify(start + first))} >= 0"
        if unproven == "lo"
        else f"{facts.display(simplify(start + end))} <= {shown}"
    )
    given = show(assumptions, facts.display)
    return TileError(
        opcode,
        "view not provably within the tensor's bounds",
        operand=label,
        expected=f"{within} at every point that reaches the call" + (f" (given {given})" if given else ""),
        found=f"byte offset {facts.display(simplify(start))} + [{first}, {end}): {bound} does not follow"
        + wrapped_note(facts, machine, start)
        + (f"; {overflow.wraps}" if overflow is not None else "")
        + " (guard the access with if or pred=, or state what the prover cannot derive with T.assume(cond))",
    )


def check_dtype_views(facts, opcode, label, buf, conds=()):
    """A view made by ``X.view(dtype)`` to a wider dtype starts where ``X`` starts.

    apache-tvm's ``.view(dtype)`` divides the element offset by the ratio of the
    widths and rounds down, so a view starting between two wide elements would
    address the one before it (bytes 0..3 for bytes 2..5 of a ``uint8`` row
    read as one ``uint32``).  The start of ``X`` must therefore be a multiple
    of the wide element's size at every point that reaches the call -- the
    alignment the wide element needs anyway (PTX ISA 5.4.6) -- or the call is
    rejected; it is never rounded.  Applies to memory and register views.
    """
    from tvm.tirx import floormod  # pylint: disable=import-outside-toplevel

    analyzer = facts.analyzer
    for view, parent in facts.rounded_dtype_views(buf):
        need = dtype_bytes(view.dtype)
        start = analyzer.simplify(facts.expand_scalars(parent.elem_offset) * dtype_bytes(parent.dtype))
        if proves(analyzer, floormod(start, need) == 0, facts.known(conds)):
            continue
        exact = exact_values(facts, start, tuple(conds))
        if exact is not None and all(value % need == 0 for value, _ in exact):
            continue
        bad = next((p for p in exact or () if p[0] % need), None)
        found = f"byte offset {facts.display(start)}"
        found += f" = {bad[0]} at {bad[1] or 'every thread'}" if bad else f" (not checked point by point: {NOT_ENUMERATED})"
        return TileError(
            opcode,
            "dtype view not aligned to its element size",
            operand=label,
            expected=(
                f"the {parent.dtype} view's start a multiple of {need} bytes to view it as {view.dtype} "
                "(.view(dtype) would round it down)"
            ),
            found=found,
        )
    return None


def _check_alignment(facts, opcode, label, starts, elem_offset, elem_bytes, need, conds):
    """Every atom start (element offsets ``elem_offset + s`` for ``s`` in ``starts``)
    is a multiple of ``need`` bytes at every point that reaches the call."""
    from tvm.tirx import floormod  # pylint: disable=import-outside-toplevel

    analyzer = facts.analyzer
    for start in sorted(starts):
        addr = (elem_offset + start) * elem_bytes
        if proves(analyzer, floormod(addr, need) == 0, facts.known(conds)):
            continue
        # Not provable for every thread: the threads that reach the call (under
        # their guards) may still all be aligned.
        exact = exact_values(facts, analyzer.simplify(addr), conds)
        if exact is not None and all(value % need == 0 for value, _ in exact):
            continue
        bad = next((p for p in exact or () if p[0] % need), None)
        found = f"byte offset {facts.display(analyzer.simplify(addr))}"
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


def root_or_error(facts, opcode, label, buf, expected):
    """``(root, None)``: the tensor (kernel parameter or allocation) view ``buf``
    is a view of; ``(None, TileError)`` when the kernel has none, the error
    naming operand ``label`` and what it should be a view of (``expected``)."""
    root = facts.root_of(buf)
    if root is not None:
        return root, None
    return None, TileError(
        opcode,
        "memory view without a known tensor",
        operand=label,
        expected=expected,
        found=buf.name,
    )


def check_memory(facts, opcode, role, op, group, repeat, pred=None, conds=()):
    """Alignment and bounds of one memory operand; return a TileError or None.

    ``group`` holds the (guarded) group extents: every thread's atom address is
    the view's address at its group coordinate and each repeat coordinate.
    ``conds`` are the if-conditions enclosing the call and ``pred`` the
    predicate that skips this operand's access (or None); the bounds rule is
    :func:`check_bounds`.
    """
    buf = op.value
    label = operand_label(role.role, op.index)
    root, err = root_or_error(facts, opcode, label, buf, "a view of a kernel parameter or an allocation")
    if err is not None:
        return err
    elem_bytes = dtype_bytes(buf.dtype)
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
    err = check_dtype_views(facts, opcode, label, buf, conds)
    err = err or _check_alignment(facts, opcode, label, starts, elem_offset, elem_bytes, need, conds)
    # Bytes from the root's first byte: a carve-out's views count elements from
    # the pool's start, and the carve-out starts `base_bytes` into the pool
    # (alignment is the same either way: the pool is 1024-byte aligned and each
    # carve-out starts at a multiple of its align).
    start = elem_offset * elem_bytes - facts.base_bytes.get(root, 0)
    span = (first * elem_bytes, (last + 1) * elem_bytes)
    return err or check_bounds(facts, opcode, label, root, start, *span, conds, pred, index=elem_offset)
