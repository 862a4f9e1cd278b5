"""The backward of the attention operator: ``torch.ops.tvm_tirx.attention_backward``.

An op of its own (with a fake implementation), so that ``torch.compile``'s AOTAutograd
calls it rather than tracing the torch backward's loop over query blocks.  Each call takes
the first of three paths that accepts it (:func:`backward_path`):

- ``"kernel"``: the backward kernel (:mod:`.attention_backward_kernels`), when its route
  is on and the call meets the kernel's rules (:func:`backward_key`);
- ``"sdpa"``: on a CUDA device, float16/bfloat16 without the LSE's gradient, torch's
  fused attention (``scaled_dot_product_attention``: cuDNN or FlashAttention-2 on an
  H200) run forward again under autograd and differentiated (the kernel's refusals, such
  as head_dim 256);
- ``"blocks"``: everything else (the CPU, float64, the LSE's gradient, deterministic
  mode where the kernel does not take the call) recomputes by blocks of query rows in
  torch (:func:`.attention_blocks.backward`).

Under ``torch.use_deterministic_algorithms(True)`` the kernel is its deterministic
variant (dQ's partial sums added in key order) and SDPA is not taken.

The path, the kernels and their argument checks depend only on the call's signature
(:func:`~.eager.signature`, the switches and modes above): they are decided on a
signature's first call and kept (:data:`PLANS`), and a backward without ``create_graph``
(grad mode off) calls the implementation without torch's dispatcher
(:class:`~.eager.FastOp`).  On an H100 the host took a median 716 us to issue one backward
call through the dispatcher with every check (``tools/profile_attention.py --host``,
``4,32,8,2048,128`` causal), against about 1.1 ms of GPU time.

Importing this module imports torch and registers the op.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch.utils._python_dispatch import is_in_torch_dispatch_mode

from ..kernels.attention.config import GRID_Z
from ..kernels.attention_backward import BK, BQ, wave_section
from . import attention_backward_kernels as kernels
from . import attention_blocks
from .attention_checks import as_bshd, attention_key
from .eager import FastOp, Plans, signature
from .torch_checks import UnsupportedInput

__all__ = ["backward_key", "backward_path", "kernel_grads", "refuse_double_backward"]

#: head dims SDPA's fused backends (cuDNN, FlashAttention-2) take; others would fall to its
#: math backend, which materialises the whole score matrix
SDPA_HEAD_DIMS = range(8, 257, 8)
#: device types whose SDPA backward the operator takes (its fused backends are CUDA's)
SDPA_DEVICES = ("cuda",)


def backward_key(q, k, v, causal: bool, scale: float, layout: str):
    """The :class:`~.attention_backward_kernels.AttentionBackwardKey` of the kernel for
    this call, or None where the torch backward computes it: the route is off
    (:data:`~.attention_backward_kernels.ROUTE`), the forward kernel's rules refuse the
    inputs (:func:`~.attention_checks.attention_key`) or head_dim is not one of
    :data:`~.attention_backward_kernels.HEAD_DIMS`.  Under
    ``torch.use_deterministic_algorithms(True)`` the key asks for the deterministic
    kernel (dQ's partial sums added in key order rather than arrival order).  While
    :data:`~.attention_backward_kernels.SECTIONS` is on, a causal call's key at a head_dim of
    :data:`~.attention_backward_kernels.SECTION_HEAD_DIMS` asks for the longest walks first in
    sections a wave wide (:func:`~tvm_tirx.kernels.attention_backward.wave_section` of its
    length); a deterministic key only while
    :data:`~.attention_backward_kernels.DETERMINISTIC_SECTIONS` is on too.  The key asks for
    ``scores_ahead`` while :data:`~.attention_backward_kernels.SCORES_AHEAD` is on."""
    if not kernels.ROUTE:
        return None
    try:
        key = attention_key(q, k, v, causal, scale, layout)
    except UnsupportedInput:
        return None
    if key.head_dim not in kernels.HEAD_DIMS:
        return None
    deterministic = torch.are_deterministic_algorithms_enabled()
    takes_sections = (kernels.SECTIONS and key.causal and key.head_dim in kernels.SECTION_HEAD_DIMS
                      and (kernels.DETERMINISTIC_SECTIONS or not deterministic))
    return kernels.AttentionBackwardKey(key.heads, key.kv_heads, key.head_dim, key.causal, key.dtype, key.scale,
                                        key.arch, deterministic, _section(key, as_bshd(q, layout)) if takes_sections
                                        else None, kernels.SCORES_AHEAD)


def _section(key, q):
    """:func:`~tvm_tirx.kernels.attention_backward.wave_section` for ``q`` (bshd), or None
    (the default order) where its grid would pass 65535 CTAs on an axis the default order's
    grid does not: z (batch x kv_heads / section) or y (the key blocks, ``ceil(seq_len /
    128)``; the default order puts them on x)."""
    section = wave_section(key.kv_heads, q.shape[1])
    fits = q.shape[0] * (key.kv_heads // section) <= GRID_Z and -(-q.shape[1] // BK) <= GRID_Z
    return section if fits else None


def backward_path(q, k, v, causal: bool, scale: float, layout: str, lse_grad: bool = False) -> str:
    """Which path computes this call's gradients: ``"kernel"``, ``"sdpa"`` or ``"blocks"``
    (see the module's docstring), for a gradient of O and, with ``lse_grad``, of the LSE."""
    return _route(q, k, v, causal, scale, layout, True, lse_grad)[0]


def _route(q, k, v, causal: bool, scale: float, layout: str, o_grad: bool, lse_grad: bool):
    """``(path, key)``: :func:`backward_path`'s answer for the gradients given (``o_grad``,
    ``lse_grad``: whether O's and the LSE's are), and the kernel's key on ``"kernel"``."""
    key = backward_key(q, k, v, causal, scale, layout)
    if key is not None:
        return "kernel", key
    return ("sdpa" if o_grad and _sdpa_takes(q, k, lse_grad) else "blocks"), None


def _sdpa_takes(q, k, lse_grad: bool) -> bool:
    """Whether torch's fused attention can differentiate this call: CUDA, float16 or
    bfloat16, no LSE gradient (SDPA returns no LSE), a head_dim of :data:`SDPA_HEAD_DIMS`,
    no empty size, not deterministic mode (the blocks' sums are in a fixed order), and no
    ``TorchDispatchMode`` active (``FlopCounterMode``, compiled autograd's tracing: under
    one, ``torch.func.vjp`` inside an op fails with "Cannot access storage of
    TensorWrapper"; the blocks compute the same gradients there)."""
    return (q.device.type in SDPA_DEVICES and q.dtype in (torch.float16, torch.bfloat16) and not lse_grad
            and q.shape[-1] in SDPA_HEAD_DIMS and q.numel() > 0 and k.numel() > 0
            and not torch.are_deterministic_algorithms_enabled() and not is_in_torch_dispatch_mode())


def _sdpa_grads(grad_o, q, k, v, causal: bool, scale: float, layout: str):
    """dQ, dK, dV by ``scaled_dot_product_attention`` (its ``is_causal`` aligns the mask
    at the first query and key, as the operator's does; GQA by ``enable_gqa``) run again
    and differentiated by ``torch.func.vjp`` (an op's body runs below autograd, where
    ``torch.autograd.grad`` records nothing), in q's layout."""
    def bhsd(t):
        return as_bshd(t, layout).transpose(1, 2)

    def sdpa(qh, kh, vh):
        return torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, is_causal=causal, scale=scale,
                                                                enable_gqa=qh.shape[1] != kh.shape[1])

    _, vjp = torch.func.vjp(sdpa, *(bhsd(t) for t in (q, k, v)))
    return tuple(as_bshd(g.transpose(1, 2), layout) for g in vjp(bhsd(grad_o)))


def kernel_grads(kernel, grad_o, grad_lse, q, k, v, o, lse, layout: str, deterministic: bool = False,
                 dsum_kernel=None):
    """dQ, dK, dV (q's, k's, v's dtypes, in ``layout``) by a compiled
    :func:`~tvm_tirx.kernels.attention_backward.make_attention_backward` ``kernel``, with
    what it needs around it: ``Dsum = rowsum(dO * O) - dLSE`` (float32 ``(batch, heads,
    seq)``; the LSE's gradient enters as ``dS = P (dP - Dsum)``), dQ accumulated in a
    zeroed float32 buffer and converted to q's dtype, and for a ``deterministic`` kernel
    its zeroed int32 ``Order`` counts.  ``grad_o`` (like ``o``) or ``grad_lse`` (like
    ``lse``) may be None.  ``dsum_kernel`` (:func:`~.attention_backward_kernels.dsum_kernel`,
    called as ``dsum_kernel(do, o, dsum, dq_acc)``) computes ``rowsum(dO * O)`` and zeroes
    dQ's float32 accumulator in the same pass if given, else torch does both (float32
    copies of dO and O, a memset).
    Either kernel may also be any callable taking its arguments (a plan's checked-once
    launch)."""
    qb, kb, vb, ob = (as_bshd(t, layout) for t in (q, k, v, o))
    do = torch.zeros_like(qb) if grad_o is None else as_bshd(grad_o, layout).contiguous()
    # the buffers allocated (and the counts zeroed) before the first launch: the host's work
    # between the Dsum kernel's launch and the main kernel's leaves the GPU idle (with
    # grad_lse, its subtraction still runs between them)
    dq_acc = torch.empty(qb.shape, dtype=torch.float32, device=q.device)
    dk, dv = torch.empty(kb.shape, dtype=k.dtype, device=k.device), torch.empty(vb.shape, dtype=v.dtype,
                                                                                  device=v.device)
    order = (torch.zeros(qb.shape[0], qb.shape[2], -(-qb.shape[1] // BQ), dtype=torch.int32, device=q.device),) \
        if deterministic else ()
    dsum = _dsum(dsum_kernel, do, ob, dq_acc)  # (batch, heads, seq); dq_acc zeroed
    dsum = (dsum if grad_lse is None else dsum - grad_lse).contiguous()
    kernel(qb, kb, vb, do, lse.contiguous(), dsum, dq_acc, dk, dv, *order)
    return as_bshd(dq_acc.to(q.dtype), layout), as_bshd(dk, layout), as_bshd(dv, layout)


def _dsum(kernel, do, o, dq_acc):
    """``rowsum(dO * O)`` of bshd ``do`` and ``o``, float32 ``(batch, heads, seq)``, and
    ``dq_acc`` zeroed: by ``kernel`` (None: by torch, in float32)."""
    if kernel is None:
        dq_acc.zero_()
        return (do.float() * o.float()).sum(-1).transpose(1, 2)
    dsum = torch.empty(do.shape[0], do.shape[2], do.shape[1], dtype=torch.float32, device=do.device)
    kernel(do, o.contiguous(), dsum, dq_acc)
    return dsum


class _Launch:
    """A compiled kernel called checked on a plan's first call, which also makes its
    unchecked launcher (:meth:`tvm_tirx.Kernel.launcher`), and unchecked after: within one
    plan every call's arguments have one signature (they are the call's inputs, or tensors
    made from them with shapes, dtypes and strides the signature fixes)."""

    __slots__ = ("kernel", "launch")

    def __init__(self, kernel):
        self.kernel, self.launch = kernel, None

    def __call__(self, *args):
        if self.launch is None:
            launch = self.kernel.launcher(*args)
            launch(*args)
            self.launch = launch
            return
        self.launch(*args)


def _make_plan(grad_o, grad_lse, q, k, v, o, lse, causal: bool, scale: float, layout: str):
    """The plan of one backward signature: ``plan(grad_o, grad_lse, q, k, v, o, lse)`` gives
    ``(dq, dk, dv)`` by the path :func:`_route` takes for it, decided once."""
    path, key = _route(q, k, v, causal, scale, layout, grad_o is not None, grad_lse is not None)
    if path == "kernel":
        main = _Launch(kernels.backward_kernel(key))
        dsum = _Launch(kernels.dsum_kernel(key)) if kernels.DSUM_ROUTE else None
        return lambda *t: kernel_grads(main, *t, layout, key.deterministic, dsum)
    if path == "sdpa":
        return lambda grad_o, grad_lse, q, k, v, o, lse: _sdpa_grads(grad_o, q, k, v, causal, scale, layout)
    return lambda grad_o, grad_lse, q, k, v, o, lse: attention_blocks.backward(q, k, v, grad_o, grad_lse, causal,
                                                                                 scale, layout)


#: The backward's plans per signature (emptied with the backward kernels' table).
PLANS = Plans(_make_plan)
kernels.on_clear_kernels(PLANS.clear)


def _attention_backward(grad_o: Optional[torch.Tensor], grad_lse: Optional[torch.Tensor], q: torch.Tensor,
                        k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, causal: bool,
                        scale: float, layout: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # the route depends on the modules' switches, deterministic mode and dispatch modes too
    key = (causal, scale, layout, kernels.ROUTE, kernels.DSUM_ROUTE, kernels.SECTIONS, kernels.SECTION_HEAD_DIMS,
           kernels.DETERMINISTIC_SECTIONS, kernels.SCORES_AHEAD,
           SDPA_DEVICES,
           torch.are_deterministic_algorithms_enabled(), is_in_torch_dispatch_mode(),
           *signature(grad_o, grad_lse, q, k, v, o, lse))
    plan = PLANS.get(key, grad_o, grad_lse, q, k, v, o, lse, causal, scale, layout)
    grads = plan(grad_o, grad_lse, q, k, v, o, lse)
    # the fake's strides (a gradient already laid out like its input is returned as it is:
    # each is a fresh tensor, and a copy of dQ, dK and dV costs a pass over all three)
    return tuple(g if g.stride() == t.stride() else torch.empty_like(t).copy_(g) for t, g in zip((q, k, v), grads))


_attention_backward_op = torch.library.custom_op("tvm_tirx::attention_backward", mutates_args=())(_attention_backward)


@_attention_backward_op.register_fake
def _attention_backward_fake(grad_o, grad_lse, q, k, v, o, lse, causal, scale, layout):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def refuse_double_backward(op, name: str) -> None:
    """Give the backward op ``op`` an autograd formula that raises ``RuntimeError`` naming
    the operator ``name``: differentiating its gradients (double backward, a gradient
    penalty after ``create_graph=True``) is not supported, and torch's own message for an
    op without a formula speaks to the op's author."""
    def refuse(ctx, *grads):
        raise RuntimeError(f"tvm_tirx.ops.{name}: the gradients of its gradients are not computed (double backward, "
                           "e.g. a gradient penalty after create_graph=True); differentiate "
                           "torch.nn.functional.scaled_dot_product_attention for that")

    op.register_autograd(refuse, setup_context=lambda ctx, inputs, output: None)


refuse_double_backward(_attention_backward_op, "attention")


#: the backward called without torch's dispatcher where nothing needs it (grad mode is off
#: in a backward without ``create_graph``): :class:`~.eager.FastOp`
_BACKWARD_CALL = FastOp(torch.ops.tvm_tirx.attention_backward, _attention_backward, 7, ((bool,), (float,), (str,)))


def attention_backward(grad_o, grad_lse, q, k, v, o, lse, causal: bool, scale: float, layout: str):
    """``(dq, dk, dv)`` of the attention operator's ``(O, LSE)`` given their gradients
    (either may be None): the op ``torch.ops.tvm_tirx.attention_backward``, or its
    implementation directly where nothing needs the dispatcher (:func:`~.eager.direct`)."""
    return _BACKWARD_CALL(grad_o, grad_lse, q, k, v, o, lse, causal, scale, layout)
