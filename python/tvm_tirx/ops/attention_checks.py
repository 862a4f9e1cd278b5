"""The rules a torch attention call must meet to run on the tvm_tirx attention kernel.

:func:`check_shapes` and :func:`check_dtypes` hold for every call (with or without
fallback: torch's SDPA refuses such inputs too); :func:`attention_key` raises
:class:`~tvm_tirx.ops.torch_checks.UnsupportedInput` for an input the kernel does not
take (device, GPU, dtype, head_dim, layout, alignment, size), which ``fallback="torch"``
turns into a torch computation.  Every message names the operator, the argument and the rule.
"""

from __future__ import annotations

import math
import numbers

import torch

from ..kernels.attention import HEAD_DIMS, choose_attention
from .attention_kernels import AttentionKey, kernel_plan
from .check_mode import collected
from .torch_checks import INT32_ELEMENTS, UnsupportedInput, device_target

__all__ = ["OP", "LAYOUTS", "as_bshd", "check_shapes", "check_devices", "check_dtypes", "resolve_scale", "attention_key"]

OP = "tvm_tirx.ops.attention"
#: "bshd": (batch, seq, heads, head_dim), the kernel's own layout; "bhsd": (batch, heads,
#: seq, head_dim), torch SDPA's, accepted as the transposed view of a bshd tensor
LAYOUTS = ("bshd", "bhsd")
_DTYPES = {torch.bfloat16: "bfloat16", torch.float16: "float16"}
_ALIGN = 16


def as_bshd(t, layout: str):
    """``t`` seen as (batch, seq, heads, head_dim): itself, or ``t.transpose(1, 2)`` for bhsd."""
    return t if layout == "bshd" else t.transpose(1, 2)


def check_shapes(q, k, v, layout: str) -> None:
    """Refuse shapes that do not make an attention (always).

    Raises
    ------
    ValueError
        ``layout`` not in :data:`LAYOUTS`; ``k`` or ``v`` on another device than ``q``
        (:func:`check_devices`); ``q``, ``k`` or ``v`` not 4-d; ``k`` and ``v`` of
        different shapes; batch or head_dim differing from ``q``'s; ``q``'s heads not a
        multiple of ``k``'s.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"{OP}: layout must be one of {LAYOUTS}, got {layout!r}")
    check_devices(OP, (("q", q), ("k", k), ("v", v)))
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"{OP}: {name} must be 4-d ({layout}), got shape {tuple(t.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"{OP}: k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    (b, _, h, d), (bk, _, hk, dk) = as_bshd(q, layout).shape, as_bshd(k, layout).shape
    if b != bk or d != dk:
        raise ValueError(f"{OP}: q and k must have the same batch and head_dim, got q {tuple(q.shape)} and k "
                         f"{tuple(k.shape)} ({layout})")
    if hk == 0 or h % hk:
        raise ValueError(f"{OP}: q's {h} heads must be a multiple of k's {hk} (GQA), got q {tuple(q.shape)} and "
                         f"k {tuple(k.shape)} ({layout})")


def check_devices(op: str, tensors) -> None:
    """Refuse tensors on another device than the first of ``tensors`` (``(name, tensor)``
    pairs): one meta tensor among real ones would otherwise send the call to the fake
    implementation, which returns memory nothing wrote.

    Raises
    ------
    ValueError
        The first tensor on another device, named.
    """
    first_name, first = tensors[0]
    for name, t in tensors[1:]:
        if t.device != first.device:
            raise ValueError(f"{op}: {name} must be on {first_name}'s device {first.device}, got {t.device}")


def check_dtypes(q, k, v) -> None:
    """Refuse dtypes SDPA refuses (always).

    Raises
    ------
    TypeError
        A tensor not floating-point (or of 8 bits: float8), or q, k and v not of one dtype.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not t.dtype.is_floating_point or t.itemsize < 2:
            raise TypeError(f"{OP}: {name} must be a floating-point tensor of 16 bits or more (as SDPA takes), "
                            f"got {t.dtype}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"{OP}: q, k and v must have one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")


def resolve_scale(scale, head_dim: int) -> float:
    """``scale``, or ``1 / sqrt(head_dim)`` for None.

    Raises
    ------
    ValueError
        ``scale`` not a positive finite number.
    """
    if scale is None:
        return 1.0 / math.sqrt(head_dim) if head_dim else 1.0
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not 0 < float(scale) < math.inf:
        raise ValueError(f"{OP}: scale must be a positive number or None, got {scale!r}")
    return float(scale)


def _check_device(tensors) -> None:
    for name, t in tensors:
        if t.device.type != "cuda" and collected() is None:  # ops.check: any device
            raise UnsupportedInput(f"{OP}: {name} must be a CUDA tensor, got one on {t.device}")
        if t.device != tensors[0][1].device:
            raise UnsupportedInput(f"{OP}: q, k and v must be on one GPU, got {name} on {t.device}")


def _check_tensors(tensors, layout: str) -> None:
    for name, t in tensors:
        if t.dtype not in _DTYPES:
            raise UnsupportedInput(f"{OP}: {name} must be torch.bfloat16 or torch.float16, got {t.dtype}")
        if not as_bshd(t, layout).is_contiguous():
            what = "contiguous" if layout == "bshd" else "the transposed view of a contiguous (batch, seq, heads, head_dim)"
            raise UnsupportedInput(f"{OP}: {name} ({layout}) must be {what} tensor, got shape {tuple(t.shape)} and "
                                   f"strides {t.stride()}")
        if t.data_ptr() % _ALIGN:
            raise UnsupportedInput(f"{OP}: {name} must start at a {_ALIGN}-byte aligned address, got {t.data_ptr():#x}")
        if t.numel() > INT32_ELEMENTS:
            raise UnsupportedInput(f"{OP}: {name} has {t.numel()} elements; the kernel indexes with int32 offsets, "
                                   f"so at most {INT32_ELEMENTS}")


def attention_key(q, k, v, causal: bool, scale: float, layout: str) -> AttentionKey:
    """The :class:`AttentionKey` of the kernel for this call (its plan is
    :func:`~tvm_tirx.kernels.attention.choose_attention`'s for ``q``'s length, through
    :func:`~tvm_tirx.ops.attention_kernels.kernel_plan`).

    The rules, in the order checked: ``q``, ``k`` and ``v`` CUDA tensors on one GPU of
    compute capability 9.0, each ``torch.bfloat16`` or ``torch.float16``, contiguous in
    the (batch, seq, heads, head_dim) order (``layout="bhsd"``: its transposed view),
    16-byte aligned, at most :data:`~tvm_tirx.ops.torch_checks.INT32_ELEMENTS` elements;
    head_dim 64, 128 or 256; ``q`` and ``k`` of one sequence length.

    Raises
    ------
    UnsupportedInput
        The first rule broken, naming the argument.
    """
    tensors = (("q", q), ("k", k), ("v", v))
    _check_device(tensors)
    arch = device_target(OP, q.device)
    _check_tensors(tensors, layout)
    (_, lq, heads, head_dim), (_, lk, kv_heads, _) = as_bshd(q, layout).shape, as_bshd(k, layout).shape
    if head_dim not in HEAD_DIMS:
        raise UnsupportedInput(f"{OP}: head_dim must be one of {sorted(HEAD_DIMS)}, got {head_dim}")
    if lq != lk:
        raise UnsupportedInput(f"{OP}: q and k must have one sequence length (the kernel has one), got {lq} and {lk}")
    plan = kernel_plan(int(head_dim), bool(causal), choose_attention(int(head_dim), bool(causal), int(lq)))
    return AttentionKey(int(heads), int(kv_heads), int(head_dim), bool(causal), _DTYPES[q.dtype], scale, arch, plan)
