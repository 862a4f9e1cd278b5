"""What one compiled GEMM kernel is: :class:`GemmSpec` (the tile kernel) and
:class:`SmallMSpec` (the small-M kernel), and :func:`make_gemm`, the tile kernel's builder.

A spec holds everything a compiled kernel depends on except the run-time ``m``: the sizes
``n`` and ``k``, the dtypes, the GPU's arch and every option of the kernel.  It is a
frozen dataclass whose defaults are resolved when it is made (a ``stages`` of None
becomes the deepest ring that fits), so two spellings of one kernel are equal and hash
equal: the torch operators' table of compiled kernels
(:mod:`tvm_tirx.ops.gemm_kernels`) is keyed on it, and its :attr:`~GemmSpec.name` is
the kernel's ``global_symbol``.  :meth:`GemmSpec.build` turns it and an ``m`` into the
checked :class:`~.config.GemmConfig` (the one place where options are validated) and the
``T.function``; :meth:`~GemmSpec.prim_func` is the run-time-``m`` function, named, made
once per spec.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import tvm

from .config import BM, BN, OUTPUTS, GemmConfig, GemmOptions
from .kernel import build as _build_kernel
from .small_m import make_small_m_gemm

__all__ = ["CONFIG", "GemmSpec", "SmallMSpec", "make_gemm"]

#: dtype -> its short spelling in kernel names
_SHORT = {"bfloat16": "bf16", "float32": "f32"}


def _short(dtype: str) -> str:
    return _SHORT.get(dtype, dtype)


@functools.lru_cache(maxsize=None)
def _run_time_func(spec) -> tvm.tirx.PrimFunc:
    """``spec.build(m)`` for an int32 run-time ``m``, named ``spec.name`` (once per spec)."""
    return spec.build(tvm.tirx.Var("m", "int32")).with_attr("global_symbol", spec.name)


class _KernelSpec:
    """What :class:`GemmSpec` and :class:`SmallMSpec` share: the named run-time-``m``
    PrimFunc, made once per (equal) spec."""

    def prim_func(self) -> tvm.tirx.PrimFunc:
        """The kernel for an int32 run-time ``m`` (``m = T.dynamic("m")``: one compiled
        kernel serves every number of rows), its ``global_symbol`` :attr:`name`; the same
        object for equal specs.

        Raises
        ------
        ValueError
            What :meth:`build` refuses.
        """
        return _run_time_func(self)


@dataclass(frozen=True)
class GemmSpec(GemmOptions, _KernelSpec):
    """One compiled tile-kernel GEMM ``C (m, n) = A (m, k) @ B (n, k)^T``: everything it
    depends on but the run-time ``m``; the compile-cache key of the torch operators and
    the source of the kernel's name.

    The fields are :class:`~.config.GemmOptions`' (declared and described there once,
    shared with :class:`~.config.GemmConfig`): :func:`make_gemm`'s parameters but ``m``,
    plus ``arch``; the defaults are the torch operators' (:data:`CONFIG`: one CTA per
    output tile, ``group_m=16``, the deepest ring), not :func:`make_gemm`'s.  The first
    five fields may be given by position (``GemmSpec(n, k, in_dtype, out_dtype, arch)``).
    Nothing is checked when a spec is made: :meth:`build` checks it
    (:class:`~.config.GemmConfig`).
    """

    def replace(self, **changes) -> GemmSpec:
        """A copy with ``changes`` (``dataclasses.replace``), whose ``stages`` is derived
        again for its tile when this spec's is the derived one (the deepest ring) and
        ``changes`` do not set it: ``GemmSpec(n, k).replace(block_n=64)`` equals
        ``GemmSpec(n, k, block_n=64)``."""
        if "stages" not in changes and self.stages == self._deepest_ring():
            changes["stages"] = None
        return dataclasses.replace(self, **changes)

    @property
    def name(self) -> str:
        """The kernel's ``global_symbol``: ``tvm_tirx_gemm_n{n}_k{k}_{in}_{out}`` (``bf16``,
        ``f32``; another dtype spelled out), then ``_bm{block_m}`` for a ``block_m`` other
        than 128, ``_bn{block_n}`` for a ``block_n`` other than 256, ``_bias_{bf16|f32}``
        for a fused bias, ``_{activation}``, ``_glu`` when gated, ``_residual``, ``_a_km``
        for ``a_major="m"``, ``_b_kn`` for ``b_major="n"``, ``_block_scaled`` for fp8 block
        scales; last the schedule options
        that differ from the spec's defaults (:meth:`schedule_suffix`).  ``arch`` is not in
        it."""
        name = f"tvm_tirx_gemm_n{self.n}_k{self.k}_{_short(self.in_dtype)}_{_short(self.out_dtype)}"
        name += f"_bm{self.block_m}" if self.block_m != BM else ""
        name += f"_bn{self.block_n}" if self.block_n != BN else ""
        name += f"_bias_{_short(self.bias)}" if self.bias else ""
        name += f"_{self.activation}" if self.activation else ""
        name += "_glu" if self.gated else ""
        name += "_residual" if self.residual else ""
        name += "_a_km" if self.a_major != "k" else ""
        name += "_b_kn" if self.b_major != "k" else ""
        return name + ("_block_scaled" if self.block_scales else "") + self.schedule_suffix()

    def schedule_suffix(self) -> str:
        """The schedule options that differ from the spec's defaults, as a name suffix:
        ``_s{stages}`` (a ring other than the deepest that fits), ``_wd{wait_depth}``,
        ``_persistent{ctas}``, ``_gm{group_m}``, ``_cluster{cluster}``, ``_spin``,
        ``_split{splits}``; empty
        for the torch operators' kernels, so that two kernels of one shape that differ
        only in their schedule never share a name."""
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        suffix = f"_s{self.stages}" if self.stages != self._deepest_ring() else ""
        suffix += f"_wd{self.wait_depth}" if self.wait_depth != defaults["wait_depth"] else ""
        suffix += f"_persistent{self.ctas}" if self.persistent else ""
        suffix += f"_gm{self.group_m}" if self.group_m != defaults["group_m"] else ""
        suffix += f"_cluster{self.cluster}" if self.cluster != defaults["cluster"] else ""
        suffix += "_spin" if self.spin else ""
        return suffix + (f"_split{self.splits}" if self.splits != 1 else "")

    def config(self, m) -> GemmConfig:
        """The checked :class:`~.config.GemmConfig` of this spec for ``m`` rows (an int or
        an int32 run-time extent): the sizes and options validated, the derived
        quantities (tiles, grid, epilogue chain).

        Raises
        ------
        ValueError
            What :func:`make_gemm` refuses.
        """
        return GemmConfig(m=m, **self.options())

    def build(self, m) -> tvm.tirx.PrimFunc:
        """The kernel for ``m`` rows (:func:`make_gemm`'s function, unnamed).

        Raises
        ------
        ValueError
            What :func:`make_gemm` refuses.
        """
        return _build_kernel(self.config(m))


#: The torch operators' options per output dtype besides the tile (:class:`GemmSpec`'s
#: defaults: ``bench/gemm.py``'s fastest on the H200, one CTA per output tile so the grid
#: follows the run-time ``m`` and no SM count enters the key); ``stages`` is the deepest
#: ring of the default 128 x 256 tile.
CONFIG = {dtype: {name: getattr(GemmSpec(BN, 64, out_dtype=dtype), name)
                  for name in ("stages", "wait_depth", "persistent", "group_m")} for dtype in OUTPUTS}


@dataclass(frozen=True)
class SmallMSpec(_KernelSpec):
    """One compiled small-M kernel (:func:`~.small_m.make_small_m_gemm`): everything it
    depends on but the run-time ``m``; bf16 K-major inputs, no fused epilogue.

    Attributes
    ----------
    n, k : int
        Rows of W (columns of C) and the reduction length, elements.
    out_dtype : str
        ``"bfloat16"`` or ``"float32"``.
    arch : str
        The CUDA architecture compiled for (``"sm_90a"``); not in :attr:`name`.
    block_m, splits, stages : int
        The plan (:class:`~.planner.SmallMPlan`): rows of X per CTA tile, CTAs per
        output tile (split-K), buffers of the ring.
    """

    n: int
    k: int
    out_dtype: str
    arch: str
    block_m: int
    splits: int
    stages: int

    in_dtype = "bfloat16"  # X and W (a class attribute: not a field)
    a_major = "k"  # X's innermost axis: the kernel reads X (m, k) row-major
    b_major = "k"  # W's innermost axis: the kernel reads W (n, k) row-major

    @classmethod
    def of(cls, spec: GemmSpec, plan) -> SmallMSpec:
        """The small-M kernel of ``spec``'s ``n``, ``k``, ``out_dtype`` and ``arch`` with
        ``plan``'s ``block_m``, ``splits`` and ``stages`` (a
        :class:`~.planner.SmallMPlan`)."""
        return cls(spec.n, spec.k, spec.out_dtype, spec.arch, plan.block_m, plan.splits, plan.stages)

    @property
    def name(self) -> str:
        """The kernel's ``global_symbol``:
        ``tvm_tirx_gemm_small_m_n{n}_k{k}_bm{block_m}_s{splits}_{bf16|f32}``."""
        return (f"tvm_tirx_gemm_small_m_n{self.n}_k{self.k}_bm{self.block_m}_s{self.splits}_"
                f"{_short(self.out_dtype)}")

    def build(self, m) -> tvm.tirx.PrimFunc:
        """The kernel for ``m`` rows (:func:`~.small_m.make_small_m_gemm`, unnamed).

        Raises
        ------
        ValueError
            What :func:`~.small_m.make_small_m_gemm` refuses.
        """
        return make_small_m_gemm(m, self.n, self.k, block_m=self.block_m, splits=self.splits, stages=self.stages,
                                 out_dtype=self.out_dtype)


def make_gemm(m, n: int, k, out_dtype: str = "bfloat16", in_dtype: str = "bfloat16", stages: int = 3,
              wait_depth: int = 1, persistent: bool = True, ctas: int = 132, group_m: int = 8, cluster: int = 1,
              spin: bool = False, block_n: int = BN, bias: str | None = None, activation: str | None = None,
              gated: bool = False, residual: bool = False, a_major: str = "k", b_major: str = "k", block_m: int = BM,
              splits: int = 1, block_scales: bool = False):
    """The kernel for ``C (m, n) = A (m, k) @ B (n, k)^T``: a ``T.function`` to pass to
    :func:`tvm_tirx.compile` (``arch="sm_90a"``).

    By default A and B are row-major (K innermost, "TN", like ``torch.matmul(a,
    b.t())``); ``a_major="m"`` takes A stored ``(k, m)`` and ``b_major="n"`` B stored
    ``(k, n)`` (``torch.matmul(a, b)`` with a row-major ``b`` is ``b_major="n"``).  A and B
    are of ``in_dtype``; C is row-major ``(m, n)``, of ``out_dtype``; products accumulate
    in fp32.

    Parameters
    ----------
    m : int or tvm.tirx.Var
        Rows of A and C: a positive int, or an int32 run-time extent (``m =
        T.dynamic("m")``): one compiled kernel then serves every ``m`` in ``1 .. 2**31 -
        129`` (row indices are int32), taken from the tensors' shapes at each call.
    n : int
        Rows of B and columns of C, any positive int.  bfloat16 output is stored by TMA
        when C's rows (``n * 2`` bytes) are a multiple of 16 bytes, else by a guarded
        ``st.global.b32`` per bf16 pair (even ``n``) or ``st.global.b16`` per element.
    k : int or tvm.tirx.Var
        The reduction length, a positive int or an int32 run-time extent (bf16 inputs);
        the rows of a K-major A or B (``k * sizeof(in_dtype)`` bytes) must be a multiple
        of 16 bytes (the TMA's stride rule).
    out_dtype : str
        ``"bfloat16"`` (rounded to nearest even) or ``"float32"`` (stored from the
        accumulators, ``st.global.v2.f32``, or ``st.global.f32`` for an odd ``n``).  At
        C's edge the TMA clips its stores; the other stores are guarded.
    in_dtype : str
        ``"bfloat16"``, or ``"float8_e4m3fn"``: the function then takes a fourth argument
        ``Scales`` ((2,) float32) and computes ``C = Scales[0] * Scales[1] * A @ B^T``.
    stages : int or None
        Shared buffers in the ring (48 KiB each with ``block_n=256``: with bfloat16 output
        at most 3, the epilogue tiles taking 64 KiB; with float32 at most 4; 32 KiB each
        with ``block_n=128``, 24 KiB with 64; :func:`~.config.gemm_smem_bytes` gives the
        total, at most 227 KiB); None: the deepest ring that fits
        (:func:`~.config.deepest_ring`).
    wait_depth : int
        wgmma batches a consumer leaves in flight (0 or 1) before releasing a stage.
    persistent : bool
        ``ctas`` CTAs (one per SM) walk the output tiles in :func:`~tvm_tirx.kernels.gemm.tile_order`; else one
        CTA per output tile.
    ctas : int
        The persistent grid.
    group_m : int
        Row tiles per group of :func:`~tvm_tirx.kernels.gemm.tile_order`.
    cluster : int
        1, or 2: pairs of CTAs on tiles of the same columns each load half of B and
        multicast it (needs a static ``m`` with an even number of ``block_m``-row tiles, an even
        ``group_m`` and an even grid), or, where ``m`` makes one row tile, pairs of CTAs on
        tiles of the same rows each load half of A and multicast it (an even grid).
    spin : bool
        Wait on mbarriers with a loop of plain ``try_wait`` instead of a suspend-time hint.
    block_n : int
        Columns of C per CTA tile, a multiple of 8 from 16 to 256 (``wgmma.m64n{block_n}``):
        fewer columns make more tiles, for shapes whose 128 x 256 tiles would leave SMs idle
        (small ``m`` or ``n``); a stage of the ring then takes ``(block_m + block_n) * 128``
        bytes and the bf16 epilogue tiles ``256 * block_n`` bytes, so more stages fit.
    bias : str or None
        The dtype of a ``Bias`` vector ``(n,)`` added to every row of the product
        (``"bfloat16"`` or ``"float32"``, converted to fp32 and added to the fp32
        accumulators), or None.  The function then takes ``Bias`` after ``B``, before
        ``C`` (inputs first, as Relax's ``call_tir`` passes them).
    activation : str or None
        Applied after the bias, before C is rounded and stored: ``"relu"``, ``"silu"``
        or ``"gelu_tanh"`` (torch's ``gelu(approximate="tanh")``;
        :mod:`tvm_tirx.kernels.parts.epilogue.activation` gives the instructions and
        their accuracy), or None.
    gated : bool
        A gated linear unit (GLU; SwiGLU with ``activation="silu"``, GeGLU with
        ``"gelu_tanh"``): ``C = activation(A Bg^T [+ bias_g]) * (A Bu^T [+ bias_u])``
        for gate and up weights ``Bg``, ``Bu`` of ``(n, k)``, in one GEMM whose B
        (``(b_rows, k)``, ``b_rows = 2 * ceil(n / 8) * 8``) interleaves them in groups of
        eight rows: B rows ``16 q .. 16 q + 7`` are ``Bg[8 q .. 8 q + 7]``, the next eight
        ``Bu[8 q ..]`` (zero rows past ``n``; :func:`tvm_tirx.ops.gate_up_weight` builds it
        for ``n`` a multiple of 8; bf16 or fp8 inputs);
        a ``Bias`` is ``(b_rows,)``, interleaved the same way.  Needs ``block_n`` 128 or 256
        (the output tile is ``block_n / 2`` columns wide).
    residual : bool
        Add a ``Residual`` tensor ``(m, n)`` of ``out_dtype`` last, in float32 before the
        one rounding: ``C = ... + Residual`` (a transformer's skip connection after its
        output projection); a bf16 residual with an even ``n`` must start at a 4-byte
        aligned address (it is read as pairs; checked at each call).  The function then takes ``Residual`` after ``Bias`` (or
        ``B``), before ``C``.  bf16 inputs only.
    a_major : str
        A's innermost axis: ``"k"`` (A is ``(m, k)``) or ``"m"`` (A is ``(k, m)``,
        its rows ``m * 2`` bytes: a multiple of 16, checked here for a static ``m``
        and at each call for a run-time one).  bf16 inputs only for ``"m"``: wgmma
        transposes 16-bit tiles only (PTX ISA 9.7.15.5.1.2).
    b_major : str
        B's innermost axis: ``"k"`` (B is ``(n, k)``) or ``"n"`` (B is ``(k, n)``,
        ``n * 2`` bytes a multiple of 16; bf16 only; with ``cluster=2``, ``block_n``
        128 or 256).  A gated B is then ``(k, b_rows)``, its columns interleaved.
    block_m : int
        Rows of C per CTA tile: 128, or 256, the cooperative tile: each consumer
        warpgroup computes 128 rows as two 64-row blocks (two ``wgmma.m64`` per K step
        into two accumulator sets, one commit group) and runs the epilogue once per block.
        A stage then holds ``(256 + block_n) * 128`` bytes (256 x 128 with bf16 output
        fits 4 stages); the bf16 epilogue tiles stay ``256 * block_n`` bytes (each
        warpgroup stores its blocks through its one tile in turn).  256 needs
        ``gated=False`` and ``block_n`` at most 192 (a consumer thread holds ``block_n``
        fp32 accumulators; see :data:`~.geometry.COOP_MAX_BLOCK_N`); with ``cluster=2``
        an even number of 256-row tiles.  The kernel's name then has ``_bm256``.
    splits : int
        CTAs per output tile, each over a contiguous ``1 / splits`` of the K tiles
        (split-K: :class:`~tvm_tirx.kernels.parts.split_k.SplitK`); 1 for none.  More than 1
        needs ``persistent=False``, ``cluster=1``, ``block_m=128``, bf16 inputs, no fused
        epilogue stage and a static ``k`` of enough K tiles for every split; the launch
        grid is then ``(tiles, splits)`` and the function ``hopper_gemm_split(A, B,
        Partial, Counters, C)``: ``Partial (m, splits * n)`` float32 of any values
        (overwritten) and ``Counters (m, ceil(n / block_n))`` uint32, zero before the call
        and left zero by it.  The result is bitwise reproducible; the name has
        ``_split{splits}``.
    block_scales : bool
        With ``in_dtype="float8_e4m3fn"``: A and B quantized in blocks, the DeepGEMM format
        (:mod:`~tvm_tirx.kernels.gemm.block_scales`): the function is then
        ``hopper_gemm_fp8_block_scaled(A, B, C, ScalesA, ScalesB)`` with ``ScalesA (m,
        ceil(k / 128))`` (one scale per row of A and 128 elements of K) and ``ScalesB
        (ceil(n / 128), ceil(k / 128))`` (one per 128 x 128 block of B), float32, and
        computes ``C = sum_kb SA[:, kb] SB[nb, kb] (A_kb @ B_kb^T)``, each block's product
        promoted into fp32 accumulators.  Needs 128-row tiles, ``block_n`` 64 or 128, no
        fused epilogue, one split; the name has ``_block_scaled``.

    Returns
    -------
    tvm.tirx.PrimFunc
        ``hopper_gemm(A, B, C)`` (bf16 inputs) or ``hopper_gemm_fp8(A, B, C, Scales)``;
        with ``bias``, ``hopper_gemm_bias(A, B, Bias, C)`` or ``hopper_gemm_fp8_bias(A, B,
        Bias, C, Scales)``; with ``residual``, ``hopper_gemm_residual(A, B, Residual, C)``
        or ``hopper_gemm_bias_residual(A, B, Bias, Residual, C)``; A, B and C
        16-byte aligned.  It computes ``C = activation(Scales[0] * Scales[1] * A @ B^T
        + Bias) + Residual`` (the parts that apply; gated, ``activation(gate) * up +
        Residual`` of the two products).

    Raises
    ------
    ValueError
        A size or an option outside those above; a TMA row stride that is not a multiple
        of 16 bytes (the message names the tensor, its row bytes and the rule).  For a
        run-time ``k`` the stride rule is checked at each call, on the host, before the
        launch (a ``ValueError`` from the kernel call).
    """
    return GemmSpec(n, k, in_dtype, out_dtype, stages=stages, wait_depth=wait_depth, persistent=persistent, ctas=ctas,
                    group_m=group_m, cluster=cluster, spin=spin, block_n=block_n, bias=bias, activation=activation,
                    gated=gated, residual=residual, a_major=a_major, b_major=b_major, block_m=block_m,
                    splits=splits, block_scales=block_scales).build(m)
