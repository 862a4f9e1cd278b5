"""Size rules the row-wise kernels share: what counts as a static int, a run-time extent,
and the element limit of int32 offsets."""

from __future__ import annotations

import numbers

import tvm

__all__ = ["MAX_ELEMENTS", "is_int", "is_extent"]

#: elements a tensor indexed with int32 offsets may hold
MAX_ELEMENTS = 2**31 - 1


def is_int(value) -> bool:
    """Whether ``value`` is a Python or numpy integer (not a bool)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_extent(value) -> bool:
    """Whether ``value`` is a positive integer or an int32 run-time extent (``T.dynamic``)."""
    if is_int(value):
        return value > 0
    return isinstance(value, tvm.tirx.Var) and str(value.ty.dtype) == "int32"
