"""Offload Relax matmuls to the Hopper GEMM (:func:`tvm_tirx.kernels.gemm.make_gemm`),
Relax attention to the attention kernel (:mod:`.relax_attention`), and RMSNorm and rotary
embeddings to their kernels (:mod:`.relax_norm`, :mod:`.relax_rotary`).

:func:`partition_for_tvm_tirx` rewrites every supported ``R.matmul`` of a Relax module
into an ``R.call_tir`` of the GEMM (and every supported ``R.nn.attention`` into one of the
attention kernel), as ``tvm.relax.backend.cuda.cublas.partition_for_cublas`` does for
cuBLAS; then build with this package's pipelines::

    mod = partition_for_tvm_tirx(mod)
    ex = tvm.compile(mod, tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}),
                     relax_pipeline="tvm_tirx", tir_pipeline="tvm_tirx")

The GEMM computes ``C (m, n) = A (m, k) @ B (n, k)^T``.  Two forms are matched:

* ``R.matmul(x, w)`` with ``w`` of shape ``(k, n)``: ``w`` is transposed into ``(n, k)``
  by an ``R.permute_dims(w, [1, 0])`` emitted before the call (a run-time transpose,
  unless a later pass folds or lifts it);
* ``R.matmul(x, R.permute_dims(w))`` with ``w`` of shape ``(n, k)`` (the "linear" form of
  ``torch.nn.functional.linear``): ``w`` is passed as it is.

``x`` is ``(*rows, k)``; with more than one row axis (batch, sequence) it is reshaped
into ``(prod(rows), k)`` and the result back into ``(*rows, n)``.  The kernels have a
run-time ``m``, so symbolic batch or sequence sizes stay symbolic and share one PrimFunc
per ``(n, k, dtypes)``; a static ``m`` gets the tile width
:func:`~tvm_tirx.kernels.gemm.choose_tile` picks for it (a ``_bn64`` / ``_bn128``
kernel when 128 x 256 tiles would leave SMs idle).  A ``(n,)`` bias add and a ReLU /
SiLU / tanh-GELU after a matmul are folded into its GEMM (:mod:`.relax_epilogue`).
"""

from __future__ import annotations

import tvm

from .gemm_kernels import gemm_prim_func
from .relax_attention import SkippedAttention, attention_kernel_func, emit_attention, match_attention
from .relax_epilogue import epilogue_offloaders
from .relax_glu import glu_offloader
from .relax_norm import norm_offloader
from .relax_rotary import rotary_offloader
from .relax_gemm import (IN_DTYPES, MAX_M, OUT_DTYPES, GemmMatch, SkippedMatmul, emit_gemm_call, fusable_options,
                         gemm_offloader, match_gemm)
from .relax_rewrite import Offloader, offload_pass

__all__ = ["IN_DTYPES", "OUT_DTYPES", "MAX_M", "SkippedMatmul", "GemmMatch", "gemm_prim_func", "match_gemm",
           "Offloader", "emit_gemm_call", "fusable_options", "gemm_offloader", "attention_offloader", "offload_pass",
           "OffloadGemm", "partition_for_tvm_tirx"]


def attention_offloader() -> Offloader:
    """The :class:`Offloader` of ``R.nn.attention`` (:mod:`.relax_attention`)."""
    return Offloader("relax.nn.attention", match_attention, attention_kernel_func, emit_attention, SkippedAttention)


def OffloadGemm(skipped: list | None = None, gemm_options: dict | None = None):  # pylint: disable=invalid-name
    """Module pass: rewrite supported ``R.matmul`` calls into ``R.call_tir`` of the GEMM.

    Each matmul :func:`match_gemm` accepts becomes ``R.call_tir(gemm, (x, b),
    R.Tensor((m, n), out_dtype))`` with ``gemm`` = :func:`gemm_prim_func` ``(n, k, ...)``
    added to the module once per ``(n, k, dtypes)`` (a run-time ``m``: one kernel for
    every batch and sequence size); ``x`` with batch axes is reshaped to ``(m, k)`` and
    the result back; a ``(k, n)`` weight gets an ``R.permute_dims(w, [1, 0])``.
    A function with a rewritten matmul then loses its unused dataflow bindings
    (``relax.analysis.remove_all_unused``), the linear form's ``permute_dims`` among them.
    Other matmuls, every other op, and functions without a match are left as they are.
    A ``(n,)`` bias add and an activation after a matmul are folded into its GEMM first
    (:mod:`tvm_tirx.ops.relax_epilogue`).

    Parameters
    ----------
    skipped : list | None
        If a list, a :class:`SkippedMatmul` is appended for each matmul left alone.
    gemm_options : dict | None
        ``make_gemm`` keyword options for every kernel (``stages``, ``persistent``, ...),
        over the torch operators' (:data:`tvm_tirx.ops.gemm_kernels.CONFIG`).

    Returns
    -------
    tvm.transform.Pass
        A module pass.  The rewritten module builds only for an ``sm_90a`` CUDA target,
        with ``relax_pipeline="tvm_tirx", tir_pipeline="tvm_tirx"``.

    Raises
    ------
    ValueError
        When it runs, from ``make_gemm``, for ``gemm_options`` it refuses.
    """
    return tvm.transform.Sequential([offload_pass(epilogue_offloaders(gemm_options), None, "tvm_tirx.OffloadGemmEpilogues"),
                                     offload_pass([gemm_offloader(gemm_options)], skipped, "tvm_tirx.OffloadGemm")],
                                    name="tvm_tirx.OffloadGemmAll")


def partition_for_tvm_tirx(mod: tvm.IRModule, skipped: list | None = None,
                           gemm_options: dict | None = None, attention: bool = True,
                           epilogues: bool = True, glu: bool = True, norm: bool = True,
                           rotary: bool = True) -> tvm.IRModule:
    """Offload the supported matmuls (and attentions) of ``mod`` to this package's kernels.

    The counterpart of ``partition_for_cublas``: call it on a Relax module before
    ``tvm.compile(mod, target, relax_pipeline="tvm_tirx", tir_pipeline="tvm_tirx")``
    with an ``sm_90a`` CUDA target.

    Parameters
    ----------
    mod : tvm.IRModule
        A Relax module; ``R.matmul`` calls on bfloat16 operands of static ``n`` and ``k``
        (``k`` a multiple of 8) are offloaded to the GEMM, whatever ``m`` (static or
        symbolic), and ``R.nn.attention`` calls to the attention kernel
        (:mod:`tvm_tirx.ops.relax_attention` says which).
    skipped : list | None
        If a list, receives a :class:`SkippedMatmul` (or
        :class:`~tvm_tirx.ops.relax_attention.SkippedAttention`,
        :class:`~tvm_tirx.ops.relax_norm.SkippedNorm`, or
        :class:`~tvm_tirx.ops.relax_rotary.SkippedRotary` for a sum of the rotate-half form)
        per call left alone, with why.
    gemm_options : dict | None
        ``make_gemm`` keyword options for every kernel, over the torch operators'
        (:data:`tvm_tirx.ops.gemm_kernels.CONFIG`).
    attention : bool
        Offload ``R.nn.attention`` too.
    epilogues : bool
        First fold a ``(n,)`` bias add and a ReLU / SiLU / tanh-GELU after a matmul into
        the GEMM's fused epilogue (:mod:`tvm_tirx.ops.relax_epilogue`; one rounding
        instead of one per op).
    glu : bool
        Before that, rewrite a gated MLP ``activation(x @ Wg) * (x @ Wu)`` into one gated
        GEMM on the interleaved weight (:mod:`tvm_tirx.ops.relax_glu`; run
        ``relax.transform.LiftTransformParams`` after it to build that weight once).
    norm : bool
        Offload ``R.nn.rms_norm`` over the last axis to the RMSNorm kernel
        (:mod:`tvm_tirx.ops.relax_norm`).
    rotary : bool
        Offload a rotary embedding in the rotate-half form, ``x * cos + rotate_half(x) *
        sin``, to the rotary kernel (:mod:`tvm_tirx.ops.relax_rotary`).

    Returns
    -------
    tvm.IRModule
        A new module; ``mod`` is not changed.

    Raises
    ------
    ValueError
        From ``make_gemm``, for ``gemm_options`` it refuses; ``gemm_options`` with
        ``bias`` or ``activation`` (the offload chooses those per call site).
    """
    if glu:
        mod = offload_pass([glu_offloader(gemm_options)], None, "tvm_tirx.OffloadGatedMLP")(mod)
    if rotary:
        mod = offload_pass([rotary_offloader()], skipped, "tvm_tirx.OffloadRotary")(mod)
    if epilogues:
        mod = offload_pass(epilogue_offloaders(gemm_options), None, "tvm_tirx.OffloadGemmEpilogues")(mod)
    offloaders = [gemm_offloader(gemm_options)] + ([attention_offloader()] if attention else [])
    offloaders += [norm_offloader()] if norm else []
    return offload_pass(offloaders, skipped, "tvm_tirx.Offload")(mod)
