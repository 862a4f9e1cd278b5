"""The gated linear unit on the tvm_tirx Hopper GEMM: :func:`glu_linear`.

A transformer MLP's first half, ``activation(x @ w_gate^T) * (x @ w_up^T)`` (SwiGLU with
SiLU, GeGLU with GELU), is one kernel here: :func:`~tvm_tirx.kernels.gemm.make_gemm` with
``gated=True`` multiplies ``x`` by a weight that interleaves the gate and up rows in
groups of eight, so each thread holds a gate column and its up column, and the epilogue
stores ``activation(gate) * up`` -- the two ``(m, n)`` intermediates of the unfused form
are never written.  :func:`glu_linear` takes ``w_gate`` and ``w_up`` as ``nn.Linear``
keeps them and makes the interleaved weight itself, once per pair of weights
(:func:`~tvm_tirx.ops.glu_weights.interleaved`): no merged weight, whose row order a
caller could get wrong in the right shape, crosses the API.

The op ``torch.ops.tvm_tirx.glu_linear`` is registered with ``torch.library.custom_op``,
with a fake implementation (``torch.compile(fullgraph=True)`` traces it) and an autograd
formula (the backward recomputes the two products with torch).  Importing this module
imports torch.
"""

from __future__ import annotations

from typing import Optional

import torch

from ..kernels.gemm import choose_tile
from ..kernels.gemm.config import BM, GLU_ROWS
from .eager import FastOp, Plans, signature
from .gemm_kernels import on_clear_kernels
from .gemm_plans import KernelPlan
from .glu_weights import gate_up_weight, interleaved
from .torch_checks import Operands, UnsupportedInput, check_dtypes, check_shapes, gemm_key, sm_count
from .gemm_plans import accumulator as _accumulator, check_fallback as _check_fallback

__all__ = ["ACTIVATIONS", "gate_up_weight", "glu_linear"]

#: activation name -> torch's function (the kernel's ``.approx`` forms: kernels/parts/epilogue/activation.py)
ACTIVATIONS = {
    "silu": torch.nn.functional.silu,
    "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
    "relu": torch.nn.functional.relu,
}
_OP = "tvm_tirx.ops.glu_linear"
#: the names of the rules' messages: the kernel's B is the interleaved copy of both weights
_GLU = Operands(_OP, "x", "w_gate/w_up", "(n, k) each")
_GATE = Operands(_OP, "x", "w_gate", "(n, k)")
_UP = Operands(_OP, "x", "w_up", "(n, k)")


def _torch_glu(x, w_gate, w_up, activation, out_dtype):
    """The product by torch, through float32 (float64 if a dtype is): the fallback and
    the backward's recomputation."""
    acc = _accumulator(x.dtype, out_dtype)
    xa = x.to(acc)
    return (ACTIVATIONS[activation](xa @ w_gate.to(acc).t()) * (xa @ w_up.to(acc).t())).to(out_dtype)


def _check_activation(activation) -> None:
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise ValueError(f"{_OP}: activation must be one of {list(ACTIVATIONS)}, got {activation!r}")


def _check_two_weights(w_gate, w_up) -> None:
    """Refuse the one-weight call of the old API, ``glu_linear(x, merged, activation)``: a
    ``torch.cat([w_gate, w_up])`` and an interleaved weight have the same shape."""
    if isinstance(w_up, torch.Tensor):
        return
    shape = tuple(w_gate.shape) if isinstance(w_gate, torch.Tensor) else type(w_gate).__name__
    raise TypeError(f"{_OP}: takes the gate and up weights as two (n, k) tensors, glu_linear(x, w_gate, w_up, "
                    f"activation); got one weight {shape} and w_up={w_up!r}. A merged (2 n, k) weight is not "
                    f"accepted: torch.cat([w_gate, w_up]) and gate_up_weight(w_gate, w_up) have the same shape "
                    f"and different row orders. Pass the two weights (a torch.cat-merged w: "
                    f"glu_linear(x, *w.chunk(2), activation))")


def _check(x, w_gate, w_up, activation, out_dtype, fallback):
    """The rules every call (and the fake) checks, whatever the fallback; the resolved
    ``out_dtype``."""
    _check_activation(activation)
    _check_fallback(_OP, fallback)
    out_dtype = x.dtype if out_dtype is None else out_dtype
    for names, w in ((_GATE, w_gate), (_UP, w_up)):
        check_shapes(names, x, w)
        check_dtypes(names, x, w, out_dtype)
    if w_gate.shape != w_up.shape or w_gate.device != w_up.device:
        raise ValueError(f"{_OP}: w_gate and w_up must have one shape (n, k) and device, got {tuple(w_gate.shape)} "
                         f"on {w_gate.device} and {tuple(w_up.shape)} on {w_up.device}")
    return out_dtype


def _kernel_plan(x, w_gate, w_up, activation, out_dtype):
    """The plan of a call on the gated kernel (any rule it does not take:
    :class:`UnsupportedInput`): the interleaved weight read on each call
    (:func:`~.glu_weights.interleaved`), then the plain GEMM plan's launch."""
    n, k = w_gate.shape
    if n % GLU_ROWS:
        raise UnsupportedInput(f"{_OP}: n = {n} (rows of w_gate and w_up) must be a multiple of {GLU_ROWS} (the "
                               f"gated kernel's row groups); pad both weights with zero rows and slice the output")
    weight = interleaved(w_gate, w_up)
    key = gemm_key(_GLU, x, weight, out_dtype)
    shape = (*x.shape[:-1], n)
    if 0 in shape or k == 0:  # activation(0) * 0 = 0
        return lambda x, w_gate, w_up: torch.zeros(shape, dtype=out_dtype, device=x.device)
    m = x.numel() // k
    block_n = choose_tile(m, n, key.out_dtype, sm_count(x.device), gated=True)["block_n"]
    # a gated tile has 128 rows and one split (the plain GEMM of 2 n columns may have got a
    # 256-row tile or a split from an override or the split-K route)
    key = key.replace(n=n, block_n=block_n, activation=activation, gated=True, block_m=BM, splits=1)
    plan = KernelPlan(key, shape, out_dtype, x, weight, None, None)
    return lambda x, w_gate, w_up: plan(x, interleaved(w_gate, w_up), None, None)


def _make_plan(x, w_gate, w_up, activation, out_dtype, fallback):
    """The plan of a call's signature (every check runs here), or raise."""
    out_dtype = _check(x, w_gate, w_up, activation, out_dtype, fallback)
    try:
        return _kernel_plan(x, w_gate, w_up, activation, out_dtype)
    except UnsupportedInput:
        if fallback != "torch":
            raise
        return lambda x, w_gate, w_up: _torch_glu(x, w_gate, w_up, activation, out_dtype)


#: The gated operator's plans (emptied with the GEMM kernel table).
PLANS = Plans(_make_plan)
on_clear_kernels(PLANS.clear)


def _glu(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, activation: str,
         out_dtype: Optional[torch.dtype], fallback: Optional[str]) -> torch.Tensor:
    _check_fallback(_OP, fallback)  # before it is hashed
    key = (activation, out_dtype, fallback, *signature(x, w_gate, w_up))
    return PLANS.get(key, x, w_gate, w_up, activation, out_dtype, fallback)(x, w_gate, w_up)


_glu_op = torch.library.custom_op("tvm_tirx::glu_linear", mutates_args=())(_glu)


@_glu_op.register_fake
def _glu_fake(x, w_gate, w_up, activation, out_dtype, fallback):
    out_dtype = _check(x, w_gate, w_up, activation, out_dtype, fallback)
    return x.new_empty((*x.shape[:-1], w_gate.shape[0]), dtype=out_dtype)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:3])
    ctx.activation = inputs[3]


def _backward(ctx, grad):
    """Recompute the product with torch (float32) and differentiate it."""
    x, w_gate, w_up = ctx.saved_tensors
    with torch.enable_grad():
        leaves = [t.detach().float().requires_grad_(need) for t, need in zip((x, w_gate, w_up),
                                                                          ctx.needs_input_grad[:3])]
        y = _torch_glu(*leaves, ctx.activation, torch.float32)
        wanted = [t for t in leaves if t.requires_grad]
        grads = iter(torch.autograd.grad(y, wanted, grad.float()))
    out = [next(grads).to(t.dtype) if need else None for t, need in zip((x, w_gate, w_up), ctx.needs_input_grad[:3])]
    return (*out, None, None, None)


_glu_op.register_autograd(_backward, setup_context=_setup_context)
# a public call runs the implementation directly when nothing needs torch's dispatcher (under a
# torch.autograd.Function with the op's formula when an input needs a gradient)
_GLU_CALL = FastOp(torch.ops.tvm_tirx.glu_linear, _glu, 3, ((str,), (torch.dtype,), (str,)),
                   (_backward, _setup_context))


def glu_linear(x, w_gate, w_up=None, activation="silu", *, out_dtype=None, fallback=None):
    """``activation(x @ w_gate^T) * (x @ w_up^T)`` in one kernel (SwiGLU for ``"silu"``).

    Parameters
    ----------
    x : torch.Tensor
        ``(*, k)``, ``torch.bfloat16``, contiguous, on a compute capability 9.0 GPU; the
        leading dimensions are the GEMM's rows (any number: one kernel per weight shape).
        A 2-d ``x`` may also be column-major (read M-major; ``m`` a multiple of 8).
    w_gate, w_up : torch.Tensor
        ``(n, k)`` each, as ``nn.Linear`` keeps them (``mlp.gate_proj.weight``,
        ``mlp.up_proj.weight``), ``torch.bfloat16``, on ``x``'s GPU, any strides; ``n`` a
        multiple of 8, ``k`` a multiple of 8.  The kernel reads them interleaved by eight
        rows: the first call makes that ``(2 n, k)`` copy and later calls reuse it while
        neither weight is freed or written in place (:func:`~tvm_tirx.ops.glu_weights.interleaved`).
        ``w_up`` is required: a single merged weight raises ``TypeError``.
    activation : str
        ``"silu"`` (SwiGLU), ``"gelu_tanh"`` (GeGLU, torch's ``approximate="tanh"``) or
        ``"relu"`` (ReGLU), applied to the gate in float32 with the ``.approx``
        instructions of :mod:`tvm_tirx.kernels.parts.epilogue.activation`.
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
        :func:`tvm_tirx.ops.linear` for ``x`` and the weights, and ``n`` not a multiple of 8.
    ValueError
        ``activation`` or ``fallback`` unknown; ``x`` 0-d, a weight not 2-d, different
        ``k``; ``w_gate`` and ``w_up`` of different shapes or devices.
    TypeError
        ``w_up`` missing or not a tensor (the one-weight call ``glu_linear(x, merged)``);
        non-floating or mixed dtypes, as :func:`tvm_tirx.ops.linear`.

    Notes
    -----
    Differentiable in ``x``, ``w_gate`` and ``w_up``: the backward recomputes both
    products with torch in float32 and differentiates ``activation(gate) * up`` exactly
    (not the ``.approx`` forms).
    """
    _check_two_weights(w_gate, w_up)
    _check_activation(activation)  # before the op's schema check (a non-str is its RuntimeError)
    return _GLU_CALL(x, w_gate, w_up, activation, out_dtype, fallback)
