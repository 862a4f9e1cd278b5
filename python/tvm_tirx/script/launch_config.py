"""``T.cuda.LaunchConfig``: the grid, block, cluster and dynamic shared memory of a
kernel's launch, checked when it is written."""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm
from tvm.ir import Expr
from tvm.tirx import IntImm

__all__ = ["LaunchConfig", "used_extents", "is_run_time"]


def used_extents(dims3) -> list:
    """Extents up to the last one that is not 1 (at least ``x``)."""
    n = 3
    while n > 1 and isinstance(dims3[n - 1], int) and dims3[n - 1] == 1:
        n -= 1
    return list(dims3[:n])


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
    return tvm.ir.is_prim_expr(value) and str(value.ty.dtype).startswith(("int", "uint"))


def _extents(value, what: str, run_time: bool) -> tuple:
    """``value`` as a tuple, integer literals (``T.int32(4)``) as ints.

    Raises ValueError for an extent that is a run-time expression where only
    compile-time extents are allowed (block, cluster).
    """
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


def is_run_time(value) -> bool:
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
        if cluster3 is not None and any(is_run_time(g) for g in self.grid3):
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
        return () if self.cluster3 is None else tuple(used_extents(self.cluster3))
