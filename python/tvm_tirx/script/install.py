"""Install tvm_tirx's names into apache-tvm's TVMScript namespace (``T``)."""

from __future__ import annotations

from types import SimpleNamespace

from tvm.tirx.script.builder import ir as _ir

from ..tile.rules import op as tile_op
from ..tile.kernel.assumptions import assume
from ..tile.ir.ewise import ewise
from . import builders, launch
from .lane_reduce import reduce_lanes
from .launch_config import LaunchConfig
from .mbarrier_wait import mbarrier_wait_phase

__all__ = ["install"]

_DONE = [False]


def install() -> None:
    """Add ``T.function``, ``T.Tensor``, the launch/index builders, span-correct
    allocations and ``T.cuda.tile`` to ``tvm.script.tirx`` (idempotent).

    The ``"tvm_tirx"`` pipelines are registered by :func:`tvm_tirx._plugin.install`
    (at ``import tvm``, through the ``tvm.backends`` entry point)."""
    if _DONE[0]:
        return
    _DONE[0] = True

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
        ("assume", assume),  # refuses a non-boolean condition
    ):
        _ir.register_script_namespace(name, value)

    cuda = _ir.cuda
    cuda.LaunchConfig = LaunchConfig
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
    cuda.tile = SimpleNamespace(apply=tile_op.apply, ewise=ewise, reduce_lanes=reduce_lanes)
