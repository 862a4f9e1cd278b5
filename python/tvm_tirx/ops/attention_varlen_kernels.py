"""The compiled varlen attention kernels (``make_attention(..., varlen=True)``) that
:func:`tvm_tirx.ops.attention_varlen` launches when its route is on.

One kernel per :class:`VarlenKey` (the :class:`~.attention_kernels.AttentionOperands` and
the schedule), with a run-time number of sequences and of packed rows, compiled on first
use and kept for the process (:class:`.KernelTable`).  The varlen kernel runs one CTA per
(query block, head, sequence) on the one-CTA-per-tile grid (it has no persistent form).

**The route is on by default** (:data:`ROUTE`): its GPU tests passed on the H200
(2026-12-05: packed calls equal to a call per sequence, head_dim 64/128/256, float16,
malformed ``cu_seqlens`` writing no row outside their sequences) and through
``ops.attention_varlen`` it ran at 1.14x (geometric mean; 0.86-1.59x) the faster of FA2's
and cuDNN's varlen forward (``bench/attention.py --varlen``).  The tile checker proves its
every store in bounds; compute-sanitizer has not yet run on it.
``TVM_TIRX_ATTENTION_VARLEN=0`` in the environment (read at import) or setting
:data:`ROUTE` to False makes ``attention_varlen`` launch the batched kernel once per
sequence instead.

This module does not import torch.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace

from tvm.script import tirx as T

from ..build.kernel import compile as _tirx_compile
from ..kernels.attention import AttentionPlan, choose_attention, make_attention
from .attention_kernels import AttentionOperands, _name
from .kernel_table import KernelTable

__all__ = ["ROUTE", "VarlenKey", "varlen_plan", "varlen_prim_func", "varlen_kernel", "cached_kernels",
           "clear_kernels"]

#: Whether ``attention_varlen`` takes the varlen kernel (on; ``TVM_TIRX_ATTENTION_VARLEN=0`` turns it off).
ROUTE = os.environ.get("TVM_TIRX_ATTENTION_VARLEN", "1") != "0"


@dataclass(frozen=True)
class VarlenKey(AttentionOperands):
    """What one compiled varlen kernel depends on: the
    :class:`~.attention_kernels.AttentionOperands` and

    Attributes
    ----------
    plan : AttentionPlan
        The schedule (:func:`varlen_plan`), never persistent.
    """

    plan: AttentionPlan


def varlen_plan(head_dim: int, causal: bool, max_seqlen: int) -> AttentionPlan:
    """The schedule :func:`~tvm_tirx.kernels.attention.choose_attention` gives rows of
    ``max_seqlen`` keys, on the one-CTA-per-tile grid, storing O per thread (a TMA store
    would write whole 64-row boxes, past a sequence's end into the next one's rows), in two
    consumer warpgroups (the packed-sequence grid counts query blocks of 128 rows; the
    table gives head_dim 64 three where it can).  ``make_attention(..., varlen=True)``
    refuses the other three (``persistent``, ``tma_store``, ``consumers=3``); the rest of
    the plan (schedule, stages, ``block_n``) is kept.

    Raises
    ------
    ValueError
        What ``choose_attention`` refuses.
    """
    return replace(choose_attention(head_dim, causal, max_seqlen), persistent=False, persistent_rows=None,
                   tma_store=False, consumers=2, o_staging=None)


@functools.lru_cache(maxsize=None)
def varlen_prim_func(key: VarlenKey):
    """``make_attention(..., varlen=True)`` of ``key`` with a run-time number of sequences
    and of packed rows, named as the batched kernel of its plan with ``_varlen`` appended.

    Raises
    ------
    ValueError
        What ``make_attention`` refuses.
    """
    func = make_attention(T.dynamic("N"), T.dynamic("T"), key.heads, key.head_dim, kv_heads=key.kv_heads,
                          causal=key.causal, scale=key.scale, dtype=key.dtype, varlen=True, **key.plan.options())
    name = _name(key.heads, key.kv_heads, key.head_dim, key.causal, key.dtype, key.scale, key.plan) + "_varlen"
    return func.with_attr("global_symbol", name)


_TABLE = KernelTable(lambda key: _tirx_compile(varlen_prim_func(key), target="cuda", arch=key.arch))


def varlen_kernel(key: VarlenKey):
    """The compiled kernel of ``key``, called as ``kernel(q, k, v, o, lse, cu_seqlens,
    max_seqlen)``: packed ``(total, heads, head_dim)`` CUDA tensors (k, v with
    ``kv_heads``), ``lse`` ``(heads, total)`` float32, ``cu_seqlens`` ``(batch + 1,)``
    int32 and ``max_seqlen`` an int.

    Raises
    ------
    ValueError
        What ``make_attention`` refuses.
    """
    return _TABLE.get(key)


def cached_kernels() -> dict:
    """A copy of this process's ``{VarlenKey: Kernel}`` table."""
    return _TABLE.cached()


def clear_kernels() -> None:
    """Forget this process's compiled varlen kernels (the on-disk compile cache is kept)."""
    _TABLE.clear()
