"""The order in which the CTAs walk the output tiles (the tile scheduler's map)."""

from __future__ import annotations

from tvm.script import tirx as T

__all__ = ["tile_order"]


def tile_order(t, tiles_m, tiles_n: int, group_m: int):
    """Output tile ``t`` -> ``(row tile, column tile)``, in groups of ``group_m`` row tiles.

    The tiles of a group walk the column tiles together (tile ``t`` of a group is its row
    ``t % size``), so that consecutive tiles share the same columns of B in L2.  The last
    group has ``size = tiles_m - first row`` rows when ``tiles_m`` is not a multiple of
    ``group_m`` (or is a run-time count): ``size`` is then ``min(group_m, tiles_m - first)``.

    Parameters
    ----------
    t : int or PrimExpr
        The tile's index, ``0 <= t < tiles_m * tiles_n``.
    tiles_m : int or PrimExpr
        Row tiles of C (128 rows each; a run-time count for a run-time ``m``).
    tiles_n : int
        Column tiles of C (``block_n`` columns each).
    group_m : int
        Row tiles per group (>= 1).

    Returns
    -------
    (row tile, column tile): ints for int arguments, else PrimExprs.
    """
    per_group = group_m * tiles_n
    if isinstance(tiles_m, int) and tiles_m % group_m == 0:  # every group is whole
        return (t // per_group) * group_m + t % group_m, (t % per_group) // group_m
    first = (t // per_group) * group_m
    rest = tiles_m - first
    size = min(rest, group_m) if isinstance(rest, int) else T.min(rest, group_m)
    return first + (t % per_group) % size, (t % per_group) // size
