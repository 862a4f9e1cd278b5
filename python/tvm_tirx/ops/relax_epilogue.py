"""Offload a Relax matmul together with the bias add and activation after it (the GEMM's
fused epilogue, :mod:`tvm_tirx.kernels.parts.epilogue`).

Matched, on top of an ``R.matmul`` that :func:`~tvm_tirx.ops.relax_gemm.match_gemm`
accepts:

* ``R.add(y, bias)`` or ``R.add(bias, y)`` with ``y`` the matmul's result and ``bias`` a
  ``(n,)`` tensor of the output dtype (bfloat16 or float32);
* ``R.nn.relu`` / ``R.nn.silu`` / ``R.nn.gelu_tanh`` of such a sum, or of the matmul's
  result itself;
* ``R.add(y, residual)`` or ``R.add(residual, y)`` with ``y`` the matmul's result and
  ``residual`` a tensor of its shape and dtype (a skip connection: the GEMM's ``residual``).

Each intermediate value must be read once (by the next step): then the chain becomes one
``R.call_tir`` of ``gemm_prim_func(n, k, ..., bias=, activation=)`` with inputs ``(x, w
[, bias])``, and the matmul and the add, no longer read, are dropped.  An intermediate
read elsewhere too leaves the chain to the plain offload.  The fused kernel adds the bias
and applies the activation in float32 and rounds once; the unfused Relax program rounds
the product, the sum and the activation each to the output dtype, so the two differ by
those roundings.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax

from .gemm_kernels import gemm_prim_func
from .relax_gemm import GemmMatch, SkippedMatmul, emit_gemm_call, fusable_options, k_pad, match_gemm, tile_options
from .relax_rewrite import Offloader

__all__ = ["ACTIVATION_OPS", "EpilogueMatch", "match_epilogue", "epilogue_offloaders"]

#: Relax activation op -> the GEMM epilogue's activation
ACTIVATION_OPS = {"relax.nn.relu": "relu", "relax.nn.silu": "silu", "relax.nn.gelu_tanh": "gelu_tanh"}
_ADD = "relax.add"
_MATMUL = "relax.matmul"


@dataclass(frozen=True)
class EpilogueMatch:
    """A matmul with its bias, activation and residual (None for none)."""

    gemm: GemmMatch
    bias: relax.Expr | None
    activation: str | None
    residual: relax.Expr | None = None


def _producer(value: relax.Expr, bindings, op: str):
    """The ``op`` call ``value`` is bound to when ``value`` is a variable read once, else None."""
    if not isinstance(value, relax.Var) or bindings.uses(value) != 1:
        return None
    bound = bindings(value)
    return bound if isinstance(bound, relax.Call) and bound.op == tvm.ir.Op.get(op) else None


def _bias_of(call: relax.Call, bindings):
    """``(matmul call, bias)`` of ``R.add`` over a matmul's once-read result, or None."""
    for product, bias in (call.args, call.args[::-1]):
        matmul = _producer(product, bindings, _MATMUL)
        if matmul is not None:
            return matmul, bias
    return None


def _bias_fits(bias: relax.Expr, g: GemmMatch) -> bool:
    ty = bias.ty
    return (isinstance(ty, relax.TensorType) and ty.shape is not None and ty.ndim == 1
            and isinstance(ty.shape.values[0], tvm.tirx.IntImm) and int(ty.shape.values[0]) == g.n
            and str(ty.dtype) == g.out_dtype)


def _residual_fits(other: relax.Expr, product: relax.Call, g: GemmMatch) -> bool:
    """Whether ``other`` has the matmul's result's shape and dtype."""
    ty, out = other.ty, product.ty
    if not isinstance(ty, relax.TensorType) or ty.shape is None or out.shape is None or ty.ndim != out.ndim:
        return False
    analyzer = tvm.sym.Analyzer()
    return str(ty.dtype) == g.out_dtype and all(analyzer.can_prove_equal(a, b)
                                                for a, b in zip(ty.shape.values, out.shape.values))


def match_epilogue(call: relax.Call, bindings):
    """The :class:`EpilogueMatch` rooted at ``call`` (an add or an activation), or a
    sentence saying why it is not one (then the call is left to the plain offload).

    ``bindings`` is the :class:`~tvm_tirx.ops.relax_bindings.Bindings` of the function.
    An add whose result only an activation reads is left for the activation to take."""
    activation = ACTIVATION_OPS.get(call.op.name)
    inner = call
    if activation is not None:
        inner = _producer(call.args[0], bindings, _ADD)
        if inner is None:
            inner = _producer(call.args[0], bindings, _MATMUL)
        if inner is None:
            return "the activation's input is not a once-read matmul or bias add"
    else:
        reader = bindings.reader(bindings.current)
        if isinstance(reader, relax.Call) and isinstance(reader.op, tvm.ir.Op) and reader.op.name in ACTIVATION_OPS:
            return "the add's one reader is an activation, which takes it"
    found = (inner, None) if inner.op.name == _MATMUL else _bias_of(inner, bindings)
    matmul, bias = found if found is not None else (None, None)
    if matmul is None:
        return "the add is not of a once-read matmul's result"
    g = match_gemm(matmul, bindings)
    if isinstance(g, str):
        return g
    if bias is not None and not _bias_fits(bias, g):
        if activation is None and _residual_fits(bias, matmul, g):
            return EpilogueMatch(g, None, None, bias)
        return f"the bias is not a ({g.n},) {g.out_dtype} tensor (nor a residual of the product's shape)"
    return EpilogueMatch(g, bias, activation)


def epilogue_offloaders(gemm_options: dict | None = None) -> list:
    """The :class:`~tvm_tirx.ops.relax_rewrite.Offloader` of each root op (``R.add`` and
    the activations), emitting ``R.call_tir`` of the fused GEMM; run them in a pass of
    their own before the plain offload (which would take the matmuls first)."""
    options = fusable_options(gemm_options)

    def kernel(e: EpilogueMatch):
        fused = dict(options, activation=e.activation, bias=e.gemm.out_dtype if e.bias is not None else None,
                     residual=e.residual is not None or None)
        return gemm_prim_func(e.gemm.n, e.gemm.k + k_pad(e.gemm), e.gemm.in_dtype, e.gemm.out_dtype,
                              **tile_options(e.gemm, {k: v for k, v in fused.items() if v is not None}))

    def emit(emit_fn, kernel_var, e: EpilogueMatch):
        g, extra = e.gemm, [] if e.bias is None else [e.bias]
        if e.residual is not None:  # (*batch, n) -> (m, n), as x is
            extra.append(e.residual if len(g.batch) == 1 else emit_fn(relax.op.reshape(e.residual, [g.m, g.n])))
        return emit_gemm_call(emit_fn, kernel_var, g, tuple(extra), pad=k_pad(g))

    return [Offloader(op, match_epilogue, kernel, emit, SkippedMatmul) for op in (_ADD, *ACTIVATION_OPS)]
