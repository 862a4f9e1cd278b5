"""``T.cuda.tile.reduce_lanes``: reduce registers over a group of lanes with butterfly shuffles.

A helper of the script layer over the ``shfl.sync`` family
(:mod:`tvm_tirx.tile.families.shuffle`), like ``T.cuda.tile.ewise``: it emits
tile calls while the kernel is parsed.  A row of an mma/wgmma accumulator lives in four lanes (PTX ISA
9.7.15.5.1.1: thread ``4g + t`` of a warp holds row ``g`` and ``g + 8``,
columns ``2t, 2t + 1`` of every 8-column block), so a row maximum is, after
each thread reduced its own columns, a reduction over the lanes ``4g .. 4g+3``:
two butterfly steps, ``shfl.sync.bfly`` with lane masks 1 and 2, each followed
by the combining instruction::

    T.cuda.tile.reduce_lanes(T.ptx["max.f32"], row_max, lanes=4)
    T.cuda.tile.reduce_lanes(T.ptx["max.f32"], row_max, across=(acc, 1))  # the lanes of acc's rows

The group of lanes is given one of three ways: ``lanes=n`` (``n`` consecutive
lanes, ``n`` a power of two), ``xor=(m1, m2, ...)`` (the butterfly's lane
masks), or ``across=(tensor, axis)``: the lanes over which ``axis`` of a
register tensor is spread, read from its layout (:func:`lane_xors`) -- the
lane permutation written through a layout.  The expansion is ordinary tile
calls, each checked by its own contract (the shuffle's member mask rules
included): per lane mask ``m``, ``shfl.sync.bfly.b32`` of every value into a
scratch tensor, then ``instr(values, values, scratch)``.
"""

from __future__ import annotations

import numpy as np
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script.builder import ir as _ir

from ..errors import TileError
from ..tile.ir.contract import WARP
from ..tile.rules.op import apply
from ..tile.ir.operands import as_view
from ..tile.ir.view_tables import axis_table

__all__ = ["reduce_lanes", "lane_xors", "BFLY"]

#: The butterfly shuffle of one 32-bit register.
BFLY = "shfl.sync.bfly.b32"
_NAME = "tile.reduce_lanes"


def _basis(masks) -> list:
    """A basis of the XOR span of ``masks`` (reduced: each leading bit in one vector), ascending."""
    basis = []
    for m in masks:
        for v in basis:
            m = min(m, m ^ v)
        if m:
            basis = [min(v, v ^ m) for v in basis] + [m]
    return sorted(basis)


def _group_error(rule_found, expected) -> TileError:
    return TileError(_NAME, "invalid lane group", expected=expected, found=rule_found)


def _masks_of(lanes, xor, across) -> tuple:
    """The butterfly's lane masks from the one of ``lanes``, ``xor``, ``across`` given."""
    given = [name for name, v in (("lanes", lanes), ("xor", xor), ("across", across)) if v is not None]
    if len(given) != 1:
        raise TileError(
            _NAME,
            "one lane group needed",
            expected="exactly one of lanes=n, xor=(m, ...) and across=(tensor, axis)",
            found=", ".join(f"{n}=" for n in given) or "none of them",
        )
    if lanes is not None:
        if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 2 or lanes > 32 or lanes & (lanes - 1):
            raise _group_error(f"lanes={lanes!r}", "lanes= a power of two from 2 to 32 (consecutive lanes)")
        return tuple(1 << k for k in range(lanes.bit_length() - 1))
    if across is not None:
        if not isinstance(across, tuple) or len(across) != 2:
            raise _group_error(f"across={across!r}", "across=(register tensor, axis)")
        return lane_xors(*across)
    masks = tuple(xor) if isinstance(xor, tuple | list) else (xor,)
    if not all(isinstance(m, int) and not isinstance(m, bool) and 0 < m < 32 for m in masks) or len(
        _basis(masks)
    ) != len(masks):
        raise _group_error(f"xor={xor!r}", "xor= lane masks in 1..31, none the XOR of others (e.g. (1, 2))")
    return masks


def lane_xors(tensor, axis: int) -> tuple:
    """The lane masks of the butterfly over the lanes that share each index of
    ``tensor``'s other axes along ``axis``: ``(1, 2)`` for the columns (axis 1)
    of a ``(64, N)`` wgmma accumulator or an ``(16, 8)`` mma.sync one.

    ``tensor`` is a register tensor whose layout places its values on thread
    axes (``laneid``, ``tid_in_wg``, ``tx``).  Along ``axis``, at each index of
    the other axes, the values must lie in one warp on a set of lanes
    ``{l0 ^ x}`` for ``x`` in one XOR span -- the same span at every index.

    Returns
    -------
    tuple[int, ...]
        A basis of that span, ascending (the masks of the butterfly steps).

    Raises
    ------
    TileError
        The layout has no lane axis or is not tabulated, or the values along
        ``axis`` span several warps or do not form such a group.
    """
    table = axis_table(tensor) if tirx.is_buffer_var(tensor) else None
    names = [a for a in WARP.position_axes if table is not None and a in table]
    if not names:
        raise _across_error(tensor, "no lane axis in its layout (or a layout not read statically)")
    ids = np.moveaxis(table[names[0]] + 32 * table.get("warpid", 0), axis, -1)
    rows = ids.reshape(-1, ids.shape[-1])
    spans = set()
    for row in rows:
        if len(set((row // 32).tolist())) != 1:
            raise _across_error(tensor, f"axis {axis} spans several warps")
        lanes = {int(x) % 32 for x in row}
        first = min(lanes)
        basis = _basis([lane ^ first for lane in lanes])
        if len(lanes) != 1 << len(basis):
            raise _across_error(tensor, f"lanes {sorted(lanes)} are not a butterfly group")
        spans.add(tuple(basis))
    if len(spans) != 1:
        raise _across_error(tensor, f"the lanes differ between indices (masks {sorted(spans)})")
    return spans.pop()


def _across_error(tensor, why) -> TileError:
    name = getattr(tensor, "name", type(tensor).__name__)
    return TileError(
        _NAME,
        "lanes along the axis are not a butterfly group",
        operand="parameter across",
        expected="a register tensor whose layout puts the axis on lanes {l0 ^ x}, x in one XOR span, "
        "the same at every index of the other axes (a wgmma or mma.sync accumulator's columns)",
        found=f"{name}: {why}",
    )


def reduce_lanes(instr, values, *, lanes=None, xor=None, across=None, membermask=None) -> None:
    """Reduce each register of ``values`` over a group of lanes, in place.

    Every lane of the group ends with the reduction (``instr`` must be
    commutative and associative: ``max``, ``min``, ``add``, ``and`` ...).
    Emits, per lane mask ``m`` of the group (PTX ISA 9.7.10.6), one
    ``shfl.sync.bfly.b32`` tile call of every value into a scratch register
    tensor and one ``instr(values, values, scratch)`` tile call: for a group
    of ``2**k`` lanes, ``k`` shuffles and ``k`` instructions per value.

    Parameters
    ----------
    instr : T.ptx chain | str
        A register instruction ``d, a, b`` on 32-bit values (``"max.f32"``,
        ``"add.f32"``, ``"max.s32"``, ``"or.b32"``).
    values : Buffer | TensorRegion
        A ``local`` register tensor of a 32-bit dtype, ``(*repeat, 1)`` or
        ``(n,)`` (taken as ``(n, 1)``): each thread's partial results.
    lanes : int, optional
        The group: ``lanes`` consecutive lanes (2, 4, 8, 16 or 32).
    xor : tuple[int, ...], optional
        The group: the butterfly's lane masks (``(1, 2)``).
    across : tuple[Buffer, int], optional
        The group: the lanes over which axis ``across[1]`` of register tensor
        ``across[0]`` lies (:func:`lane_xors`).
    membermask : PrimExpr | int, optional
        The shuffles' member mask (default: the lanes that reach the call).

    Raises
    ------
    TileError
        Not exactly one of ``lanes``/``xor``/``across``, an invalid group,
        ``values`` not a register tensor, or any rule of the emitted calls
        (their messages name ``shfl.sync.bfly.b32`` or ``instr``).
    """
    masks = _masks_of(lanes, xor, across)
    values = as_view(values)
    if not tirx.is_buffer_var(values) or values.scope() != "local":
        raise TileError(
            _NAME,
            "not a register tensor",
            operand="values (operand 2)",
            expected="a T.alloc_local tensor of 32-bit values",
            found=f"storage scope {values.scope()!r}" if tirx.is_buffer_var(values) else type(values).__name__,
        )
    shape = [int(n) for n in values.shape]
    if shape[-1] != 1:
        values, shape = values.view(*shape, 1), [*shape, 1]
    scratch = IRBuilder.name(f"{values.name}_partner", _ir.alloc_local(shape, values.dtype))
    params = {} if membermask is None else {"membermask": membermask}
    for mask in masks:
        _ir.evaluate(apply(BFLY, scratch, values, b=mask, **params))
        _ir.evaluate(apply(instr, values, values, scratch))
