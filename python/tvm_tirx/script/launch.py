"""Kernel entry with an explicit launch: ``T.device_entry(launch=T.cuda.LaunchConfig(...))``
and the CUDA index builders ``T.cuda.thread_idx`` & co."""

from __future__ import annotations

import functools

import tvm
from tvm.script.ir_builder import IRBuilder
from tvm.tirx import IntImm
from tvm.tirx.script.builder import ir as _ir

from ..errors import TileError
from ..tile.ir.scope import WARP, LaunchFacts
from .dyn_smem import DynamicSharedPool
from .launch_config import LaunchConfig, is_run_time, used_extents

__all__ = [
    "device_entry",
    "thread_idx",
    "block_idx",
    "block_dim",
    "grid_dim",
    "lane_id",
    "warp_id",
    "cluster_ctaid",
    "current_launch",
]

_AXES = ("x", "y", "z")


class _Launch:
    """The launch of the function being parsed and the index Vars it defined."""

    def __init__(self, builder, config, block_vars, grid_vars, cluster_vars, dyn_pool=None):
        self.builder = builder
        self.config = config
        self.block_vars = block_vars
        self.grid_vars = grid_vars
        self.cluster_vars = cluster_vars
        self.dyn_pool = dyn_pool  # DynamicSharedPool, or None without dynamic shared memory


_CURRENT: list = [None]


def device_entry(launch: LaunchConfig | None = None) -> None:
    """Start the kernel's device region, optionally with its launch.

    ``T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))`` marks the
    device entry (apache-tvm's ``T.device_entry()``) and defines the CTA and
    thread index variables of that launch (``T.cta_id``/``T.thread_id``), which
    ``T.cuda.thread_idx("x")`` and friends return.  With
    ``dynamic_smem_bytes=N`` it also emits ``tirx.dyn_smem_bytes = N`` and
    allocates the kernel's dynamic shared memory pool (``dyn_smem``); a
    run-time size is the pool's extent instead (apache-tvm's SplitHostDevice
    takes only a constant ``tirx.dyn_smem_bytes``, and infers the launch's
    size from the extent of a ``shared.dyn`` allocation without it).

    Raises
    ------
    TypeError
        ``launch`` is not a :class:`LaunchConfig`.
    """
    if launch is not None and not isinstance(launch, LaunchConfig):
        raise TypeError(
            f"device_entry: launch must be a T.cuda.LaunchConfig, got {type(launch).__name__}"
        )
    if launch is not None and launch.programmatic_dependent_launch:
        _request_programmatic_dependent_launch()
    _STOCK["device_entry"]()
    if launch is None:
        return
    # Read by apache-tvm's SplitHostDevice into the kernel's launch bounds.
    # Like device_entry, the attribute frame stays open to the function's end.
    bounds = {}
    if launch.min_blocks_per_sm:
        bounds["tirx.launch_bounds_min_blocks_per_sm"] = launch.min_blocks_per_sm
    if launch.max_registers:
        bounds["tirx.max_registers"] = launch.max_registers
    dyn_size = launch.dynamic_smem_bytes
    if not is_run_time(dyn_size) and dyn_size:
        # Read by apache-tvm's SplitHostDevice into the launch's shared-memory size.
        bounds["tirx.dyn_smem_bytes"] = dyn_size
    if bounds:
        # A flat `T.attr({...})` statement, entered as the TIRx parser enters one.
        scope = _ir.attr(bounds)
        for frame in getattr(scope, "frames", [scope]):
            frame.add_callback(functools.partial(frame.__exit__, None, None, None))
            frame.__enter__()
    cluster_vars = []
    grid = used_extents(launch.grid3)
    if launch.cluster3 is not None:
        rank = max(len(grid), len(launch.cluster_used))
        grid = list(launch.grid3[:rank])
        cluster = list(launch.cluster3[:rank])
        _ir.cluster_id([g // c for g, c in zip(grid, cluster)])
        cluster_vars = _as_list(_ir.cta_id_in_cluster(cluster))
    grid_vars = _as_list(_ir.cta_id(grid))
    block_vars = _as_list(_ir.thread_id(used_extents(launch.block3)))
    pool = None
    if is_run_time(dyn_size) or dyn_size:
        pool = DynamicSharedPool(dyn_size)

    _CURRENT[0] = _Launch(IRBuilder.current(), launch, block_vars, grid_vars, cluster_vars, pool)


#: apache-tvm's launch-parameter tag (runtime/meta_data.h, spelled so) that makes its CUDA
#: launcher use cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION.
PDL_TAG = "tirx.use_programtic_dependent_launch"


def _request_programmatic_dependent_launch() -> None:
    """Add the PDL tag to the kernel's ``tirx.kernel_launch_params`` attribute (apache-tvm's
    SplitHostDevice appends it to the launch parameters it computes)."""
    try:
        _ir.func_attr({"tirx.kernel_launch_params": [PDL_TAG]})
    except ValueError as err:
        raise ValueError(
            "LaunchConfig(programmatic_dependent_launch=True): T.device_entry must be at the top "
            "level of the kernel, outside any with/for/if (the launch attribute is a function "
            f"attribute); or write T.func_attr({{'tirx.kernel_launch_params': ['{PDL_TAG}']}}) there"
        ) from err


def _as_list(v):
    return [v] if tvm.ir.is_prim_expr(v) else list(v)


def current_launch():
    """The :class:`LaunchConfig` of the function being parsed, or None."""
    launch = _active("current_launch", required=False)
    return launch.config if launch is not None else None


def current_dyn_pool(name: str = "alloc_shared"):
    """The :class:`~tvm_tirx.script.dyn_smem.DynamicSharedPool` of the kernel being parsed.

    Raises
    ------
    TileError
        The kernel has no launch, or its launch declares no dynamic shared memory.
    """
    launch = _active(name, required=False)
    if launch is None or launch.dyn_pool is None:
        raise TileError(
            "",
            "shared.dyn allocation without dynamic shared memory",
            expected="T.device_entry(launch=T.cuda.LaunchConfig(..., dynamic_smem_bytes=N)) before it",
            found="no launch" if launch is None else "dynamic_smem_bytes=0",
        )
    return launch.dyn_pool


def _active(name, required=True):
    launch = _CURRENT[0]
    if launch is not None and IRBuilder.is_in_scope() and launch.builder.same_as(IRBuilder.current()):
        return launch
    if required:
        raise ValueError(
            f"T.cuda.{name}() needs the kernel's launch: call "
            "T.device_entry(launch=T.cuda.LaunchConfig(grid=..., block=...)) first"
        )
    return None


def _axis(d: str, name: str) -> int:
    if d not in _AXES:
        raise ValueError(f"T.cuda.{name}: axis must be 'x', 'y' or 'z', got {d!r}")
    return _AXES.index(d)


def _index(d, name, vars_attr, dims_attr):
    i = _axis(d, name)
    launch = _active(name)
    variables = getattr(launch, vars_attr)
    if i < len(variables):
        return variables[i]
    assert getattr(launch.config, dims_attr)[i] == 1
    return IntImm("int32", 0)


def cluster_ctaid(d: str = "x"):
    """``%cluster_ctaid.<d>`` (PTX ISA 10.13): the CTA's position in its cluster, an int32
    Var (``IntImm(0)`` for an extent of 1).

    Raises
    ------
    ValueError
        The launch has no clusters.
    """
    i = _axis(d, "cluster_ctaid")
    launch = _active("cluster_ctaid")
    if launch.config.cluster3 is None:
        raise ValueError("T.cuda.cluster_ctaid: the launch has no clusters (LaunchConfig(cluster=...))")
    if i < len(launch.cluster_vars):
        return launch.cluster_vars[i]
    return IntImm("int32", 0)


def thread_idx(d: str = "x"):
    """``threadIdx.<d>``: an int32 Var in ``[0, block[d])`` (``IntImm(0)`` for an extent of 1)."""
    return _index(d, "thread_idx", "block_vars", "block3")


def block_idx(d: str = "x"):
    """``blockIdx.<d>``: an int32 Var in ``[0, grid[d])`` (``IntImm(0)`` for an extent of 1)."""
    return _index(d, "block_idx", "grid_vars", "grid3")


def block_dim(d: str = "x"):
    """``blockDim.<d>`` of the launch, as an int32 constant."""
    return IntImm("int32", _active("block_dim").config.block3[_axis(d, "block_dim")])


def grid_dim(d: str = "x"):
    """``gridDim.<d>`` of the launch: an int32 constant, or the extent's expression
    for a run-time grid (``T.ceildiv(n, 256)``)."""
    extent = _active("grid_dim").config.grid3[_axis(d, "grid_dim")]
    return extent if is_run_time(extent) else IntImm("int32", extent)


def _linear_thread():
    launch = _active("lane_id")
    return LaunchFacts(block=launch.config.block3, thread_vars=tuple(launch.block_vars)).linear_thread()


def lane_id():
    """The thread's lane in its warp: linear thread index mod 32 (int32 expression)."""
    return _linear_thread() % WARP


def warp_id():
    """The thread's warp in its CTA: linear thread index // 32 (int32 expression)."""
    return _linear_thread() // WARP


#: apache-tvm builders that ours wrap, captured before installation.
_STOCK: dict = {}
