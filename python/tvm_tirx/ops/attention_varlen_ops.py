"""The torch operator :func:`attention_varlen`: attention over sequences of different
lengths packed in one tensor, FlashAttention's varlen interface.

``q`` is ``(total_q, heads, head_dim)``: the sequences' rows one after another, sequence
``i`` at rows ``cu_seqlens_q[i]:cu_seqlens_q[i + 1]`` (likewise ``k`` and ``v`` with
``cu_seqlens_k``).  By default each sequence is one call of
:func:`.attention_ops.attention`'s implementation -- the attention kernel (one compiled
kernel serves every length) or, with ``fallback="torch"``, torch by blocks of query rows;
with the varlen kernel's route on (:mod:`.attention_varlen_kernels`, off until it has run
on an H200) a call whose queries and keys share their packing is one launch of
``make_attention(..., varlen=True)``.  The backward is one call of the
``tvm_tirx::attention_backward`` op per sequence.  The lengths are read on the host
(one device-to-host copy of each ``cu_seqlens`` per call), which also lets every
``cu_seqlens`` be checked before anything runs.  Registered as
``torch.ops.tvm_tirx.attention_varlen`` (and its backward as
``tvm_tirx::attention_varlen_backward``) with fake implementations, so
``torch.compile(fullgraph=True)`` traces a call without a graph break.
"""

from __future__ import annotations

import numbers
from typing import Optional

import torch

from . import attention_varlen_kernels as varlen_kernels
from .attention_backward_ops import attention_backward, refuse_double_backward
from .attention_blocks import accumulator
from .attention_checks import attention_key, check_devices, check_dtypes, resolve_scale
from .attention_ops import _attention, _check_arguments
from .torch_checks import UnsupportedInput

__all__ = ["attention_varlen"]

OP = "tvm_tirx.ops.attention_varlen"


def _check_shapes(q, k, v, cu_q, cu_k) -> None:
    """Refuse shapes that make no packed attention, and tensors on another device than q.

    Raises
    ------
    ValueError
        q, k or v not 3-d, k and v differing, head_dim differing, heads not a multiple of
        k's; k, v or a ``cu_seqlens`` on another device than q.
    """
    check_devices(OP, (("q", q), ("k", k), ("v", v), ("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)))
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 3:
            raise ValueError(f"{OP}: {name} must be 3-d (total, heads, head_dim), got shape {tuple(t.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"{OP}: k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape[2] != k.shape[2] or k.shape[1] == 0 or q.shape[1] % k.shape[1]:
        raise ValueError(f"{OP}: q and k must have one head_dim and q's heads a multiple of k's (GQA), got q "
                         f"{tuple(q.shape)} and k {tuple(k.shape)}")


def _check_cu_type(name: str, cu) -> None:
    """Raise ``TypeError`` unless ``cu`` is a 1-d int32 tensor."""
    if not isinstance(cu, torch.Tensor) or cu.dim() != 1 or cu.dtype != torch.int32:
        found = f"{cu.dtype} of shape {tuple(cu.shape)}" if isinstance(cu, torch.Tensor) else type(cu).__name__
        raise TypeError(f"{OP}: {name} must be a 1-d torch.int32 tensor (batch + 1 cumulative lengths), got {found}")


def _lengths(name: str, cu, total: int, device) -> list:
    """The host copy of ``cu`` (``cu_seqlens_q`` or ``_k``) after checking it.

    Raises
    ------
    TypeError
        ``cu`` not a 1-d int32 tensor.
    ValueError
        Fewer than 2 entries, on another device than q, not starting at 0, decreasing, or
        not ending at ``total`` (the rows of q, or of k).
    """
    _check_cu_type(name, cu)
    if cu.device != device:
        raise ValueError(f"{OP}: {name} must be on q's device {device}, got {cu.device}")
    values = cu.tolist()
    if len(values) < 2 or values[0] != 0 or values[-1] != total or any(b < a for a, b in zip(values, values[1:])):
        shown = values if len(values) <= 8 else values[:4] + ["..."] + values[-2:]
        raise ValueError(f"{OP}: {name} must start at 0, never decrease and end at the tensor's {total} rows, got "
                         f"{shown}")
    return values


def _sequences(q, k, cu_q, cu_k, max_q, max_k, causal):
    """``[(q0, q1, k0, k1), ...]``: each sequence's rows in q and in k, after the checks.

    Raises
    ------
    ValueError
        What :func:`_lengths` refuses; the two ``cu_seqlens`` of different batch sizes; a
        ``max_seqlen`` shorter than a sequence; causal with a sequence whose query and key
        lengths differ (the alignment would be ambiguous: SDPA aligns at the start,
        FlashAttention at the end).
    """
    qs, ks = _lengths("cu_seqlens_q", cu_q, q.shape[0], q.device), _lengths("cu_seqlens_k", cu_k, k.shape[0], q.device)
    if len(qs) != len(ks):
        raise ValueError(f"{OP}: cu_seqlens_q and cu_seqlens_k must describe one batch, got {len(qs) - 1} and "
                         f"{len(ks) - 1} sequences")
    spans = [(a, b, c, d) for a, b, c, d in zip(qs, qs[1:], ks, ks[1:])]
    for name, given, longest in (("max_seqlen_q", max_q, max(b - a for a, b, _, _ in spans)),
                                 ("max_seqlen_k", max_k, max(d - c for _, _, c, d in spans))):
        if given is not None and given < longest:
            raise ValueError(f"{OP}: {name} is {given}, shorter than the longest sequence ({longest} rows)")
    if causal:
        for i, (a, b, c, d) in enumerate(spans):
            if b - a != d - c:
                raise ValueError(f"{OP}: causal attention needs each sequence's query and key lengths equal, got "
                                 f"{b - a} and {d - c} for sequence {i}")
    return spans


def _varlen_key(q, k, v, spans, longest: int, causal: bool, scale: float):
    """The :class:`~.attention_varlen_kernels.VarlenKey` of the varlen kernel for this
    call, or None where each sequence is a launch of its own: the route is off
    (:data:`~.attention_varlen_kernels.ROUTE`), queries and keys are packed differently
    (the kernel reads one ``cu_seqlens``), or the forward kernel's rules refuse the packed
    tensors seen as one batch entry."""
    if not varlen_kernels.ROUTE or any((a, b) != (c, d) for a, b, c, d in spans):
        return None
    try:
        key = attention_key(q[None], k[None], v[None], causal, scale, "bshd")
    except UnsupportedInput:
        return None
    return varlen_kernels.VarlenKey(key.heads, key.kv_heads, key.head_dim, key.causal, key.dtype, key.scale,
                                    key.arch, varlen_kernels.varlen_plan(key.head_dim, key.causal, longest))


def _attention_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                      cu_seqlens_k: torch.Tensor, max_seqlen_q: Optional[int], max_seqlen_k: Optional[int],
                      causal: bool, scale: Optional[float], fallback: Optional[str]) -> tuple[torch.Tensor, torch.Tensor]:
    _check_shapes(q, k, v, cu_seqlens_q, cu_seqlens_k)
    check_dtypes(q, k, v)
    scale = resolve_scale(scale, q.shape[2])
    out, lse = torch.empty_like(q), q.new_empty((q.shape[1], q.shape[0]), dtype=accumulator(q.dtype))
    spans = _sequences(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal)
    longest = max(b - a for a, b, _, _ in spans)
    key = _varlen_key(q, k, v, spans, longest, causal, scale) if q.shape[0] else None
    if key is not None:
        varlen_kernels.varlen_kernel(key)(q, k, v, out, lse, cu_seqlens_q.contiguous(), longest)
        return out, lse
    for q0, q1, k0, k1 in spans:
        if q1 == q0:
            continue
        o_i, lse_i = _attention(*(t[None, a:b] for t, a, b in ((q, q0, q1), (k, k0, k1), (v, k0, k1))), causal,
                                scale, "bshd", fallback)
        out[q0:q1], lse[:, q0:q1] = o_i[0], lse_i[0]
    return out, lse


_varlen_op = torch.library.custom_op("tvm_tirx::attention_varlen", mutates_args=())(_attention_varlen)


@_varlen_op.register_fake
def _attention_varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, fallback):
    _check_shapes(q, k, v, cu_seqlens_q, cu_seqlens_k)
    check_dtypes(q, k, v)
    resolve_scale(scale, q.shape[2])
    return torch.empty_like(q), q.new_empty((q.shape[1], q.shape[0]), dtype=accumulator(q.dtype))


def _varlen_backward_impl(grad_o: Optional[torch.Tensor], grad_lse: Optional[torch.Tensor], q: torch.Tensor,
                          k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                          cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor, causal: bool,
                          scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for q0, q1, k0, k1 in _sequences(q, k, cu_seqlens_q, cu_seqlens_k, None, None, causal):
        if q1 == q0:
            continue
        grads = attention_backward(None if grad_o is None else grad_o[None, q0:q1],
                                   None if grad_lse is None else grad_lse[None, :, q0:q1], q[None, q0:q1],
                                   k[None, k0:k1], v[None, k0:k1], o[None, q0:q1], lse[None, :, q0:q1], causal,
                                   scale, "bshd")
        dq[q0:q1], dk[k0:k1], dv[k0:k1] = (g[0] for g in grads)
    return dq, dk, dv


_varlen_backward_op = torch.library.custom_op("tvm_tirx::attention_varlen_backward",
                                              mutates_args=())(_varlen_backward_impl)


@_varlen_backward_op.register_fake
def _varlen_backward_fake(grad_o, grad_lse, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, causal, scale):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, cu_q, cu_k, _, _, causal, scale, _ = inputs
    ctx.save_for_backward(q, k, v, *output, cu_q, cu_k)
    ctx.set_materialize_grads(False)  # an output the loss does not use gets None, not zeros
    ctx.causal, ctx.scale = causal, resolve_scale(scale, q.shape[2])


def _backward(ctx, grad_o, grad_lse):
    q, k, v, o, lse, cu_q, cu_k = ctx.saved_tensors
    grads = torch.ops.tvm_tirx.attention_varlen_backward(grad_o, grad_lse, q, k, v, o, lse, cu_q, cu_k, ctx.causal,
                                                         ctx.scale)
    return (*grads, None, None, None, None, None, None, None)


_varlen_op.register_autograd(_backward, setup_context=_setup_context)
refuse_double_backward(_varlen_backward_op, "attention_varlen")


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None, *, causal=False,
                     scale=None, return_lse=False, fallback=None):
    """Attention over packed sequences of different lengths (FlashAttention's varlen form).

    Parameters
    ----------
    q : torch.Tensor
        ``(total_q, heads, head_dim)``: the batch's query rows, sequence after sequence.
    k, v : torch.Tensor
        ``(total_k, kv_heads, head_dim)``, ``heads`` a multiple of ``kv_heads`` (GQA).
    cu_seqlens_q, cu_seqlens_k : torch.Tensor
        ``(batch + 1,)`` int32 on q's device: cumulative lengths, from 0 to ``total_q``
        (``total_k``); sequence ``i`` is rows ``cu_seqlens_q[i]:cu_seqlens_q[i + 1]`` of q.
    max_seqlen_q, max_seqlen_k : int, optional
        The longest sequence's rows, checked when given (FlashAttention's interface
        takes them; the kernel of each sequence needs no bound today).
    causal : bool
        Query ``i`` of a sequence attends to that sequence's keys ``<= i``; each
        sequence's query and key lengths must then be equal.
    scale, return_lse, fallback
        As :func:`tvm_tirx.ops.attention` (dtypes, head_dim and the kernel's rules too).

    Returns
    -------
    torch.Tensor or tuple[torch.Tensor, torch.Tensor]
        O like ``q`` (and, with ``return_lse``, the LSE ``(heads, total_q)`` float32 --
        float64 for float64 inputs --
        FlashAttention's varlen layout).

    Raises
    ------
    UnsupportedInput
        (without ``fallback="torch"``) a sequence the kernel does not take, as
        :func:`tvm_tirx.ops.attention` would for it.
    ValueError
        Shapes that make no attention; a ``cu_seqlens`` that does not start at 0, never
        decrease and end at the rows of its tensor, or on another device; the two of
        different batch sizes; a ``max_seqlen`` shorter than a sequence; causal with
        unequal query and key lengths; the errors of :func:`tvm_tirx.ops.attention`.
    TypeError
        A ``cu_seqlens`` not a 1-d int32 tensor, a ``max_seqlen`` not an int; the dtype
        errors of
        :func:`tvm_tirx.ops.attention`.

    Notes
    -----
    Each sequence is one launch of the attention kernel (and one backward per sequence):
    a batch of many short sequences pays one call's host cost per sequence.
    Differentiable once, as :func:`tvm_tirx.ops.attention`.
    """
    _check_arguments(causal, scale, "bshd", return_lse, fallback)
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _check_cu_type(name, cu)  # before the op's schema converts them
    for name, bound in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, numbers.Integral)):
            raise TypeError(f"{OP}: {name} must be an int or None, got {bound!r}")
    max_seqlen_q, max_seqlen_k = (None if b is None else int(b) for b in (max_seqlen_q, max_seqlen_k))
    o, lse = torch.ops.tvm_tirx.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                                 causal, None if scale is None else float(scale), fallback)
    return (o, lse) if return_lse else o
