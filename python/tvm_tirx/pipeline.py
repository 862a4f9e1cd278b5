"""The ``"tvm_tirx"`` TIR pipeline: what ``tvm.compile(..., tir_pipeline="tvm_tirx")`` runs.

A module may hold two kinds of PrimFunc: hand-written TIRx kernels (every
``T.cuda.tile.apply`` kernel) and, when it comes from Relax, the schedulable
``s_tir`` PrimFuncs of legalized operators (marked by the ``s_tir`` attribute).
apache-tvm lowers the two with different pipelines (``"tirx"`` and ``"s_tir"``);
this one sends each function to its own: the TIRx kernels through
:class:`~tvm_tirx.relax.UnwrapRelaxRoot`,
:func:`~tvm_tirx.smem_limits.CheckSharedMemoryLimit`, :class:`~tvm_tirx.LowerTileApply` and
``"tirx"``, the others through ``"s_tir"``, and joins the results.
"""

from __future__ import annotations

import functools

__all__ = ["PIPELINE_NAME", "register_pipeline", "is_s_tir"]

#: Name of the TIR pipeline registered with apache-tvm.
PIPELINE_NAME = "tvm_tirx"


def is_s_tir(func) -> bool:
    """Whether a PrimFunc is a schedulable ``s_tir`` one (apache-tvm sets the ``s_tir`` attribute)."""
    return bool(func.attrs is not None and func.attrs.get("s_tir", False))


def _pipeline_factory(**kwargs):
    import tvm  # pylint: disable=import-outside-toplevel
    from tvm.tirx import compilation_pipeline as cp  # pylint: disable=import-outside-toplevel

    from .relax import UnwrapRelaxRoot  # pylint: disable=import-outside-toplevel
    from .smem_limits import CheckSharedMemoryLimit  # pylint: disable=import-outside-toplevel
    from .tile.lower import LowerTileApply  # pylint: disable=import-outside-toplevel

    tirx_stock, finalize_host, finalize_device = cp.tirx_pipeline(**kwargs)
    tile = tvm.ir.transform.Sequential(
        [UnwrapRelaxRoot(), CheckSharedMemoryLimit(), LowerTileApply(), tirx_stock]
    )

    @tvm.transform.module_pass(opt_level=0, name="tvm_tirx.pipeline")
    def _pipeline(mod, _ctx):
        funcs = dict(mod.functions.items())
        schedulable = {gv: f for gv, f in funcs.items() if isinstance(f, tvm.tirx.PrimFunc) and is_s_tir(f)}
        if not schedulable:
            return tile(mod)
        s_tir_stock = cp.get_tir_pipeline("s_tir")[0]
        rest = {gv: f for gv, f in funcs.items() if gv not in schedulable}
        lowered = dict(s_tir_stock(tvm.IRModule(schedulable, attrs=mod.attrs)).functions.items())
        if rest:
            lowered.update(tile(tvm.IRModule(rest, attrs=mod.attrs)).functions.items())
        return tvm.IRModule(lowered, attrs=mod.attrs)

    return _pipeline, finalize_host, finalize_device


@functools.cache
def register_pipeline() -> str:
    """Register the ``"tvm_tirx"`` TIR pipeline with apache-tvm; returns its name.

    Pass it as ``tvm.compile(mod, target, tir_pipeline="tvm_tirx")``;
    :func:`tvm_tirx.compile` uses it too.
    """
    from tvm.tirx.compilation_pipeline import register_tir_pipeline  # pylint: disable=import-outside-toplevel

    register_tir_pipeline(PIPELINE_NAME, _pipeline_factory)
    return PIPELINE_NAME
