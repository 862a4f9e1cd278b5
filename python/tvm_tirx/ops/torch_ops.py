"""torch operators on the tvm_tirx Hopper GEMM: :func:`linear` and :func:`matmul`.

Both are registered with ``torch.library.custom_op`` (``torch.ops.tvm_tirx.linear``, with a
fused ``(n,)`` bias ``torch.ops.tvm_tirx.linear_bias``, and ``torch.ops.tvm_tirx.matmul``)
with fake implementations, so ``torch.compile(fullgraph=True)``
traces a model that calls them without a graph break: the compiled graph calls the op,
which launches the kernel.  The kernel is :func:`~tvm_tirx.kernels.gemm.make_gemm` with a
run-time ``m``: the first call for an (n, k, dtypes, GPU) compiles it (or loads it from the
on-disk compile cache), and that one kernel serves every number of rows
(:mod:`tvm_tirx.ops.gemm_kernels`).

An input the kernel does not take raises :class:`~tvm_tirx.ops.torch_checks.UnsupportedInput`
(a ``ValueError`` naming the argument and the rule; the rules are
:func:`~tvm_tirx.ops.torch_checks.gemm_key`'s); with ``fallback="torch"`` the call is
computed by torch instead.  Dtypes torch's own ``linear`` refuses (integer, bool or complex
operands, operands of two dtypes, a non-floating ``out_dtype``) raise a ``TypeError`` with or
without the fallback.

Both ops have an autograd formula (``torch.library.register_autograd``): the forward is the
kernel (or the fallback), the backward is computed by torch's own matmuls, so a model whose
weights require grad trains, eager or under ``torch.compile`` (eager calls that need a
gradient run under a ``torch.autograd.Function`` with that formula: :class:`~.eager.FastOp`).
Importing this module imports torch and registers the ops.
"""

from __future__ import annotations

from typing import Optional

import torch

from .gemm_plans import FALLBACKS, accumulator as _accumulator, check_fallback as _check_fallback, run_gemm
from .eager import FastOp
from .linear_route import (ARG_TYPES as _ARG_TYPES, LINEAR, MATMUL, REGISTERED, call_linear, call_matmul,
                           check_bias_type, check_matmul_shapes)
from .torch_checks import Operands, UnsupportedInput, check_dtypes, check_shapes

__all__ = ["linear", "matmul", "UnsupportedInput", "FALLBACKS"]


def _fake_gemm(names: Operands, x, w, out_dtype, fallback):
    """The output's shape ``(*x.shape[:-1], n)`` and dtype, without computing it."""
    out_dtype = x.dtype if out_dtype is None else out_dtype
    _check_fallback(names.op, fallback)
    check_shapes(names, x, w)
    check_dtypes(names, x, w, out_dtype)
    return x.new_empty((*x.shape[:-1], w.shape[0]), dtype=out_dtype)


def _linear(x: torch.Tensor, weight: torch.Tensor, out_dtype: Optional[torch.dtype],
            fallback: Optional[str]) -> torch.Tensor:
    return run_gemm(LINEAR, x, weight, out_dtype, fallback)


_linear_op = torch.library.custom_op("tvm_tirx::linear", mutates_args=())(_linear)


@_linear_op.register_fake
def _linear_fake(x, weight, out_dtype, fallback):
    return _fake_gemm(LINEAR, x, weight, out_dtype, fallback)


def _linear_bias(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out_dtype: Optional[torch.dtype],
                 fallback: Optional[str]) -> torch.Tensor:
    check_bias_type(bias)
    return run_gemm(LINEAR, x, weight, out_dtype, fallback, bias)


_linear_bias_op = torch.library.custom_op("tvm_tirx::linear_bias", mutates_args=())(_linear_bias)


@_linear_bias_op.register_fake
def _linear_bias_fake(x, weight, bias, out_dtype, fallback):
    check_bias_type(bias)
    if bias.dim() != 1 or bias.shape[0] != weight.shape[0]:
        raise ValueError(f"{LINEAR.op}: bias must have shape ({weight.shape[0]},) (n), got {tuple(bias.shape)}")
    return _fake_gemm(LINEAR, x, weight, out_dtype, fallback)


def _linear_residual(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], residual: torch.Tensor,
                     out_dtype: Optional[torch.dtype], fallback: Optional[str]) -> torch.Tensor:
    check_bias_type(bias, residual)
    return run_gemm(LINEAR, x, weight, out_dtype, fallback, bias, residual)


_linear_residual_op = torch.library.custom_op("tvm_tirx::linear_residual", mutates_args=())(_linear_residual)


@_linear_residual_op.register_fake
def _linear_residual_fake(x, weight, bias, residual, out_dtype, fallback):
    check_bias_type(bias, residual)
    out = _fake_gemm(LINEAR, x, weight, out_dtype, fallback)
    if residual.shape != out.shape:
        raise ValueError(f"{LINEAR.op}: residual must have the output's shape {tuple(out.shape)}, got "
                         f"{tuple(residual.shape)}")
    return out


def _matmul(a: torch.Tensor, b: torch.Tensor, out_dtype: Optional[torch.dtype],
            fallback: Optional[str]) -> torch.Tensor:
    check_matmul_shapes(a, b)
    return run_gemm(MATMUL, a, b.t(), out_dtype, fallback)


_matmul_op = torch.library.custom_op("tvm_tirx::matmul", mutates_args=())(_matmul)


@_matmul_op.register_fake
def _matmul_fake(a, b, out_dtype, fallback):
    check_matmul_shapes(a, b)
    return _fake_gemm(MATMUL, a, b.t(), out_dtype, fallback)


# -- autograd: the backward is torch's own matmuls -----------------------------------------------

def _grad_x(grad, w, dtype):
    """``grad (*, n) @ w (n, k)``: the gradient of ``x`` in ``x @ w^T``, cast to ``dtype``."""
    acc = _accumulator(grad.dtype, w.dtype)
    return (grad.to(acc) @ w.to(acc)).to(dtype)


def _grad_w(grad, x, dtype):
    """``grad (*, n)^T @ x (*, k)`` over the flattened rows: the gradient of ``w`` (n, k) in
    ``x @ w^T``, cast to ``dtype``."""
    acc = _accumulator(grad.dtype, x.dtype)
    return (grad.reshape(-1, grad.shape[-1]).to(acc).t() @ x.reshape(-1, x.shape[-1]).to(acc)).to(dtype)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])


def _linear_backward(ctx, grad):
    x, weight = ctx.saved_tensors
    grad_x = _grad_x(grad, weight, x.dtype) if ctx.needs_input_grad[0] else None
    grad_w = _grad_w(grad, x, weight.dtype) if ctx.needs_input_grad[1] else None
    return grad_x, grad_w, None, None


def _setup_bias_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.bias_dtype = inputs[2].dtype


def _grad_bias(grad, dtype):
    """The sum of ``grad`` over its rows, accumulated in float32 (float64), cast to ``dtype``."""
    return grad.reshape(-1, grad.shape[-1]).to(_accumulator(grad.dtype, dtype)).sum(0).to(dtype)


def _linear_bias_backward(ctx, grad):
    grad_x, grad_w, _, _ = _linear_backward(ctx, grad)
    grad_b = _grad_bias(grad, ctx.bias_dtype) if ctx.needs_input_grad[2] else None
    return grad_x, grad_w, grad_b, None, None


def _matmul_backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad_a = _grad_x(grad, b.t(), a.dtype) if ctx.needs_input_grad[0] else None  # g @ b^T
    grad_b = _grad_w(grad, a, b.dtype).t() if ctx.needs_input_grad[1] else None  # (g^T @ a)^T = a^T @ g
    return grad_a, grad_b, None, None


_linear_op.register_autograd(_linear_backward, setup_context=_setup_context)
_linear_bias_op.register_autograd(_linear_bias_backward, setup_context=_setup_bias_context)


def _setup_residual_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.bias_dtype = None if inputs[2] is None else inputs[2].dtype
    ctx.residual_dtype = inputs[3].dtype


def _linear_residual_backward(ctx, grad):
    grad_x, grad_w, _, _ = _linear_backward(ctx, grad)
    grad_b = _grad_bias(grad, ctx.bias_dtype) if ctx.bias_dtype is not None and ctx.needs_input_grad[2] else None
    grad_r = grad.to(ctx.residual_dtype) if ctx.needs_input_grad[3] else None
    return grad_x, grad_w, grad_b, grad_r, None, None


_linear_residual_op.register_autograd(_linear_residual_backward, setup_context=_setup_residual_context)
_matmul_op.register_autograd(_matmul_backward, setup_context=_setup_context)
# the calls that cannot take the launch plans: under a torch.autograd.Function with the op's
# formula where only autograd needs to record them, else through the registered op
vars(REGISTERED).update(
    linear=FastOp(torch.ops.tvm_tirx.linear, _linear, 2, _ARG_TYPES, (_linear_backward, _setup_context)),
    linear_bias=FastOp(torch.ops.tvm_tirx.linear_bias, _linear_bias, 3, _ARG_TYPES,
                       (_linear_bias_backward, _setup_bias_context)),
    linear_residual=FastOp(torch.ops.tvm_tirx.linear_residual, _linear_residual, 4, _ARG_TYPES,
                           (_linear_residual_backward, _setup_residual_context)),
    matmul=FastOp(torch.ops.tvm_tirx.matmul, _matmul, 2, _ARG_TYPES, (_matmul_backward, _setup_context)),
)


def linear(x, weight, bias=None, *, residual=None, out_dtype=None, fallback=None):
    """``x @ weight.T + bias (+ residual)``, like ``torch.nn.functional.linear``, on the tvm_tirx Hopper GEMM.

    Parameters
    ----------
    x : torch.Tensor
        ``(*, k)``, ``torch.bfloat16``, contiguous, on a compute capability 9.0 GPU
        (H100 / H200); the leading dimensions are flattened into the GEMM's ``m`` rows,
        any number of them (one compiled kernel serves every ``m``).  A 2-d ``x`` may
        also be column-major (``x.t()`` contiguous: the kernel reads it M-major,
        ``make_gemm(a_major="m")``; ``m`` a multiple of 8).
    weight : torch.Tensor
        ``(n, k)``, ``torch.bfloat16``, on ``x``'s GPU: contiguous (k innermost, as
        ``nn.Linear.weight``), or the transpose of a contiguous ``(k, n)`` tensor (the
        kernel then reads it N-major, ``make_gemm(b_major="n")``; ``n`` a multiple of 8).
        Each operand's rows, as stored, take a multiple of 16 bytes (``k`` a multiple of
        8 for an operand stored with k innermost; none when both are stored transposed);
        both base pointers 16-byte aligned.
    bias : torch.Tensor | None
        ``(n,)``, ``torch.bfloat16`` or ``torch.float32``, contiguous, on ``x``'s device:
        added by the kernel to the float32 accumulators before the one rounding to
        ``out_dtype`` (op ``torch.ops.tvm_tirx.linear_bias``; a ``bias`` breaking one of
        those rules raises :class:`UnsupportedInput`, or with ``fallback="torch"`` is
        added by torch in float32).  Any other shape that broadcasts to the output's is
        added by torch to the rounded product, the sum rounded again.  ``None``: none.
        A bias that is not floating-point raises a TypeError, as torch's does.
    residual : torch.Tensor | None
        Added last: ``x @ weight.T + bias + residual`` (a skip connection).  Of the
        output's shape ``(*, n)`` and dtype, contiguous, on ``x``'s device: added by the
        kernel in float32 before the one rounding (op ``torch.ops.tvm_tirx.linear_residual``;
        breaking one of those rules raises :class:`UnsupportedInput`, or with
        ``fallback="torch"`` is added by torch in float32).  Any other shape that
        broadcasts is added by torch to the rounded result.  ``None``: none.
    out_dtype : torch.dtype | None
        ``torch.bfloat16`` (round to nearest even) or ``torch.float32``; ``None`` for
        ``x.dtype``.  The products accumulate in float32 either way.
    fallback : str | None
        ``None``: an input the kernel does not take raises.  ``"torch"``: such a call is
        computed by ``torch.nn.functional.linear`` instead (in ``out_dtype``; through
        float32, or float64 if one of the dtypes is, when ``out_dtype`` is not the
        inputs' dtype), on whatever device the tensors are.

    Returns
    -------
    torch.Tensor
        ``(*, n)`` of ``out_dtype``, on ``x``'s device.

    Raises
    ------
    UnsupportedInput
        (a ``ValueError``; not with ``fallback="torch"``) ``x`` or ``weight`` not a CUDA
        tensor, not on one device, the GPU not compute capability 9.0, a dtype other than
        bfloat16, ``out_dtype`` not bfloat16 or float32, an operand neither contiguous nor
        the transpose of a contiguous tensor, rows (as stored) not a multiple of 16 bytes,
        a base pointer not 16-byte aligned, a tensor of more than
        ``2**31 - 129`` elements (:data:`~tvm_tirx.ops.torch_checks.INT32_ELEMENTS`).  The
        message names the argument and the rule.
    ValueError
        ``x`` 0-d, ``weight`` not 2-d, different ``k``; ``fallback`` not None or ``"torch"``;
        a 1-d ``bias`` of a length other than ``n`` or 1; a ``residual`` that does not
        broadcast with the output.
    TypeError
        (with or without ``fallback``, as torch refuses them) ``x`` or ``weight`` not
        floating-point (integer, bool, complex), ``x`` and ``weight`` of different dtypes,
        ``out_dtype`` not floating-point.

    Notes
    -----
    Differentiable: the backward is computed by torch's matmuls (not the kernel), in
    float32 (float64 if a dtype is), each gradient cast to its input's dtype:
    ``grad_x = grad @ weight``, ``grad_weight = grad^T @ x`` and ``grad_bias`` the sum
    of ``grad`` over its rows (leading dimensions flattened), ``grad_residual = grad``;
    only the gradients needed are computed.
    """
    return call_linear(x, weight, bias, residual, out_dtype, fallback)


def matmul(a, b, *, out_dtype=None, fallback=None):
    """``a @ b``, like ``torch.matmul`` for a 2-d ``b``, on the tvm_tirx Hopper GEMM.

    ``b`` may be row-major (contiguous: the "NN" GEMM, the kernel of
    ``make_gemm(b_major="n")``) or column-major (``b.t()`` contiguous, as ``weight.t()``
    is: the "TN" GEMM); no copy is made in either case.

    Parameters
    ----------
    a : torch.Tensor
        ``(*, k)``, ``torch.bfloat16``, contiguous, on a compute capability 9.0 GPU; the
        leading dimensions are flattened into the GEMM's ``m`` rows.  A 2-d ``a`` may also
        be column-major (``a.t()`` contiguous, read M-major; ``m`` a multiple of 8).
    b : torch.Tensor
        ``(k, n)``, ``torch.bfloat16``, row-major (strides ``(n, 1)``; ``n`` a multiple of
        8) or column-major (strides ``(1, k)``), on ``a``'s GPU.  ``k`` a multiple of 8
        unless both ``a`` and ``b`` are stored with k outermost; both base pointers
        16-byte aligned.
    out_dtype : torch.dtype | None
        ``torch.bfloat16`` or ``torch.float32``; ``None`` for ``a.dtype``.  The products
        accumulate in float32.
    fallback : str | None
        ``None`` (an unsupported input raises) or ``"torch"`` (compute such a call with
        torch instead).

    Returns
    -------
    torch.Tensor
        ``(*, n)`` of ``out_dtype``, on ``a``'s device.

    Raises
    ------
    UnsupportedInput
        (a ``ValueError``; not with ``fallback="torch"``) the rules of :func:`linear`,
        with ``b.t()`` in the place of ``weight``: a ``b`` that is neither row- nor
        column-major (a strided view) breaks the layout rule.
    ValueError
        ``a`` 0-d, ``b`` not 2-d, ``a``'s last size not ``b``'s first; ``fallback`` not
        None or ``"torch"``.
    TypeError
        The dtype rules of :func:`linear` (with or without ``fallback``).

    Notes
    -----
    Differentiable as :func:`linear` is: ``grad_a = grad @ b^T`` and
    ``grad_b = a^T @ grad``, by torch.
    """
    return call_matmul(a, b, out_dtype, fallback)
