"""Tile kernels inside Relax programs: ``R.call_tir`` / ``R.call_tir_inplace`` on a PrimFunc
written with ``T.cuda.tile.apply``.

Build such a module with apache-tvm's own entry point and this package's two pipelines,
both registered by name when ``tvm`` is imported::

    ex = tvm.compile(mod, target, relax_pipeline="tvm_tirx", tir_pipeline="tvm_tirx")
    vm = tvm.relax.VirtualMachine(ex, tvm.cuda())

Why a Relax pipeline of our own: apache-tvm's CUDA Relax pipeline was written for
schedulable (``s_tir``) PrimFuncs, whose body is a root ``SBlockRealize``.  A hand-written
kernel has none, and three of its passes then misbehave: ``FuseOps`` / ``FuseTIR`` fuse it
with its neighbours (giving "Inconsistent buffers ... mapped to the same relax var"),
``dlight`` tries to schedule it, and ``RewriteDataflowReshape`` stops on an internal check
(``func->body->IsInstance<SBlockRealizeNode>()``) for any kernel with two or more buffer
parameters whose result feeds another op.  :class:`PrepareTileKernels` marks each such
kernel as opaque and already scheduled (the ``op_pattern`` / ``tirx.is_scheduled``
attributes apache-tvm's own hand-written kernels carry) and wraps its body in an empty,
annotated root block; the TIR pipeline's :class:`UnwrapRelaxRoot` removes that block
again before the kernel is lowered.
"""

from __future__ import annotations

import functools

import tvm
import tvm.s_tir
from tvm.relax import pipeline as relax_pipelines
from tvm.relax.backend.cuda import pipeline as cuda_pipeline

from ..build.pipeline import PIPELINE_NAME, ROOT_ANNOTATION, UnwrapRelaxRoot, is_s_tir, map_prim_funcs

__all__ = [
    "PIPELINE_NAME",
    "ROOT_ANNOTATION",
    "OP_PATTERN_OPAQUE",
    "PrepareTileKernels",
    "UnwrapRelaxRoot",
    "relax_pipeline",
    "register_relax_pipeline",
]

#: ``relay::OpPatternKind::kOpaque``: Relax's fusion never merges such a PrimFunc.
OP_PATTERN_OPAQUE = 8


def _prepare(func):
    """``func`` marked opaque and scheduled, its body in an annotated root block;
    schedulable (``s_tir``) PrimFuncs and already prepared ones are returned as they are."""
    if is_s_tir(func) or isinstance(func.body, tvm.s_tir.SBlockRealize):
        return func
    attrs = {"tirx.is_scheduled": True}
    if func.attrs is None or "op_pattern" not in func.attrs:
        attrs["op_pattern"] = OP_PATTERN_OPAQUE
    block = tvm.s_tir.SBlock(
        [], [], [], "root", func.body, annotations={ROOT_ANNOTATION: True}
    )
    return func.with_body(tvm.s_tir.SBlockRealize([], True, block)).with_attrs(attrs)


def PrepareTileKernels():  # pylint: disable=invalid-name
    """Module pass: make every hand-written PrimFunc of a Relax module safe for Relax's passes.

    A PrimFunc that is not a schedulable ``s_tir`` one (every ``T.cuda.tile.apply``
    kernel, and any other hand-written TIRx kernel; :func:`tvm_tirx.build.pipeline.is_s_tir`
    decides, as it does for the TIR pipeline) gets

    - ``op_pattern = 8`` (opaque) unless it already has an ``op_pattern``: never fused;
    - ``tirx.is_scheduled = True``: ``dlight`` leaves it alone;
    - its body wrapped in an empty root block annotated ``tvm_tirx.relax_root``.

    Schedulable PrimFuncs (those of legalized Relax ops) are left untouched.

    Returns
    -------
    tvm.transform.Pass
        A module pass; run it before apache-tvm's Relax pipeline.
    """
    @tvm.transform.module_pass(opt_level=0, name="tvm_tirx.PrepareTileKernels")
    def _pass(mod, _ctx):
        return map_prim_funcs(mod, _prepare)

    return _pass


def relax_pipeline(target=None, offload_gemm: bool = False, gemm_options: dict | None = None):
    """The Relax pipeline for modules that call tile kernels.

    Parameters
    ----------
    target : tvm.target.Target | None
        A CUDA target; None takes ``Target.current()`` when the pipeline runs (this is
        how ``tvm.compile(..., relax_pipeline="tvm_tirx")`` calls it).
    offload_gemm : bool
        First rewrite the supported ``R.matmul`` calls into calls of the Hopper GEMM
        (:func:`tvm_tirx.ops.relax_offload.OffloadGemm`, with ``gemm_options``): pass
        ``relax_pipeline=relax_pipeline(offload_gemm=True)`` to ``tvm.compile``.
    gemm_options : dict | None
        ``make_gemm`` options for the offloaded kernels.

    Returns
    -------
    tvm.transform.Pass
        (The GEMM offload,) :func:`PrepareTileKernels`,
        then apache-tvm's default CUDA pipeline (``tvm.relax.backend.cuda.pipeline``: its
        library dispatch, legalization, dataflow lowering and finalization passes) with
        :func:`~tvm_tirx.ops.relax_views.ViewReshapedOutputs` before the dataflow lowering
        (a block's output reshapes become views, not copies).

    Raises
    ------
    ValueError
        When it runs with no target given and none current, or a non-CUDA one; from
        ``make_gemm``, for ``gemm_options`` it refuses.
    """
    @tvm.transform.module_pass(opt_level=0, name="tvm_tirx.relax_pipeline")
    def _pass(mod, _ctx):
        tgt = target if target is not None else tvm.target.Target.current()
        if tgt is None or tgt.kind.name != "cuda":
            raise ValueError(
                "tvm_tirx relax pipeline: needs a CUDA target, "
                f"got {None if tgt is None else tgt.kind.name!r}; "
                "call tvm.compile(mod, target=<cuda target>, relax_pipeline='tvm_tirx', "
                "tir_pipeline='tvm_tirx')"
            )
        if offload_gemm:
            # imported here: this module loads while `import tvm` runs (the plugin hook)
            from .relax_offload import OffloadGemm  # pylint: disable=import-outside-toplevel

            mod = OffloadGemm(gemm_options=gemm_options)(mod)
        mod = PrepareTileKernels()(mod)
        return _default_with_views(tgt)(mod)

    return _pass


def _default_with_views(tgt) -> tvm.transform.Pass:
    """apache-tvm's default CUDA pipeline with :func:`~tvm_tirx.ops.relax_views.ViewReshapedOutputs`
    right before its ``RewriteDataflowReshape`` (the first of its dataflow lowering passes)."""
    from .relax_views import ViewReshapedOutputs  # pylint: disable=import-outside-toplevel

    passes = (cuda_pipeline.library_dispatch_passes(tgt) + cuda_pipeline.legalize_passes(tgt) + [ViewReshapedOutputs()]
              + cuda_pipeline.dataflow_lower_passes(tgt) + cuda_pipeline.finalize_passes(tgt))

    @tvm.transform.module_pass(opt_level=0, name="tvm_tirx.default_cuda_pipeline")
    def _pass(mod, _ctx):
        with tgt:
            return tvm.transform.Sequential(passes)(mod)

    return _pass


@functools.cache
def register_relax_pipeline() -> str:
    """Register :func:`relax_pipeline` with apache-tvm as ``"tvm_tirx"``; returns the name."""
    if PIPELINE_NAME not in relax_pipelines.PIPELINE_MAP:
        relax_pipelines.register_pipeline(PIPELINE_NAME)(relax_pipeline)
    return PIPELINE_NAME
