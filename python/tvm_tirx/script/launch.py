"""Kernel entry with an explicit launch: ``T.device_entry(launch=T.cuda.LaunchConfig(...))``
and the CUDA index builders ``T.cuda.thread_idx`` & co."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ..tile.scope import WARP

__all__ = [
    "LaunchConfig",
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


def _dims(value, what: str, run_time: bool = False) -> tuple:
    """``value`` as 3 extents, ``x`` first (missing ones 1); ``run_time`` allows
    integer expressions of the kernel's parameters (the grid)."""
    value = _extents(value, what, run_time)
    if not 1 <= len(value) <= 3 or not all(isinstance(v, int) and v >= 1 or _is_int_expr(v) for v in value):
        allowed = " or integer expressions of the kernel's parameters" if run_time else ""
        raise ValueError(
            f"LaunchConfig: {what} must be a positive int or a tuple of 1 to 3 positive ints{allowed}, "
            f"got {value!r}"
        )
    return value + (1,) * (3 - len(value))


def _is_int_expr(value) -> bool:
    import tvm  # pylint: disable=import-outside-toplevel

    return tvm.ir.is_prim_expr(value) and str(value.ty.dtype).startswith(("int", "uint"))


def _extents(value, what: str, run_time: bool) -> tuple:
    """``value`` as a tuple, integer literals (``T.int32(4)``) as ints.

    Raises ValueError for an extent that is a run-time expression where only
    compile-time extents are allowed (block, cluster).
    """
    from tvm.ir import Expr  # pylint: disable=import-outside-toplevel
    from tvm.tirx import IntImm  # pylint: disable=import-outside-toplevel

    items = (value,) if isinstance(value, (int, Expr)) else tuple(value)
    out = []
    for item in items:
        if isinstance(item, IntImm):
            item = int(item.value)
        elif isinstance(item, Expr) and not run_time:
            raise ValueError(
                f"LaunchConfig: {what} extent {item} is a run-time value; {what} extents are ints "
                "known when the kernel is compiled (grid and dynamic_smem_bytes may be run-time "
                "expressions)"
            )
        out.append(item)
    return tuple(out)


def _is_run_time(value) -> bool:
    """Whether a launch size is a run-time expression (not an int)."""
    return not isinstance(value, int)


@dataclass(frozen=True)
class LaunchConfig:
    """The launch of a kernel: grid and block extents (CUDA ``gridDim``/``blockDim``).

    Parameters
    ----------
    grid : int | PrimExpr | tuple[int | PrimExpr, ...]
        CTAs per grid, ``x`` first (1 to 3 extents).  An extent may be an
        integer expression of the kernel's scalar parameters and symbolic
        tensor extents (``grid=T.ceildiv(n, 256)``): apache-tvm's host code
        computes it from the arguments at every launch, and
        :class:`tvm_tirx.Kernel` checks it first (:mod:`tvm_tirx.build.launch_sizes`).
        Nothing bounds the CTA ids then, so a memory access of the last,
        partial CTA must be guarded (``pred=`` or ``if``; the bounds rule).
    block : int | tuple[int, ...]
        Threads per CTA, ``x`` first (1 to 3 extents); at most 1024 in total
        (CUDA C++ Programming Guide, "Thread Hierarchy").
    cluster : int | tuple[int, ...] | None
        CTAs per thread-block cluster, ``x`` first (sm_90; PTX ISA 2.2.1, at
        most 8 CTAs portably).  Each grid extent must be a multiple of the
        cluster's.
    dynamic_smem_bytes : int | PrimExpr
        Dynamic shared memory per CTA in bytes (CUDA's ``extern __shared__``
        window).  A non-zero size gives the kernel one pool, emitted as
        apache-tvm's ``tirx.dyn_smem_bytes`` attribute, out of which
        ``T.alloc_shared(..., scope="shared.dyn")`` carves named tensors
        (see :mod:`tvm_tirx.script.dyn_smem`).  The target's limit is checked
        when the kernel is compiled (:mod:`tvm_tirx.build.smem_limits`).  An integer
        expression of the kernel's parameters (``n * 4``) is a run-time size:
        the pool is then allocated with that extent (apache-tvm's host code
        computes the launch's size from it), and the limit and the carve-outs'
        extent are checked by :class:`tvm_tirx.Kernel` before each launch
        (:mod:`tvm_tirx.build.launch_sizes`).
    min_blocks_per_sm : int | None
        CUDA's ``__launch_bounds__(threads, minBlocksPerMultiprocessor)``: ask
        the compiler to fit this many CTAs per SM (it limits registers to do so).
    max_registers : int | None
        CUDA's ``__maxnreg__``: registers per thread at most.
    programmatic_dependent_launch : bool
        Launch with CUDA's programmatic stream serialization attribute
        (``cudaLaunchAttributeProgrammaticStreamSerialization``, sm_90): the
        kernel may start before the previous kernel on the stream finishes;
        it must execute ``T.ptx["griddepcontrol.wait"]()`` before reading what
        that kernel wrote, and the previous kernel may let it start early with
        ``T.ptx["griddepcontrol.launch_dependents"]()`` (PTX ISA 9.7.15.14).
        apache-tvm's CUDA launcher sets the attribute when the kernel's
        ``tirx.kernel_launch_params`` holds ``tirx.use_programtic_dependent_launch``
        (apache-tvm's spelling); ``T.device_entry`` adds it as a function
        attribute, so ``T.device_entry`` must then be at the kernel's top
        level (outside any ``with``/``for``/``if``).  Not with ``cluster`` in
        this release.

    Raises
    ------
    ValueError
        Extents that are not positive ints, a block of more than 1024 threads,
        a grid that is not a whole number of clusters,
        ``programmatic_dependent_launch`` with ``cluster``, a
        ``dynamic_smem_bytes`` that is neither an int >= 0 nor an integer
        expression, a run-time block or cluster extent, or a run-time grid
        with ``cluster`` (the grid must be a whole number of clusters, which
        is not known when the kernel is compiled).
    """

    grid: tuple = 1
    block: tuple = 1
    cluster: object = None
    dynamic_smem_bytes: object = 0  # int, or an integer PrimExpr (a run-time size)
    min_blocks_per_sm: int | None = None
    max_registers: int | None = None
    programmatic_dependent_launch: bool = False
    grid3: tuple = field(init=False, repr=False)
    block3: tuple = field(init=False, repr=False)
    cluster3: tuple = field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "grid3", _dims(self.grid, "grid", run_time=True))
        object.__setattr__(self, "block3", _dims(self.block, "block"))
        cluster3 = None if self.cluster is None else _dims(self.cluster, "cluster")
        object.__setattr__(self, "cluster3", cluster3)
        threads = self.block3[0] * self.block3[1] * self.block3[2]
        if threads > 1024:
            raise ValueError(f"LaunchConfig: block has {threads} threads, more than 1024")
        if cluster3 is not None and any(_is_run_time(g) for g in self.grid3):
            raise ValueError(
                f"LaunchConfig: a run-time grid {self.grid3} with cluster {cluster3} is not supported: "
                "give the grid as ints (a whole number of clusters)"
            )
        if cluster3 is not None and any(g % c for g, c in zip(self.grid3, cluster3)):
            raise ValueError(
                f"LaunchConfig: grid {self.grid3} is not a whole number of clusters {cluster3}"
            )
        if self.min_blocks_per_sm and self.max_registers:
            raise ValueError(
                "LaunchConfig: give min_blocks_per_sm or max_registers, not both "
                "(CUDA's __maxnreg__ cannot be combined with __launch_bounds__'s minimum)"
            )
        if self.programmatic_dependent_launch and cluster3 is not None:
            raise ValueError(
                "LaunchConfig: programmatic_dependent_launch with cluster is not supported in this "
                "release (apache-tvm 0.27's CUDA launcher is not verified to set both launch attributes)"
            )
        size = self.dynamic_smem_bytes
        if _is_int_expr(size):
            size = _extents(size, "dynamic_smem_bytes", True)[0]
            object.__setattr__(self, "dynamic_smem_bytes", size)
        if not (_is_int_expr(size) or isinstance(size, int) and not isinstance(size, bool) and size >= 0):
            raise ValueError(
                "LaunchConfig: dynamic_smem_bytes must be an int >= 0 or an integer expression of the "
                f"kernel's parameters (bytes), got {size!r}"
            )

    @property
    def threads(self) -> int:
        """Threads per CTA."""
        return self.block3[0] * self.block3[1] * self.block3[2]

    @property
    def cluster_used(self) -> tuple:
        """Cluster extents up to the last one that is not 1 (``()`` without clusters)."""
        return () if self.cluster3 is None else tuple(_used(self.cluster3))


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


def _used(dims3):
    """Extents up to the last one that is not 1 (at least ``x``)."""
    n = 3
    while n > 1 and isinstance(dims3[n - 1], int) and dims3[n - 1] == 1:
        n -= 1
    return list(dims3[:n])


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
    from tvm.script.ir_builder import IRBuilder  # pylint: disable=import-outside-toplevel
    from tvm.tirx.script.builder import ir as _ir  # pylint: disable=import-outside-toplevel

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
    if not _is_run_time(dyn_size) and dyn_size:
        # Read by apache-tvm's SplitHostDevice into the launch's shared-memory size.
        bounds["tirx.dyn_smem_bytes"] = dyn_size
    if bounds:
        # A flat `T.attr({...})` statement, entered as the TIRx parser enters one.
        scope = _ir.attr(bounds)
        for frame in getattr(scope, "frames", [scope]):
            frame.add_callback(functools.partial(frame.__exit__, None, None, None))
            frame.__enter__()
    cluster_vars = []
    grid = _used(launch.grid3)
    if launch.cluster3 is not None:
        rank = max(len(grid), len(launch.cluster_used))
        grid = list(launch.grid3[:rank])
        cluster = list(launch.cluster3[:rank])
        _ir.cluster_id([g // c for g, c in zip(grid, cluster)])
        cluster_vars = _as_list(_ir.cta_id_in_cluster(cluster))
    grid_vars = _as_list(_ir.cta_id(grid))
    block_vars = _as_list(_ir.thread_id(_used(launch.block3)))
    pool = None
    if _is_run_time(dyn_size) or dyn_size:
        from .dyn_smem import DynamicSharedPool  # pylint: disable=import-outside-toplevel

        pool = DynamicSharedPool(dyn_size)

    _CURRENT[0] = _Launch(IRBuilder.current(), launch, block_vars, grid_vars, cluster_vars, pool)


#: apache-tvm's launch-parameter tag (runtime/meta_data.h, spelled so) that makes its CUDA
#: launcher use cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION.
PDL_TAG = "tirx.use_programtic_dependent_launch"


def _request_programmatic_dependent_launch() -> None:
    """Add the PDL tag to the kernel's ``tirx.kernel_launch_params`` attribute (apache-tvm's
    SplitHostDevice appends it to the launch parameters it computes)."""
    from tvm.tirx.script.builder import ir as _ir  # pylint: disable=import-outside-toplevel

    try:
        _ir.func_attr({"tirx.kernel_launch_params": [PDL_TAG]})
    except ValueError as err:
        raise ValueError(
            "LaunchConfig(programmatic_dependent_launch=True): T.device_entry must be at the top "
            "level of the kernel, outside any with/for/if (the launch attribute is a function "
            f"attribute); or write T.func_attr({{'tirx.kernel_launch_params': ['{PDL_TAG}']}}) there"
        ) from err


def _as_list(v):
    import tvm  # pylint: disable=import-outside-toplevel

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
    from ..errors import TileError  # pylint: disable=import-outside-toplevel

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
    from tvm.script.ir_builder import IRBuilder  # pylint: disable=import-outside-toplevel

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
    from tvm.tirx import IntImm  # pylint: disable=import-outside-toplevel

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
    from tvm.tirx import IntImm  # pylint: disable=import-outside-toplevel

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
    from tvm.tirx import IntImm  # pylint: disable=import-outside-toplevel

    return IntImm("int32", _active("block_dim").config.block3[_axis(d, "block_dim")])


def grid_dim(d: str = "x"):
    """``gridDim.<d>`` of the launch: an int32 constant, or the extent's expression
    for a run-time grid (``T.ceildiv(n, 256)``)."""
    from tvm.tirx import IntImm  # pylint: disable=import-outside-toplevel

    extent = _active("grid_dim").config.grid3[_axis(d, "grid_dim")]
    return extent if _is_run_time(extent) else IntImm("int32", extent)


def _linear_thread():
    from ..tile.scope import LaunchFacts  # pylint: disable=import-outside-toplevel

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
