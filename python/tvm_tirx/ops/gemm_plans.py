"""Launch plans of the GEMM operators: what a call of ``linear`` / ``matmul`` runs, per signature.

:func:`run_gemm` is the operators' implementation (the body of each registered op and
the eager fast path alike): ``x (*, k) @ w (n, k)^T (+ bias) (+ residual)``.  The checks
(:mod:`.torch_checks`), the kernel choice (:func:`~.torch_checks.gemm_key`), the kernel's
argument checks and launch sizes (:meth:`tvm_tirx.Kernel.launcher`) and the output's
shape depend only on the call's :func:`~.eager.signature`, so they run on a signature's
first call and make a plan; later calls of that signature allocate the output and launch.
A signature whose input the kernel does not take makes no plan (the error is raised on
every call) unless ``fallback="torch"``, whose plan computes with torch.
"""

from __future__ import annotations

import torch

from ..kernels.gemm.planner import SmallMPlan, choose_gemm, k_padding
from .eager import Plans, signature
from .gemm_kernels import SmallMSpec, a_operand, b_operand, gemm_kernel, on_clear_kernels
from .pad_kernels import pad_k
from .small_m_plan import workspace
from .torch_checks import (Operands, UnsupportedInput, bias_dtype, check_dtypes, check_residual, check_shapes,
                           gemm_key, sm_count)

__all__ = ["plan", "run_gemm", "accumulator", "check_fallback", "KernelPlan", "SmallMLaunch", "PaddedK", "FALLBACKS",
           "PLANS"]

#: The values ``fallback`` takes: None (raise on an unsupported input) or ``"torch"``.
FALLBACKS = (None, "torch")


def accumulator(*dtypes) -> torch.dtype:
    """float64 if one of ``dtypes`` is float64, else float32."""
    return torch.float64 if torch.float64 in dtypes else torch.float32


def check_fallback(op: str, fallback) -> None:
    """Raise ValueError naming ``op`` unless ``fallback`` is one of :data:`FALLBACKS`."""
    if fallback not in FALLBACKS:
        raise ValueError(f"{op}: fallback must be None or 'torch', got {fallback!r}")


def _torch_gemm(x, w, out_dtype):
    """``x (*, k) @ w (n, k)^T`` by torch, in ``out_dtype`` (the fallback; the dtypes are
    :func:`check_dtypes`'s: floating, ``x.dtype == w.dtype``)."""
    if x.dtype == out_dtype:
        return torch.nn.functional.linear(x, w)
    acc = accumulator(x.dtype, out_dtype)
    return torch.nn.functional.linear(x.to(acc), w.to(acc)).to(out_dtype)


def _torch_plan(out_dtype):
    """The fallback's plan: the product by torch, the bias and residual added in float32
    (float64) before the one rounding to ``out_dtype``."""

    def run(x, w, bias, residual):
        if bias is None and residual is None:
            return _torch_gemm(x, w, out_dtype)
        acc = accumulator(x.dtype, out_dtype, *(t.dtype for t in (bias, residual) if t is not None))
        y = _torch_gemm(x, w, acc)
        return sum((t.to(acc) for t in (bias, residual) if t is not None), y).to(out_dtype)

    return run


def _empty_plan(shape, out_dtype):
    """The plan of an empty output, or of ``k = 0`` (an empty sum: zeros plus the bias and
    the residual)."""

    def run(x, w, bias, residual):
        out = torch.empty(shape, dtype=out_dtype, device=x.device)
        if out.numel():
            out.zero_()
            for t in (bias, residual):
                if t is not None:
                    out.add_(t.to(out_dtype))
        return out

    return run


class KernelPlan:
    """One signature's launch: allocate C, pass A, B (and the bias, the residual) as the
    kernel takes them, launch without checks (they ran when the plan was made).

    Made with the kernel's spec (:class:`~tvm_tirx.kernels.gemm.spec.GemmSpec`), the output's shape and dtype
    and one call's tensors (``x (*, k)``, ``w (n, k)`` as the key reads them, the bias and
    residual or None; with splits, the workspaces of :func:`~.small_m_plan.workspace`),
    whose arguments :meth:`tvm_tirx.Kernel.launcher` checks (raising what a call would);
    called as ``plan(x, w, bias, residual)`` on tensors of that
    call's signature, it returns the new output.
    """

    __slots__ = ("key", "shape", "dtype", "device", "like_x", "flat", "launch")

    def __init__(self, key, shape, out_dtype, x, w, bias, residual):
        self.key, self.shape, self.dtype, self.device = key, shape, out_dtype, x.device
        self.like_x = out_dtype == x.dtype  # x.new_empty: cheaper than torch.empty's keywords
        # a 2-d, K-major x is A as it is, and C is the output itself: no views to make
        self.flat = x.dim() == 2 and key.a_major == "k"
        out = self._new_out(x)
        self.launch = gemm_kernel(key).launcher(*self._arguments(x, w, bias, residual, out))

    def _new_out(self, x):
        if self.like_x:
            return x.new_empty(self.shape)
        return torch.empty(self.shape, dtype=self.dtype, device=self.device)

    def _arguments(self, x, w, bias, residual, out):
        key = self.key
        if self.flat:  # x is (m, k), out and a residual (m, n): as they are
            a, c, r = x, out, residual
        else:
            a, c = a_operand(key, x), out.view(-1, key.n)
            r = None if residual is None else residual.view(-1, key.n)
        b = b_operand(key, w)
        if key.splits > 1:  # a plain product (GemmConfig's checks): the split-K workspaces before C
            return (a, b, *workspace(self.device, x.numel() // key.k, key.n, key.splits, -(-key.n // key.block_n)), c)
        if bias is None:
            return (a, b, c) if r is None else (a, b, r, c)
        return (a, b, bias, c) if r is None else (a, b, bias, r, c)

    def __call__(self, x, w, bias, residual):
        out = self._new_out(x)
        self.launch(*self._arguments(x, w, bias, residual, out))
        return out


class SmallMLaunch(KernelPlan):
    """A :class:`KernelPlan` of the small-M kernel (:class:`~tvm_tirx.kernels.gemm.spec.SmallMSpec`): it
    passes ``x`` as ``X (m, k)``, ``w`` as ``W (n, k)`` and, with more than one split, the
    workspaces of the current stream (:func:`~.small_m_plan.workspace`) before C.
    Made as ``SmallMLaunch(key, shape, out_dtype, x, w)``; called as ``plan(x, w, None, None)``."""

    __slots__ = ("m",)

    def __init__(self, key: SmallMSpec, shape, out_dtype, x, w):
        self.m = x.numel() // key.k
        super().__init__(key, shape, out_dtype, x, w, None, None)

    def _arguments(self, x, w, bias, residual, out):
        a, c = (x, out) if self.flat else (x.view(self.m, self.key.k), out.view(self.m, self.key.n))
        if self.key.splits == 1:
            return (a, w, c)
        return (a, w, *workspace(self.device, self.m, self.key.n, self.key.splits, -(-self.key.n // 128)), c)


def _make_plan(names: Operands, x, w, out_dtype, fallback, bias, residual, plan_k=None):  # noqa: PLR0913
    """The plan of a call's signature (every check of the call runs here), or raise;
    ``plan_k``: the caller's ``k`` when ``x`` and ``w`` are its operands padded along K
    (the planner and its overrides see the call as the caller made it)."""
    check_fallback(names.op, fallback)
    check_shapes(names, x, w)
    check_dtypes(names, x, w, out_dtype)
    plan_k = int(w.shape[1]) if plan_k is None else plan_k
    try:
        key = gemm_key(names, x, w, out_dtype, fused=bias is not None or residual is not None, plan_k=plan_k)
        if bias is not None:
            key = key.replace(bias=bias_dtype(names, bias, x, w.shape[0]))
        if residual is not None:
            check_residual(names, residual, x, w.shape[0], out_dtype)
            key = key.replace(residual=True)
    except UnsupportedInput:
        if fallback != "torch":
            raise
        return _torch_plan(out_dtype)
    n, k = w.shape
    shape = (*x.shape[:-1], n)
    if k == 0 or 0 in shape:
        return _empty_plan(shape, out_dtype)
    small = _small_m_key(key, x.numel() // k, x.device, plan_k)
    if small is not None:
        return SmallMLaunch(small, shape, out_dtype, x, w)
    pad = k_padding(x.numel() // k, n, k, x.element_size()) if key.a_major == key.b_major == "k" else 0
    if pad:  # the plan of the padded operands (whose rows need no padding), padding each call's
        return PaddedK(pad, _make_plan(names, pad_k(x, pad), pad_k(w, pad), out_dtype, fallback, bias, residual, k))
    return KernelPlan(key, shape, out_dtype, x, w, bias, residual)


class PaddedK:
    """A launch plan that appends ``pad`` zero columns to ``x (*, k)`` and ``w (n, k)`` on
    every call (new tensors: the caller's are not touched) and runs ``inner``, the plan of
    the padded operands, on them: the product is the same, and the kernel's TMA loads read
    rows of a multiple of :data:`~tvm_tirx.kernels.gemm.planner.ROW_PITCH_BYTES`.  Called
    as ``plan(x, w, bias, residual)``."""

    __slots__ = ("pad", "inner")

    def __init__(self, pad: int, inner):
        self.pad, self.inner = pad, inner

    def __call__(self, x, w, bias, residual):
        return self.inner(pad_k(x, self.pad), pad_k(w, self.pad), bias, residual)


def _small_m_key(key, m: int, device, plan_k: int):
    """The :class:`~tvm_tirx.kernels.gemm.spec.SmallMSpec` of the call when
    :func:`~tvm_tirx.kernels.gemm.planner.choose_gemm`, asked with the caller's ``plan_k``,
    gives it to the small-M kernel (a plain product of K-major operands), else None."""
    plain = key.bias is None and not key.residual and key.a_major == "k" and key.b_major == "k"
    if not plain or key.in_dtype != "bfloat16":
        return None
    choice = choose_gemm(m, key.n, plan_k, key.out_dtype, sm_count(device))
    if not isinstance(choice, SmallMPlan):
        return None
    return SmallMSpec.of(key, choice)


#: The GEMM operators' plans (emptied with the kernel table: ``gemm_kernels.clear_kernels``).
PLANS = Plans(_make_plan)
on_clear_kernels(PLANS.clear)


def plan(names: Operands, x, w, out_dtype, fallback, bias=None, residual=None):
    """The launch plan of a call ``x (*, k) @ w (n, k)^T (+ bias (n,)) (+ residual (*, n))``:
    made (every check run) on its signature's first call, the same object after.

    Parameters
    ----------
    names : Operands
        The operator and its operands' names, for messages.
    x, w : torch.Tensor
        ``(*, k)`` and ``(n, k)``.
    out_dtype : torch.dtype | None
        The output's dtype; ``None`` for ``x.dtype``.
    fallback : str | None
        ``None`` or ``"torch"``.
    bias, residual : torch.Tensor | None
        A fused ``(n,)`` bias and a fused residual of the output's shape, or None.

    Returns
    -------
    Callable
        ``plan(x, w, bias, residual)`` on tensors of this call's signature: a new
        ``(*, n)`` tensor of ``out_dtype``, computed by the kernel (or by torch: the
        fallback).

    Raises
    ------
    UnsupportedInput, ValueError, TypeError
        The rules of :mod:`.torch_checks` (see :func:`tvm_tirx.ops.linear`).
    """
    check_fallback(names.op, fallback)  # before it is hashed
    out_dtype = x.dtype if out_dtype is None else out_dtype
    key = (names, out_dtype, fallback, *signature(x, w, bias, residual))
    return PLANS.get(key, names, x, w, out_dtype, fallback, bias, residual)


def run_gemm(names: Operands, x, w, out_dtype, fallback, bias=None, residual=None):
    """The registered operators' implementation: :func:`plan` of the call, run on it."""
    return plan(names, x, w, out_dtype, fallback, bias, residual)(x, w, bias, residual)
