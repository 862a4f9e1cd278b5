"""How a call of :func:`~tvm_tirx.ops.linear` or :func:`~tvm_tirx.ops.matmul` is computed.

:func:`route` decides, from the shapes of ``bias`` and ``residual``, which registered
operator computes the call (``linear``, ``linear_bias`` with a fused ``(n,)`` bias, or
``linear_residual`` with a fused residual) and what torch adds after it (a bias or a
residual that only broadcasts).  It returns a function of the call's tensors.  Both paths
of :func:`tvm_tirx.ops.linear` take it:

* through torch's dispatcher (``torch.compile``, modes) or autograd: the function calls the
  registered operators (:data:`REGISTERED`: under a ``torch.autograd.Function`` with the
  op's formula where only autograd needs to record the call), and the route is decided
  again on every call;
* the eager fast path (:func:`~.eager.direct`): the function calls the GEMM's launch
  plans (:func:`~.gemm_plans.plan`), made when the route is, and the route is kept per call
  signature (:data:`LINEAR_PLANS`), so a later call of that signature only allocates and
  launches.

Both run the same checks in the same order, so they raise the same errors.  Importing
this module imports torch.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

import torch

from .eager import Plans, direct, signature, typed
from .gemm_kernels import on_clear_kernels
from .gemm_plans import plan as gemm_plan
from .torch_checks import Operands

__all__ = ["LINEAR", "MATMUL", "ARG_TYPES", "REGISTERED", "route", "call_linear", "call_matmul", "LINEAR_PLANS",
           "MATMUL_PLANS", "check_bias_type", "check_matmul_shapes"]

LINEAR = Operands("tvm_tirx.ops.linear", "x", "weight", "contiguous (n, k) as nn.Linear's weight is, or the "
                  "transpose of a contiguous (k, n)")
MATMUL = Operands("tvm_tirx.ops.matmul", "a", "b.t()", "contiguous (b column-major, as weight.t() is), or b "
                  "itself contiguous (row-major)", "b.t().contiguous().t()")


def check_bias_type(bias, residual=None) -> None:
    """A bias (or residual) that is not floating-point (integer, bool, complex, as torch's
    ``linear`` refuses a bias) raises a TypeError naming it, with or without the fallback."""
    for name, t in (("bias", bias), ("residual", residual)):
        if isinstance(t, torch.Tensor) and not t.is_floating_point():
            raise TypeError(f"{LINEAR.op}: {name} must be floating-point, got {t.dtype}")


def check_broadcast(residual, out) -> None:
    """A residual that does not broadcast with the output raises a ValueError naming it
    (not torch's bare broadcasting error)."""
    shape = tuple(residual.shape) if isinstance(residual, torch.Tensor) else None
    try:
        ok = shape is not None and torch.broadcast_shapes(shape, out.shape) is not None
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"{LINEAR.op}: residual must have the output's shape {tuple(out.shape)} (added in the "
                         f"kernel) or broadcast with it (added by torch), got "
                         f"{shape if shape is not None else type(residual).__name__}")


def check_matmul_shapes(a, b) -> None:
    """``a (*, k) @ b (k, n)`` in ``b``'s own terms (the rules then see ``b.t()`` (n, k))."""
    if b.dim() != 2:
        raise ValueError(f"{MATMUL.op}: b must be 2-d (k, n), got shape {tuple(b.shape)}")
    if a.dim() >= 1 and a.shape[-1] != b.shape[0]:
        raise ValueError(f"{MATMUL.op}: a (*, k) and b (k, n) must have the same k, got a {tuple(a.shape)} "
                         f"and b {tuple(b.shape)}")


#: the registered operators as :class:`~.eager.FastOp` attributes (``linear``, ``linear_bias``,
#: ``linear_residual``, ``matmul``; set by :mod:`.torch_ops`, which registers them): a call that
#: needs a gradient runs under a ``torch.autograd.Function`` with the op's formula, any other
#: call that cannot take the launch plans through the registered op
REGISTERED = SimpleNamespace()


def _fused(planned: bool, x, w, bias, residual, out_dtype, fallback) -> Callable:
    """``f(x, w, bias, residual)`` computing the product with the fused ``bias`` / ``residual``
    (either may be None): a launch plan, or the registered operator of that form
    (:data:`REGISTERED`)."""
    if planned:
        return gemm_plan(LINEAR, x, w, out_dtype, fallback, bias, residual)
    if residual is not None:
        return lambda x, w, b, r: REGISTERED.linear_residual(x, w, b, r, out_dtype, fallback)
    if bias is not None:
        return lambda x, w, b, r: REGISTERED.linear_bias(x, w, b, out_dtype, fallback)
    return lambda x, w, b, r: REGISTERED.linear(x, w, out_dtype, fallback)


def route(x, weight, bias, residual, out_dtype, fallback, planned: bool) -> Callable:
    """``f(x, weight, bias, residual)`` computing :func:`tvm_tirx.ops.linear` for calls of
    this one's shapes; ``planned``: on launch plans (the eager fast path), else on the
    registered operators.

    Raises
    ------
    TypeError
        ``bias`` or ``residual`` not floating-point.
    ValueError
        A 1-d ``bias`` of a length other than ``n`` or 1.
    UnsupportedInput, ValueError, TypeError
        ``planned``: the rules of the fused form (:func:`~.gemm_plans.plan`).
    """
    n = weight.shape[0] if isinstance(weight, torch.Tensor) and weight.dim() == 2 else None
    if residual is not None:
        check_bias_type(None, residual)
        fused = isinstance(residual, torch.Tensor) and n is not None and residual.shape == (*x.shape[:-1], n)
        if fused and (bias is None or (isinstance(bias, torch.Tensor) and bias.shape == (n,))):
            check_bias_type(bias)
            return _fused(planned, x, weight, bias, residual, out_dtype, fallback)
        inner = route(x, weight, bias, None, out_dtype, fallback, planned)
        return lambda x, w, b, r: _add_residual(inner(x, w, b, None), r)
    if bias is None:
        return _fused(planned, x, weight, None, None, out_dtype, fallback)
    vector = isinstance(bias, torch.Tensor) and bias.dim() == 1 and n is not None
    if vector and bias.shape[0] == n:  # the kernel's fused bias
        check_bias_type(bias)
        return _fused(planned, x, weight, bias, None, out_dtype, fallback)
    if isinstance(bias, torch.Tensor):
        check_bias_type(bias)
    if vector and bias.shape[0] != 1:
        raise ValueError(f"{LINEAR.op}: bias of shape {tuple(bias.shape)} does not broadcast to the output's "
                         f"(*, {n}): expected ({n},) or (1,)")
    inner = _fused(planned, x, weight, None, None, out_dtype, fallback)
    return lambda x, w, b, r: _add(inner(x, w, None, None), b)


def _add(out, t):
    return torch.add(out, t).to(out.dtype)


def _add_residual(out, residual):
    check_broadcast(residual, out)
    return _add(out, residual)


#: the registered GEMM operators' types of ``out_dtype`` and ``fallback``
ARG_TYPES = ((torch.dtype,), (str,))


#: the fast path's routes of linear, per call signature (emptied with the GEMM kernels)
LINEAR_PLANS = Plans(route)
on_clear_kernels(LINEAR_PLANS.clear)


def call_linear(x, weight, bias, residual, out_dtype, fallback):
    """:func:`tvm_tirx.ops.linear` (its arguments in this order): the fast path when
    :func:`~.eager.direct` holds, else through the registered operators.

    Returns the output ``(*, n)``; raises what :func:`tvm_tirx.ops.linear` documents
    (the same errors on both paths)."""
    if direct(x, weight, bias, residual) and typed((out_dtype, fallback), ARG_TYPES):
        key = (out_dtype, fallback, *signature(x, weight, bias, residual))
        return LINEAR_PLANS.get(key, x, weight, bias, residual, out_dtype, fallback, True)(x, weight, bias, residual)
    return route(x, weight, bias, residual, out_dtype, fallback, False)(x, weight, bias, residual)


def _matmul_route(a, b, out_dtype, fallback) -> Callable:
    """``f(a, b)`` on the launch plan of ``a @ b`` (the checks of the call run here)."""
    check_matmul_shapes(a, b)
    launch = gemm_plan(MATMUL, a, b.t(), out_dtype, fallback)
    return lambda a, b: launch(a, b.t(), None, None)


#: the fast path's plans of matmul, per call signature
MATMUL_PLANS = Plans(_matmul_route)
on_clear_kernels(MATMUL_PLANS.clear)


def call_matmul(a, b, out_dtype, fallback):
    """:func:`tvm_tirx.ops.matmul`: the fast path when :func:`~.eager.direct` holds, else
    the registered operator.

    Returns ``a @ b`` (``(*, n)``); raises what :func:`tvm_tirx.ops.matmul` documents."""
    if direct(a, b) and typed((out_dtype, fallback), ARG_TYPES):
        key = (out_dtype, fallback, *signature(a, b))
        return MATMUL_PLANS.get(key, a, b, out_dtype, fallback)(a, b)
    return REGISTERED.matmul(a, b, out_dtype, fallback)
