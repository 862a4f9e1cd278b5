"""The compiled attention backward kernels the torch operator launches, and the route to them.

One kernel per :class:`AttentionBackwardKey` (heads, kv_heads, head_dim, causal, dtype,
scale, arch, deterministic, section), made by
:func:`~tvm_tirx.kernels.attention_backward.make_attention_backward` with a run-time batch
and sequence length, compiled on first use and kept for the process (:class:`.KernelTable`).
With :data:`SECTIONS` on, the section follows the call's length, so one head configuration
may compile one kernel per divisor of ``kv_heads`` its lengths ask for.

**The route is on by default** (:data:`ROUTE`): on the H200 (2026-12-05) the kernel's GPU
tests passed (every length from one kernel, GQA, MQA, float16, 2-4 stages, NaN-filled
outputs, the forward kernel's O and LSE), compute-sanitizer's memcheck found no error in
them, and through the operator it ran 12-37x faster than the torch backward by query
blocks.  The operator's backward takes the kernel for every call it accepts
(:func:`~.attention_backward_ops.backward_key`) and the torch backward
(:mod:`.attention_blocks`) for the rest.  ``TVM_TIRX_ATTENTION_BACKWARD=0`` in the
environment (read at import) or setting :data:`ROUTE` to False turns it off.

This module does not import torch.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass

from tvm.script import tirx as T

from ..build.kernel import compile as _tirx_compile
from ..kernels.attention_backward import DETERMINISTIC_PLANS, HEAD_DIMS, PLANS, make_attention_backward
from ..kernels.attention_backward.config import takes_scores_ahead
from ..kernels.attention_backward.dsum import make_dsum
from ..kernels.attention.config import DTYPES
from .attention_kernels import AttentionOperands, f32_bits
from .kernel_table import KernelTable

__all__ = ["ROUTE", "DSUM_ROUTE", "SECTIONS", "SCORES_AHEAD", "SECTION_HEAD_DIMS", "HEAD_DIMS", "AttentionBackwardKey",
           "plan", "backward_prim_func", "backward_kernel", "on_clear_kernels", "dsum_kernel", "cached_kernels",
           "clear_kernels"]

#: Whether the operator's backward takes the kernel (on; ``TVM_TIRX_ATTENTION_BACKWARD=0`` turns it off).
ROUTE = os.environ.get("TVM_TIRX_ATTENTION_BACKWARD", "1") != "0"
#: Whether the kernel's ``Dsum = rowsum(dO * O)`` comes from :func:`dsum_kernel` (one pass over
#: dO and O) rather than torch's float32 copies of both.  On: its GPU tests passed and it made
#: the operator's backward 1.11-1.26x faster per call (H100, 2026-12-05, ``bench/attention.py
#: --dsum``, every row of ``KERNEL_ROWS``); ``TVM_TIRX_ATTENTION_DSUM=0`` turns it off.
DSUM_ROUTE = os.environ.get("TVM_TIRX_ATTENTION_DSUM", "1") != "0"
#: Whether a causal call's kernel launches the longest walks first in sections a wave wide
#: (``make_attention_backward(longest_first=True, section=wave_section(kv_heads, seq_len))``), at
#: the head_dims of :data:`SECTION_HEAD_DIMS` (for the deterministic kernel: see
#: :data:`DETERMINISTIC_SECTIONS`).
#: On: measured on an H100 (2026-12-07, ``tools/device_batch.sh sections-quick``, the kernel alone,
#: us, default order / sections): 4 x 32 x 8 x 2048 causal 960 / 819, 2 x 32 x 32 x 3000 887 / 866,
#: 1 x 32 x 32 x 8192 2945 / 2795.  ``TVM_TIRX_ATTENTION_SECTIONS=0`` in the environment (read at
#: import) turns it off.
SECTIONS = os.environ.get("TVM_TIRX_ATTENTION_SECTIONS", "1") != "0"
#: Whether, with :data:`SECTIONS`, the deterministic kernel takes the sections too.  On: on an H100
#: (2026-12-07, ``bench/attention.py --deterministic``, per call through the operator, us, default
#: order / sections, the same bits): 1 x 32 x 32 x 8192 x 128 causal 8732 / 8194, 4 x 32 x 8 x 2048 x
#: 128 causal 2897 / 2749, 4 x 32 x 32 x 4096 x 64 causal 7933 / 6616; its GPU tests passed in sections
#: of one head.  ``TVM_TIRX_ATTENTION_DETERMINISTIC_SECTIONS=0`` (read at import) turns it off.
DETERMINISTIC_SECTIONS = os.environ.get("TVM_TIRX_ATTENTION_DETERMINISTIC_SECTIONS", "1") != "0"
#: Whether the kernels whose plan is overlapped (head_dim 128) issue the next ``S^T`` under ``dK``
#: (``make_attention_backward(scores_ahead=True)``; not the deterministic kernel at head_dim 128, which
#: refuses it; :attr:`AttentionBackwardKey.scores_ahead`).  Off: built on the CPU only (2026-12-07),
#: neither GPU-tested nor timed yet; ``TVM_TIRX_ATTENTION_SCORES_AHEAD=1`` in the environment (read at
#: import) turns it on, for those runs.
SCORES_AHEAD = os.environ.get("TVM_TIRX_ATTENTION_SCORES_AHEAD", "0") == "1"
#: head_dims whose causal calls take sections (where they were measured faster than the default order; at
#: head_dim 64, H100, 2026-12-07, the kernel alone at 4 x 32 x 32 x 4096 causal: "columns"/4 2067 -> 2015 us,
#: "rows"/3 1783 -> 1755)
SECTION_HEAD_DIMS = (64, 128)


@dataclass(frozen=True)
class AttentionBackwardKey(AttentionOperands):
    """What one compiled backward kernel depends on: the
    :class:`~.attention_kernels.AttentionOperands` of the attention (``head_dim`` one of
    :data:`HEAD_DIMS`; ``dtype`` also dK's and dV's) and

    Attributes
    ----------
    deterministic : bool
        Whether the kernel adds dQ's partial sums in a fixed order
        (``make_attention_backward(deterministic=True)``; the operator asks for it under
        ``torch.use_deterministic_algorithms(True)``).
    section : int or None
        With an int, the kernel launches the longest causal walks first in sections of that
        many key/value heads (``make_attention_backward(longest_first=True, section=...)``;
        the operator asks for :func:`~tvm_tirx.kernels.attention_backward.wave_section` of
        the call's length on causal calls at :data:`SECTION_HEAD_DIMS` while :data:`SECTIONS`
        is on, and for a deterministic key while :data:`DETERMINISTIC_SECTIONS` is on too);
        None: the default launch order.
    scores_ahead : bool
        Whether an overlapped plan issues the next ``S^T`` under ``dK``
        (``make_attention_backward(scores_ahead=True)``; the operator asks for it while
        :data:`SCORES_AHEAD` is on).
    """

    deterministic: bool = False
    section: int | None = None
    scores_ahead: bool = False


def _name(key: AttentionBackwardKey) -> str:
    name = (f"tvm_tirx_attention_backward_h{key.heads}_kv{key.kv_heads}_d{key.head_dim}_"
            f"{'causal' if key.causal else 'full'}_{DTYPES[key.dtype]}")
    if f32_bits(key.scale) != f32_bits(1.0 / math.sqrt(key.head_dim)):
        name += f"_s{f32_bits(key.scale)}"
    name += f"_lpt{key.section}" if key.section is not None else ""
    name += "_ahead" if plan(key).get("scores_ahead") else ""
    return name + ("_deterministic" if key.deterministic else "")


def plan(key: AttentionBackwardKey) -> dict:
    """``make_attention_backward``'s ``dq_split`` / ``stages`` / ``overlap`` for ``key``: its
    head_dim's :data:`~tvm_tirx.kernels.attention_backward.PLANS`, or for a deterministic key
    :data:`~tvm_tirx.kernels.attention_backward.DETERMINISTIC_PLANS` where that has the head_dim;
    with ``key.scores_ahead``, an overlapped plan gains ``scores_ahead=True`` where the kernel
    takes it (a new dict; the tables are not changed)."""
    table = DETERMINISTIC_PLANS if key.deterministic and key.head_dim in DETERMINISTIC_PLANS else PLANS
    chosen = dict(table[key.head_dim])
    if key.scores_ahead and takes_scores_ahead(chosen.get("overlap", False), key.deterministic, key.head_dim):
        chosen["scores_ahead"] = True
    return chosen


@functools.lru_cache(maxsize=None)
def backward_prim_func(key: AttentionBackwardKey):
    """``make_attention_backward`` of ``key`` with a run-time batch and sequence length
    and the ``dq_split`` / ``stages`` / ``overlap`` of :data:`~tvm_tirx.kernels.attention_backward.PLANS`
    (a deterministic key: :data:`~tvm_tirx.kernels.attention_backward.DETERMINISTIC_PLANS` where it has one),
    named ``tvm_tirx_attention_backward_h{heads}_kv{kv_heads}_d{head_dim}_{causal|full}_{bf16|f16}``
    (``_s{bits}`` appended for a scale other than ``1 / sqrt(head_dim)``, ``_lpt{section}``
    for a section, ``_ahead`` for ``scores_ahead`` (:data:`SCORES_AHEAD`), then
    ``_deterministic`` for that mode).

    Raises
    ------
    ValueError
        What ``make_attention_backward`` refuses.
    """
    func = make_attention_backward(T.dynamic("B"), T.dynamic("L"), key.heads, key.head_dim, kv_heads=key.kv_heads,
                                   causal=key.causal, scale=key.scale, dtype=key.dtype,
                                   deterministic=key.deterministic, longest_first=key.section is not None,
                                   section=key.section, **plan(key))
    return func.with_attr("global_symbol", _name(key))


def _compile(key: AttentionBackwardKey):
    return _tirx_compile(backward_prim_func(key), target="cuda", arch=key.arch)


_TABLE = KernelTable(lambda key: _compile(key))  # _compile looked up at each compile (tests replace it)


def backward_kernel(key: AttentionBackwardKey):
    """The compiled kernel of ``key``, called as ``kernel(q, k, v, do, lse, dsum, dq_acc,
    dk, dv)`` with contiguous ``(batch, seq, heads, head_dim)`` CUDA tensors (k, v, dk, dv
    with ``kv_heads``), ``lse`` and ``dsum`` ``(batch, heads, seq)`` float32 and
    ``dq_acc`` like q in float32, zeroed (the kernel adds into it); a deterministic key's
    kernel takes an eleventh, ``order``, int32 ``(batch, heads, ceil(seq / 64))`` zeroed.

    Raises
    ------
    ValueError
        What ``make_attention_backward`` refuses.
    """
    return _TABLE.get(key)


def _compile_dsum(key: tuple):
    heads, head_dim, dtype, arch = key
    func = make_dsum(T.dynamic("B"), T.dynamic("L"), heads, head_dim, dtype, zero_dq=True)
    name = f"tvm_tirx_attention_dsum_zero_dq_h{heads}_d{head_dim}_{DTYPES[dtype]}"
    return _tirx_compile(func.with_attr("global_symbol", name), target="cuda", arch=arch)


_DSUM = KernelTable(lambda key: _compile_dsum(key))


def dsum_kernel(key: AttentionBackwardKey):
    """The compiled :func:`~tvm_tirx.kernels.attention_backward.dsum.make_dsum` of ``key``'s
    heads, head_dim and dtype (run-time batch and length, ``zero_dq=True``), called as
    ``kernel(do, o, dsum, dq_acc)``: do and o contiguous ``(batch, seq, heads, head_dim)``,
    dsum ``(batch, heads, seq)`` float32 (overwritten), dq_acc float32 like do (zeroed)."""
    return _DSUM.get((key.heads, key.head_dim, key.dtype, key.arch))


def cached_kernels() -> dict:
    """A copy of this process's ``{AttentionBackwardKey: Kernel}`` table."""
    return _TABLE.cached()


def on_clear_kernels(forget) -> None:
    """Call ``forget()`` whenever :func:`clear_kernels` runs (the backward's plans hold
    these kernels)."""
    _TABLE.on_clear(forget)


def clear_kernels() -> None:
    """Forget this process's compiled backward kernels and every plan holding one (the
    on-disk compile cache is kept)."""
    _TABLE.clear()
    _DSUM.clear()
