"""The compiled GEMM kernels the torch operators launch, one per kernel spec, kept for the process.

A spec (:class:`~tvm_tirx.kernels.gemm.spec.GemmSpec`, or
:class:`~tvm_tirx.kernels.gemm.spec.SmallMSpec` for the small-M kernel) names what a
compiled kernel depends on: ``n`` and ``k`` (static), the input and output dtypes, the
GPU's arch, the tile's width and every other option.  ``m`` is not in it: every kernel is
made with a run-time ``m`` (``T.dynamic("m")``), so one compiled kernel serves every
number of rows that gets its tile width -- :func:`~tvm_tirx.kernels.gemm.choose_tile`
picks 64 or 128 columns when 128 x 256 tiles would leave SMs idle (small ``m`` or ``n``),
so a weight sees at most three kernels.  The spec is the table's key and gives the
kernel's name (``global_symbol``).  The first :func:`gemm_kernel` call for a spec
compiles it with :func:`tvm_tirx.compile`, whose on-disk compile cache
(:mod:`tvm_tirx.build.cache`) makes that a load in every later process; later calls in
this process return the same :class:`~tvm_tirx.Kernel` object.

This module does not import torch.
"""

from __future__ import annotations

import tvm

from ..build.kernel import compile as _tirx_compile
from ..kernels.gemm.spec import CONFIG, GemmSpec, SmallMSpec
from .kernel_table import KernelTable

__all__ = ["CONFIG", "GemmSpec", "GemmKey", "SmallMSpec", "gemm_spec", "gemm_prim_func", "gemm_kernel", "a_operand",
           "b_operand", "cached_kernels", "clear_kernels", "on_clear_kernels"]

#: The name the tile kernel's spec had before it was :class:`GemmSpec` (an alias; the
#: same class).
GemmKey = GemmSpec

_TABLE = KernelTable(lambda key: _compile(key))  # _compile looked up at each compile (tests replace it)


def gemm_spec(n: int, k: int, in_dtype: str = "bfloat16", out_dtype: str = "bfloat16", **options) -> GemmSpec:
    """The :class:`GemmSpec` of ``(n, k, in_dtype, out_dtype)`` with the options of
    :data:`CONFIG` for ``out_dtype`` updated by ``options`` (the Relax offload's and
    :func:`gemm_prim_func`'s spelling).

    The ring is :data:`CONFIG`'s (3 stages for bf16 output, 4 for float32) unless
    ``options`` set ``stages``, whatever ``block_n``; a spec made directly,
    ``GemmSpec(n, k, ..., block_n=128)``, takes the deepest ring of its tile instead.

    Parameters
    ----------
    n, k : int
        Columns of C and the reduction length, elements.
    in_dtype, out_dtype : str
        ``"bfloat16"``; ``"bfloat16"`` or ``"float32"``.
    **options
        :class:`GemmSpec`'s other fields (``make_gemm``'s keyword options and ``arch``).

    Raises
    ------
    ValueError
        ``out_dtype`` not in :data:`CONFIG`.
    TypeError
        An option :class:`GemmSpec` does not have.
    """
    if out_dtype not in CONFIG:
        raise ValueError(f"gemm_prim_func: out_dtype must be one of {list(CONFIG)}, found {out_dtype!r}")
    return GemmSpec(int(n), int(k), in_dtype, out_dtype, **{**CONFIG[out_dtype], **options})


def gemm_prim_func(n: int, k: int, in_dtype: str = "bfloat16", out_dtype: str = "bfloat16",
                   **options) -> tvm.tirx.PrimFunc:
    """The run-time-``m`` GEMM PrimFunc for ``(n, k, in_dtype, out_dtype)``, shared by the
    torch operators (:func:`gemm_kernel`) and the Relax offload
    (:class:`tvm_tirx.ops.relax_offload.OffloadGemm`): ``gemm_spec(n, k, in_dtype,
    out_dtype, **options).prim_func()`` (:func:`gemm_spec`,
    :meth:`GemmSpec.prim_func <tvm_tirx.kernels.gemm.spec.GemmSpec.prim_func>`).

    ``make_gemm(m, n, k, out_dtype, in_dtype, **options)`` with ``m`` an int32 run-time
    extent and the options of :data:`CONFIG` for ``out_dtype`` updated by ``options``;
    its ``global_symbol`` is the spec's
    :attr:`~tvm_tirx.kernels.gemm.spec.GemmSpec.name`,
    ``tvm_tirx_gemm_n{n}_k{k}_{in}_{out}`` (``bf16``, ``f32``),
    with ``_bn{block_n}`` after it for a ``block_n`` other than 256,
    ``_bias_{bf16|f32}`` for a fused bias, ``_{activation}`` for a fused activation and
    ``_glu`` for a gated GEMM, ``_residual`` for an added residual, ``_a_km`` for an A
    stored ``(k, m)`` (``a_major="m"``) and ``_b_kn`` for a B stored ``(k, n)``
    (``b_major="n"``).
    Made once per spec (cached): ``A (m, k)``, ``B (n, k)`` of ``in_dtype``,
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
    return gemm_spec(n, k, in_dtype, out_dtype, **options).prim_func()


def _compile(key):
    """Compile the run-time-``m`` kernel of ``key`` (a :class:`GemmSpec` or a
    :class:`SmallMSpec`; the on-disk cache may serve it)."""
    return _tirx_compile(key.prim_func(), target="cuda", arch=key.arch)


def a_operand(key: GemmSpec, x):
    """A as the kernel of ``key`` takes it: ``x`` (any leading dimensions) as ``(m, k)``,
    or for ``a_major="m"`` (a 2-d ``x``) its transpose ``x.t()``, the contiguous
    ``(k, m)`` storage (no copy)."""
    return x.view(-1, x.shape[-1]) if key.a_major == "k" else x.t()


def b_operand(key: GemmSpec, w):
    """B as the kernel of ``key`` takes it: ``w`` ((n, k), as the ops' checks see it)
    itself, or for ``b_major="n"`` its transpose ``w.t()``, the contiguous ``(k, n)``
    storage (no copy)."""
    return w if key.b_major == "k" else w.t()


def gemm_kernel(key: GemmSpec | SmallMSpec):
    """The compiled kernel of the spec ``key``: compiled (or loaded from the on-disk cache)
    on the first call for that spec (or an equal one) in this process, the same object
    afterwards.

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
    """A copy of this process's ``{GemmSpec | SmallMSpec: Kernel}`` table."""
    return _TABLE.cached()


def on_clear_kernels(forget) -> None:
    """Call ``forget()`` whenever :func:`clear_kernels` runs (the torch operators' launch
    plans, :class:`tvm_tirx.ops.eager.Plans`, are forgotten with the kernels)."""
    _TABLE.on_clear(forget)


def clear_kernels() -> None:
    """Forget this process's compiled kernels (the on-disk compile cache is kept)."""
    _TABLE.clear()
