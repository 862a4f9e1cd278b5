"""Offload a Relax rotary embedding in the rotate-half form to the rotary kernel
(:mod:`tvm_tirx.kernels.rotary`).

Matched: ``R.add(R.multiply(x, cos), R.multiply(rotated, sin))`` (either order of each
sum and product) where ``rotated = R.concat([R.negative(hi), lo], axis=-1)`` and ``lo`` /
``hi`` are the two halves of ``x``'s last axis (``R.split`` in two, or two
``R.strided_slice``) -- the form of Llama's ``rotate_half``; ``x`` is ``(batch, seq,
heads, head_dim)`` with static heads and head_dim (64, 128, 256), ``cos`` and ``sin``
are ``(1, seq, 1, head_dim)`` or ``(seq, 1, head_dim)`` (one row per position,
broadcast over batch and heads), every tensor of one dtype, bfloat16 or float16.  The
sum becomes one ``R.call_tir`` of the kernel (one per ``(heads, head_dim, dtype)``, with
run-time batch and length) on ``x`` and the tables reshaped to ``(seq, head_dim)``
(views); the slices, products and sums drop out when nothing else reads them.  The
kernel computes in float32 and rounds once; the unfused program rounds every product.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import tvm
from tvm import relax
from tvm.script import tirx as T

from ..kernels.attention.config import DTYPES as SHORT_DTYPES
from ..kernels.rotary import check_rotary, make_rotary
from .relax_rewrite import Offloader, SkippedCall

__all__ = ["RotaryMatch", "SkippedRotary", "match_rotary", "rotary_prim_func", "rotary_offloader"]

_ANY = tvm.tirx.Var("n", "int32")  # stands for a symbolic batch or length in the generator's checks
_OPS = {name: tvm.ir.Op.get(f"relax.{name}") for name in ("multiply", "concat", "negative", "split", "strided_slice")}


class SkippedRotary(SkippedCall):
    """An ``R.add`` the rotary offload left alone (see :class:`~tvm_tirx.ops.relax_rewrite.SkippedCall`)."""


@dataclass(frozen=True)
class RotaryMatch:
    """A matched rotary embedding: ``x``, the two tables as the sum reads them, the
    sizes (batch and length as PrimExprs) and the dtype."""

    x: relax.Expr
    cos: relax.Expr
    sin: relax.Expr
    batch: tvm.tirx.PrimExpr
    seq_len: tvm.tirx.PrimExpr
    heads: int
    head_dim: int
    dtype: str


@functools.lru_cache(maxsize=None)
def rotary_prim_func(heads: int, head_dim: int, dtype: str) -> tvm.tirx.PrimFunc:
    """``make_rotary`` with run-time batch and length, named
    ``tvm_tirx_rotary_h{heads}_d{head_dim}_{bf16|f16}``.

    Raises
    ------
    ValueError
        What :func:`~tvm_tirx.kernels.rotary.make_rotary` refuses.
    """
    func = make_rotary(T.dynamic("B"), T.dynamic("L"), heads, head_dim, dtype)
    return func.with_attr("global_symbol", f"tvm_tirx_rotary_h{heads}_d{head_dim}_{SHORT_DTYPES[dtype]}")


def _call(expr, lookup, op: str):
    """The call of ``relax.{op}`` ``expr`` is (or is bound to), else None."""
    value = lookup(expr) if isinstance(expr, relax.Var) else expr
    return value if isinstance(value, relax.Call) and value.op == _OPS[op] else None


def _ints(expr) -> list | None:
    fields = getattr(expr, "fields", None)
    if fields is None or not all(isinstance(f, tvm.tirx.IntImm) for f in fields):
        return None
    return [int(f) for f in fields]


def _halves(parts, d: int) -> bool:
    """Whether ``R.split``'s ``indices_or_sections`` cuts ``d`` in two halves."""
    if isinstance(parts, tvm.tirx.IntImm | int):
        return int(parts) == 2
    return [int(p) for p in parts] == [d // 2]


def _half(expr, lookup, which: int, d: int):
    """The tensor whose last-axis half ``which`` (0 lower, 1 upper) ``expr`` is, else None."""
    value = lookup(expr) if isinstance(expr, relax.Var) else expr
    if isinstance(value, relax.TupleGetItem) and value.index == which:
        split = _call(value.tuple_value, lookup, "split")
        if split is not None and int(split.attrs.axis) in (-1, 3) and _halves(split.attrs.indices_or_sections, d):
            return split.args[0]
    sliced = _call(value, lookup, "strided_slice")
    if sliced is not None and len(sliced.args) == 4:
        axes, begin, end = (_ints(a) for a in sliced.args[1:])
        if axes in ([3], [-1]) and [begin, end] == ([[0], [d // 2]], [[d // 2], [d]])[which]:
            return sliced.args[0]
    return None


def _rotated_input(expr, lookup, d: int):
    """``x`` if ``expr`` is ``concat([-x_hi, x_lo], axis=-1)``, else None."""
    cat = _call(expr, lookup, "concat")
    if cat is None or int(cat.attrs.axis) not in (-1, 3):
        return None
    parts = cat.args[0].fields if isinstance(cat.args[0], relax.Tuple) else None
    if parts is None or len(parts) != 2:
        return None
    neg = _call(parts[0], lookup, "negative")
    hi = _half(neg.args[0], lookup, 1, d) if neg is not None else None
    lo = _half(parts[1], lookup, 0, d)
    return hi if hi is not None and lo is not None and hi.same_as(lo) else None


def _table(table, x_shape) -> str | None:
    """Why ``table`` is not a per-position table for ``x``, or None."""
    dims = list(table.ty.shape.values) if table.ty.shape is not None else None
    if dims is None or len(dims) not in (3, 4) or (len(dims) == 4 and not _is_one(dims[0])):
        return f"a table of shape {_dims(dims or [])} (offloaded: (1, seq, 1, head_dim) or (seq, 1, head_dim))"
    seq, one, d = dims[-3:]
    if not (_is_one(one) and tvm.sym.Analyzer().can_prove_equal(seq, x_shape[1]) and _same(d, x_shape[3])):
        return f"a table of shape {_dims(dims)} for x of shape {_dims(x_shape)} (offloaded: (1, seq, 1, head_dim))"
    return None


def _dims(shape) -> str:
    """``shape`` (PrimExprs) as a readable list."""
    return "[" + ", ".join(str(int(e)) if isinstance(e, tvm.tirx.IntImm) else str(e) for e in shape) + "]"


def _is_one(e) -> bool:
    return isinstance(e, tvm.tirx.IntImm) and int(e) == 1


def _same(a, b) -> bool:
    return isinstance(a, tvm.tirx.IntImm) and isinstance(b, tvm.tirx.IntImm) and int(a) == int(b)


def _products(call, lookup):
    """``(x, cos, sin)`` of ``x * cos + rotate_half(x) * sin`` (any operand order), else None."""
    terms = [_call(arg, lookup, "multiply") for arg in call.args]
    d = call.ty.shape.values[-1] if call.ty.shape is not None and call.ty.ndim >= 1 else None
    if None in terms or not isinstance(d, tvm.tirx.IntImm):
        return None
    for plain, rot in (terms, terms[::-1]):
        for r_arg, s_arg in (rot.args, rot.args[::-1]):
            x = _rotated_input(r_arg, lookup, int(d))
            if x is None:
                continue
            for x_arg, c_arg in (plain.args, plain.args[::-1]):
                if x_arg.same_as(x):
                    return x, c_arg, s_arg
    return None


def match_rotary(call: relax.Call, lookup=lambda var: None):
    """Whether ``call`` (of ``relax.add``) is a rotary embedding the kernel computes.

    Returns
    -------
    RotaryMatch | str | None
        The match; a sentence saying why a sum of the rotate-half form is left alone; or
        None for a sum of another form.  Nothing is raised.
    """
    found = _products(call, lookup)
    if found is None:
        return None
    x, cos, sin = found
    shape = list(x.ty.shape.values) if x.ty.shape is not None else None
    analyzer = tvm.sym.Analyzer()
    if shape is None or len(shape) != 4 or not all(analyzer.can_prove_equal(a, b) for a, b in
                                                    zip(shape, call.ty.shape.values)) or call.ty.ndim != 4:
        return (f"x of shape {_dims(shape or [])} and a sum of shape {_dims(call.ty.shape.values)} (offloaded: x "
                "(batch, seq, heads, head_dim), the sum's shape)")
    reason = _table(cos, shape) or _table(sin, shape)
    if reason:
        return reason
    dtypes = {str(t.ty.dtype) for t in (x, cos, sin)}
    if len(dtypes) != 1:
        return f"dtypes {sorted(dtypes)} (offloaded: one dtype)"
    heads, head_dim = (int(e) if isinstance(e, tvm.tirx.IntImm) else e for e in shape[2:])
    try:
        check_rotary(*(int(e) if isinstance(e, tvm.tirx.IntImm) else _ANY for e in shape[:2]), heads, head_dim,
                     dtypes.pop())
    except ValueError as err:
        return f"the kernel refuses it: {err}"
    return RotaryMatch(x, cos, sin, shape[0], shape[1], heads, head_dim, str(x.ty.dtype))


def _kernel(r: RotaryMatch) -> tvm.tirx.PrimFunc:
    return rotary_prim_func(r.heads, r.head_dim, r.dtype)


def emit_rotary(emit, kernel: tvm.ir.GlobalVar, r: RotaryMatch) -> relax.Expr:
    """``R.call_tir(kernel, (x, cos, sin), x's shape)`` with the tables reshaped to
    ``(seq, head_dim)``."""
    tables = [emit(relax.op.reshape(t, [r.seq_len, r.head_dim])) for t in (r.cos, r.sin)]
    out = relax.TensorType([r.batch, r.seq_len, r.heads, r.head_dim], r.dtype)
    return relax.call_tir(kernel, [r.x, *tables], out)


def rotary_offloader() -> Offloader:
    """The :class:`~tvm_tirx.ops.relax_rewrite.Offloader` of rotary sums (rooted at ``relax.add``)."""
    return Offloader("relax.add", match_rotary, _kernel, emit_rotary, SkippedRotary)
