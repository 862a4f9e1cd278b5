"""Offload Relax's fused attention (``R.nn.attention``) to the tvm_tirx attention kernel.

``R.nn.attention(q, k, v, scale=None, causal_mask=None)`` takes ``(batch, seq, heads,
head_dim)`` tensors -- the layout :func:`tvm_tirx.kernels.attention.make_attention` reads
in place -- so the rewrite is one ``R.call_tir`` of the kernel with two outputs (O and the
log-sum-exp) and the first taken.  Matched: no bias and no window; q, k and v of one dtype,
bfloat16 or float16; known 4-d shapes with static heads and head_dim (64, 128 or 256);
k and v of one shape with q's batch, sequence length (static or symbolic, the same
expression), head_dim and head count (the op's contract; grouped-query attention goes
through :func:`tvm_tirx.ops.attention`, or as Relax models write it: k and v each the
``R.repeat(t, group, axis=2)`` of fewer heads, which the kernel then reads unrepeated as
grouped-query attention, query head ``h`` on head ``h // group`` -- what the repeat
computes -- and the repeats drop out); ``causal_mask`` None, ``"TopLeft"``
or ``"BottomRight"`` (the same mask when the lengths are equal).  Batch and length stay
symbolic: one PrimFunc per (heads, kv_heads, head_dim, causal, dtype, scale) serves every
call site (:func:`tvm_tirx.ops.attention_kernels.attention_prim_func`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tvm
from tvm import relax

from ..kernels.attention import HEAD_DIMS, AttentionConfig, choose_attention
from .attention_kernels import attention_prim_func

__all__ = ["DTYPES", "SkippedAttention", "AttentionMatch", "match_attention", "attention_kernel_func",
           "emit_attention"]

#: The dtypes offloaded (q, k and v alike).
DTYPES = ("bfloat16", "float16")
_CAUSAL = {None: False, "TopLeft": True, "BottomRight": True}
_ANY = tvm.tirx.Var("n", "int32")  # stands for a symbolic batch or length in the generator's checks


@dataclass(frozen=True)
class SkippedAttention:
    """An ``R.nn.attention`` left to the default lowering: the Relax function's name, the
    variable it is bound to, and why it was not offloaded."""

    function: str
    var: str
    reason: str


@dataclass(frozen=True)
class AttentionMatch:  # pylint: disable=too-many-instance-attributes
    """An ``R.nn.attention`` the kernel computes: its operands, ``batch`` and ``seq_len``
    (PrimExprs, static or symbolic), the static head counts and head_dim, ``causal``, the
    softmax ``scale`` (a float) and the dtype name."""

    q: relax.Expr
    k: relax.Expr
    v: relax.Expr
    batch: tvm.tirx.PrimExpr
    seq_len: tvm.tirx.PrimExpr
    heads: int
    kv_heads: int
    head_dim: int
    causal: bool
    scale: float
    dtype: str


def _static(value) -> int | None:
    return int(value) if isinstance(value, int | tvm.tirx.IntImm) else None


def _shapes(q, k, v):
    """``(q shape, k shape)`` as lists, or the reason they do not make an attention."""
    shapes = [t.ty.shape for t in (q, k, v)]
    if any(s is None for s in shapes) or any(t.ty.ndim != 4 for t in (q, k, v)):
        return "an operand's shape is unknown or not 4-d"
    (qs, ks, vs) = (list(s.values) for s in shapes)
    analyzer = tvm.sym.Analyzer()
    if not all(analyzer.can_prove_equal(a, b) for a, b in zip(ks, vs)):
        return "k and v have different shapes"
    if not (analyzer.can_prove_equal(qs[0], ks[0]) and analyzer.can_prove_equal(qs[1], ks[1])):
        return "q and k differ in batch or sequence length (the kernel has one length)"
    return qs, ks


def _check(qs, ks, dtype, causal_mask) -> str | None:
    heads, kv_heads, head_dim = _static(qs[2]), _static(ks[2]), _static(qs[3])
    if dtype not in DTYPES:
        return f"dtype {dtype} (offloaded: {list(DTYPES)})"
    if head_dim is None or head_dim not in HEAD_DIMS or _static(ks[3]) != head_dim:
        return (f"head_dim {qs[3] if head_dim is None else head_dim} (offloaded: static, one of {sorted(HEAD_DIMS)}, "
                "equal in q, k and v)")
    if heads is None or kv_heads is None or heads != kv_heads:
        return (f"heads {qs[2] if heads is None else heads} and kv_heads {ks[2] if kv_heads is None else kv_heads} "
                "(offloaded: static and equal -- R.nn.attention is defined for one head count, and apache-tvm's "
                "own lowering of fewer K/V heads computes something else; repeat K and V, or call "
                "tvm_tirx.ops.attention for grouped-query attention)")
    if causal_mask not in _CAUSAL:
        return f"causal_mask {causal_mask!r}"
    return None


def _unrepeat(k, v, lookup):
    """``(k, v)`` before an ``R.repeat`` of their heads (axis 2, one static count for both),
    or themselves when they are not both such repeats."""
    bound = [lookup(t) if isinstance(t, relax.Var) else None for t in (k, v)]
    repeat = tvm.ir.Op.get("relax.repeat")
    if not all(isinstance(b, relax.Call) and b.op == repeat for b in bound):
        return k, v
    counts = {int(b.attrs.repeats) for b in bound}
    axes = {None if b.attrs.axis is None else int(b.attrs.axis) % 4 for b in bound}
    if len(counts) != 1 or axes != {2} or any(b.args[0].ty.ndim != 4 for b in bound):
        return k, v
    return bound[0].args[0], bound[1].args[0]


def match_attention(call: relax.Call, lookup=lambda var: None):
    """Whether ``call`` (of ``relax.nn.attention``) is one the kernel computes.

    ``lookup`` maps a variable to the expression bound to it (the offload's bindings): K
    and V bound to ``R.repeat`` of their heads are read before the repeat.

    Returns
    -------
    AttentionMatch | str
        The match, or a sentence saying why the call is left to the default lowering (a
        bias or a window, dtypes, shapes, heads, head_dim, the mask).  Nothing is raised.
    """
    if len(call.args) != 3 or call.attrs.window_size is not None:
        return "a bias or a sliding window (offloaded: plain or causal attention)"
    q, k, v = call.args
    k_grouped, v_grouped = _unrepeat(k, v, lookup)
    dtypes = {str(t.ty.dtype) for t in (q, k, v)}
    if len(dtypes) != 1:
        return f"dtypes {sorted(dtypes)} (offloaded: one of {list(DTYPES)} for q, k and v)"
    shapes = _shapes(q, k, v)
    if isinstance(shapes, str):
        return shapes
    qs, ks = shapes
    causal_mask = None if call.attrs.causal_mask is None else str(call.attrs.causal_mask)
    reason = _check(qs, ks, dtypes.pop(), causal_mask)
    if reason:
        return reason
    head_dim = int(qs[3])
    scale = float(call.attrs.scale.value) if call.attrs.scale is not None else 1.0 / math.sqrt(head_dim)
    kv_heads = _static(k_grouped.ty.shape.values[2])
    if kv_heads is None or int(qs[2]) % kv_heads:  # not a grouping the kernel reads: the repeated K and V
        k_grouped, v_grouped, kv_heads = k, v, int(ks[2])
    found = AttentionMatch(q, k_grouped, v_grouped, qs[0], qs[1], int(qs[2]), kv_heads, head_dim,
                           _CAUSAL[causal_mask], scale, str(q.ty.dtype))
    try:  # what the kernel generator refuses (scale, head counts, static sizes over int32 offsets)
        AttentionConfig(*(_static(e) or _ANY for e in (found.batch, found.seq_len)), found.heads, found.kv_heads,
                        head_dim, found.dtype, found.causal, scale)
    except ValueError as err:
        return f"the kernel refuses it: {err}"
    return found


def attention_kernel_func(a: AttentionMatch) -> tvm.tirx.PrimFunc:
    """The kernel of a match (run-time batch and length), of the plan that
    :func:`~tvm_tirx.kernels.attention.choose_attention` gives for the match's length when
    that length is static, else the table's kernel for rows of unknown length (at head_dim
    128 the persistent kernel that launches one CTA per tile past
    :data:`~tvm_tirx.kernels.attention.schedules.PERSISTENT_ROWS` keys)."""
    seq_len = _static(a.seq_len)
    plan = None if seq_len is None else choose_attention(a.head_dim, a.causal, seq_len)
    return attention_prim_func(a.heads, a.kv_heads, a.head_dim, a.causal, a.dtype, a.scale, plan)


def emit_attention(emit, kernel: tvm.ir.GlobalVar, a: AttentionMatch) -> relax.Expr:
    """``R.call_tir(kernel, (q, k, v), (O, LSE))[0]``."""
    outs = [relax.TensorType([a.batch, a.seq_len, a.heads, a.head_dim], a.dtype),
            relax.TensorType([a.batch, a.heads, a.seq_len], "float32")]
    return relax.TupleGetItem(emit(relax.call_tir(kernel, [a.q, a.k, a.v], outs)), 0)
