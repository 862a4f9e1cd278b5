"""``T.cuda.tile.ewise``: apply a scalar TIRx function at every register coordinate.

``T.cuda.tile.ewise(lambda x: x * T.sigmoid(x), dst, src)`` writes
``dst[c] = fn(src[c])`` for every coordinate ``c`` of the register tensors, as
unrolled loops emitted where the call is parsed.  Unlike ``tile.apply`` it
names no instruction: apache-tvm's CUDA codegen picks them for the scalar
expression.  Nothing is converted implicitly: each input's dtype must equal
the function's parameter annotation (when given) and the result's dtype must
equal ``dst``'s.
"""

from __future__ import annotations

import inspect

import tvm
from tvm.tirx.script.builder import ir as _ir

from ...errors import TileError, operand_label
from .operands import as_view

__all__ = ["ewise"]

_NAME = "tile.ewise"


def _dtype_of_annotation(annotation):
    """The dtype a parameter annotation names (``T.float32`` or ``"float32"``), or None."""
    if annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, str):
        return annotation
    for attr in ("dtype", "_dtype_str"):  # T.float32 is apache-tvm's DtypeConstructor
        value = getattr(annotation, attr, None)
        if isinstance(value, str):
            return value
    return None


def _expr_dtype(value):
    ty = getattr(value, "ty", None)
    return str(getattr(ty, "dtype", "")) or None


def ewise(fn, dst, *inputs, scope: str = "thread") -> None:
    """Apply scalar function ``fn`` elementwise over register tensors.

    Parameters
    ----------
    fn : callable
        Takes one scalar ``PrimExpr`` per input and returns one; may be a lambda
        or a function with dtype annotations (``def f(x: T.float32)``).
    dst : Buffer | TensorRegion
        ``local`` register tensor written at every coordinate (a region
        ``r[0:4]`` is the view ``r.sub[0:4]``).
    *inputs : Buffer | TensorRegion | PrimExpr
        ``local`` register tensors of ``dst``'s shape, or typed scalars
        (reused at every coordinate).
    scope : str
        ``"thread"`` (each thread its own registers).

    Raises
    ------
    TileError
        ``dst``/inputs not register tensors of one shape, a scope other than
        ``"thread"``, a parameter annotation or result dtype that differs from
        the operand's, or an input count that does not match ``fn``.
    """
    if scope != "thread":
        raise TileError(_NAME, "execution scope not supported", expected="'thread'", found=repr(scope))
    dst, inputs = as_view(dst), tuple(as_view(v) for v in inputs)  # A[0:4] is A.sub[0:4]
    _require_operands(dst, inputs)
    _require_signature(fn, inputs)

    shape = [int(s) for s in dst.shape]
    frames = [_ir.unroll(n) for n in shape]
    coord = []
    stack = []
    try:
        for frame in frames:
            stack.append(frame)
            coord.append(frame.__enter__())
        args = [op[tuple(coord)] if tvm.tirx.is_buffer_var(op) else op for op in inputs]
        value = fn(*args)
        if _expr_dtype(value) != dst.dtype:
            raise TileError(
                _NAME,
                "result dtype differs from dst",
                operand=operand_label("dst", 1),
                expected=dst.dtype,
                found=f"{_expr_dtype(value)} (no implicit conversion; use cvt)",
            )
        _ir.buffer_store(dst, value, list(coord))
    finally:
        while stack:
            stack.pop().__exit__(None, None, None)


def _require_operands(dst, inputs) -> None:
    """``dst`` and every tensor input are register tensors of ``dst``'s shape;
    the other inputs are typed scalars."""
    operands = [dst, *inputs]
    for i, op in enumerate(operands):
        role = "dst" if i == 0 else f"input {i}"
        if tvm.tirx.is_buffer_var(op):
            if op.scope() != "local":
                raise TileError(
                    _NAME,
                    "not a register tensor",
                    operand=operand_label(role, i + 1),
                    expected="a T.alloc_local tensor",
                    found=f"storage scope {op.scope()!r}",
                )
            if [int(s) for s in op.shape] != [int(s) for s in dst.shape]:
                raise TileError(
                    _NAME,
                    "shapes differ",
                    operand=operand_label(role, i + 1),
                    expected=f"shape {tuple(int(s) for s in dst.shape)}",
                    found=f"shape {tuple(int(s) for s in op.shape)}",
                )
        elif i == 0 or not tvm.ir.is_prim_expr(op):
            raise TileError(
                _NAME,
                "operand is not a register tensor" + ("" if i == 0 else " or typed scalar"),
                operand=operand_label(role, i + 1),
                found=type(op).__name__,
            )


def _require_signature(fn, inputs) -> None:
    """``fn`` takes one argument per input, annotated (if at all) with its dtype."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = None
    if params is not None and len(params) != len(inputs):
        raise TileError(
            _NAME, "input count", expected=f"{len(params)} input(s) for {fn}", found=str(len(inputs))
        )
    in_dtypes = [op.dtype if tvm.tirx.is_buffer_var(op) else _expr_dtype(op) for op in inputs]
    for i, (p, dtype) in enumerate(zip(params or [], in_dtypes)):
        want = _dtype_of_annotation(p.annotation)
        if want is not None and want != dtype:
            raise TileError(
                _NAME,
                "input dtype differs from the function's parameter",
                operand=operand_label(f"input {i + 1}", i + 2),
                expected=f"{want} (parameter {p.name!r})",
                found=dtype,
            )
