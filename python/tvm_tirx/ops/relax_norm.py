"""Offload Relax's ``R.nn.rms_norm`` to the RMSNorm kernel (:mod:`tvm_tirx.kernels.norm`).

Matched: ``R.nn.rms_norm(x, w, axes=[-1], epsilon)`` with ``x`` and ``w`` of one dtype,
bfloat16 or float16; ``x`` of known rank whose last axis is static (a multiple of 256, at
most 4096) and ``w`` of shape ``(hidden,)``.  Leading axes may be symbolic: ``x`` is
reshaped to ``(rows, hidden)`` (a view), the kernel -- one per ``(hidden, dtype, eps)``,
with run-time rows -- writes ``(rows, hidden)``, reshaped back.  The kernel computes in
float32 and rounds once, as apache-tvm's lowering of the op does (it multiplies the sum of
squares by ``1 / hidden`` where the lowering divides by ``hidden``: the two may differ in
the last bit of the float32 mean when ``hidden`` is not a power of two).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import tvm
from tvm import relax
from tvm.script import tirx as T

from ..kernels.attention.config import DTYPES as SHORT_DTYPES
from ..kernels.norm import check_rms_norm, make_rms_norm
from .attention_kernels import f32_bits
from .relax_rewrite import Offloader, SkippedCall

__all__ = ["NormMatch", "SkippedNorm", "match_rms_norm", "rms_norm_prim_func", "norm_offloader"]

_ANY = tvm.tirx.Var("rows", "int32")  # stands for symbolic rows in the generator's checks


class SkippedNorm(SkippedCall):
    """An ``R.nn.rms_norm`` left to the default lowering (see :class:`~tvm_tirx.ops.relax_rewrite.SkippedCall`)."""


@dataclass(frozen=True)
class NormMatch:
    """A matched RMSNorm: the operands, the leading (row) axes, the row count (their
    product), the static ``hidden``, the dtype and ``eps``."""

    x: relax.Expr
    weight: relax.Expr
    batch: tuple
    rows: tvm.tirx.PrimExpr
    hidden: int
    dtype: str
    eps: float


@functools.lru_cache(maxsize=None)
def rms_norm_prim_func(hidden: int, dtype: str, eps: float) -> tvm.tirx.PrimFunc:
    """``make_rms_norm`` with run-time rows, named ``tvm_tirx_rms_norm_h{hidden}_{bf16|f16}_e{bits}``
    (``bits``: the float32 bits of ``eps``, hex).

    Raises
    ------
    ValueError
        What :func:`~tvm_tirx.kernels.norm.make_rms_norm` refuses.
    """
    func = make_rms_norm(T.dynamic("M"), hidden, dtype, eps)
    return func.with_attr("global_symbol", f"tvm_tirx_rms_norm_h{hidden}_{SHORT_DTYPES[dtype]}_e{f32_bits(eps)}")


def match_rms_norm(call: relax.Call, _lookup=None):
    """Whether ``call`` (of ``relax.nn.rms_norm``) is one the kernel computes.

    Returns
    -------
    NormMatch | str
        The match, or a sentence saying why the call is left to the default lowering.
        Nothing is raised.
    """
    x, weight = call.args
    if x.ty.shape is None or weight.ty.shape is None or x.ty.ndim < 1:
        return "an operand's shape is unknown"
    dims, ndim = list(x.ty.shape.values), x.ty.ndim
    axes = sorted(int(a) % ndim for a in call.attrs.axes)
    if axes != [ndim - 1]:
        return f"axes {list(call.attrs.axes)} (offloaded: the last axis only)"
    dtype = str(x.ty.dtype)
    if str(weight.ty.dtype) != dtype:
        return f"dtypes {dtype} and {weight.ty.dtype} (offloaded: one dtype)"
    hidden = dims[-1]
    if not isinstance(hidden, tvm.tirx.IntImm):
        return f"hidden {hidden} (offloaded: a static last axis)"
    hidden = int(hidden)
    w_dims = list(weight.ty.shape.values)
    if len(w_dims) != 1 or not isinstance(w_dims[0], tvm.tirx.IntImm) or int(w_dims[0]) != hidden:
        return f"weight shape {w_dims} (offloaded: ({hidden},))"
    rows = functools.reduce(lambda a, b: a * b, dims[:-1], tvm.tirx.IntImm("int64", 1))
    rows = tvm.sym.Analyzer().simplify(rows)
    eps = float(call.attrs.epsilon)
    try:
        check_rms_norm(int(rows) if isinstance(rows, tvm.tirx.IntImm) else _ANY, hidden, dtype, eps)
    except ValueError as err:
        return f"the kernel refuses it: {err}"
    return NormMatch(x, weight, tuple(dims[:-1]), rows, hidden, dtype, eps)


def _kernel(n: NormMatch) -> tvm.tirx.PrimFunc:
    return rms_norm_prim_func(n.hidden, n.dtype, n.eps)


def emit_rms_norm(emit, kernel: tvm.ir.GlobalVar, n: NormMatch) -> relax.Expr:
    """``R.call_tir(kernel, (x, w), (rows, hidden))``, ``x`` reshaped to two axes first and
    the result back when it has other than one leading axis."""
    flat = len(n.batch) == 1
    x = n.x if flat else emit(relax.op.reshape(n.x, [n.rows, n.hidden]))
    out = relax.call_tir(kernel, [x, n.weight], relax.TensorType([n.rows, n.hidden], n.dtype))
    return out if flat else relax.op.reshape(emit(out), [*n.batch, n.hidden])


def norm_offloader() -> Offloader:
    """The :class:`~tvm_tirx.ops.relax_rewrite.Offloader` of ``R.nn.rms_norm``."""
    return Offloader("relax.nn.rms_norm", match_rms_norm, _kernel, emit_rms_norm, SkippedNorm)
