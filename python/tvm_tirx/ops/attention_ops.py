"""The torch operator :func:`attention` on the tvm_tirx attention kernel.

Registered with ``torch.library.custom_op`` (``torch.ops.tvm_tirx.attention``) with a fake
implementation, so ``torch.compile(fullgraph=True)`` traces a model calling it without a
graph break.  The kernel is :func:`~tvm_tirx.kernels.attention.make_attention` with a
run-time batch and sequence length: the first call per (heads, kv_heads, head_dim, causal,
dtype, scale, GPU) compiles it, and that kernel serves every batch and length
(:mod:`.attention_kernels`).  An input it does not take raises
:class:`~tvm_tirx.ops.torch_checks.UnsupportedInput` (rules:
:func:`.attention_checks.attention_key`); ``fallback="torch"`` computes such a call with
torch instead.  Differentiable, in an op of its own (:mod:`.attention_backward_ops`): the
backward kernel where it takes the call, else SDPA run again and differentiated, else torch
in float32 by blocks of query rows (:mod:`.attention_blocks`).  Importing this module
imports torch and registers the op.
"""

from __future__ import annotations

import numbers
from typing import Optional

import torch

from . import attention_blocks
from .attention_backward_ops import attention_backward
from .attention_checks import as_bshd, attention_key, check_dtypes, check_shapes, resolve_scale
from .attention_kernels import attention_kernel, on_clear_kernels
from .eager import FastOp, Plans, signature
from .torch_checks import UnsupportedInput

__all__ = ["attention"]


def _torch_attention(q, k, v, causal: bool, scale: float, layout: str):
    """(O, LSE) by torch in float32 (float64 for float64 inputs), by blocks of query rows
    (:mod:`.attention_blocks`): O in q's dtype and layout, LSE (batch, heads, seq) float32
    (float64 for float64 inputs)."""
    out, _ = _empty_outputs(q, layout)  # laid out as the kernel's output, so the fake implementation fits both
    return out, attention_blocks.forward(q, k, v, out, causal, scale, layout)


def _empty_outputs(q, layout: str):
    """O laid out as the kernel writes it ((batch, seq, heads, head_dim) storage, seen in
    ``layout``) and LSE (batch, heads, seq) float32 (float64 for float64 inputs)."""
    b, n, h, d = as_bshd(q, layout).shape
    o = q.new_empty((b, n, h, d))
    return as_bshd(o, layout), q.new_empty((b, h, n), dtype=attention_blocks.accumulator(q.dtype))


def _checked(q, k, v, scale, layout, fallback):
    if fallback not in (None, "torch"):
        raise ValueError(f"tvm_tirx.ops.attention: fallback must be None or 'torch', got {fallback!r}")
    check_shapes(q, k, v, layout)
    check_dtypes(q, k, v)
    return resolve_scale(scale, as_bshd(q, layout).shape[3])


class _KernelPlan:
    """One signature's launch: allocate O ((batch, seq, heads, head_dim) storage) and the
    LSE, launch without checks (they ran when the plan was made)."""

    __slots__ = ("bhsd", "lse_shape", "launch")

    def __init__(self, key, q, k, v, layout: str):
        self.bhsd = layout == "bhsd"
        b, n, h, _ = as_bshd(q, layout).shape
        self.lse_shape = (b, h, n)
        o, lse = self._outputs(q)
        self.launch = attention_kernel(key).launcher(*(as_bshd(t, layout) for t in (q, k, v, o)), lse)

    def _outputs(self, q):
        """O laid out as ``q`` (whose storage is (batch, seq, heads, head_dim): the rules
        hold it dense), and the LSE."""
        return torch.empty_like(q), q.new_empty(self.lse_shape, dtype=torch.float32)

    def __call__(self, q, k, v):
        o, lse = self._outputs(q)
        if self.bhsd:
            self.launch(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), o.transpose(1, 2), lse)
            return o, lse
        self.launch(q, k, v, o, lse)
        return o, lse


def _make_plan(q, k, v, causal, scale, layout, fallback):
    """The plan of a call's signature (every check runs here), or raise."""
    scale = _checked(q, k, v, scale, layout, fallback)
    try:
        key = attention_key(q, k, v, causal, scale, layout)
    except UnsupportedInput:
        if fallback == "torch":
            return lambda q, k, v: _torch_attention(q, k, v, causal, scale, layout)
        raise
    if not as_bshd(q, layout).numel():
        return lambda q, k, v: _empty_outputs(q, layout)
    return _KernelPlan(key, q, k, v, layout)


#: The attention operator's plans (emptied with the kernel table).
PLANS = Plans(_make_plan)
on_clear_kernels(PLANS.clear)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: Optional[float],
               layout: str, fallback: Optional[str]) -> tuple[torch.Tensor, torch.Tensor]:
    if fallback not in (None, "torch"):  # before it is hashed
        raise ValueError(f"tvm_tirx.ops.attention: fallback must be None or 'torch', got {fallback!r}")
    key = (causal, scale, layout, fallback, *signature(q, k, v))
    return PLANS.get(key, q, k, v, causal, scale, layout, fallback)(q, k, v)


_attention_op = torch.library.custom_op("tvm_tirx::attention", mutates_args=())(_attention)


@_attention_op.register_fake
def _attention_fake(q, k, v, causal, scale, layout, fallback):
    _checked(q, k, v, scale, layout, fallback)
    return _empty_outputs(q, layout)  # the kernel and the fallback lay O out alike


def _setup_context(ctx, inputs, output):
    q, k, v, causal, scale, layout, _ = inputs
    ctx.save_for_backward(q, k, v, *output)
    ctx.set_materialize_grads(False)  # an output the loss does not use gets None, not zeros
    ctx.causal, ctx.scale, ctx.layout = causal, resolve_scale(scale, as_bshd(q, layout).shape[3]), layout


def _backward(ctx, grad_o, grad_lse):
    q, k, v, o, lse = ctx.saved_tensors
    grads = attention_backward(grad_o, grad_lse, q, k, v, o, lse, ctx.causal, ctx.scale, ctx.layout)
    return (*grads, None, None, None, None)


_attention_op.register_autograd(_backward, setup_context=_setup_context)
# a public call runs the implementation directly when nothing needs torch's dispatcher (under a
# torch.autograd.Function with the op's formula when an input needs a gradient)
_ATTENTION_CALL = FastOp(torch.ops.tvm_tirx.attention, _attention, 3, ((bool,), (float,), (str,), (str,)),
                         (_backward, _setup_context))


def attention(q, k, v, *, causal=False, scale=None, layout="bshd", return_lse=False, fallback=None):
    """Fused attention forward ``softmax(scale * q k^T) v`` on the tvm_tirx Hopper kernel.

    Parameters
    ----------
    q : torch.Tensor
        ``(batch, seq, heads, head_dim)`` (``layout="bshd"``, contiguous) or ``(batch,
        heads, seq, head_dim)`` (``layout="bhsd"``, the transposed view of a contiguous
        bshd tensor, as ``x.view(b, s, h, d).transpose(1, 2)`` gives), ``torch.bfloat16``
        or ``torch.float16``, on a compute capability 9.0 GPU; head_dim 64, 128 or 256.
    k, v : torch.Tensor
        Like ``q`` with ``kv_heads`` heads (``heads`` a multiple of it: GQA / MQA) and
        ``q``'s sequence length (the kernel's rule; with ``fallback="torch"`` another
        length is computed by torch), on ``q``'s device.
    causal : bool
        Query ``i`` attends to keys ``<= i`` only: the mask is aligned at the first query
        and key, as SDPA's ``is_causal`` aligns it (FlashAttention aligns it at the last
        ones; the two agree when q and k have one length).
    scale : float | None
        The softmax scale; ``None`` for ``1 / sqrt(head_dim)``.
    layout : str
        ``"bshd"`` or ``"bhsd"``, for q, k, v and the output.
    return_lse : bool
        Also return the log-sum-exp of each row, ``(batch, heads, seq)`` float32, float64
        for float64 inputs (natural log of the sum of ``exp(scale * q.k)``).
    fallback : str | None
        ``None``: an input the kernel does not take raises.  ``"torch"``: such a call is
        computed by torch in float32 (float64 for float64 inputs) instead, by blocks of
        query rows (:mod:`.attention_blocks`: memory grows with ``seq``, the scores of
        one block at most :data:`~.attention_blocks.SCORE_BYTES`).

    Returns
    -------
    torch.Tensor or tuple[torch.Tensor, torch.Tensor]
        The output in ``layout`` and ``q``'s dtype (and the LSE with ``return_lse``).

    Raises
    ------
    UnsupportedInput
        (a ``ValueError``; not with ``fallback="torch"``) the rules of
        :func:`~tvm_tirx.ops.attention_checks.attention_key`, naming the argument.
    ValueError
        Shapes that make no attention (not 4-d, k and v differing, batch or head_dim
        differing, heads not a multiple of kv_heads), an unknown ``layout``, a
        ``scale`` that is not positive and finite, ``fallback`` not None or ``"torch"``.
    TypeError
        q, k, v not floating-point (or float8, which SDPA refuses too) or not of one
        dtype; ``causal`` or ``return_lse`` not a bool; ``scale`` not a number.

    Notes
    -----
    Differentiable once (:mod:`.attention_backward_ops` picks the path per call): the
    fused backward kernel (:func:`~tvm_tirx.kernels.attention_backward.make_attention_backward`)
    where it takes the call (head_dim 64 and 128 on an sm_90 GPU, unless
    ``TVM_TIRX_ATTENTION_BACKWARD=0``; its deterministic variant under
    ``torch.use_deterministic_algorithms(True)``); else, for CUDA float16/bfloat16
    without a gradient of the LSE, SDPA run again and differentiated; else torch (float32,
    or float64 for float64 inputs) recomputes the attention by blocks of query rows
    (:func:`.attention_blocks.backward`; memory grows with ``seq``, not ``seq**2``).  The
    gradients are not themselves differentiable (no double backward: a ``RuntimeError``).
    """
    _check_arguments(causal, scale, layout, return_lse, fallback)
    o, lse = _ATTENTION_CALL(q, k, v, causal, None if scale is None else float(scale), layout, fallback)
    return (o, lse) if return_lse else o


def _check_arguments(causal, scale, layout, return_lse, fallback) -> None:
    """The keyword arguments' types, before the op's schema converts them."""
    for name, value in (("causal", causal), ("return_lse", return_lse)):
        if not isinstance(value, bool):
            raise TypeError(f"tvm_tirx.ops.attention: {name} must be a bool, got {value!r}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, numbers.Real)):
        raise TypeError(f"tvm_tirx.ops.attention: scale must be a number or None, got {scale!r}")
    if not isinstance(layout, str):
        raise ValueError(f"tvm_tirx.ops.attention: layout must be one of ('bshd', 'bhsd'), got {layout!r}")
    if fallback not in (None, "torch"):
        raise ValueError(f"tvm_tirx.ops.attention: fallback must be None or 'torch', got {fallback!r}")
