"""The compiled GEMM kernels the torch ops launch, one per :class:`GemmKey`, kept for the process.

A key names what a compiled kernel depends on: ``n`` and ``k`` (static), the input and
output dtypes, the GPU's arch and the tile's width.  ``m`` is not in the key: every
kernel is made with a run-time ``m`` (``T.dynamic("m")``), so one compiled kernel serves
every number of rows that gets its tile width -- :func:`~tvm_tirx.kernels.gemm.choose_tile`
picks 64 or 128 columns when 128 x 256 tiles would leave SMs idle (small ``m`` or ``n``),
so a weight sees at most three kernels.  The first :func:`gemm_kernel` call for a
key compiles it with :func:`tvm_tirx.compile`, whose on-disk compile cache
(:mod:`tvm_tirx.build.cache`) makes that a load in every later process; later calls in
this process return the same :class:`~tvm_tirx.Kernel` object.

This module does not import torch.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

import tvm

from ..build.kernel import compile as _tirx_compile
from ..kernels.gemm import BN, make_gemm
from ..kernels.gemm.small_m import make_small_m_gemm
from ..kernels.gemm.tiles import deepest_ring
from .kernel_table import KernelTable

__all__ = ["CONFIG", "GemmKey", "SmallMKey", "small_m_prim_func", "gemm_prim_func", "gemm_kernel", "a_operand", "b_operand", "cached_kernels",
           "clear_kernels", "on_clear_kernels"]


@dataclass(frozen=True)
class GemmKey:
    """What one compiled GEMM kernel ``C (m, n) = A (m, k) @ B (n, k)^T`` depends on.

    Attributes
    ----------
    n : int
        Rows of B, columns of C (elements).
    k : int
        The reduction length (elements); ``k * sizeof(in_dtype)`` a multiple of 16 bytes.
    in_dtype : str
        ``"bfloat16"`` (A and B).
    out_dtype : str
        ``"bfloat16"`` or ``"float32"`` (C).
    arch : str
        The CUDA architecture compiled for, ``"sm_90a"``.
    block_n : int
        Columns of C per CTA tile (64, 128 or 256, ``make_gemm``'s ``block_n``); the
        ring is as deep as fits (:func:`~tvm_tirx.kernels.gemm.tiles.deepest_ring`).
    bias : str | None
        The dtype of a fused bias vector (``make_gemm``'s ``bias``), or None.
    activation : str | None
        ``make_gemm``'s fused ``activation``, or None.
    gated : bool
        ``make_gemm``'s ``gated``: ``n`` is then C's columns and B has ``2 n`` rows
        (gate and up interleaved by eight).
    residual : bool
        ``make_gemm``'s ``residual``: C's ``(m, n)`` residual added last.
    a_major : str
        ``make_gemm``'s ``a_major``: ``"k"`` (A stored ``(m, k)``) or ``"m"`` (stored
        ``(k, m)``; :func:`a_operand` gives what to pass).
    b_major : str
        ``make_gemm``'s ``b_major``: ``"k"`` (B stored ``(n, k)``) or ``"n"`` (stored
        ``(k, n)``; :func:`b_operand` gives what to pass).
    """

    n: int
    k: int
    in_dtype: str
    out_dtype: str
    arch: str
    block_n: int = BN
    bias: Optional[str] = None
    activation: Optional[str] = None
    gated: bool = False
    residual: bool = False
    a_major: str = "k"
    b_major: str = "k"


@dataclass(frozen=True)
class SmallMKey:
    """What one compiled small-M kernel (:mod:`tvm_tirx.kernels.gemm.small_m`) depends on:
    ``n``, ``k`` (elements), ``out_dtype`` (``"bfloat16"`` / ``"float32"``), ``arch``, and
    the plan's ``block_m``, ``splits`` and ``stages``
    (:class:`~tvm_tirx.kernels.gemm.planner.SmallMPlan`).  Inputs are bf16, K-major."""

    n: int
    k: int
    out_dtype: str
    arch: str
    block_m: int
    splits: int
    stages: int

    @property
    def a_major(self) -> str:
        """X's innermost axis: ``"k"`` (the small-M kernel reads ``X (m, k)`` row-major)."""
        return "k"


#: make_gemm's options per output dtype: bench/gemm.py's fastest on the H200 (one CTA per
#: output tile, so the grid follows the run-time m and no SM count enters the key)
CONFIG = {
    "bfloat16": dict(stages=3, wait_depth=1, persistent=False, group_m=16),
    "float32": dict(stages=4, wait_depth=1, persistent=False, group_m=16),
}
_TABLE = KernelTable(lambda key: _compile(key))  # _compile looked up at each compile (tests replace it)


_SHORT = {"bfloat16": "bf16", "float32": "f32"}


@functools.lru_cache(maxsize=None)
def _prim_func(n: int, k: int, in_dtype: str, out_dtype: str, options: tuple) -> tvm.tirx.PrimFunc:
    block_n = dict(options).get("block_n", BN)
    name = f"tvm_tirx_gemm_n{n}_k{k}_{_SHORT.get(in_dtype, in_dtype)}_{_SHORT[out_dtype]}"
    name += f"_bn{block_n}" if block_n != BN else ""
    bias, activation = dict(options).get("bias"), dict(options).get("activation")
    name += f"_bias_{_SHORT[bias]}" if bias else ""
    name += f"_{activation}" if activation else ""
    name += "_glu" if dict(options).get("gated") else ""
    name += "_residual" if dict(options).get("residual") else ""
    name += "_a_km" if dict(options).get("a_major", "k") != "k" else ""
    name += "_b_kn" if dict(options).get("b_major", "k") != "k" else ""
    func = make_gemm(tvm.tirx.Var("m", "int32"), n, k, out_dtype=out_dtype, in_dtype=in_dtype, **dict(options))
    return func.with_attr("global_symbol", name)


def gemm_prim_func(n: int, k: int, in_dtype: str = "bfloat16", out_dtype: str = "bfloat16",
                   **options) -> tvm.tirx.PrimFunc:
    """The run-time-``m`` GEMM PrimFunc for ``(n, k, in_dtype, out_dtype)``, shared by the
    torch operators (:func:`gemm_kernel`) and the Relax offload
    (:class:`tvm_tirx.ops.relax_offload.OffloadGemm`).

    ``make_gemm(m, n, k, out_dtype, in_dtype, **options)`` with ``m`` an int32 run-time
    extent and the options of :data:`CONFIG` for ``out_dtype`` updated by ``options``;
    its ``global_symbol`` is ``tvm_tirx_gemm_n{n}_k{k}_{in}_{out}`` (``bf16``, ``f32``),
    with ``_bn{block_n}`` after it for a ``block_n`` other than 256,
    ``_bias_{bf16|f32}`` for a fused bias, ``_{activation}`` for a fused activation and
    ``_glu`` for a gated GEMM, ``_residual`` for an added residual, ``_a_km`` for an A
    stored ``(k, m)`` (``a_major="m"``) and ``_b_kn`` for a B stored ``(k, n)``
    (``b_major="n"``).
    Made once per arguments (cached): ``A (m, k)``, ``B (n, k)`` of ``in_dtype``,
    ``C (m, n)`` of ``out_dtype``, row-major, 16-byte aligned; ``C = A @ B^T`` with fp32
    accumulation.

    Parameters
    ----------
    n, k : int
        Columns of C and the reduction length, elements (``k * sizeof(in_dtype)`` a
        multiple of 16 bytes).
    in_dtype, out_dtype : str
        ``"bfloat16"``; ``"bfloat16"`` or ``"float32"``.
    **options
        ``make_gemm``'s keyword options (``stages``, ``persistent``, ``group_m``, ...),
        over those of :data:`CONFIG`.

    Raises
    ------
    ValueError
        ``out_dtype`` not in :data:`CONFIG`; from ``make_gemm``: a size, dtype or option
        it refuses (``cluster=2`` among them: it needs a static ``m``).
    """
    if out_dtype not in CONFIG:
        raise ValueError(f"gemm_prim_func: out_dtype must be one of {list(CONFIG)}, found {out_dtype!r}")
    options = {**CONFIG[out_dtype], **options}
    return _prim_func(int(n), int(k), in_dtype, out_dtype, tuple(sorted(options.items())))


@functools.lru_cache(maxsize=None)
def small_m_prim_func(key: SmallMKey) -> tvm.tirx.PrimFunc:
    """The run-time-``m`` small-M PrimFunc of ``key``, named
    ``tvm_tirx_gemm_small_m_n{n}_k{k}_bm{block_m}_s{splits}_{bf16|f32}`` (made once per key).

    Raises
    ------
    ValueError
        What :func:`~tvm_tirx.kernels.gemm.small_m.make_small_m_gemm` refuses.
    """
    func = make_small_m_gemm(tvm.tirx.Var("m", "int32"), key.n, key.k, block_m=key.block_m, splits=key.splits,
                             stages=key.stages, out_dtype=key.out_dtype)
    name = f"tvm_tirx_gemm_small_m_n{key.n}_k{key.k}_bm{key.block_m}_s{key.splits}_{_SHORT[key.out_dtype]}"
    return func.with_attr("global_symbol", name)


def _compile(key):
    """Compile the run-time-``m`` kernel of ``key`` (a :class:`GemmKey` or a
    :class:`SmallMKey`; the on-disk cache may serve it)."""
    if isinstance(key, SmallMKey):
        return _tirx_compile(small_m_prim_func(key), target="cuda", arch=key.arch)
    options = {}
    if key.block_n != BN or key.gated:
        options.update(block_n=key.block_n, stages=deepest_ring(key.block_n, key.out_dtype, key.gated))
    fused = dict(bias=key.bias, activation=key.activation, gated=key.gated, residual=key.residual,
                 a_major=key.a_major if key.a_major != "k" else None,
                 b_major=key.b_major if key.b_major != "k" else None)
    options.update({name: value for name, value in fused.items() if value})
    return _tirx_compile(gemm_prim_func(key.n, key.k, key.in_dtype, key.out_dtype, **options), target="cuda",
                         arch=key.arch)


def a_operand(key: GemmKey, x):
    """A as the kernel of ``key`` takes it: ``x`` (any leading dimensions) as ``(m, k)``,
    or for ``a_major="m"`` (a 2-d ``x``) its transpose ``x.t()``, the contiguous
    ``(k, m)`` storage (no copy)."""
    return x.view(-1, x.shape[-1]) if key.a_major == "k" else x.t()


def b_operand(key: GemmKey, w):
    """B as the kernel of ``key`` takes it: ``w`` ((n, k), as the ops' checks see it)
    itself, or for ``b_major="n"`` its transpose ``w.t()``, the contiguous ``(k, n)``
    storage (no copy)."""
    return w if key.b_major == "k" else w.t()


def gemm_kernel(key: GemmKey):
    """The compiled kernel of ``key``: compiled (or loaded from the on-disk cache) on the
    first call for that key in this process, the same object afterwards.

    Returns
    -------
    tvm_tirx.Kernel
        Called as ``kernel(a, b, c)`` with torch CUDA tensors ``a`` (m, k), ``b`` (n, k)
        and ``c`` (m, n), contiguous and 16-byte aligned, for any ``m >= 1``.

    Raises
    ------
    ValueError
        What :func:`~tvm_tirx.kernels.gemm.make_gemm` refuses (a ``k`` that breaks the
        16-byte row rule, an unknown dtype).
    tvm_tirx.TileError
        The kernel breaks a tile contract (a bug of the generator, not of the caller).
    """
    return _TABLE.get(key)


def cached_kernels() -> dict:
    """A copy of this process's ``{GemmKey: Kernel}`` table."""
    return _TABLE.cached()


def on_clear_kernels(forget) -> None:
    """Call ``forget()`` whenever :func:`clear_kernels` runs (the torch operators' launch
    plans, :class:`tvm_tirx.ops.eager.Plans`, are forgotten with the kernels)."""
    _TABLE.on_clear(forget)


def clear_kernels() -> None:
    """Forget this process's compiled kernels (the on-disk compile cache is kept)."""
    _TABLE.clear()
