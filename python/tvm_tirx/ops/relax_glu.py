"""Offload a Relax gated MLP, ``activation(x @ Wg) * (x @ Wu)``, to the gated GEMM.

Matched: ``R.multiply(a, u)`` (either order) where ``a`` is ``R.nn.silu`` /
``R.nn.gelu_tanh`` / ``R.nn.relu`` of a matmul's result and ``u`` another matmul's result,
each intermediate read once; both matmuls are ones :func:`~tvm_tirx.ops.relax_gemm.match_gemm`
accepts, read the same ``x`` and have the same ``n`` (a multiple of 8), ``k``, dtypes and
weight layout.  The chain becomes one ``R.call_tir`` of the gated GEMM
(``make_gemm(gated=True)``, :mod:`tvm_tirx.kernels.parts.epilogue`) on a weight that
interleaves the gate and up weights by eight rows, built in the module from the two
weights by ``R.reshape`` and ``R.concat``.  That weight depends on the weights alone:
``relax.transform.LiftTransformParams`` (with the function's ``num_input`` attribute)
moves it into the module's parameter transform, computed once; otherwise it is rebuilt
at each call.  The fused kernel applies the activation and the product in float32 and
rounds once; the unfused program rounds both products, the activation and the product.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import tvm
from tvm import relax

from ..kernels.gemm.config import BN, GATED_BLOCK_NS, GLU_ROWS
from ..kernels.gemm.tiles import choose_tile, deepest_ring
from .gemm_kernels import gemm_prim_func
from .relax_epilogue import ACTIVATION_OPS
from .relax_gemm import GemmMatch, SkippedMatmul, emit_gemm_call, fusable_options, match_gemm
from .relax_rewrite import Offloader

__all__ = ["GluMatch", "match_glu", "glu_offloader"]

_MATMUL = tvm.ir.Op.get("relax.matmul")


@dataclass(frozen=True)
class GluMatch:
    """The gate matmul, the up matmul and the activation of a matched gated MLP."""

    gate: GemmMatch
    up: GemmMatch
    activation: str


def _bound(value: relax.Expr, bindings):
    """The call a once-read variable is bound to, else None."""
    if not isinstance(value, relax.Var) or bindings.uses(value) != 1:
        return None
    bound = bindings(value)
    return bound if isinstance(bound, relax.Call) and isinstance(bound.op, tvm.ir.Op) else None


def _gate_and_up(args, bindings):
    """``(gate matmul, up matmul, activation)`` of a multiply's two arguments, or None."""
    for act_value, up_value in (args, args[::-1]):
        act, up = _bound(act_value, bindings), _bound(up_value, bindings)
        if act is None or up is None or act.op.name not in ACTIVATION_OPS or up.op != _MATMUL:
            continue
        gate = _bound(act.args[0], bindings)
        if gate is not None and gate.op == _MATMUL:
            return gate, up, ACTIVATION_OPS[act.op.name]
    return None


def match_glu(call: relax.Call, bindings):
    """The :class:`GluMatch` of ``call`` (an ``R.multiply``), or a sentence saying why it
    is not one (then its parts are left to the other offloads).  Nothing is raised."""
    found = _gate_and_up(call.args, bindings)
    if found is None:
        return "not activation(matmul) * matmul with each intermediate read once"
    gate_call, up_call, activation = found
    gate, up = match_gemm(gate_call, bindings), match_gemm(up_call, bindings)
    for part in (gate, up):
        if isinstance(part, str):
            return part
    if not gate.x.same_as(up.x):
        return "the gate and up matmuls read different inputs"
    same = ("n", "k", "in_dtype", "out_dtype", "transpose_b")
    if any(getattr(gate, f) != getattr(up, f) for f in same) or len(gate.b.ty.shape) != 2:
        return "the gate and up matmuls differ in n, k, dtypes or weight layout"
    if gate.n % GLU_ROWS:
        return f"n = {gate.n} is not a multiple of {GLU_ROWS} (the gated GEMM's row groups)"
    return GluMatch(gate, up, activation)


def _interleaved(emit, e: GluMatch) -> relax.Expr:
    """The ``(2 n, k)`` weight: gate and up rows interleaved by eight (``(n, k)`` weights
    taken as they are, ``(k, n)`` ones transposed first)."""
    n, k = e.gate.n, e.gate.k
    groups = []
    for w in (e.gate.b, e.up.b):
        w = relax.op.permute_dims(w, [1, 0]) if e.gate.transpose_b else w
        groups.append(relax.op.reshape(w, [n // GLU_ROWS, 1, GLU_ROWS, k]))
    return emit(relax.op.reshape(relax.op.concat(groups, axis=1), [2 * n, k]))


def glu_offloader(gemm_options: dict | None = None) -> Offloader:
    """The :class:`~tvm_tirx.ops.relax_rewrite.Offloader` of ``R.multiply`` (:func:`match_glu`):
    run it in a pass before the epilogue and plain offloads (which would take the
    activation and the matmuls first).  The tile width is
    :func:`~tvm_tirx.kernels.gemm.choose_tile`'s (gated) for a static ``m``, 256 for a
    symbolic one, unless ``gemm_options`` sets ``block_n`` (a width the gated GEMM cannot
    take, 64, is a ValueError when a gated MLP is found); the ring is as deep as fits."""
    options = fusable_options(gemm_options)

    def kernel(e: GluMatch):
        g = e.gate
        m = int(g.m) if isinstance(g.m, tvm.tirx.IntImm) else None
        block_n = options.get("block_n") or (choose_tile(m, g.n, g.out_dtype, gated=True)["block_n"] if m else BN)
        if block_n not in GATED_BLOCK_NS:
            raise ValueError(f"gemm_options block_n={block_n}: the gated MLP rewrite (relax_glu) needs block_n in "
                             f"{GATED_BLOCK_NS}; pass glu=False to leave gated MLPs to the plain GEMMs")
        stages = options.get("stages", deepest_ring(block_n, g.out_dtype, gated=True))
        fused = dict(options, block_n=block_n, stages=stages, activation=e.activation, gated=True)
        return gemm_prim_func(g.n, g.k, g.in_dtype, g.out_dtype, **fused)

    def emit(emit_fn, kernel_var, e: GluMatch):
        gate = dataclasses.replace(e.gate, b=_interleaved(emit_fn, e), transpose_b=False)
        return emit_gemm_call(emit_fn, kernel_var, gate)

    return Offloader("relax.multiply", match_glu, kernel, emit, SkippedMatmul)
