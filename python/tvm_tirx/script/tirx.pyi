"""Type stub for ``from tvm_tirx.script import tirx as T``.

At runtime ``tvm_tirx.script.tirx`` is apache-tvm's ``tvm.script.tirx`` with
tvm_tirx's names installed (``tvm_tirx/script/install.py``).  This stub
declares those names with their exact parameters, the stock names that the
tutorials use, and a view/tensor type for buffers.  It is partial: every other
stock TVMScript name resolves through the module ``__getattr__`` as ``Any``.

apache-tvm ships no type information, so its classes (``PrimExpr``,
``PrimFunc``, ``TileLayout`` ...) are spelled here as aliases of ``Any``; the
aliases document the intent and keep this stub free of tvm imports.

``TensorView`` and the aliases ``PrimExpr``, ``PrimFunc``, ``PtxInstr``,
``TensorRegion``, ``Shape``, ``Index``, ``Scope`` and ``Axis`` exist for type checkers only
(there is no runtime object): use them in annotations under
``typing.TYPE_CHECKING`` or as strings, e.g. ``def f(x: "T.TensorView")``.
"""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, overload

# ---------------------------------------------------------------------------
# apache-tvm types (Any to a type checker: apache-tvm has no py.typed)
# ---------------------------------------------------------------------------

#: ``tvm.ir.PrimExpr``: a scalar TIR expression (a ``Var``, ``IntImm``, a call ...).
PrimExpr: TypeAlias = Any
#: ``tvm.tirx.PrimFunc``: what ``@T.function`` makes of a kernel.
PrimFunc: TypeAlias = Any
#: ``tvm.tirx.layout.Layout`` (``TileLayout``, ``ComposeLayout`` ...).
Layout: TypeAlias = Any
#: ``T.ptx["..."]``: one PTX instruction of apache-tvm's PTX table (``_InstrChain``).
PtxInstr: TypeAlias = Any
#: ``tvm.ir.TensorRegion``: ``A[0:64, 1:2]``, a region of a buffer (every axis kept);
#: tile operands take it as the view ``A.sub[0:64, 1:2]``.
TensorRegion: TypeAlias = Any

#: A shape: one extent or a sequence of extents (ints or int32/int64 expressions).
Shape: TypeAlias = int | Sequence[int | PrimExpr]
#: One index of ``view.sub[...]``: an int/expression selects, a slice narrows.
Index: TypeAlias = int | slice | PrimExpr
#: Execution scopes of ``T.cuda.tile.apply`` (``tvm_tirx.tile.ir.scope.SCOPES``).
Scope: TypeAlias = Literal["thread", "warp", "warpgroup", "cta", "cluster"]
#: A CUDA launch axis.
Axis: TypeAlias = Literal["x", "y", "z"]

# ---------------------------------------------------------------------------
# Tensors and views
# ---------------------------------------------------------------------------

class _SubIndexer:
    """``view.sub``: numpy-style view constructor (``A.sub[tid, :]``, ``A.sub[0, 4:8, ::4]``)."""

    def __getitem__(self, indices: Index | tuple[Index, ...], /) -> TensorView:
        """An int/expression removes the dim, ``a:b`` narrows it, ``a::s`` takes every s-th."""

class _PickIndexer:
    """The indexer of ``view.tile(...)`` and ``view.chunk(...)``: index it with picks."""

    def __getitem__(self, picks: Index | tuple[Index, ...], /) -> TensorView: ...

class TensorView:
    """A ``tvm.tirx.Buffer`` as tile operands see it.

    What ``T.Tensor`` declares and ``T.alloc_local``/``T.alloc_shared`` return
    (at runtime a ``tvm.ir.Var`` with a ``BufferType``).  Views (``sub``,
    ``view``, ``local``, ``permute``, ``rearrange``, ``tile``, ``chunk``) are
    zero-copy buffers over the same storage; ``A[i, j]`` is an element (a
    ``BufferLoad`` expression), ``A[i, j] = v`` stores one.
    """

    @property
    def shape(self) -> Sequence[PrimExpr]:
        """Logical extents (``IntImm`` for static ones)."""
    @property
    def dtype(self) -> str:
        """Element dtype, e.g. ``"float32"``."""
    @property
    def layout(self) -> Layout | None:
        """Where each coordinate lives (``TileLayout``), or None."""
    @property
    def strides(self) -> Sequence[PrimExpr]: ...
    @property
    def elem_offset(self) -> PrimExpr: ...
    @property
    def data_alignment(self) -> int: ...
    @property
    def offset_factor(self) -> int: ...
    @property
    def allocated_addr(self) -> Sequence[PrimExpr] | None: ...
    @property
    def data(self) -> PrimExpr:
        """The buffer's data pointer."""
    @property
    def byte_offset(self) -> PrimExpr: ...
    @property
    def sub(self) -> _SubIndexer:
        """Numpy-style view indexer: ``A.sub[tid, :]`` is row ``tid`` as a ``(n,)`` view."""
    def scope(self) -> str:
        """Storage scope: ``"global"``, ``"shared"``, ``"local"`` ..."""
    @overload
    def view(self, dtype: str, /) -> TensorView:
        """Reinterpret the elements: ``r.view("uint32")`` (the last extent scales)."""
    @overload
    def view(self, *shape: int | PrimExpr, layout: Layout | None = None) -> TensorView:
        """Reshape (one ``-1`` is inferred) or, with ``layout=``, re-lay the storage."""
    def local(self, *shape: int | PrimExpr, layout: Layout | None = None) -> TensorView:
        """The thread's own storage of a distributed buffer (its physical span)."""
    def permute(self, *dims: int) -> TensorView:
        """Reorder the dimensions: ``C.view(2, 8, 4, 2).permute(1, 2, 0, 3)``."""
    def rearrange(self, pattern: str, /, **sizes: int) -> TensorView:
        """einops-style relayout: ``buf.rearrange("b (2 r) -> 2 b r")``."""
    @overload
    def tile(self, dim: int, factors: Sequence[int], /) -> _PickIndexer:
        """Split ``dim`` into ``factors`` and pick a chunk: ``buf.tile(0, (4, -1))[c, :]``."""
    @overload
    def tile(self, *specs: tuple[int, Sequence[int]]) -> _PickIndexer: ...
    def chunk(self, spec: Sequence[int | None], /) -> _PickIndexer:
        """Equal contiguous chunks per dim: ``X.chunk((None, 4))[:, c]``."""
    def access_ptr(
        self,
        access_mask: str | int,
        ptr_type: str = "handle",
        content_lanes: int = 1,
        offset: PrimExpr = 0,
        extent: PrimExpr | None = None,
    ) -> PrimExpr: ...
    def ptr_to(self, indices: Sequence[PrimExpr]) -> PrimExpr:
        """Address of the element at ``indices``."""
    def vload(self, begin: Sequence[PrimExpr], dtype: str | None = None) -> PrimExpr: ...
    def vstore(self, begin: Sequence[PrimExpr], value: PrimExpr) -> Any: ...
    def offset_of(self, indices: Sequence[PrimExpr]) -> list[PrimExpr]: ...
    def elem_offset_of(self, indices: Sequence[PrimExpr], inner: bool = True) -> PrimExpr: ...
    def byte_offset_of(self, indices: Sequence[PrimExpr], inner: bool = True) -> PrimExpr: ...
    def is_scalar(self, alloc_or_decl: bool = True) -> bool: ...
    def get_flattened_buffer(self) -> TensorView: ...
    def with_dtype(self, dtype: str) -> TensorView: ...
    def with_allocated_addr(self, allocated_addr: Any) -> TensorView: ...
    def __getitem__(self, indices: Index | tuple[Index, ...], /) -> PrimExpr:
        """An element (``BufferLoad``): ``policy[0]``; with a slice, a region
        (``TensorRegion``, ``A[0:64, 1:2]``), which tile operands take as ``A.sub[0:64, 1:2]``."""
    def __setitem__(
        self, indices: Index | tuple[Index, ...], value: PrimExpr | int | float, /
    ) -> None:
        """Store one element (``BufferStore``)."""

# ---------------------------------------------------------------------------
# Names tvm_tirx adds (tvm_tirx/script/builders.py, launch.py)
# ---------------------------------------------------------------------------

@overload
def function(
    func: Callable[..., Any], *, private: bool = False, check_well_formed: bool = True
) -> PrimFunc:
    """Parse a kernel written in TVMScript into a ``PrimFunc``: ``@T.function``.

    A tile-contract violation is raised as ``tvm_tirx.TileError`` at the
    offending line.
    """

@overload
def function(
    func: None = None, *, private: bool = False, check_well_formed: bool = True
) -> Callable[[Callable[..., Any]], PrimFunc]:
    """``@T.function(private=True)``: the decorator with options."""

def Tensor(  # noqa: N802
    shape: Sequence[int | PrimExpr],
    dtype: str = "float32",
    align: int = 0,
    scope: str = "global",
    layout: Layout | None = None,
) -> TensorView:
    """A kernel parameter: ``A: T.Tensor((64, 4), "float32", align=16)``.

    ``align`` is the promised alignment of the base pointer in bytes (0: the
    element size; otherwise a power of two).  A type checker sees the call in
    an annotation as an invalid type (mypy's ``valid-type``): the parameter is
    ``Any`` to it.
    """

def assume(cond: PrimExpr | bool) -> PrimExpr:
    """``T.assume(cond)``: a fact the bounds and alignment proofs take as given from
    this statement on (until the memory it reads is written); a non-boolean
    ``cond`` is a ``tvm_tirx.TileError``.  ``options={"check_assumptions": True}``
    checks it at run time (prints the line and traps)."""

def dynamic(name: str, dtype: Literal["int32", "int64"] = "int32") -> PrimExpr:
    """A named symbolic extent: ``N = T.dynamic("N")`` at module level, then
    ``T.Tensor((N, 4), "float32")``; it prints and appears in messages as ``N``
    (apache-tvm's ``tvm.tirx.Var(name, dtype)``)."""

def alloc_local(
    shape: Shape,
    dtype: str = "float32",
    data: PrimExpr | None = None,
    strides: Sequence[PrimExpr] | None = None,
    elem_offset: PrimExpr | None = None,
    byte_offset: PrimExpr | None = None,
    *,
    scope: str = "local",
    align: int = -1,
    offset_factor: int = 0,
    layout: Literal["default"] | Layout | None = "default",
    allocated_addr: int | tuple[int, ...] | None = None,
    annotations: dict[str, Any] | None = None,
) -> TensorView:
    """Per-thread registers: ``T.alloc_local((4,), "float32", layout="default")``.

    ``layout`` may be any ``TileLayout``, gapped or permuted; storage is the
    layout's span.  (The runtime wrapper takes ``shape, dtype, *args,
    layout=, **kwargs`` and forwards the rest to apache-tvm's
    ``T.alloc_local``, whose parameters are the ones declared here.)
    """

def alloc_shared(
    shape: Shape,
    dtype: str = "float32",
    data: PrimExpr | None = None,
    strides: Sequence[PrimExpr] | None = None,
    elem_offset: PrimExpr | None = None,
    byte_offset: PrimExpr | None = None,
    *,
    scope: str = "shared",
    align: int = -1,
    offset_factor: int = 0,
    layout: Literal["default"] | Layout | None = "default",
    allocated_addr: int | tuple[int, ...] | None = None,
    annotations: dict[str, Any] | None = None,
) -> TensorView:
    """CTA shared memory: ``T.alloc_shared((64, 4), "float32", align=16)``.

    ``scope="shared.dyn"`` carves the tensor out of the kernel's dynamic shared
    memory; it also takes the keywords ``offset=`` (bytes; None: the next free
    byte, rounded up to ``align``) and ``alias=True`` (overlap earlier carve-outs)."""

def device_entry(launch: _CudaNamespace.LaunchConfig | None = None) -> None:
    """Start the device region: ``T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))``.

    With a launch it also defines the CTA and thread indices that
    ``T.cuda.thread_idx("x")`` and friends return.
    """

class _TileNamespace:
    """``T.cuda.tile``: tile operations over tensor views."""

    @staticmethod
    def apply(
        instr: str | PtxInstr,
        *operands: TensorView | TensorRegion | PrimExpr,
        scope: Scope = "thread",
        pred: PrimExpr | None = None,
        preserve_dst: bool = False,
        **params: PrimExpr,
    ) -> PrimExpr:
        """Repeat one explicitly named PTX instruction over tensor views.

        ``T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], registers, A.sub[tid, :])``

        Operands come in the family's order (``ld``: registers, memory; ``st``:
        memory, registers; ``mov``: dst, src); each shape reads
        ``(*group, *repeat, *atom)``.  ``pred`` guards every emitted
        instruction; ``preserve_dst=True`` keeps predicated-off register
        destinations; ``**params`` are family parameters (``cache_policy=``).
        A region ``A[0:64, 1:2]`` is the view ``A.sub[0:64, 1:2]`` (every axis kept).
        """
    @staticmethod
    def ewise(
        fn: Callable[..., PrimExpr],
        dst: TensorView | TensorRegion,
        *inputs: TensorView | TensorRegion | PrimExpr,
        scope: Literal["thread"] = "thread",
    ) -> None:
        """``dst[c] = fn(*inputs[c])`` at every coordinate of register tensors.

        ``T.cuda.tile.ewise(lambda v: v * T.sigmoid(v), y, x)``
        """
    @staticmethod
    def reduce_lanes(
        instr: str | PtxInstr,
        values: TensorView | TensorRegion,
        *,
        lanes: int | None = None,
        xor: int | Sequence[int] | None = None,
        across: tuple[TensorView, int] | None = None,
        membermask: PrimExpr | int | None = None,
    ) -> None:
        """Reduce each register of ``values`` over a group of lanes, in place, with
        butterfly ``shfl.sync.bfly.b32`` and ``instr`` tile calls (one each per lane mask).

        ``T.cuda.tile.reduce_lanes(T.ptx["max.f32"], row_max, lanes=4)``; the group is
        ``lanes=n`` consecutive lanes, the masks ``xor=(1, 2)``, or ``across=(acc, 1)``:
        the lanes over which axis 1 of register tensor ``acc`` lies.
        """

class _CudaNamespace:
    """``T.cuda``: apache-tvm's CUDA namespace plus tvm_tirx's launch names and ``tile``.

    Indices need the launch of ``T.device_entry(launch=...)``; each is an int32
    expression (``IntImm(0)`` along an axis of extent 1).
    """

    @dataclass(frozen=True)
    class LaunchConfig:
        """The launch of a kernel: ``T.cuda.LaunchConfig(grid=1, block=64, cluster=None)``.

        Extents are an int or 1 to 3 ints, ``x`` first; at most 1024 threads per
        CTA; the grid must be a whole number of clusters.  ``min_blocks_per_sm``
        (``__launch_bounds__``) and ``max_registers`` (``__maxnreg__``) exclude
        each other; ``dynamic_smem_bytes`` (bytes) gives the kernel a dynamic
        shared memory pool for ``T.alloc_shared(..., scope="shared.dyn")``.
        ``programmatic_dependent_launch`` launches with CUDA's programmatic stream
        serialization (pair it with ``T.ptx["griddepcontrol.wait"]()``); not with clusters.
        ``grid`` extents and ``dynamic_smem_bytes`` may be integer expressions of the
        kernel's scalar parameters and symbolic extents (``grid=T.ceildiv(N, 256)``),
        computed and checked at each call; a run-time grid is not combined with ``cluster``.
        """

        grid: int | PrimExpr | Sequence[int | PrimExpr] = 1
        block: int | Sequence[int] = 1
        cluster: int | Sequence[int] | None = None
        dynamic_smem_bytes: int | PrimExpr = 0
        min_blocks_per_sm: int | None = None
        max_registers: int | None = None
        programmatic_dependent_launch: bool = False
        grid3: tuple[int | PrimExpr, int | PrimExpr, int | PrimExpr] = field(init=False, repr=False)
        block3: tuple[int, int, int] = field(init=False, repr=False)
        cluster3: tuple[int, int, int] | None = field(init=False, repr=False)
        @property
        def threads(self) -> int:
            """Threads per CTA."""
        @property
        def cluster_used(self) -> tuple[int, ...]:
            """Cluster extents up to the last one that is not 1 (``()`` without clusters)."""
    tile: _TileNamespace
    @staticmethod
    def thread_idx(d: Axis = "x") -> PrimExpr:
        """``threadIdx.<d>``: an int32 Var in ``[0, block[d])``."""
    @staticmethod
    def block_idx(d: Axis = "x") -> PrimExpr:
        """``blockIdx.<d>``: an int32 Var in ``[0, grid[d])``."""
    @staticmethod
    def block_dim(d: Axis = "x") -> PrimExpr:
        """``blockDim.<d>`` of the launch, an int32 constant."""
    @staticmethod
    def grid_dim(d: Axis = "x") -> PrimExpr:
        """``gridDim.<d>`` of the launch: an int32 constant, or the run-time extent's expression."""
    @staticmethod
    def lane_id() -> PrimExpr:
        """The thread's lane in its warp (linear thread index mod 32)."""
    @staticmethod
    def warp_id() -> PrimExpr:
        """The thread's warp in its CTA (linear thread index // 32)."""
    @staticmethod
    def cluster_ctaid(d: Axis = "x") -> PrimExpr:
        """``%cluster_ctaid.<d>``: the CTA's position in its cluster (needs ``cluster=``)."""
    @staticmethod
    def mbarrier_wait_phase(bar: TensorView, phase: int | PrimExpr, *, scope: Literal["cta", "cluster"] = "cta") -> PrimExpr:
        """Spin until the phase of parity ``phase`` of mbarrier ``bar`` (a uint64 shared view of shape (1,)) completes."""

    # -- apache-tvm's own T.cuda names ------------------------------------
    @staticmethod
    def cta_sync() -> PrimExpr:
        """``__syncthreads()``: CTA-wide barrier."""
    @staticmethod
    def warp_sync() -> PrimExpr:
        """``__syncwarp()``."""
    @staticmethod
    def cluster_sync() -> PrimExpr:
        """Cluster-wide barrier (``barrier.cluster.arrive`` + ``wait``)."""
    # Declared without signatures (each is a call or a sub-namespace); listing
    # them keeps a misspelt ``T.cuda.<name>`` an error.
    any_sync: Callable[..., PrimExpr]
    atomic_add: Callable[..., PrimExpr]
    atomic_cas: Callable[..., PrimExpr]
    ballot_sync: Callable[..., PrimExpr]
    bfloat1622float2: Callable[..., PrimExpr]
    bfloat162float: Callable[..., PrimExpr]
    clock64: Callable[..., PrimExpr]
    cta_max: Callable[..., PrimExpr]
    cta_min: Callable[..., PrimExpr]
    cta_reduce: Callable[..., PrimExpr]
    cta_sum: Callable[..., PrimExpr]
    cvta_generic_to_shared: Callable[..., PrimExpr]
    elect_sync: Callable[..., PrimExpr]
    fadd2_rn: Callable[..., PrimExpr]
    fdividef: Callable[..., PrimExpr]
    ffs_u32: Callable[..., PrimExpr]
    float22bfloat162_rn: Callable[..., PrimExpr]
    float22bfloat162_rn_from_float2: Callable[..., PrimExpr]
    float22half2: Callable[..., PrimExpr]
    float2_x: Callable[..., PrimExpr]
    float2_y: Callable[..., PrimExpr]
    float8tohalf8: Callable[..., PrimExpr]
    float_as_uint: Callable[..., PrimExpr]
    fmul2_rn: Callable[..., PrimExpr]
    fp8x4_e4m3_from_float4: Callable[..., PrimExpr]
    func_call: Callable[..., PrimExpr]
    get_tmem_addr: Callable[..., PrimExpr]
    grid_sync: Callable[..., PrimExpr]
    half2float: Callable[..., PrimExpr]
    half8tofloat8: Callable[..., PrimExpr]
    hmax2: Callable[..., PrimExpr]
    hmin2: Callable[..., PrimExpr]
    iket: Any
    ldg: Callable[..., PrimExpr]
    make_float2: Callable[..., PrimExpr]
    mbarrier_wait: Callable[..., PrimExpr]
    mbarrier_wait_acquire_cluster: Callable[..., PrimExpr]
    mma_fill: Callable[..., PrimExpr]
    mma_fill_legacy: Callable[..., PrimExpr]
    mma_store: Callable[..., PrimExpr]
    mma_store_legacy: Callable[..., PrimExpr]
    mov_sreg: Callable[..., PrimExpr]
    nano_sleep: Callable[..., PrimExpr]
    printf: Callable[..., PrimExpr]
    reduce_add_sync_u32: Callable[..., PrimExpr]
    reduce_min_sync_u32: Callable[..., PrimExpr]
    runtime_instr_desc: Callable[..., PrimExpr]
    sm100_2sm_leader_smem_addr: Callable[..., PrimExpr]
    smem_addr_from_uint64: Callable[..., PrimExpr]
    syncthreads_and: Callable[..., PrimExpr]
    syncthreads_or: Callable[..., PrimExpr]
    tcgen05: Any
    thread_fence: Callable[..., PrimExpr]
    thread_rank: Callable[..., PrimExpr]
    timer_end: Callable[..., PrimExpr]
    timer_finalize: Callable[..., PrimExpr]
    timer_init: Callable[..., PrimExpr]
    timer_start: Callable[..., PrimExpr]
    trap_when_assert_failed: Callable[..., PrimExpr]
    uint_as_float: Callable[..., PrimExpr]
    wait_until: Callable[..., PrimExpr]
    warp_max: Callable[..., PrimExpr]
    warp_min: Callable[..., PrimExpr]
    warp_reduce: Callable[..., PrimExpr]
    warp_sum: Callable[..., PrimExpr]
    warpgroup_sync: Callable[..., PrimExpr]
    wgmma: Any

cuda: _CudaNamespace

# ---------------------------------------------------------------------------
# Stock apache-tvm names the tutorials use
# ---------------------------------------------------------------------------

class _PtxNamespace:
    """``T.ptx``: apache-tvm's PTX instruction table, ``T.ptx["ld.global.v4.b32"]``.

    An entry is ``Any`` to a type checker; its spelling is checked when the
    kernel is parsed (``tvm_tirx.TileError``).
    """

    def __getitem__(self, text: str, /) -> PtxInstr: ...
    def __getattr__(self, name: str) -> Any: ...

ptx: _PtxNamespace

class _DtypeConstructor:
    """A dtype: ``T.float32(0)`` is a typed constant, ``x: T.float32`` a typed scalar."""

    def __call__(
        self, expr: PrimExpr | Literal["inf", "-inf", "nan"] | int | float | None = None
    ) -> PrimExpr: ...
    def __getitem__(self, shape: int | tuple[int, ...], /) -> Any: ...

bfloat16: _DtypeConstructor
float16: _DtypeConstructor
float32: _DtypeConstructor
float64: _DtypeConstructor
int8: _DtypeConstructor
int16: _DtypeConstructor
int32: _DtypeConstructor
int64: _DtypeConstructor
uint8: _DtypeConstructor
uint16: _DtypeConstructor
uint32: _DtypeConstructor
uint64: _DtypeConstructor

def min(a: PrimExpr, b: PrimExpr) -> PrimExpr:  # noqa: A001
    """The smaller of two expressions."""

def max(a: PrimExpr, b: PrimExpr) -> PrimExpr:  # noqa: A001
    """The larger of two expressions."""

def sigmoid(x: PrimExpr) -> PrimExpr:
    """``1 / (1 + exp(-x))``."""

def exp(x: PrimExpr) -> PrimExpr: ...
def sqrt(x: PrimExpr) -> PrimExpr: ...
def serial(
    start: PrimExpr,
    stop: PrimExpr = None,
    *,
    annotations: dict[str, Any] | None = None,
    step: PrimExpr | None = None,
    unroll: bool | int | None = None,
    dtype: str | None = None,
) -> Iterable[PrimExpr]:
    """``for i in T.serial(n)``: a sequential loop (a ``ForFrame`` that the parser iterates)."""

def unroll(
    start: PrimExpr,
    stop: PrimExpr = None,
    *,
    annotations: dict[str, Any] | None = None,
    step: PrimExpr | None = None,
    dtype: str | None = None,
) -> Iterable[PrimExpr]:
    """``for i in T.unroll(n)``: a fully unrolled loop."""

def __getattr__(name: str) -> Any:
    """Every other stock TVMScript name (``T.prim_func``, ``T.Buffer``, ``T.grid`` ...)."""
