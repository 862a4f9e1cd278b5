"""The compiled attention kernels the torch operator launches, one per :class:`AttentionKey`.

A key names what a compiled kernel depends on: the head counts, head_dim, causal, the
dtype, the softmax scale, the GPU's arch and the launch grid.  Batch and sequence length
are not in the key: every kernel is made with both as run-time extents, so one compiled
kernel serves every (batch, length) -- two at head_dim 128, whose schedule table puts rows
of at most :data:`~tvm_tirx.kernels.attention.schedules.PERSISTENT_ROWS` keys on the
persistent grid (that kernel is also the one for rows of unknown length: it launches one
CTA per tile for longer rows) and longer rows on one CTA per tile, and two at head_dim 64
causal, whose table gives rows known to be longer than
:data:`~tvm_tirx.kernels.attention.schedules.TWO_CONSUMER_CAUSAL_ROWS` keys three
consumer warpgroups on one CTA per tile and the others (unknown lengths too) two on the
persistent grid.  Kernels are compiled
on first use (the on-disk compile cache of :mod:`tvm_tirx.build.cache` may serve them)
and kept for the process (:class:`.KernelTable`).

This module does not import torch.
"""

from __future__ import annotations

import functools
import math
import struct
from dataclasses import dataclass, replace

import tvm
from tvm.script import tirx as T

from ..build.kernel import compile as _tirx_compile
from ..kernels.attention import AttentionPlan, choose_attention, choose_schedule, make_attention
from ..kernels.attention.config import DTYPES, HEAD_DIMS
from .kernel_table import KernelTable

__all__ = ["AttentionOperands", "AttentionKey", "kernel_plan", "attention_prim_func", "attention_kernel", "cached_kernels", "clear_kernels",
           "on_clear_kernels", "f32_bits"]

@dataclass(frozen=True)
class AttentionOperands:
    """What the forward and the backward kernels of one attention both depend on.

    Attributes
    ----------
    heads, kv_heads : int
        Query heads and key/value heads (``heads`` a multiple of ``kv_heads``).
    head_dim : int
        64, 128 or 256.
    causal : bool
        Whether query ``i`` sees keys ``<= i`` only.
    dtype : str
        ``"bfloat16"`` or ``"float16"`` (Q, K, V and O).
    scale : float
        The softmax scale.
    arch : str
        The CUDA architecture compiled for, ``"sm_90a"``.
    """

    heads: int
    kv_heads: int
    head_dim: int
    causal: bool
    dtype: str
    scale: float
    arch: str


@dataclass(frozen=True)
class AttentionKey(AttentionOperands):
    """What one compiled attention (forward) kernel depends on: the
    :class:`AttentionOperands` and

    Attributes
    ----------
    plan : AttentionPlan
        The kernel's schedule (:func:`kernel_plan` of what
        :func:`~tvm_tirx.kernels.attention.choose_attention` gives for the call's length).
    """

    plan: AttentionPlan


def kernel_plan(head_dim: int, causal: bool, plan: AttentionPlan | None = None) -> AttentionPlan:
    """The plan of the run-time-length kernel that serves calls planned ``plan`` (None:
    rows of unknown length, :func:`~tvm_tirx.kernels.attention.choose_attention`'s plan
    for them).  A persistent kernel keeps the launch-time grid choice of the table's plan
    for unknown lengths (``persistent_rows``) unless ``plan`` sets its own, so that one
    compiled kernel serves every length the table puts on the persistent grid.

    Raises
    ------
    ValueError
        What ``choose_attention`` refuses.
    """
    if plan is None:
        return choose_attention(head_dim, causal)
    if plan.persistent_rows is None and plan.persistent:
        return replace(plan, persistent_rows=choose_schedule(head_dim, causal)["persistent_rows"])
    return plan


def _name(heads, kv_heads, head_dim, causal, dtype, scale, plan: AttentionPlan) -> str:
    """The kernel's ``global_symbol``: the table's kernels keep their short names; a plan
    that differs from the table's for unknown lengths says how."""
    table = AttentionPlan(**choose_schedule(head_dim, causal))
    name = f"tvm_tirx_attention_h{heads}_kv{kv_heads}_d{head_dim}_{'causal' if causal else 'full'}_{DTYPES[dtype]}"
    if plan.persistent != table.persistent:
        name += "_persistent" if plan.persistent else "_per_tile"
    if (plan.pingpong, plan.overlap, plan.stages) != (table.pingpong, table.overlap, table.stages):
        name += f"_pp{int(plan.pingpong)}_ov{int(plan.overlap)}_st{plan.stages}"
    if plan.persistent and plan.persistent_rows != table.persistent_rows:
        name += f"_rows{plan.persistent_rows or 0}"
    if plan.tma_store != table.tma_store:
        name += "_tma_store" if plan.tma_store else "_thread_store"
    block_n = plan.block_n or HEAD_DIMS[head_dim]  # None: the head_dim's, which the table names
    if block_n != table.block_n:
        name += f"_bn{block_n}"
    if plan.consumers != table.consumers:
        name += f"_c{plan.consumers}"
    if plan.o_staging is not None:  # not against the table's: that depends on schedules.KV_STAGING
        name += f"_o{plan.o_staging}"
    if plan.v_ring:  # likewise (schedules.V_RING)
        name += "_vring"
    if f32_bits(scale) != f32_bits(1.0 / math.sqrt(head_dim)):
        name += f"_s{f32_bits(scale)}"
    return name


def attention_prim_func(heads: int, kv_heads: int, head_dim: int, causal: bool, dtype: str,
                        scale: float, plan: AttentionPlan | None = None) -> tvm.tirx.PrimFunc:
    """``make_attention`` with a run-time batch and sequence length and the schedule of
    :func:`kernel_plan` (``plan``; None: the plan for rows of unknown length), named
    ``tvm_tirx_attention_h{heads}_kv{kv_heads}_d{head_dim}_{causal|full}_{bf16|f16}``,
    with ``_persistent`` or ``_per_tile`` appended where the plan's grid is not the
    table's for rows of unknown length (:func:`~tvm_tirx.kernels.attention.choose_schedule`),
    ``_pp{0|1}_ov{0|1}_st{stages}`` where its schedule is not, ``_rows{n}`` where its
    launch-time grid choice is not, ``_tma_store`` / ``_thread_store`` where its O store
    is not, ``_bn{block_n}`` where its keys per block are not, ``_c{consumers}`` where its
    consumer warpgroups are not, ``_o{o_staging}`` where it sets where O is staged, and
    ``_s{bits}`` (the float32 bits of ``scale``, hex)
    unless ``scale`` is the default ``1 / sqrt(head_dim)``: kernels of different plans or
    scales never share a name (the Relax offload adds one PrimFunc per name).

    Raises
    ------
    ValueError
        What :func:`~tvm_tirx.kernels.attention.make_attention` refuses.
    """
    return _prim_func(heads, kv_heads, head_dim, causal, dtype, scale, kernel_plan(head_dim, causal, plan))


@functools.lru_cache(maxsize=None)
def _prim_func(heads: int, kv_heads: int, head_dim: int, causal: bool, dtype: str, scale: float,
               plan: AttentionPlan):
    func = make_attention(T.dynamic("B"), T.dynamic("L"), heads, head_dim, kv_heads=kv_heads, causal=causal,
                          scale=scale, dtype=dtype, **plan.options())
    return func.with_attr("global_symbol", _name(heads, kv_heads, head_dim, causal, dtype, scale, plan))


def f32_bits(value: float) -> str:
    """The float32 bit pattern of ``value`` as 8 hex digits (the kernel's scale is float32)."""
    return struct.pack(">f", value).hex()


def _compile(key: AttentionKey):
    func = attention_prim_func(key.heads, key.kv_heads, key.head_dim, key.causal, key.dtype, key.scale, key.plan)
    return _tirx_compile(func, target="cuda", arch=key.arch)


_TABLE = KernelTable(lambda key: _compile(key))  # _compile looked up at each compile (tests replace it)


def attention_kernel(key: AttentionKey):
    """The compiled kernel of ``key``, called as ``kernel(q, k, v, o, lse)`` with contiguous
    ``(batch, seq, heads, head_dim)`` CUDA tensors (K and V with ``kv_heads``) and ``lse``
    ``(batch, heads, seq)`` float32, for any batch and length.

    Raises
    ------
    ValueError
        What :func:`~tvm_tirx.kernels.attention.make_attention` refuses.
    """
    return _TABLE.get(key)


def cached_kernels() -> dict:
    """A copy of this process's ``{AttentionKey: Kernel}`` table."""
    return _TABLE.cached()


def on_clear_kernels(forget) -> None:
    """Call ``forget()`` whenever :func:`clear_kernels` runs (the torch operators' launch
    plans, :class:`tvm_tirx.ops.eager.Plans`, are forgotten with the kernels)."""
    _TABLE.on_clear(forget)


def clear_kernels() -> None:
    """Forget this process's compiled kernels (the on-disk compile cache is kept)."""
    _TABLE.clear()
