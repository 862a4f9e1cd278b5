"""A tile call's operands as written: tensor views (a buffer region becomes the equal
view) or typed scalar expressions, each with its position in the call."""

from __future__ import annotations

from dataclasses import dataclass

import tvm

from ...errors import TileError
from .views import int_or_none, static_int

__all__ = ["Operand", "as_view", "classify"]


@dataclass(frozen=True)
class Operand:
    """One call operand after classification.

    Attributes
    ----------
    value : object
        The buffer view (``kind == "tensor"``) or scalar ``PrimExpr``; for a
        raw ``T.ptx`` call's register (:mod:`..rules.raw_calls`), the element load
        ``regs[i]`` (a tuple of them for a register group).
    kind : str
        ``"tensor"``, ``"scalar"``, or ``"element"`` (a raw call's register).
    index : int | str
        1-based position among the call's operands (the instruction is not
        counted), or the keyword of an operand passed by keyword (``mbar``).
    """

    value: object
    kind: str
    index: object

    @property
    def shape(self) -> tuple:
        """Static shape of a tensor operand (ints; a symbolic extent stays an Expr)."""
        return tuple(static_int(s) for s in self.value.shape)


def as_view(value):
    """``value`` with a buffer region (``A[0:64, 1:2]``, a ``tvm.ir.TensorRegion``)
    replaced by the equal view ``A.sub[0:64, 1:2]``; anything else unchanged.

    A region keeps every axis of its buffer: an index ``A[tid, 0:4]`` parses to
    the same region as ``A[tid:tid + 1, 0:4]``, so it becomes an axis of extent 1
    (``A.sub[tid:tid + 1, 0:4]``, shape ``(1, 4)``); ``.sub[tid, :]`` is the way
    to drop it.  An axis the region covers whole stays un-narrowed
    (``A.sub[:, 1:2]``).  Like every view, the result is declared in the
    enclosing IRBuilder frame, so call it while parsing, once per operand.
    """
    if not isinstance(value, tvm.ir.TensorRegion) or not tvm.tirx.is_buffer_var(value.source):
        return value
    buf = value.source
    picks = []
    for r, extent in zip(value.region, buf.shape):
        whole = int_or_none(r.min) == 0 and int_or_none(r.extent) == int_or_none(extent) is not None
        picks.append(slice(None) if whole else slice(r.min, r.min + r.extent))
    return buf.sub[tuple(picks)]


def classify(value, index, opcode: str) -> Operand:
    """Classify a call operand as a tensor view or a scalar expression.

    Raises
    ------
    TileError
        The operand is neither a buffer/view nor a typed scalar expression
        (e.g. a bare Python number, whose dtype is ambiguous).
    """
    value = getattr(value, "scalar", value)
    if tvm.tirx.is_buffer_var(value):
        return Operand(value, "tensor", index)
    if isinstance(value, bool | int | float):
        raise TileError(
            opcode,
            "untyped scalar",
            operand=_where(index),
            expected="a typed scalar such as T.float32(0) or T.uint32(17)",
            found=repr(value),
        )
    if tvm.ir.is_prim_expr(value):
        return Operand(value, "scalar", index)
    raise TileError(
        opcode,
        "operand is not a tensor view or scalar expression",
        operand=_where(index),
        expected="a Buffer view (X, X.sub[...], X[a:b, ...], X.view(...)) or a PrimExpr",
        found=type(value).__name__,
    )


def _where(index) -> str:
    return f"parameter {index}" if isinstance(index, str) else f"operand {index}"
