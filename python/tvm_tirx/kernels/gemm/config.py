"""The GEMM's options (its fixed geometry, re-exported here, is :mod:`.geometry`'s; the
checks on sizes and options, :mod:`.checks`').

:class:`GemmOptions` declares the options once; :class:`GemmConfig` adds ``m``, holds one
kernel's sizes and options, validated once, and the quantities derived from them (tile
counts, the grid, the rounds of the persistent loop); every other module of
:mod:`tvm_tirx.kernels.gemm` reads it.  A size is a Python ``int`` (static) or, for ``m``
and ``k``, an int32 run-time extent (``T.dynamic("m")``): the derived counts are then
expressions of it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property

from tvm.runtime import DataType
from tvm.script import tirx as T

from ..parts.epilogue import (Activation, Bias, Epilogue, ExactStore, Gate, Geometry, GuardedStore, Residual,
                              Scale, TmaStore)
from ..parts.ring import Ring
from ..parts.split_k import SplitK
from ...tile.fragments import accumulator_col, accumulator_row
from .geometry import (ACTIVATIONS, BIAS_DTYPES, BK_BYTES, BLOCK_MS, BLOCK_NS, BM, BN, CONSUMERS, GATED_BLOCK_NS,
                       GLU_ROWS, INPUTS, MAX_ELEMENTS, MAX_SIZE, MAX_STAGES, OUTPUTS, SMEM_LIMIT, TMA_STRIDE, WG_M,
                       consumers, deepest_ring, gemm_smem_bytes, tma_epilogue)
from .checks import check_options, check_sizes, static as _static
from .operands import Operand

__all__ = ["BM", "BN", "BLOCK_MS", "BLOCK_NS", "BK_BYTES", "WG_M", "CONSUMERS", "INPUTS", "OUTPUTS", "SMEM_LIMIT",
           "GLU_ROWS", "GATED_BLOCK_NS", "MAX_STAGES", "ACTIVATIONS", "BIAS_DTYPES", "MAX_SIZE", "MAX_ELEMENTS",
           "TMA_STRIDE", "GemmOptions", "GemmConfig", "gemm_smem_bytes", "deepest_ring"]


def _ceildiv(a, b: int):
    return -(-a // b) if isinstance(a, int) else T.ceildiv(a, b)


@dataclass(frozen=True)
class GemmOptions:  # pylint: disable=too-many-instance-attributes
    """A tile-kernel GEMM's sizes but ``m``, its dtypes, its GPU's arch and its options:
    the fields :class:`~.spec.GemmSpec` (the compile-cache key) and :class:`GemmConfig`
    (the checked kernel of one ``m``) share, declared once.  Their meaning is
    :func:`~tvm_tirx.kernels.gemm.make_gemm`'s parameters; the defaults are the torch
    operators' (one CTA per output tile, ``group_m=16``, the deepest ring), so two
    spellings of one kernel are equal and hash equal.  Nothing but ``stages`` is resolved
    here: :class:`GemmConfig` checks.

    Attributes
    ----------
    n : int
        Columns of C; rows of B (``2 n``, interleaved, when ``gated``), elements.
    k : int or tvm.tirx.Var
        The reduction length, elements (``k * sizeof(in_dtype)`` a multiple of 16 bytes
        for a K-major operand).
    in_dtype, out_dtype : str
        A and B's dtype (``"bfloat16"``, ``"float8_e4m3fn"``); C's (``"bfloat16"``,
        ``"float32"``).
    arch : str
        The CUDA architecture compiled for (``"sm_90a"``); not in the kernel's name
        (:attr:`.spec.GemmSpec.name`).
    block_n : int
        Columns of C per CTA tile: a multiple of 8 from 16 to 256.
    bias, activation : str or None
        A fused bias vector's dtype and a fused activation (``make_gemm``'s).
    gated, residual : bool
        A gated linear unit; a residual added last (``make_gemm``'s).
    a_major, b_major : str
        A's and B's innermost axis: ``"k"``, or ``"m"`` / ``"n"`` (``make_gemm``'s).
    stages : int or None
        Shared buffers of the ring; None (the default) becomes, when the object is made,
        the deepest ring that fits :attr:`block_n`, :attr:`out_dtype` and :attr:`gated`
        (:func:`deepest_ring`: 3 for bf16 output at ``block_n=256``).
    wait_depth, persistent, ctas, group_m, cluster, spin
        ``make_gemm``'s options (``persistent`` False and ``group_m`` 16 here, not its
        defaults).
    block_m : int
        Rows of C per CTA tile: 128 (the default), 256 (the cooperative tile) or 64 (one
        consumer warpgroup: decode's tile) (``make_gemm``'s); after the others, so that the positional fields stay as they were.
    splits : int
        CTAs per output tile, each over a contiguous ``1 / splits`` of K (split-K, met in
        a workspace: :class:`~tvm_tirx.kernels.parts.split_k.SplitK`); 1 (the default) for
        none.  After ``block_m``.
    block_scales : bool
        FP8 inputs quantized in blocks (``ScalesA (m, ceil(k / 128))`` and ``ScalesB
        (ceil(n / 128), ceil(k / 128))``: :mod:`.block_scales`) instead of per tensor.  Last.
    """

    n: int
    k: object  # int, or an int32 run-time extent (tvm.tirx.Var)
    in_dtype: str = "bfloat16"
    out_dtype: str = "bfloat16"
    arch: str = "sm_90a"
    block_n: int = BN
    bias: str | None = None  # the Bias vector's dtype, or None
    activation: str | None = None
    gated: bool = False
    residual: bool = False
    a_major: str = "k"  # A's innermost axis: "k" (A (m, k)) or "m" (A (k, m)); .operands
    b_major: str = "k"  # B's innermost axis: "k" (B (n, k)) or "n" (B (k, n))
    stages: int | None = None
    wait_depth: int = 1
    persistent: bool = False
    ctas: int = 132
    group_m: int = 16
    cluster: int = 1
    spin: bool = False
    block_m: int = BM
    splits: int = 1
    block_scales: bool = False

    def __post_init__(self):
        if self.stages is None:
            object.__setattr__(self, "stages", self._deepest_ring())

    def _deepest_ring(self) -> int | None:
        """:func:`deepest_ring` of the tile, or None where the tile is not one the kernel
        has (:class:`GemmConfig` then says why)."""
        tile = type(self.block_n) is int and self.block_n in BLOCK_NS and type(self.gated) is bool  # noqa: E721
        tile = tile and type(self.block_m) is int and self.block_m in BLOCK_MS  # noqa: E721
        if not tile or self.out_dtype not in OUTPUTS:
            return None
        return deepest_ring(self.block_n, self.out_dtype, self.gated, self.block_m)

    def options(self) -> dict:
        """The fields as a dict (``dataclasses.asdict`` without copying the values)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(GemmOptions)}


@dataclass(frozen=True)
class GemmConfig(GemmOptions):
    """One GEMM kernel: the :class:`GemmOptions` and the rows ``m`` (keyword only: an int
    or an int32 run-time extent), checked when it is made, and the quantities derived
    from them (tiles, grid, rounds, the ring, the epilogue chain).  Made by
    :meth:`~.spec.GemmSpec.config`; ``GemmConfig(n, k, m=m, **options)`` directly.

    Raises
    ------
    ValueError
        Whatever :func:`~tvm_tirx.kernels.gemm.make_gemm` refuses: a TMA row stride that
        is not a multiple of 16 bytes, a run-time ``n``, options out of range.
    """

    m: object = field(kw_only=True)  # int, or an int32 run-time extent (tvm.tirx.Var)

    def __post_init__(self):
        super().__post_init__()
        check_options(self)
        check_sizes(self)

    @property
    def mma(self) -> str:
        """The wgmma opcode of ``in_dtype`` (m64 x ``block_n``, fp32 accumulators)."""
        return INPUTS[self.in_dtype][0].format(n=self.block_n)

    @property
    def ring(self) -> Ring:
        """The shared ring (:class:`~tvm_tirx.kernels.parts.Ring`): ``stages`` buffers,
        released by each consumer warpgroup of each CTA of the cluster."""
        return Ring(self.stages, self.consumers * self.cluster, self.cluster, self.spin)

    @property
    def consumers(self) -> int:
        """Consumer warpgroups: one in a 64-row tile, two in a 128- or 256-row one."""
        return consumers(self.block_m)

    @property
    def multicast(self) -> str | None:
        """The operand a 2-CTA cluster shares (each CTA loads half of its stage rows and
        multicasts them to both): ``"B"`` where the pair's tiles are vertically adjacent
        (same columns: an even number of row tiles in groups of an even ``group_m``),
        ``"A"`` where C has one row tile (the pair's tiles side by side in the same rows:
        decode's ``x``, shared by every column tile), None with one CTA per cluster.
        :func:`~.checks.check_sizes` refuses a cluster whose tiles pair neither way."""
        if self.cluster == 1:
            return None
        return "A" if _static(self.tiles_m) == 1 else "B"

    @cached_property
    def epilogue(self) -> Epilogue:
        """The consumers' epilogue chain (:class:`~tvm_tirx.kernels.parts.epilogue.Epilogue`)
        of the options, built once: ``Scale`` (fp8 inputs), ``Bias``, the activation
        (inside ``Gate`` when gated), ``Residual``, then ``TmaStore`` (:attr:`tma_store`),
        ``ExactStore`` (float32 on :attr:`exact` tiles) or ``GuardedStore`` (the rest,
        bf16 on exact tiles of a width that is not whole boxes among them).  Its
        :attr:`~tvm_tirx.kernels.parts.epilogue.Epilogue.params` are the kernel's
        parameters besides A, B and C."""
        activation = Activation(self.activation) if self.activation else None
        stages = [Scale()] if self.in_dtype != "bfloat16" and not self.block_scales else []
        stages += [Bias(self.bias)] if self.bias else []
        stages += [Gate(activation)] if self.gated else [activation] if activation else []
        stages += [Residual()] if self.residual else []
        exact_fp32 = self.exact and not self.bf16_out
        # with splits the store runs in one CTA per tile, under a guard read from shared memory
        # (SplitK.last): only the per-thread stores, which no guard needs to be uniform for
        # (predicated: the H100's split-K ran 2.5x slower than unsplit at 1000^3, its last CTA's
        # epilogue issue-bound on a branch, address and reconvergence per element, ncu 2026-12-06)
        if self.splits > 1:
            stages.append(GuardedStore(predicated=True))
        else:
            stages.append(TmaStore() if self.tma_store else ExactStore() if exact_fp32 else GuardedStore())
        geometry = Geometry(self.m, self.n, self.out_dtype, self.block_n, self.out_block_n, self.b_rows, self.block_m,
                            WG_M, self.blocks)
        return Epilogue(geometry, tuple(stages))

    @property
    def blocks(self) -> int:
        """64-row blocks per consumer warpgroup (wgmma batches per K step, accumulator
        sets per thread): 1 in a 128-row tile, 2 in a 256-row one."""
        return self.block_m // (self.consumers * WG_M)

    @property
    def kstep(self) -> int:
        """K elements per wgmma instruction (16 bf16, 32 e4m3)."""
        return INPUTS[self.in_dtype][1]

    @property
    def bk(self) -> int:
        """K elements per stage row (128 bytes)."""
        return BK_BYTES * 8 // DataType(self.in_dtype).bits

    @property
    def out_block_n(self) -> int:
        """Columns of C per tile: ``block_n``, or ``block_n / 2`` when gated (a tile's
        accumulators hold a gate and an up column for each output column)."""
        return self.block_n // 2 if self.gated else self.block_n

    @property
    def b_rows(self) -> int:
        """Rows of B: ``n``, or when gated ``2 * ceil(n / 8) * 8`` (gate and up rows
        interleaved in groups of :data:`GLU_ROWS`, the last group zero-padded)."""
        return 2 * -(-self.n // GLU_ROWS) * GLU_ROWS if self.gated else self.n

    @property
    def operand_a(self) -> Operand:
        """A's place in global memory and in the ring (:mod:`.operands`)."""
        return Operand("A", self.a_major, self.block_m, self.bk, self.in_dtype)

    @property
    def operand_b(self) -> Operand:
        """B's place (``block_n`` rows of N per stage)."""
        return Operand("B", self.b_major, self.block_n, self.bk, self.in_dtype)

    @property
    def tma_dtype(self) -> str:
        """The dtype the TMA moves A and B as: fp8 as bytes (``uint8``), else ``in_dtype``."""
        return "uint8" if DataType(self.in_dtype).bits == 8 else self.in_dtype

    @property
    def tiles_m(self):
        """Row tiles of C, ``ceil(m / block_m)`` (an expression for a run-time ``m``)."""
        return _ceildiv(self.m, self.block_m)

    @property
    def tiles_n(self):
        """Column tiles of C, ``ceil(n / out_block_n)``."""
        return _ceildiv(self.n, self.out_block_n)

    @property
    def k_tiles(self):
        """K tiles (ring iterations per output tile), ``ceil(k / bk)``."""
        return _ceildiv(self.k, self.bk)

    @property
    def n_tiles(self):
        """Output tiles, ``tiles_m * tiles_n``."""
        return self.tiles_m * self.tiles_n

    @property
    def split_tiles(self):
        """K tiles per split, ``ceil(k_tiles / splits)`` (``k_tiles`` with one split; the
        last split's tiles past K are zero-filled by the TMA)."""
        return self.k_tiles if self.splits == 1 else _ceildiv(self.k_tiles, self.splits)

    @property
    def grid(self):
        """CTAs launched along x: ``ctas`` (persistent) or one per output tile (with
        splits, each column of the grid's y, :attr:`launch_grid`, holds one split)."""
        return self.ctas if self.persistent else self.n_tiles

    @property
    def launch_grid(self):
        """The launch's grid: :attr:`grid`, or ``(grid, splits)`` with splits (the split as
        ``blockIdx.y``, whose bound the launch states: every slab index is provably in
        ``Partial``)."""
        return self.grid if self.splits == 1 else (self.grid, self.splits)

    def split_of(self):
        """The CTA's split of K: ``blockIdx.y``, or 0 with one split."""
        return 0 if self.splits == 1 else T.cuda.block_idx("y")

    @cached_property
    def split_k(self) -> SplitK | None:
        """The split-K reduction (:class:`~tvm_tirx.kernels.parts.split_k.SplitK`) of the
        consumers' accumulators, placed by the wgmma fragment map (PTX ISA
        9.7.15.5.1.1), or None with one split.  Counted in ``Counters[bm * block_m, bn]``
        (``Counters (m, tiles_n)``: the first row of each row tile)."""
        if self.splits == 1:
            return None
        geometry = self.epilogue.geometry

        def element(b, h, e, at):
            return (accumulator_row(geometry.row0(at), at.tid, h), accumulator_col(at.bn * self.block_n, at.tid, b, e))

        # named barrier 3: the TMA store's are 1 and 2 (one per consumer warpgroup)
        return SplitK(self.splits, self.m, self.n, self.block_n // 8, element, threads=self.consumers * 128, leader=128,
                      barrier=3, pairs=True)

    @property
    def rounds(self):
        """Output tiles each CTA walks (at most): 1 with one CTA per tile (a constant, so
        that a run-time ``m`` leaves no run-time loop around the tile: that loop cost 6% at
        16384 x 14336 x 4096 on the H200, 737 against 783 TFLOP/s for the static kernel)."""
        return _ceildiv(self.n_tiles, self.grid) if self.persistent else 1

    @property
    def exact(self) -> bool:
        """Whether the tiles cover C exactly (static m, n multiples of the tile): the
        float32 epilogue then needs no bound guards."""
        m, n = _static(self.m), _static(self.n)
        return m is not None and n is not None and m % self.block_m == 0 and n % self.out_block_n == 0

    @property
    def bf16_out(self) -> bool:
        """Whether C is bf16 (stored by TMA)."""
        return self.out_dtype == "bfloat16"

    @property
    def tma_store(self) -> bool:
        """Whether C is stored by TMA: bf16 output with rows of a multiple of 16 bytes, on
        tiles of whole 64-column boxes (:func:`~.geometry.tma_epilogue`)."""
        n = _static(self.n)
        return (self.bf16_out and n is not None and n * 2 % TMA_STRIDE == 0
                and tma_epilogue(self.out_dtype, self.block_n, self.gated))

    @property
    def fp32_vector(self) -> int:
        """float32 columns per store: 2 (``st.global.v2.f32``, 8-byte aligned) when ``n``
        is a static even int, else 1 (``st.global.f32``: an odd or a run-time ``n``)."""
        n = _static(self.n)
        return 2 if n is not None and n % 2 == 0 else 1
