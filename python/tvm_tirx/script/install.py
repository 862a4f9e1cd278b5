"""Install tvm_tirx's names into apache-tvm's TVMScript namespace (``T``)."""

from __future__ import annotations

from types import SimpleNamespace

__all__ = ["install"]

_DONE = [False]


def install() -> None:
    """Add ``T.function``, ``T.Tensor``, the launch/index builders, span-correct
    allocations and ``T.cuda.tile`` to ``tvm.script.tirx``, and register the
    ``"tvm_tirx"`` TIR and Relax pipelines with apache-tvm (idempotent)."""
    # Importing tvm may itself run this function (through the tvm.backends
    # entry point), so the flag is read after the import.
    from tvm.tirx.script.builder import ir as _ir  # pylint: disable=import-outside-toplevel

    if _DONE[0]:
        return
    _DONE[0] = True

    from ..tile import op as tile_op  # pylint: disable=import-outside-toplevel
    from ..tile.ewise import ewise  # pylint: disable=import-outside-toplevel
    from . import builders, launch  # pylint: disable=import-outside-toplevel
    from .mbarrier_wait import mbarrier_wait_phase  # pylint: disable=import-outside-toplevel

    tile_op.register_op()
    tile_op.set_launch_query(launch.current_launch)
    builders._STOCK.update(alloc_local=_ir.alloc_local, alloc_shared=_ir.alloc_shared)  # pylint: disable=protected-access
    launch._STOCK.update(device_entry=_ir.device_entry)  # pylint: disable=protected-access

    for name, value in (
        ("function", builders.function),
        ("Tensor", builders.Tensor),
        ("dynamic", builders.dynamic),
        ("alloc_local", builders.alloc_local),
        ("alloc_shared", builders.alloc_shared),
        ("device_entry", launch.device_entry),
    ):
        _ir.register_script_namespace(name, value)

    cuda = _ir.cuda
    cuda.LaunchConfig = launch.LaunchConfig
    for name in (
        "thread_idx",
        "block_idx",
        "block_dim",
        "grid_dim",
        "lane_id",
        "warp_id",
        "cluster_ctaid",
    ):
        setattr(cuda, name, getattr(launch, name))
    cuda.mbarrier_wait_phase = mbarrier_wait_phase
    cuda.tile = SimpleNamespace(apply=tile_op.apply, ewise=ewise)

    # The "tvm_tirx" pipelines, so that tvm.compile(..., tir_pipeline="tvm_tirx",
    # relax_pipeline="tvm_tirx") works after a plain ``import tvm``.
    from ..pipeline import register_pipeline  # pylint: disable=import-outside-toplevel
    from ..relax import register_relax_pipeline  # pylint: disable=import-outside-toplevel

    register_pipeline()
    register_relax_pipeline()
