"""Register ownership: each register value of a call belongs to the thread that
passes it to the instruction.

A register tensor's layout may place values on threads (``laneid``,
``warpid`` ... axes of ``tvm.tirx.layout``).  For a per-thread form, the
thread axes at each group coordinate must be the issuing thread's ids; for a
collective form, the value at each atom coordinate must be on the thread the
ISA's fragment map gives (:attr:`OperandRole.lane_coords`), in the same
register slot on every thread of the collective.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...errors import TileError, operand_label
from ..ir.scope import thread_axis_values
from ..ir.view_tables import as_points, axis_table, fragment_points, gather
from ..ir.views import ViewMap, coords

__all__ = ["check_ownership"]


def _foreign_value(opcode, label, axes, expect, where_expected, coord):
    """A TileError when a layout thread axis at ``coord`` differs from ``expect``, else None."""
    for axis, value in axes.items():
        if axis != "m" and (axis not in expect or int(value) != expect[axis]):
            return TileError(
                opcode,
                "register value owned by another thread",
                operand=label,
                expected=f"{axis} = {expect.get(axis, '?')} ({where_expected})",
                found=f"{axis} = {int(value)} at coordinate {coord}",
            )
    return None


def _collective_slots(opcode, role, view, label, g, rep_list, position, expect, collective):
    """The register slots the thread at ``position`` of the collective passes, or a TileError."""
    slots = []
    for rep in rep_list:
        for coord in role.lane_coords(position):
            full = (*g, *rep, *coord)
            axes = view.apply(full)
            where = f"{collective.member} {position} holds {coord} by the ISA's fragment map"
            err = _foreign_value(opcode, label, axes, expect, where, full)
            if err:
                return err
            if not any(a in axes for a in collective.position_axes):
                return TileError(
                    opcode,
                    f"{collective.name}-collective register operand without a {collective.member} axis",
                    operand=label,
                    expected=f"a layout that places each value on its {collective.member} "
                    f"({collective.position_axes[0]})",
                    found=f"layout {view.layout}",
                )
            slots.append(int(axes["m"]))
    return slots


def _collective_holds(role, buf, members, repeat, collective) -> bool:
    """Whether :func:`_check_collective` finds nothing, decided over whole arrays
    (:mod:`..ir.view_tables`): every element of every group coordinate and position
    is compared, as there.  False also when the view is not tabulated; the
    element-by-element check then decides and names the first violation."""
    table = axis_table(buf)
    points = as_points(fragment_points(role.lane_coords, repeat, collective.width)) if table is not None else None
    if points is None or not any(a in table for a in collective.position_axes):
        return False
    for g, (t0, c) in members.items():
        expects = [thread_axis_values(t0 + p, c) for p in range(collective.width)]
        for axis, values in table.items():
            if axis == "m":
                continue
            found = gather(values, tuple(g), points)
            if found is None or any(axis not in e for e in expects):
                return False
            if not (found == np.array([e[axis] for e in expects])[:, None]).all():
                return False
        slots = gather(table["m"], tuple(g), points)
        if slots is None or not (slots == slots[0]).all():
            return False
    return True


def _check_collective(opcode, role, view, label, members, repeat, collective):
    """Each thread's registers hold the coordinates the ISA gives its position, in
    one register slot per PTX operand position, the same slot on every thread."""
    if _collective_holds(role, view.buf, members, repeat, collective):
        return None
    rep_list = list(itertools.product(*(range(n) for n in repeat)))
    for g, (t0, c) in members.items():
        first = None
        for position in range(collective.width):
            expect = thread_axis_values(t0 + position, c)
            mine = _collective_slots(opcode, role, view, label, g, rep_list, position, expect, collective)
            if isinstance(mine, TileError):
                return mine
            if first is None:
                first = mine
            elif mine != first:
                return TileError(
                    opcode,
                    f"register slots differ between {collective.member}s",
                    operand=label,
                    expected=f"the same register slot for each fragment register on every "
                    f"{collective.member} ({first[:8]})",
                    found=f"{collective.member} {position}: {mine[:8]}",
                )
    return None


def _group_axis_unmapped(opcode, label, seen, ids, g):
    axis = next(i for i, (a, b) in enumerate(zip(seen[ids], g)) if a != b)
    return TileError(
        opcode,
        "group axis not mapped to a thread axis",
        operand=label,
        expected=f"group axis {axis} carried by a layout thread axis (laneid, warpid, ...)",
        found=f"group coordinates {seen[ids]} and {g} held by the same thread",
    )


def check_ownership(opcode, role, op, group, origin, members, repeat, collective):
    """Register values at each group coordinate belong to the thread issuing it.

    ``members`` maps each group coordinate (relative to ``origin``) to one
    issuing thread ``(t, c)`` (the first of its collective).  The layout's
    thread axes at that coordinate must equal that thread's ids, and every
    group axis must be carried by some thread axis.  Returns a TileError or None.
    """
    view = ViewMap(op.value)
    label = operand_label(role.role, op.index)
    if role.lane_coords is not None:
        return _check_collective(opcode, role, view, label, members, repeat, collective)
    inner = list(coords(repeat, role.atom))
    # Strided layouts: the thread axes of (g, r, k) are those of (g, 0, 0)
    # plus those of (0, r, k), so all of (r, k) at the first group coordinate
    # and (0, 0) at the others cover the box.  Otherwise every point is checked.
    first = next(iter(members), None)
    seen = {}
    for g, (t, c) in members.items():
        expect = thread_axis_values(t, c)
        where = tuple(o + x for o, x in zip(origin, g))
        for rk in inner if (not view.separable or g == first) else inner[:1]:
            err = _foreign_value(
                opcode, label, view.apply((*g, *rk)), expect, f"the issuing thread at group {where}", (*where, *rk)
            )
            if err:
                return err
        ids = tuple(sorted((a, int(v)) for a, v in view.apply((*g, *inner[0])).items() if a != "m"))
        if group and ids in seen:
            return _group_axis_unmapped(opcode, label, seen, ids, g)
        seen[ids] = g
    return None
