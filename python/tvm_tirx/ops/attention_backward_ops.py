"""The backward of the attention operator: ``torch.ops.tvm_tirx.attention_backward``.

An op of its own (with a fake implementation), so that ``torch.compile``'s AOTAutograd
calls it rather than tracing the torch backward's loop over query blocks.  It takes the
backward kernel (:mod:`.attention_backward_kernels`) when that route is on and the call
meets the kernel's rules (:func:`backward_key`), and otherwise recomputes by blocks of
query rows in torch (:func:`.attention_blocks.backward`).  Importing this module imports
torch and registers the op.
"""

from __future__ import annotations

from typing import Optional

import torch

from . import attention_backward_kernels as kernels
from . import attention_blocks
from .attention_checks import as_bshd, attention_key
from .torch_checks import UnsupportedInput

__all__ = ["backward_key"]


def backward_key(q, k, v, causal: bool, scale: float, layout: str):
    """The :class:`~.attention_backward_kernels.AttentionBackwardKey` of the kernel for
    this call, or None where the torch backward computes it: the route is off
    (:data:`~.attention_backward_kernels.ROUTE`), the forward kernel's rules refuse the
    inputs (:func:`~.attention_checks.attention_key`), head_dim is not one of
    :data:`~.attention_backward_kernels.HEAD_DIMS`, or
    ``torch.use_deterministic_algorithms(True)`` is in force (the kernel adds its dQ
    partial sums with float32 atomics, in arrival order; the torch backward adds them in
    a fixed order)."""
    if not kernels.ROUTE or torch.are_deterministic_algorithms_enabled():
        return None
    try:
        key = attention_key(q, k, v, causal, scale, layout)
    except UnsupportedInput:
        return None
    if key.head_dim not in kernels.HEAD_DIMS:
        return None
    return kernels.AttentionBackwardKey(key.heads, key.kv_heads, key.head_dim, key.causal, key.dtype, key.scale,
                                        key.arch)


def _kernel_grads(key, grad_o, grad_lse, q, k, v, o, lse, layout: str):
    """dQ, dK, dV by the backward kernel of ``key``: ``Dsum = rowsum(dO * O) - dLSE`` (the
    LSE's gradient enters as ``dS = P (dP - Dsum)``), dQ accumulated in a zeroed float32
    buffer and converted to q's dtype."""
    qb, kb, vb, ob = (as_bshd(t, layout) for t in (q, k, v, o))
    do = torch.zeros_like(qb) if grad_o is None else as_bshd(grad_o, layout).contiguous()
    dsum = (do.float() * ob.float()).sum(-1).transpose(1, 2)  # (batch, heads, seq)
    dsum = (dsum if grad_lse is None else dsum - grad_lse).contiguous()
    dq_acc = torch.zeros(qb.shape, dtype=torch.float32, device=q.device)
    dk, dv = torch.empty(kb.shape, dtype=k.dtype, device=k.device), torch.empty(vb.shape, dtype=v.dtype,
                                                                                  device=v.device)
    kernels.backward_kernel(key)(qb, kb, vb, do, lse.contiguous(), dsum, dq_acc, dk, dv)
    return as_bshd(dq_acc.to(q.dtype), layout), as_bshd(dk, layout), as_bshd(dv, layout)


def _attention_backward(grad_o: Optional[torch.Tensor], grad_lse: Optional[torch.Tensor], q: torch.Tensor,
                        k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, causal: bool,
                        scale: float, layout: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    key = backward_key(q, k, v, causal, scale, layout)
    if key is None:
        grads = attention_blocks.backward(q, k, v, grad_o, grad_lse, causal, scale, layout)
    else:
        grads = _kernel_grads(key, grad_o, grad_lse, q, k, v, o, lse, layout)
    return tuple(torch.empty_like(t).copy_(g) for t, g in zip((q, k, v), grads))  # the fake's strides


_attention_backward_op = torch.library.custom_op("tvm_tirx::attention_backward", mutates_args=())(_attention_backward)


@_attention_backward_op.register_fake
def _attention_backward_fake(grad_o, grad_lse, q, k, v, o, lse, causal, scale, layout):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def attention_backward(grad_o, grad_lse, q, k, v, o, lse, causal: bool, scale: float, layout: str):
    """``(dq, dk, dv)`` of the attention operator's ``(O, LSE)`` given their gradients
    (either may be None): the op ``torch.ops.tvm_tirx.attention_backward``."""
    return torch.ops.tvm_tirx.attention_backward(grad_o, grad_lse, q, k, v, o, lse, causal, scale, layout)
