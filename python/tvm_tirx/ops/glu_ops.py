"""The gated linear unit on the tvm_tirx Hopper GEMM: :func:`glu_linear` and :func:`gate_up_weight`.

A transformer MLP's first half, ``activation(x @ w_gate^T) * (x @ w_up^T)`` (SwiGLU with
SiLU, GeGLU with GELU), is one kernel here: :func:`~tvm_tirx.kernels.gemm.make_gemm` with
``gated=True`` multiplies ``x`` by a weight that interleaves the gate and up rows in
groups of eight (:func:`gate_up_weight`, made once per model), so each thread holds a gate
column and its up column, and the epilogue stores ``activation(gate) * up`` -- the two
``(m, n)`` intermediates of the unfused form are never written.

The op ``torch.ops.tvm_tirx.glu_linear`` is registered with ``torch.library.custom_op``,
with a fake implementation (``torch.compile(fullgraph=True)`` traces it) and an autograd
formula (the backward recomputes the two products with torch).  Importing this module
imports torch.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from ..kernels.gemm import choose_tile
from ..kernels.gemm.config import GLU_ROWS
from .gemm_kernels import a_operand, b_operand, gemm_kernel
from .torch_checks import Operands, UnsupportedInput, check_dtypes, check_shapes, gemm_key, sm_count
from .torch_ops import _accumulator, _check_fallback

__all__ = ["ACTIVATIONS", "gate_up_weight", "glu_linear"]

#: activation name -> torch's function (the kernel's ``.approx`` forms: kernels/gemm/fused.py)
ACTIVATIONS = {
    "silu": torch.nn.functional.silu,
    "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
    "relu": torch.nn.functional.relu,
}
_GLU = Operands("tvm_tirx.ops.glu_linear", "x", "weight", "contiguous (2 n, k) as gate_up_weight makes it, or the "
                "transpose of a contiguous (k, 2 n)")


def gate_up_weight(w_gate, w_up):
    """The gated GEMM's weight: ``w_gate`` and ``w_up`` interleaved in groups of eight rows.

    Parameters
    ----------
    w_gate, w_up : torch.Tensor
        ``(n, k)`` each, one dtype and device (``nn.Linear`` weights: k innermost);
        ``n`` a multiple of 8 (:data:`~tvm_tirx.kernels.gemm.config.GLU_ROWS`).

    Returns
    -------
    torch.Tensor
        ``(2 n, k)``, contiguous: rows ``16 q .. 16 q + 7`` are ``w_gate[8 q .. 8 q + 7]``,
        rows ``16 q + 8 .. 16 q + 15`` are ``w_up[8 q .. 8 q + 7]``.

    Raises
    ------
    ValueError
        The two are not 2-d of one shape, dtype and device, or ``n`` is not a multiple of 8.
    """
    if w_gate.dim() != 2 or w_gate.shape != w_up.shape or w_gate.dtype != w_up.dtype or w_gate.device != w_up.device:
        raise ValueError(f"gate_up_weight: w_gate and w_up must be 2-d (n, k) of one shape, dtype and device, got "
                         f"{tuple(w_gate.shape)} {w_gate.dtype} {w_gate.device} and {tuple(w_up.shape)} "
                         f"{w_up.dtype} {w_up.device}")
    n, k = w_gate.shape
    if n % GLU_ROWS:
        raise ValueError(f"gate_up_weight: n (rows of w_gate) must be a multiple of {GLU_ROWS}, got {n}: pad both "
                         f"weights with zero rows and slice the output")
    groups = (w_gate.reshape(n // GLU_ROWS, GLU_ROWS, k), w_up.reshape(n // GLU_ROWS, GLU_ROWS, k))
    return torch.stack(groups, dim=1).reshape(2 * n, k).contiguous()


def _split(weight):
    """``(w_gate, w_up)``, each ``(n, k)``, of a :func:`gate_up_weight` result."""
    rows, k = weight.shape
    pairs = weight.reshape(rows // (2 * GLU_ROWS), 2, GLU_ROWS, k)
    return pairs[:, 0].reshape(rows // 2, k), pairs[:, 1].reshape(rows // 2, k)


def _torch_glu(x, weight, activation, out_dtype):
    """The product by torch, through float32 (float64 if a dtype is): the fallback and
    the backward's recomputation."""
    acc = _accumulator(x.dtype, out_dtype)
    w_gate, w_up = _split(weight.to(acc))
    xa = x.to(acc)
    return (ACTIVATIONS[activation](xa @ w_gate.t()) * (xa @ w_up.t())).to(out_dtype)


def _check_activation(activation) -> None:
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise ValueError(f"{_GLU.op}: activation must be one of {list(ACTIVATIONS)}, got {activation!r}")


def _check(x, weight, activation, out_dtype, fallback):
    """The rules every call (and the fake) checks, whatever the fallback; the resolved
    ``out_dtype``."""
    _check_activation(activation)
    _check_fallback(_GLU.op, fallback)
    out_dtype = x.dtype if out_dtype is None else out_dtype
    check_shapes(_GLU, x, weight)
    check_dtypes(_GLU, x, weight, out_dtype)
    if weight.shape[0] % (2 * GLU_ROWS):
        raise ValueError(f"{_GLU.op}: weight must have 2 n rows, n a multiple of {GLU_ROWS} (gate_up_weight's "
                         f"result), got {weight.shape[0]} rows")
    return out_dtype


@torch.library.custom_op("tvm_tirx::glu_linear", mutates_args=())
def _glu_op(x: torch.Tensor, weight: torch.Tensor, activation: str, out_dtype: Optional[torch.dtype],
            fallback: Optional[str]) -> torch.Tensor:
    out_dtype = _check(x, weight, activation, out_dtype, fallback)
    try:
        key = gemm_key(_GLU, x, weight, out_dtype)
    except UnsupportedInput:
        if fallback != "torch":
            raise
        return _torch_glu(x, weight, activation, out_dtype)
    n, k = weight.shape[0] // 2, weight.shape[1]
    m = x.numel() // k if k else 0
    out = torch.empty((*x.shape[:-1], n), dtype=out_dtype, device=x.device)
    if out.numel() == 0 or k == 0:  # activation(0) * 0 = 0
        return out.zero_()
    block_n = choose_tile(m, n, key.out_dtype, sm_count(x.device), gated=True)["block_n"]
    key = dataclasses.replace(key, n=n, block_n=block_n, activation=activation, gated=True)
    gemm_kernel(key)(a_operand(key, x), b_operand(key, weight), out.view(-1, n))
    return out


@_glu_op.register_fake
def _glu_fake(x, weight, activation, out_dtype, fallback):
    out_dtype = _check(x, weight, activation, out_dtype, fallback)
    return x.new_empty((*x.shape[:-1], weight.shape[0] // 2), dtype=out_dtype)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.activation = inputs[2]


def _backward(ctx, grad):
    """Recompute the product with torch (float32) and differentiate it."""
    x, weight = ctx.saved_tensors
    with torch.enable_grad():
        xa = x.detach().float().requires_grad_(ctx.needs_input_grad[0])
        wa = weight.detach().float().requires_grad_(ctx.needs_input_grad[1])
        y = _torch_glu(xa, wa, ctx.activation, torch.float32)
        wanted = [t for t in (xa, wa) if t.requires_grad]
        grads = iter(torch.autograd.grad(y, wanted, grad.float()))
    grad_x = next(grads).to(x.dtype) if ctx.needs_input_grad[0] else None
    grad_w = next(grads).to(weight.dtype) if ctx.needs_input_grad[1] else None
    return grad_x, grad_w, None, None, None


_glu_op.register_autograd(_backward, setup_context=_setup_context)


def glu_linear(x, weight, activation="silu", *, out_dtype=None, fallback=None):
    """``activation(x @ w_gate^T) * (x @ w_up^T)`` in one kernel (SwiGLU for ``"silu"``).

    Parameters
    ----------
    x : torch.Tensor
        ``(*, k)``, ``torch.bfloat16``, contiguous, on a compute capability 9.0 GPU; the
        leading dimensions are the GEMM's rows (any number: one kernel per weight shape).
        A 2-d ``x`` may also be column-major (read M-major; ``m`` a multiple of 8).
    weight : torch.Tensor
        ``(2 n, k)`` from :func:`gate_up_weight` (gate and up rows interleaved by eight),
        ``torch.bfloat16``, contiguous, on ``x``'s GPU; ``k`` a multiple of 8.
    activation : str
        ``"silu"`` (SwiGLU), ``"gelu_tanh"`` (GeGLU, torch's ``approximate="tanh"``) or
        ``"relu"`` (ReGLU), applied to the gate in float32 with the ``.approx``
        instructions of :mod:`tvm_tirx.kernels.gemm.fused`.
    out_dtype : torch.dtype | None
        ``torch.bfloat16`` or ``torch.float32``; None for ``x.dtype``.
    fallback : str | None
        None: an input the kernel does not take raises.  ``"torch"``: such a call is
        computed by torch (through float32).

    Returns
    -------
    torch.Tensor
        ``(*, n)`` of ``out_dtype``.

    Raises
    ------
    UnsupportedInput
        (a ``ValueError``; not with ``fallback="torch"``) the rules of
        :func:`tvm_tirx.ops.linear` for ``x`` and ``weight``.
    ValueError
        ``activation`` or ``fallback`` unknown; ``x`` 0-d, ``weight`` not 2-d, different
        ``k``; ``weight``'s rows not ``2 n`` with ``n`` a multiple of 8.
    TypeError
        Non-floating or mixed dtypes, as :func:`tvm_tirx.ops.linear`.

    Notes
    -----
    Differentiable: the backward recomputes both products with torch in float32 and
    differentiates ``activation(gate) * up`` exactly (not the ``.approx`` forms).
    """
    _check_activation(activation)  # before the op's schema check (a non-str is its RuntimeError)
    return torch.ops.tvm_tirx.glu_linear(x, weight, activation, out_dtype, fallback)
