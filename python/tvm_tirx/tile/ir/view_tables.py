"""Every coordinate of a view at once: :meth:`.views.ViewMap.apply` as numpy arrays.

The rules that look at each element of a tile (the register slots of a
fragment, a matrix descriptor's tile offsets) ask a layout for thousands of
coordinates; :func:`axis_table` computes them all in one pass with the same
arithmetic as :meth:`~.views.ViewMap.apply` (row-major re-split of the view's
coordinate over the layout's shard extents, coordinate x stride per shard
iter, the constant offsets, the XOR swizzle of ``"m"``), so a rule that
reads the table checks exactly the elements it checked one by one.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from .views import ViewMap, xor_swizzle

__all__ = ["axis_table", "gather", "fragment_points", "as_points", "slots_distinct", "TABLE_LIMIT"]

#: Largest view (elements) tabulated; a larger one is checked element by element.
TABLE_LIMIT = 1 << 22


def _shard_coords(flat, shape, shard):
    """Per shard axis, the coordinate of each row-major index ``flat`` of a
    ``shape`` view (:meth:`ViewMap.coord`, vectorised)."""
    if shard == shape:
        return list(np.unravel_index(flat, shape)) if shape else []
    out = []
    for n in reversed(shard):
        out.append(flat % n)
        flat = flat // n
    return out[::-1]


def _table(view: ViewMap):
    terms = view.static_terms
    if terms is None or not all(isinstance(n, int) for n in (*view.shape, *view.shard)):
        return None
    size = int(np.prod(view.shape, dtype=np.int64))
    if size > TABLE_LIMIT:
        return None
    iters, offsets, swizzle = terms
    flat = np.arange(size, dtype=np.int64)
    out = {axis: np.full(size, value, dtype=np.int64) for axis, value in offsets.items()}
    out.setdefault("m", np.zeros(size, dtype=np.int64))
    for c, (_, stride, axis) in zip(_shard_coords(flat, view.shape, view.shard), iters):
        out[axis] = out.get(axis, 0) + c * stride
    if swizzle is not None:
        out["m"] = xor_swizzle(out["m"], *swizzle)
    for axis, values in out.items():
        values = np.broadcast_to(values, (size,)).reshape(view.shape)
        values.setflags(write=False)
        out[axis] = values
    return out


@functools.lru_cache(maxsize=64)
def _cached(buf):
    return _table(ViewMap(buf))


def axis_table(buf):
    """``{axis name: int64 array of buf's shape}``: :meth:`ViewMap.apply` of
    view ``buf`` at every coordinate (``"m"``: the storage offset in elements
    or register slots; thread axes such as ``tid_in_wg`` too).  The arrays are
    read-only and cached per view.

    Returns None when the view is not tabulated: a symbolic shape or layout,
    a layout :meth:`ViewMap.apply` hands to apache-tvm, or more than
    :data:`TABLE_LIMIT` elements; the caller then asks :class:`ViewMap`.
    """
    return _cached(buf)


def gather(values, lead, points):
    """``values[(*lead, *p)]`` for each coordinate ``p`` along the last axis of
    ``points`` (an int array ``(..., d)``): an array of shape ``points.shape[:-1]``.

    ``values`` is one array of :func:`axis_table`; ``lead`` a tuple of ints.
    Returns None when a coordinate lies outside the view (the caller then asks
    :class:`ViewMap`, which reads such a coordinate its own way) or the ranks
    do not add up.
    """
    if points.ndim < 2 or len(lead) + points.shape[-1] != values.ndim:
        return None
    dims = np.array(values.shape, dtype=np.int64)
    if any(not 0 <= x < n for x, n in zip(lead, values.shape)):
        return None
    if points.size and ((points < 0).any() or (points >= dims[len(lead) :]).any()):
        return None
    return values[(*lead, *np.moveaxis(points, -1, 0))]


def fragment_points(lane_coords, repeat: tuple, width: int) -> list:
    """The ``(*repeat, *atom)`` coordinates each position of a collective passes:
    per position (0 .. ``width - 1``) a list of tuples, repeat coordinates outer
    and the fragment's PTX register order inner (``lane_coords(position)``: the
    ISA's fragment map, :attr:`.contract.OperandRole.lane_coords`)."""
    reps = list(itertools.product(*(range(n) for n in repeat)))
    return [[(*r, *c) for r in reps for c in lane_coords(p)] for p in range(width)]


def as_points(rows):
    """``rows`` (lists of coordinate tuples, one list per thread) as an int64
    array ``(threads, points, d)`` for :func:`gather`; None when the lists differ
    in length or are empty."""
    if not rows or len({len(row) for row in rows}) != 1 or not rows[0]:
        return None
    points = np.array(rows, dtype=np.int64)
    return points if points.ndim == 3 else None


def slots_distinct(buf, leads, per_thread) -> bool:
    """Whether, at every group coordinate in ``leads`` (tuples of ints), the
    coordinates of each thread (``per_thread``: one list of coordinate tuples
    per thread, without the group axes) map to distinct storage offsets of view
    ``buf`` (register slots of a destination), every coordinate compared.
    False also when the view is not tabulated or a coordinate lies outside it:
    the element-by-element check then decides and names the overlap."""
    table = axis_table(buf)
    points = as_points(per_thread) if table is not None else None
    if points is None:
        return False
    for lead in leads:
        slots = gather(table["m"], tuple(lead), points)
        if slots is None:
            return False
        ordered = np.sort(slots, axis=1)
        if (ordered[:, 1:] == ordered[:, :-1]).any():
            return False
    return True
