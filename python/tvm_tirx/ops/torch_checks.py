"""The rules a torch GEMM call must meet to run on the Hopper GEMM kernel, each with its error.

:func:`check_shapes` and :func:`check_dtypes` hold for every call (torch itself would refuse
such shapes and dtypes);
:func:`gemm_key` raises :class:`UnsupportedInput` for an input the kernel does not take
(device, GPU, dtype, layout, alignment, size), which ``fallback="torch"`` turns into a
torch computation.  Every message names the operator, the argument and the rule.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch

from ..kernels.gemm import BM, BN
from ..kernels.gemm.planner import choose_gemm
from ..kernels.gemm.tiles import SMS
from .check_mode import ARCH, collected
from .gemm_kernels import GemmSpec

__all__ = ["UnsupportedInput", "Operands", "check_shapes", "check_dtypes", "gemm_key", "bias_dtype", "sm_count",
           "device_target",
           "INT32_ELEMENTS"]

#: The kernel's tensors are indexed with int32 element offsets: each may hold at most this many
#: elements (``2**31 - 129``; one more is refused).
INT32_ELEMENTS = 2**31 - 129
_INPUTS = {torch.bfloat16: "bfloat16"}
_OUTPUTS = {torch.bfloat16: "bfloat16", torch.float32: "float32"}
_ALIGN = 16  # bytes: the kernel's tensors are declared align=16 (TMA base addresses)


class UnsupportedInput(ValueError):
    """An input the tvm_tirx kernel does not take (its message names the argument and the
    rule); ``fallback="torch"`` computes such a call with torch instead."""


class Operands(NamedTuple):
    """How an operator names its two operands in messages.

    ``x`` is A (``(*, k)``); ``w`` is the (n, k) row-major B the kernel reads, as the user
    passed it: ``"weight"`` for ``linear``, ``"b.t()"`` for ``matmul``, whose ``b`` is
    (k, n); ``w_layout`` says how that operand must be laid out; ``w_copy`` is the
    expression, in the user's terms, of a K-major copy of it (default ``"{w}.contiguous()"``).
    """

    op: str
    x: str
    w: str
    w_layout: str
    w_copy: str = ""


def check_shapes(names: Operands, x, w) -> None:
    """Refuse operands whose shapes do not multiply (always; with or without fallback).

    Raises
    ------
    ValueError
        ``x`` is 0-d, ``w`` is not 2-d, or their ``k`` differ.
    """
    if x.dim() < 1:
        raise ValueError(f"{names.op}: {names.x} must have at least one dimension (*, k), got a 0-d tensor")
    if w.dim() != 2:
        raise ValueError(f"{names.op}: {names.w} must be 2-d (n, k), got shape {tuple(w.shape)}")
    if x.shape[-1] != w.shape[1]:
        raise ValueError(f"{names.op}: {names.x} (*, k) and {names.w} (n, k) must have the same k, got "
                         f"{names.x} {tuple(x.shape)} and {names.w} {tuple(w.shape)}")


def check_dtypes(names: Operands, x, w, out_dtype) -> None:
    """Refuse dtypes torch's own ``linear`` refuses (always; with or without fallback).

    ``out_dtype`` is the resolved one (``x.dtype`` for ``None``).

    Raises
    ------
    TypeError
        ``x`` or ``w`` not a floating-point tensor (integer, bool, complex), ``x`` and ``w``
        of different dtypes, or ``out_dtype`` not a floating-point dtype.
    """
    for name, t in ((names.x, x), (names.w, w)):
        if not t.dtype.is_floating_point:
            raise TypeError(f"{names.op}: {name} must be a floating-point tensor, got {t.dtype}")
    if x.dtype != w.dtype:
        raise TypeError(f"{names.op}: {names.x} and {names.w} must have the same dtype (as "
                        f"torch.nn.functional.linear requires), got {x.dtype} and {w.dtype}")
    if not out_dtype.is_floating_point:
        raise TypeError(f"{names.op}: out_dtype must be a floating-point dtype, got {out_dtype}")


@functools.lru_cache(maxsize=None)
def _capability(index: int) -> tuple:
    return tuple(torch.cuda.get_device_capability(index))


def device_target(op: str, device) -> str:
    """The arch the kernel is compiled for on the CUDA ``device``: ``"sm_90a"`` (H100, H200).

    Raises
    ------
    UnsupportedInput
        The GPU is not compute capability 9.0 (the kernel's wgmma, TMA multicast and
        setmaxnreg are ``sm_90a`` instructions).
    """
    if collected() is not None:  # ops.check: any device is taken for an H200
        return ARCH
    major, minor = _capability(device.index if device.index is not None else torch.cuda.current_device())
    if (major, minor) != (9, 0):
        raise UnsupportedInput(f"{op}: the kernel needs a Hopper GPU (compute capability 9.0, sm_90a); {device} "
                               f"is sm_{major}{minor}")
    return "sm_90a"


def _check_device(names: Operands, x, w) -> None:
    for name, t in ((names.x, x), (names.w, w)):
        if t.device.type != "cuda" and collected() is None:  # ops.check: any device
            raise UnsupportedInput(f"{names.op}: {name} must be a CUDA tensor, got one on {t.device}")
    if x.device != w.device:
        raise UnsupportedInput(f"{names.op}: {names.x} and {names.w} must be on the same GPU, got {x.device} "
                               f"and {w.device}")


def _check_dtypes(names: Operands, x, w, out_dtype) -> None:
    for name, t in ((names.x, x), (names.w, w)):
        if t.dtype not in _INPUTS:
            raise UnsupportedInput(f"{names.op}: {name} must be torch.bfloat16, got {t.dtype}")
    if out_dtype not in _OUTPUTS:
        raise UnsupportedInput(f"{names.op}: out_dtype must be torch.bfloat16 or torch.float32, got {out_dtype}")


def _major(t, inner: str) -> str | None:
    """``"k"`` for a contiguous ``t``, ``inner`` for a 2-d ``t`` whose transpose is
    contiguous (stored with its other axis innermost), else None."""
    if t.is_contiguous():
        return "k"
    return inner if t.dim() == 2 and t.t().is_contiguous() else None


def _majors(names: Operands, x, w) -> tuple:
    """``(a_major, b_major)`` of ``x`` and ``w`` (:func:`_major`), or the layout rule's error."""
    a_major, b_major = _major(x, "m"), _major(w, "n")
    if a_major is None:
        raise UnsupportedInput(f"{names.op}: {names.x} must be contiguous (rows of k elements back to back, "
                               f"k innermost) or, 2-d, the transpose of a contiguous (k, m) tensor, got shape "
                               f"{tuple(x.shape)} and strides {x.stride()}; pass {names.x}.contiguous()")
    if b_major is None:
        raise UnsupportedInput(f"{names.op}: {names.w} must be {names.w_layout}, got {names.w} of shape "
                               f"{tuple(w.shape)} and strides {w.stride()}")
    return a_major, b_major


def _check_rows(names: Operands, x, w, a_major: str, b_major: str) -> None:
    """Each operand's innermost extent (its row) takes a multiple of 16 bytes (the TMA's rule)."""
    (n, k), size = w.shape, x.element_size()
    k_major = [name for name, major in ((names.x, a_major), (names.w, b_major)) if major == "k"]
    if k_major and k * size % _ALIGN:
        raise UnsupportedInput(f"{names.op}: k = {k}: rows of {' and '.join(k_major)} take k * {size} = "
                               f"{k * size} bytes, and the kernel's TMA loads need a multiple of {_ALIGN} bytes "
                               f"(k a multiple of {_ALIGN // size}); pad k with zeros")
    copies = ((names.x, a_major, x.shape[0], f"{names.x}.contiguous()"),
              (names.w, b_major, n, names.w_copy or f"{names.w}.contiguous()"))
    for name, major, extent, copy in copies:
        if major != "k" and extent * size % _ALIGN:
            raise UnsupportedInput(f"{names.op}: {major} = {extent}: {name} is the transpose of a contiguous "
                                   f"({'k, ' + major}) tensor whose rows take {major} * {size} = {extent * size} "
                                   f"bytes, and the kernel's TMA loads need a multiple of {_ALIGN} bytes ({major} "
                                   f"a multiple of {_ALIGN // size}); pass {copy} instead (k innermost, a copy)")


def _check_layout(names: Operands, x, w) -> tuple:
    """The rules of the operands' layouts; returns ``(a_major, b_major)`` (:func:`_majors`)."""
    a_major, b_major = _majors(names, x, w)
    _check_rows(names, x, w, a_major, b_major)
    for name, t in ((names.x, x), (names.w, w)):
        if t.data_ptr() % _ALIGN:
            raise UnsupportedInput(f"{names.op}: {name} must start at a {_ALIGN}-byte aligned address, got "
                                   f"{t.data_ptr():#x} (a view at storage offset {t.storage_offset()})")
    return a_major, b_major


def _check_sizes(names: Operands, m: int, n: int, k: int) -> None:
    for what, count in ((f"{names.x} (m x k)", m * k), (f"{names.w} (n x k)", n * k), ("the output (m x n)", m * n)):
        if count > INT32_ELEMENTS:
            raise UnsupportedInput(f"{names.op}: {what} has {count} elements; the kernel indexes with int32 "
                                   f"offsets, so at most {INT32_ELEMENTS}")


def gemm_key(names: Operands, x, w, out_dtype, fused: bool = False, plan_k: int | None = None) -> GemmSpec:
    """The :class:`~tvm_tirx.kernels.gemm.spec.GemmSpec` of the kernel that computes ``x (*, k) @ w (n, k)^T`` in ``out_dtype``.

    The rules, in the order checked: both operands CUDA tensors on one device of compute
    capability 9.0; both ``torch.bfloat16``; ``out_dtype`` ``torch.bfloat16`` or
    ``torch.float32``; ``x`` contiguous (the key's ``a_major`` ``"k"``) or, 2-d, its
    transpose contiguous (``"m"``: the kernel reads ``x.t()``, stored ``(k, m)``); ``w``
    contiguous (``b_major`` ``"k"``) or its transpose contiguous (``"n"``: the kernel reads
    ``w.t()``, stored ``(k, n)``); each operand's rows a multiple of 16 bytes (the TMA's
    row stride rule: ``k * 2`` for a K-major operand, ``m * 2`` or ``n * 2`` for the
    others); both base pointers 16-byte aligned; at most
    :data:`INT32_ELEMENTS` (``2**31 - 129``) elements in each tensor (int32 offsets).
    The key's ``block_n`` (and ``block_m``) is
    :func:`~tvm_tirx.kernels.gemm.planner.choose_gemm`'s tile for ``m`` (the rows of
    ``x``), ``n`` and the device's SM count (``fused``: the kernel will fuse a bias or a
    residual, which narrows the cooperative tiles it may take; ``plan_k``: the ``k`` the
    planner is asked with, None for ``w``'s: a plan for operands padded along K is the
    planner's, and the user's :func:`~tvm_tirx.kernels.gemm.planner.override`, for the
    caller's ``k``).

    Raises
    ------
    UnsupportedInput
        The first rule broken, naming the argument.
    """
    _check_device(names, x, w)
    arch = device_target(names.op, x.device)
    _check_dtypes(names, x, w, out_dtype)
    a_major, b_major = _check_layout(names, x, w)
    n, k = w.shape
    m = x.numel() // k if k else 0
    _check_sizes(names, m, n, k)
    plain = x.dtype == torch.bfloat16 and not fused  # the only products the split-K kernel has
    choice = choose_gemm(m, int(n), int(k if plan_k is None else plan_k), _OUTPUTS[out_dtype], sm_count(x.device),
                         small_m=False,
                         fused=fused, split_k=None if plain else False) if m and n and k else None
    tile = choice if isinstance(choice, dict) else {}  # a SmallMPlan: gemm_plans takes it
    splits = tile.get("splits", 1) if plain else 1  # an override's splits serve its plain calls only
    return GemmSpec(n=int(n), k=int(k), in_dtype=_INPUTS[x.dtype], out_dtype=_OUTPUTS[out_dtype], arch=arch,
                   block_n=tile.get("block_n", BN), a_major=a_major, b_major=b_major,
                   block_m=tile.get("block_m", BM), splits=splits)


#: bias dtypes the kernel adds in its epilogue (the Bias stage, kernels/parts/epilogue/stages.py)
_BIASES = {torch.bfloat16: "bfloat16", torch.float32: "float32"}


def bias_dtype(names: Operands, bias, x, n: int) -> str:
    """The kernel's name of ``bias``'s dtype, after the rules the fused bias has: a
    contiguous ``(n,)`` tensor of ``torch.bfloat16`` or ``torch.float32`` on ``x``'s device.

    Raises
    ------
    UnsupportedInput
        The first rule broken, naming ``bias``.
    """
    if bias.device != x.device:
        raise UnsupportedInput(f"{names.op}: bias must be on {names.x}'s device {x.device}, got {bias.device}")
    if tuple(bias.shape) != (n,):
        raise UnsupportedInput(f"{names.op}: bias must have shape ({n},) (n), got {tuple(bias.shape)}")
    if bias.dtype not in _BIASES:
        raise UnsupportedInput(f"{names.op}: bias must be torch.bfloat16 or torch.float32, got {bias.dtype}")
    if not bias.is_contiguous():
        raise UnsupportedInput(f"{names.op}: bias must be contiguous, got strides {bias.stride()}")
    return _BIASES[bias.dtype]


def check_residual(names: Operands, residual, x, n: int, out_dtype) -> None:
    """The rules of a residual the kernel adds in its epilogue: a contiguous tensor of the
    output's shape ``(*x.shape[:-1], n)`` and dtype, on ``x``'s device, starting at a
    4-byte aligned address (read as pairs).

    Raises
    ------
    UnsupportedInput
        The first rule broken, naming ``residual``.
    """
    shape = (*x.shape[:-1], n)
    if residual.device != x.device:
        raise UnsupportedInput(f"{names.op}: residual must be on {names.x}'s device {x.device}, got {residual.device}")
    if tuple(residual.shape) != shape:
        raise UnsupportedInput(f"{names.op}: residual must have the output's shape {shape}, got "
                               f"{tuple(residual.shape)}")
    if residual.dtype != out_dtype:
        raise UnsupportedInput(f"{names.op}: residual must have the output's dtype {out_dtype}, got {residual.dtype}")
    if not residual.is_contiguous():
        raise UnsupportedInput(f"{names.op}: residual must be contiguous, got strides {residual.stride()}")
    if residual.data_ptr() % 4:  # the kernel reads a bf16 residual as b32 pairs
        raise UnsupportedInput(f"{names.op}: residual must start at a 4-byte aligned address, got "
                               f"{residual.data_ptr():#x} (a view at storage offset {residual.storage_offset()})")


def sm_count(device) -> int:
    """SMs of the CUDA ``device`` (:data:`~tvm_tirx.kernels.gemm.tiles.SMS`, an H200's
    132, for any other device)."""
    if device.type != "cuda" or collected() is not None:
        return SMS
    return _multiprocessors(device.index if device.index is not None else torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _multiprocessors(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count
