"""The ``"tvm_tirx"`` TIR pipeline: what ``tvm.compile(..., tir_pipeline="tvm_tirx")`` runs.

A module may hold two kinds of PrimFunc: hand-written TIRx kernels (every
``T.cuda.tile.apply`` kernel) and, when it comes from Relax, the schedulable
``s_tir`` PrimFuncs of legalized operators (marked by the ``s_tir`` attribute).
apache-tvm lowers the two with different pipelines (``"tirx"`` and ``"s_tir"``);
this one sends each function to its own: the TIRx kernels through
:func:`UnwrapRelaxRoot`, :func:`~tvm_tirx.build.smem_limits.CheckSharedMemoryLimit`,
:class:`~tvm_tirx.LowerTileApply` and ``"tirx"``, the others through ``"s_tir"``,
and joins the results; an ``s_tir`` PrimFunc that ``sch.tensorize`` gave tile
calls (:mod:`tvm_tirx.schedule.tensor_intrin`) has them checked and expanded first, by
:func:`~tvm_tirx.schedule.scheduled.LowerScheduledTileCalls`.  The device functions then go through apache-tvm's device
finalization and :func:`~tvm_tirx.build.cuda_source.legalize_device_source` (names and
literals that apache-tvm's CUDA codegen would print as source nvcc rejects).

Debug builds (``detect_hangs``, ``check_assumptions``; :mod:`tvm_tirx.build.debug`)
are options of this pipeline: the factory reads them when a build starts (a
``tvm_tirx.debug_build`` block or the ``TVM_TIRX_*`` environment variables; or
its own ``detect_hangs=`` / ``check_assumptions=`` arguments, through
``tvm.tirx.get_tir_pipeline("tvm_tirx", ...)``), and :func:`LowerTileApplyDebug`
builds the checks into the kernels it lowers.
"""

from __future__ import annotations

import functools

import tvm
import tvm.s_tir
from tvm.tirx import compilation_pipeline as cp

from ..schedule.scheduled import LowerScheduledTileCalls, has_tile_calls
from ..tile.lower.lower import LowerTileApply, lower_tile_apply
from .cuda_source import legalize_device_source
from .debug import DebugOptions, current_debug, hang_timeout, instrument, refuse_scheduled
from .smem_limits import CheckSharedMemoryLimit

__all__ = ["PIPELINE_NAME", "ROOT_ANNOTATION", "register_pipeline", "is_s_tir", "UnwrapRelaxRoot", "map_prim_funcs",
           "LowerTileApplyDebug"]

#: Name of the TIR pipeline registered with apache-tvm.
PIPELINE_NAME = "tvm_tirx"

#: Annotation on the root block that :class:`PrepareTileKernels` adds and
#: :class:`UnwrapRelaxRoot` removes; no other block carries it.
ROOT_ANNOTATION = "tvm_tirx.relax_root"


def is_s_tir(func) -> bool:
    """Whether a PrimFunc is a schedulable ``s_tir`` one (apache-tvm sets the ``s_tir`` attribute)."""
    return bool(func.attrs is not None and func.attrs.get("s_tir", False))


def _unwrap(func):
    body = func.body
    if isinstance(body, tvm.s_tir.SBlockRealize) and ROOT_ANNOTATION in body.block.annotations:
        return func.with_body(body.block.body)
    return func


def map_prim_funcs(mod, fn):
    """``mod`` with ``fn`` applied to each PrimFunc (the same module when none changes)."""
    updates = {}
    for gvar, func in mod.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc):
            new = fn(func)
            if not new.same_as(func):
                updates[gvar] = new
    if not updates:
        return mod
    mod = mod.clone()
    for gvar, func in updates.items():
        mod.update_func(gvar, func)
    return mod


def UnwrapRelaxRoot():  # pylint: disable=invalid-name
    """Module pass: remove the root block that :class:`PrepareTileKernels` added.

    The first pass of the ``"tvm_tirx"`` TIR pipeline; a no-op for every other PrimFunc.

    Returns
    -------
    tvm.transform.Pass
    """
    @tvm.transform.module_pass(opt_level=0, name="tvm_tirx.UnwrapRelaxRoot")
    def _pass(mod, _ctx):
        return map_prim_funcs(mod, _unwrap)

    return _pass


def LowerTileApplyDebug(options: DebugOptions):  # pylint: disable=invalid-name
    """Module pass: :class:`~tvm_tirx.LowerTileApply`, then the debug checks of ``options``
    (:func:`tvm_tirx.build.debug.instrument`) on every PrimFunc it lowered.

    Parameters
    ----------
    options : DebugOptions
        The checks to build in; off: plain ``LowerTileApply``.

    Returns
    -------
    tvm.transform.Pass
    """
    if not options:
        return LowerTileApply()

    @tvm.transform.module_pass(opt_level=0, name="tvm_tirx.LowerTileApplyDebug")
    def _pass(mod, _ctx):
        return map_prim_funcs(mod, lambda f: instrument(lower_tile_apply(f), f, options))

    return _pass


def _scheduled_with_tile_calls(mod) -> list:
    return [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc) and has_tile_calls(f)]


def _pipeline_factory(detect_hangs=None, check_assumptions=None, **kwargs):
    """The pipeline; ``detect_hangs`` / ``check_assumptions`` left None take
    :func:`~tvm_tirx.build.debug.current_debug` (read when the build starts)."""
    debug = current_debug()
    debug = DebugOptions(debug.detect_hangs if detect_hangs is None else hang_timeout(detect_hangs),
                         debug.check_assumptions if check_assumptions is None else bool(check_assumptions))
    tirx_stock, finalize_host, finalize_device = cp.tirx_pipeline(**kwargs)
    tile = tvm.ir.transform.Sequential(
        # T.assume facts served the proofs of LowerTileApply; the CUDA codegen has no use for them
        [UnwrapRelaxRoot(), CheckSharedMemoryLimit(), LowerTileApplyDebug(debug), tvm.tirx.transform.RemoveAssume(),
         tirx_stock]
    )

    @tvm.transform.module_pass(opt_level=0, name="tvm_tirx.pipeline")
    def _pipeline(mod, _ctx):
        funcs = dict(mod.functions.items())
        schedulable = {gv: f for gv, f in funcs.items() if isinstance(f, tvm.tirx.PrimFunc) and is_s_tir(f)}
        if not schedulable:
            return tile(mod)
        s_tir_stock = cp.get_tir_pipeline("s_tir")[0]
        rest = {gv: f for gv, f in funcs.items() if gv not in schedulable}
        refuse_scheduled(debug, _scheduled_with_tile_calls(tvm.IRModule(schedulable)))
        scheduled = LowerScheduledTileCalls()(tvm.IRModule(schedulable, attrs=mod.attrs))
        lowered = dict(s_tir_stock(scheduled).functions.items())
        if rest:
            lowered.update(tile(tvm.IRModule(rest, attrs=mod.attrs)).functions.items())
        return tvm.IRModule(lowered, attrs=mod.attrs)

    return _pipeline, finalize_host, legalize_device_source(finalize_device)


@functools.cache
def register_pipeline() -> str:
    """Register the ``"tvm_tirx"`` TIR pipeline with apache-tvm; returns its name.

    Pass it as ``tvm.compile(mod, target, tir_pipeline="tvm_tirx")``;
    :func:`tvm_tirx.compile` uses it too.
    """
    cp.register_tir_pipeline(PIPELINE_NAME, _pipeline_factory)
    return PIPELINE_NAME
