"""The group of a call: which threads (or collectives) execute it, as a box of
group coordinates.

Without guards that is the scope's whole group (:func:`..ir.scope.full_group`).
Under guards over thread ids, the executing threads of every instance of the
scope (each warp at ``"warp"`` ...) must form the same box of group
coordinates; the group is that box.  For a collective form (a warp of 32, a
warpgroup of 128 threads), every thread of a collective that takes part must
be active, and the group counts collectives.
"""

from __future__ import annotations

from ...errors import TileError
from .points import exact_values
from ..ir.scope import full_group
from .threads import active_threads
from .uniformity import at_first_member

__all__ = ["group_box", "check_uniform_pred"]


def check_uniform_pred(facts, pred, collective, conds, opcode):
    """A ``pred`` of a collective form has one value over each collective.

    ``.aligned`` instructions are executed by every thread of the collective
    together (PTX ISA 9.7.14.5 for warps, 9.7.15 for warpgroups); a predicate
    true for some of its threads and false for others is what an enclosing
    ``if`` that splits the collective is (rejected by :func:`group_box`).
    Proven symbolically (the predicate equals itself evaluated at the
    collective's first thread), else point by point (:func:`.points.exact_values`)
    over the threads and loop values that reach the call.

    Raises
    ------
    TileError
        The predicate differs between two threads of one collective, or is not
        provably uniform (it reads memory, or too many points).
    """
    from tvm.tirx import Cast  # pylint: disable=import-outside-toplevel

    if pred is None or collective.width <= 1 or facts.launch is None:
        return
    why = facts.uniformity.why_not(pred, collective.name)
    if why is None:
        return
    pred = facts.expand_scalars(pred)
    at_first = at_first_member(facts, pred, collective.width)
    if facts.analyzer.can_prove(pred == at_first):
        return
    differs = Cast("int32", pred) - Cast("int32", at_first)
    exact = exact_values(facts, differs, tuple(facts.expand_scalars(c) for c in conds))
    bad = next((where for value, where in exact or () if value != 0), None)
    if exact is not None and bad is None:
        return
    found = f"pred={facts.display(pred)}"
    if bad is not None:
        found += f": at {bad} it differs from the {collective.name}'s first {collective.member}"
    else:
        found += f": {why}"
    raise TileError(
        opcode,
        f"pred not uniform over the {collective.name}",
        operand="pred",
        expected=(
            f"a predicate with one value for all {collective.width} {collective.member}s of each "
            f"{collective.name} (a .aligned instruction is executed by the whole {collective.name})"
        ),
        found=found,
    )


def _whole_collectives(active, collective, opcode):
    """``[(t0, c)]``: the first thread of each collective in ``active``.

    Raises
    ------
    TileError
        A collective is only partly active (a guard splits it).
    """
    width = collective.width
    units = {}
    for t, c in active:
        units.setdefault((c, t // width), set()).add(t % width)
    for (_, unit), members in units.items():
        if len(members) != width:
            raise TileError(
                opcode,
                f"{collective.name}-collective instruction needs all {width} {collective.member}s",
                expected=f"a guard that keeps whole {collective.name}s",
                found=f"{len(members)} {collective.member}s of {collective.name} {unit}",
            )
    return [(width * unit, c) for (c, unit) in units]


def _box(members, rank, scope, what, opcode):
    """``(lo, hi)`` of the group coordinates in ``members``; they must fill the box."""
    coords = list(members)
    lo = tuple(min(x[i] for x in coords) for i in range(rank))
    hi = tuple(max(x[i] for x in coords) for i in range(rank))
    size = 1
    for a, b in zip(lo, hi):
        size *= b - a + 1
    if size != len(coords):
        raise TileError(
            opcode,
            f"guarded {what} do not form a box of the group",
            expected=f"a rectangular range of {scope} group coordinates",
            found=f"{len(coords)} {what} spanning {lo}..{hi}",
        )
    return lo, hi


def group_box(scope, facts, conds, opcode, collective):
    """``(extents, origin, members)`` of the group of threads that execute the call.

    ``members`` maps each group coordinate (relative to ``origin``) to one
    thread ``(t, c)`` at it (the first thread of its collective).

    Raises
    ------
    TileError
        The launch does not divide into the scope's groups, a guard is not
        understood, splits a collective, or keeps threads that are not a box
        (or not the same box in every instance of the scope).
    """
    extents, coord_fn, instance_fn = full_group(scope, facts.launch, opcode, collective.width)
    active = active_threads(facts, conds, opcode, scope) if conds else facts.all_threads()
    what = "threads"
    if collective.width > 1:
        active = _whole_collectives(active, collective, opcode)
        what = f"{collective.name}s"
    rank = len(extents)
    by_instance = {}
    for t, c in active:
        by_instance.setdefault(instance_fn(t, c), {})[coord_fn(t, c)[:rank]] = (t, c)
    boxes = [(*_box(members, rank, scope, what, opcode), members) for members in by_instance.values()]
    if not boxes:
        return (0,) * rank, (0,) * rank, {}
    lo, hi, members = boxes[0]
    for other in boxes[1:]:
        if (other[0], other[1]) != (lo, hi):
            raise TileError(
                opcode,
                f"guarded {what} differ between instances of the scope",
                expected=f"the same {scope} group range in every {scope}",
                found=f"{lo}..{hi} and {other[0]}..{other[1]}",
            )
    extents = tuple(b - a + 1 for a, b in zip(lo, hi))
    rel = {tuple(x - o for x, o in zip(g, lo)): tc for g, tc in members.items()}
    return extents, lo, rel
