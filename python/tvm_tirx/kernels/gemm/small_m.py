"""The small-M GEMM (decode): ``C (m, n) = X (m, k) @ W (n, k)^T`` for a few rows ``m``.

With ``m`` of 1 to 64 the 128-row tiles of :func:`~tvm_tirx.kernels.gemm.make_gemm` are
almost empty and there are few of them (``n / 256``): the GPU waits on a handful of SMs.
This kernel swaps the operands, as cuBLAS and DeepGEMM do for decode: the weight ``W``
fills wgmma's M side (128 of its rows per CTA, 64 per consumer warpgroup) and the rows of
``X`` its N side (``block_m`` = 8, 16, 32 or 64: ``wgmma.m64n{block_m}k16``, PTX ISA
9.7.15.5), so each CTA computes ``C^T`` for 128 columns of C and ``block_m`` of its rows.
``splits`` CTAs share one such tile, each over a contiguous ``1 / splits`` of K, so that
``ceil(n / 128) * splits`` CTAs stream the weight from every SM (split-K).

Split-K reduction, in the one launch (:class:`~tvm_tirx.kernels.parts.split_k.SplitK`):
every CTA stores its fp32 partial tile into its own slab of the workspace ``Partial (m,
splits * n)`` with plain stores and counts itself in ``Counters[row0, tile]``; the CTA that
completes the count adds the slabs in slab order and writes C, so results are bitwise
reproducible for any ``splits``; ``Counters`` is left zero and ``Partial`` needs no
initial value.  The partials were first added with ``red.global.add.f32`` into a zeroed
workspace: the H200's time per call then grew with ``m`` by about 11 ns per thousand
partial elements, to 0.43x cuBLAS at 64 x 4096 x 4096, as if the L2's atomic units bound it.

The producer warpgroup streams W (128 x 64 per stage) and X (``block_m`` x 64) by TMA into
a ring of ``stages`` buffers (128-byte swizzle), as in :mod:`.producer`; rows of X past
``m`` and K past ``k`` are zero-filled by the TMA.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tvm.script import tirx as T

from ...tile.fragments import accumulator_layout
from ..parts.ring import Ring
from .checks import check_size, check_stride
from .config import BK_BYTES, CONSUMERS, INPUTS, SMEM_LIMIT, WG_M, _ceildiv
from .operands import Operand
from .producer import LOAD
from ..parts.split_k import Workspace, no_empty_split
from .small_m_epilogue import ROWS_W, Place, make_reduce, make_store, split_k

__all__ = ["BLOCK_MS", "SmallMConfig", "make_small_m_gemm", "small_m_smem_bytes"]

#: the rows of X per CTA tile: wgmma's N (a multiple of 8, PTX ISA 9.7.15.5)
BLOCK_MS = (8, 16, 32, 64)
#: the output dtypes (C is stored one element at a time: C^T's elements are not contiguous in C)
OUT_DTYPES = ("bfloat16", "float32")


def small_m_smem_bytes(stages: int, block_m: int) -> int:
    """Dynamic shared memory of :func:`make_small_m_gemm`, bytes: ``stages`` buffers of
    ``(128 + block_m) * 128`` bytes, the mbarriers, a 16-byte slot for the split count,
    and 1 KiB for aligning the swizzled tiles."""
    return stages * (ROWS_W + block_m) * BK_BYTES + 16 * stages + 16 + 1024


@dataclass(frozen=True)
class SmallMConfig:
    """One small-M kernel's sizes and options (:func:`make_small_m_gemm`'s parameters),
    checked when made.

    Raises
    ------
    ValueError
        An option out of range, a ``k`` whose rows break the TMA's 16-byte stride rule,
        a ring that does not fit in shared memory.
    """

    m: object  # int, or an int32 run-time extent
    n: int
    k: int
    block_m: int = 8
    splits: int = 1
    stages: int = 8
    out_dtype: str = "bfloat16"
    in_dtype: str = "bfloat16"

    def __post_init__(self):
        check_size("m", self.m, self.in_dtype)
        for name in ("n", "k"):
            value = getattr(self, name)
            if type(value) is not int:  # noqa: E721
                raise ValueError(f"make_small_m_gemm: {name} must be a Python int, found {value!r}")
            check_size(name, value, self.in_dtype)
        check_stride("k: X (m, k) and W (n, k)", self.k, self.in_dtype)
        rules = [
            ("block_m", self.block_m in BLOCK_MS, f"one of {BLOCK_MS}"),
            ("splits", type(self.splits) is int and 1 <= self.splits <= self.k_tiles  # noqa: E721
             and no_empty_split(self.k_tiles, self.splits),
             f"an int in 1 .. {self.k_tiles} (the 64-element K tiles) that leaves no split without a K tile "
             f"(splits of ceil(k_tiles / splits) tiles)"),
            ("stages", type(self.stages) is int and self.stages >= 1  # noqa: E721
             and small_m_smem_bytes(self.stages, self.block_m) <= SMEM_LIMIT,
             f"a positive int whose ring fits {SMEM_LIMIT} bytes of shared memory"),
            ("out_dtype", self.out_dtype in OUT_DTYPES, f"one of {list(OUT_DTYPES)}"),
            ("in_dtype", self.in_dtype == "bfloat16", "'bfloat16'"),
        ]
        for name, ok, want in rules:
            if not ok:
                raise ValueError(f"make_small_m_gemm: {name} must be {want}, found {getattr(self, name)!r}")

    @property
    def bk(self) -> int:
        """K elements per stage (one 128-byte swizzle row of bf16)."""
        return BK_BYTES // 2

    @property
    def k_tiles(self) -> int:
        """K tiles of the whole reduction, ``ceil(k / 64)``."""
        return -(-self.k // self.bk)

    @property
    def split_tiles(self) -> int:
        """K tiles per split, ``ceil(k_tiles / splits)`` (the last split's tail past K
        is zero-filled by the TMA)."""
        return -(-self.k_tiles // self.splits)

    @property
    def tiles_n(self) -> int:
        """Column tiles of C (128 rows of W each)."""
        return -(-self.n // ROWS_W)

    @property
    def tiles_m(self):
        """Row tiles of C, ``ceil(m / block_m)`` (an expression of a run-time ``m``)."""
        return _ceildiv(self.m, self.block_m)

    @property
    def grid(self):
        """CTAs: one per (row tile, column tile, split)."""
        return self.tiles_m * self.tiles_n * self.splits

    @property
    def operand_w(self) -> Operand:
        """W in the ring: wgmma's A, 128 rows of K-major bf16."""
        return Operand("A", "k", ROWS_W, self.bk, self.in_dtype)

    @property
    def operand_x(self) -> Operand:
        """X in the ring: wgmma's B, ``block_m`` rows of K-major bf16."""
        return Operand("B", "k", self.block_m, self.bk, self.in_dtype)

    @property
    def ring(self) -> Ring:
        """The shared ring: ``stages`` buffers released by the two consumer warpgroups."""
        return Ring(self.stages, CONSUMERS)

    @property
    def mma(self) -> str:
        """The wgmma opcode of ``in_dtype`` (:data:`~.config.INPUTS`), m64 x ``block_m``."""
        return INPUTS[self.in_dtype][0].format(n=self.block_m)

    @property
    def kstep(self) -> int:
        """K elements per wgmma instruction (:data:`~.config.INPUTS`)."""
        return INPUTS[self.in_dtype][1]


class RingBuffers(NamedTuple):
    """The ring's shared memory: W's stages ``sw``, X's stages ``sx``, and the ``full`` and
    ``empty`` mbarriers of each stage."""

    sw: object
    sx: object
    full: object
    empty: object


def _make_producer(cfg: SmallMConfig):
    """The macro ``produce(X, W, bufs, flag, tm, tn, split)`` (``bufs`` the
    :class:`RingBuffers`): thread 0 of the
    producer warpgroup loads this CTA's K tiles (``split * split_tiles ..``) of W (128
    rows from ``128 tn``) and X (``block_m`` rows from ``block_m tm``) into the ring."""
    ring, tiles, bm = cfg.ring, cfg.split_tiles, cfg.block_m
    op_w, op_x = cfg.operand_w, cfg.operand_x
    stage_bytes = (ROWS_W + bm) * BK_BYTES

    @T.macro
    def produce(X, W, bufs, flag, tm, tn, split):
        for kt in T.serial(tiles):
            s = ring.slot(kt)
            ring.acquire(bufs.empty, s, kt, flag)
            ring.arm(bufs.full, s, stage_bytes)
            T.cuda.tile.apply(T.ptx[LOAD], op_w.box(bufs.sw, s, 0, ROWS_W, 0), W, mbar=bufs.full.sub[s, :],
                              coords=op_w.coords(tn * ROWS_W, 0, split * tiles + kt, 0), swizzle=3, l2_promotion=3)
            T.cuda.tile.apply(T.ptx[LOAD], op_x.box(bufs.sx, s, 0, bm, 0), X, mbar=bufs.full.sub[s, :],
                              coords=op_x.coords(tm * bm, 0, split * tiles + kt, 0), swizzle=3, l2_promotion=3)

    return produce


def _make_mainloop(cfg: SmallMConfig):
    """The macro ``mainloop(bufs, acc, flag, tid, c)`` (``bufs`` the :class:`RingBuffers`):
    consumer warpgroup
    ``c`` multiplies its 64 rows of W by the ``block_m`` rows of X over the CTA's K tiles
    into ``acc`` (64 x ``block_m`` fp32, the wgmma fragment map), one wgmma batch in flight,
    and releases each stage once the batch after it is issued."""
    ring, tiles, bm, mma, kstep = cfg.ring, cfg.split_tiles, cfg.block_m, cfg.mma, cfg.kstep
    op_w, op_x = cfg.operand_w, cfg.operand_x

    @T.macro
    def mainloop(bufs, acc, flag, tid, c):
        for kt in T.serial(tiles):
            s = ring.slot(kt)
            ring.wait(bufs.full, s, kt, flag)
            T.ptx["wgmma.fence.sync.aligned"]()
            T.cuda.tile.apply(T.ptx[mma], acc, op_w.mma_view(bufs.sw, s, c * WG_M, WG_M, kstep),
                              op_x.mma_view(bufs.sx, s, 0, bm, kstep), scope="warpgroup", scale_d=kt > 0)
            T.ptx["wgmma.commit_group.sync.aligned"]()
            T.ptx["wgmma.wait_group.sync.aligned"](1)
            if kt > 0:
                ring.release(bufs.empty, ring.slot(kt - 1), tid)
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        ring.release(bufs.empty, ring.slot(tiles - 1), tid)

    return mainloop


def _make_body(cfg: SmallMConfig):
    """The macro ``body(X, W, Partial, Counters, C)`` (``Partial`` and ``Counters`` None
    with one split): the launch, the ring, the producer warpgroup 0 and the consumer
    warpgroups 1 and 2.  CTA ``bx`` takes split ``bx % splits`` of column tile
    ``bx / splits % tiles_n`` of row tile ``bx / (splits * tiles_n)``."""
    stages, bm, splits, tiles_n = cfg.stages, cfg.block_m, cfg.splits, cfg.tiles_n
    op_w, op_x = cfg.operand_w, cfg.operand_x
    produce, mainloop, store = _make_producer(cfg), _make_mainloop(cfg), make_store(cfg)
    reduce = make_reduce(cfg) if splits > 1 else None
    scratch = split_k(cfg).part_registers if splits > 1 else 1  # the split-K gather's registers
    launch = T.cuda.LaunchConfig(grid=cfg.grid, block=128 * (1 + CONSUMERS),
                                 dynamic_smem_bytes=small_m_smem_bytes(stages, bm))

    @T.macro
    def body(X, W, Partial, Counters, C):
        T.device_entry(launch=launch)
        sw = T.alloc_shared(op_w.stage_shape(stages), "bfloat16", scope="shared.dyn", align=1024,
                            layout=op_w.ring_layout(stages))
        sx = T.alloc_shared(op_x.stage_shape(stages), "bfloat16", scope="shared.dyn", align=1024,
                            layout=op_x.ring_layout(stages))
        full = T.alloc_shared((stages, 1), "uint64", scope="shared.dyn", align=8)
        empty = T.alloc_shared((stages, 1), "uint64", scope="shared.dyn", align=8)
        slot = T.alloc_shared((1,), "uint32", scope="shared.dyn", align=4)
        tid = T.cuda.thread_idx("x")
        bx = T.cuda.block_idx("x")
        wg = T.cuda.warp_id() // 4
        flag = T.alloc_local((1,), "uint32")
        if tid == 0:
            cfg.ring.init(full, empty)
            T.ptx["fence.mbarrier_init.release.cluster"]()
        T.cuda.cta_sync()
        if wg == 0:  # the producer warpgroup
            if tid == 0:
                produce(X, W, RingBuffers(sw, sx, full, empty), flag, bx // (splits * tiles_n),
                        bx // splits % tiles_n, bx % splits)
        else:  # two consumer warpgroups, 64 rows of W each
            c = wg - 1
            acc = T.alloc_local((WG_M, bm), "float32", layout=accumulator_layout(bm))
            words = T.alloc_local((WG_M, bm // 2), "uint32", layout=accumulator_layout(bm, packed=True))
            got = T.alloc_local((1,), "uint32")
            part = T.alloc_local((scratch,), "float32")
            mainloop(RingBuffers(sw, sx, full, empty), acc, flag, tid, c)
            if reduce is None:
                store(C, acc, words, Place(bx // tiles_n, bx % tiles_n, tid, c))
            else:
                reduce(Workspace(Partial, Counters, slot, got, part), C, acc, words,
                       Place(bx // (splits * tiles_n), bx // splits % tiles_n, tid, c, bx % splits))

    return body


def make_small_m_gemm(m, n: int, k: int, block_m: int = 8, splits: int = 1, stages: int = 8,
                      out_dtype: str = "bfloat16", in_dtype: str = "bfloat16"):
    """The small-M (decode) kernel for ``C (m, n) = X (m, k) @ W (n, k)^T`` (module
    docstring): a ``T.function`` to pass to :func:`tvm_tirx.compile` (``arch="sm_90a"``).

    Parameters
    ----------
    m : int or tvm.tirx.Var
        Rows of X and C: a positive int or an int32 run-time extent (``T.dynamic("m")``).
        Any ``m`` is computed correctly; the kernel is fast while ``m <= block_m``.
    n, k : int
        Rows of W (columns of C) and the reduction length, elements; ``k * 2`` bytes a
        multiple of 16 (the TMA's stride rule).
    block_m : int
        Rows of X per CTA tile, 8, 16, 32 or 64 (wgmma's N).
    splits : int
        CTAs that share one output tile, each over ``1 / splits`` of K (1 .. ``ceil(k /
        64)``); more than 1 adds the ``Partial`` and ``Counters`` workspaces.
    stages : int
        Buffers of the ring, ``(128 + block_m) * 128`` bytes each.
    out_dtype : str
        ``"bfloat16"`` or ``"float32"`` (C).
    in_dtype : str
        ``"bfloat16"`` (X and W).

    Returns
    -------
    tvm.tirx.PrimFunc
        ``small_m_gemm(X, W, C)``, or with ``splits > 1`` ``small_m_gemm_split(X, W,
        Partial, Counters, C)``: X ``(m, k)``, W ``(n, k)`` bf16 and C ``(m, n)``,
        16-byte aligned and row-major; ``Partial`` ``(m, splits * n)`` float32, of any
        values (overwritten), and ``Counters`` ``(m, ceil(n / 128))`` uint32, all zero
        before the call and left all zero by it (the torch operators keep both:
        :func:`tvm_tirx.ops.small_m_plan.workspace`; only the rows ``i * block_m`` of
        ``Counters`` are used).  Results are bitwise reproducible for any ``splits``.

    Raises
    ------
    ValueError
        A size or option outside those above (the message names it and what was found).
    """
    cfg = SmallMConfig(m, n, k, block_m, splits, stages, out_dtype, in_dtype)
    body = _make_body(cfg)
    x_spec = T.Tensor((m, k), in_dtype, align=16)
    w_spec = T.Tensor((n, k), in_dtype, align=16)
    c_spec = T.Tensor((m, n), out_dtype, align=16)
    if splits == 1:

        @T.function
        def small_m_gemm(X: x_spec, W: w_spec, C: c_spec):
            body(X, W, None, None, C)

        return small_m_gemm
    p_spec = T.Tensor((m, splits * n), "float32", align=4)
    n_spec = T.Tensor((m, cfg.tiles_n), "uint32", align=4)

    @T.function
    def small_m_gemm_split(X: x_spec, W: w_spec, Partial: p_spec, Counters: n_spec, C: c_spec):
        body(X, W, Partial, Counters, C)

    return small_m_gemm_split
