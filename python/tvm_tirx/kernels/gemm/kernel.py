"""The kernel: shared memory, barriers, the producer and consumer warpgroups."""

from __future__ import annotations

from tvm.script import tirx as T

from ...tile.families.tma import swizzled_layout
from ...tile.fragments import accumulator_layout
from .config import BM, BN, CONSUMERS, WG_M, GemmConfig, gemm_smem_bytes
from ..parts.epilogue import Registers
from .consumer import make_consumer
from .producer import make_producer
from .shared import Shared, Work

__all__ = ["make_gemm"]


def _cluster_rank(clusters):
    """The CTA's rank in its cluster (0 in a launch without clusters)."""
    return T.cuda.cluster_ctaid("x") if clusters else 0


def _make_body(cfg: GemmConfig):
    """The macro ``body(A, B, C, extra)`` (``extra`` the tuple of the epilogue's parameters,
    in ``cfg.epilogue.params``' order): the launch, the shared ring and barriers, the
    producer warpgroup 0 and the consumer warpgroups 1 and 2, each walking this CTA's
    output tiles ``t = blockIdx.x + i * grid`` for ``i < rounds`` while ``t < n_tiles``."""
    stages, in_dtype, cluster = cfg.stages, cfg.in_dtype, cfg.cluster
    n_tiles, grid, rounds, k_tiles, bf16_out = cfg.n_tiles, cfg.grid, cfg.rounds, cfg.k_tiles, cfg.bf16_out
    bn, out_bn, gated, epilogue = cfg.block_n, cfg.out_block_n, cfg.gated, cfg.epilogue
    produce_tile, consume_tile, ring, drain = make_producer(cfg), make_consumer(cfg), cfg.ring, epilogue.drain
    op_a, op_b = cfg.operand_a, cfg.operand_b
    # the bf16 epilogue's tiles: per consumer out_bn / 64 boxes of 64 rows x 32 words (a token 1 KiB for fp32)
    out_shape = (CONSUMERS, out_bn // 64, WG_M, 32) if bf16_out else (1, 1, 8, 32)
    out_layout = swizzled_layout(out_shape, "uint32", 3)
    # a run-time grid (one CTA per tile of a run-time m) cannot be launched in clusters,
    # not even of one CTA: it is a plain launch then (cluster=2 needs a static m)
    clusters = cluster if isinstance(grid, int) else None
    launch = T.cuda.LaunchConfig(grid=grid, block=128 * (1 + CONSUMERS), min_blocks_per_sm=1,
                                 dynamic_smem_bytes=gemm_smem_bytes(stages, cfg.out_dtype, bn, cfg.gated),
                                 cluster=clusters)

    @T.macro
    def body(A, B, C, extra):
        T.device_entry(launch=launch)
        sa = T.alloc_shared(op_a.stage_shape(stages), in_dtype, scope="shared.dyn", align=1024,
                            layout=op_a.ring_layout(stages))
        sb = T.alloc_shared(op_b.stage_shape(stages), in_dtype, scope="shared.dyn", align=1024,
                            layout=op_b.ring_layout(stages))
        so = T.alloc_shared(out_shape, "uint32", scope="shared.dyn", align=1024, layout=out_layout)
        full = T.alloc_shared((stages, 1), "uint64", scope="shared.dyn", align=8)
        empty = T.alloc_shared((stages, 1), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        bx = T.cuda.block_idx("x")
        wg = T.cuda.warp_id() // 4
        rank = _cluster_rank(clusters)
        flag = T.alloc_local((1,), "uint32")
        if tid == 0:
            ring.init(full, empty)
            T.ptx["fence.mbarrier_init.release.cluster"]()
        if cluster == 2:
            T.cuda.cluster_sync()
        else:
            T.cuda.cta_sync()
        if wg == 0:  # the producer warpgroup
            T.cuda.tile.apply(T.ptx["setmaxnreg.dec.sync.aligned.u32"], scope="warpgroup", nreg=40)
            if tid == 0:
                for i in T.serial(rounds):
                    t = bx + i * grid  # this CTA's i-th output tile
                    if t < n_tiles:
                        produce_tile(A, B, Shared(sa, sb, so, full, empty), flag, t, i * k_tiles, rank)
        else:  # two consumer warpgroups, 64 rows of the tile each
            T.cuda.tile.apply(T.ptx["setmaxnreg.inc.sync.aligned.u32"], scope="warpgroup", nreg=232)
            c = wg - 1
            acc = T.alloc_local((WG_M, bn), "float32", layout=accumulator_layout(bn))
            # what the epilogue stores: a gated GEMM's act(gate) * up, else acc itself
            out = T.alloc_local((WG_M, out_bn), "float32", layout=accumulator_layout(out_bn)) if gated else acc
            words = T.alloc_local((WG_M, out_bn // 2), "uint32", layout=accumulator_layout(out_bn, packed=True))
            factor = T.alloc_local((1,), "float32")
            tmp = T.alloc_local((out_bn // 2,), "float32")  # the fused activation's scratch registers
            for i in T.serial(rounds):
                t = bx + i * grid
                if t < n_tiles:
                    consume_tile(C, epilogue.bind(extra), Shared(sa, sb, so, full, empty),
                                 Registers(acc, out, words, tmp, factor), flag, Work(t, i * k_tiles, tid, c))
            if drain is not None:  # the TMA store's last read of the shared tile
                drain(tid)
        if cluster == 2:
            T.cuda.cluster_sync()  # no CTA leaves while its peer may still signal or fill it

    return body


def make_gemm(m, n: int, k, out_dtype: str = "bfloat16", in_dtype: str = "bfloat16", stages: int = 3,
              wait_depth: int = 1, persistent: bool = True, ctas: int = 132, group_m: int = 8, cluster: int = 1,
              spin: bool = False, block_n: int = BN, bias: str | None = None, activation: str | None = None,
              gated: bool = False, residual: bool = False, a_major: str = "k", b_major: str = "k"):
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
    stages : int
        Shared buffers in the ring (48 KiB each with ``block_n=256``: with bfloat16 output
        at most 3, the epilogue tiles taking 64 KiB; with float32 at most 4; 32 KiB each
        with ``block_n=128``, 24 KiB with 64; :func:`gemm_smem_bytes` gives the total,
        at most 227 KiB).
    wait_depth : int
        wgmma batches a consumer leaves in flight (0 or 1) before releasing a stage.
    persistent : bool
        ``ctas`` CTAs (one per SM) walk the output tiles in :func:`tile_order`; else one
        CTA per output tile.
    ctas : int
        The persistent grid.
    group_m : int
        Row tiles per group of :func:`tile_order`.
    cluster : int
        1, or 2: pairs of CTAs on tiles of the same columns each load half of B and
        multicast it (needs a static ``m`` with an even number of 128-row tiles, an even
        ``group_m`` and an even grid).
    spin : bool
        Wait on mbarriers with a loop of plain ``try_wait`` instead of a suspend-time hint.
    block_n : int
        Columns of C per CTA tile, 64, 128 or 256 (``wgmma.m64n{block_n}``): fewer columns
        make more tiles, for shapes whose 128 x 256 tiles would leave SMs idle (small ``m``
        or ``n``); a stage of the ring then takes ``(128 + block_n) * 128`` bytes and the
        bf16 epilogue tiles ``256 * block_n`` bytes, so more stages fit.
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
    cfg = GemmConfig(m, n, k, out_dtype, in_dtype, stages, wait_depth, persistent, ctas, group_m, cluster, spin,
                     block_n, bias, activation, gated, residual, a_major, b_major)
    return _prim_func(cfg, _make_body(cfg))


def _prim_func(cfg: GemmConfig, body):
    """The ``T.function`` around ``body``: ``(A, B, *inputs, C, *trailing)``, the epilogue
    chain's parameters (``cfg.epilogue``: ``Bias`` and ``Residual`` before C, inputs first
    as Relax's ``call_tir`` passes them; fp8's ``Scales`` after it)."""
    epilogue = cfg.epilogue
    specs = {"A": T.Tensor(cfg.operand_a.global_shape(cfg.m, cfg.k), cfg.in_dtype, align=16),
             "B": T.Tensor(cfg.operand_b.global_shape(cfg.b_rows, cfg.k), cfg.in_dtype, align=16),
             "C": T.Tensor((cfg.m, cfg.n), cfg.out_dtype, align=16)}
    specs.update((p.name, p.spec()) for p in epilogue.params)
    names = ("A", "B", *(p.name for p in epilogue.inputs), "C", *(p.name for p in epilogue.trailing))
    return _signature(names, specs, body)


def _signature(names: tuple, specs: dict, body):
    """The ``T.function`` whose parameters are ``names`` (annotated ``specs[name]``), calling
    ``body(A, B, C, extra)`` with ``extra`` the epilogue's parameters in the chain's order.

    TVMScript reads a function's parameters from its Python source, so a parameter list
    that varies with the options cannot be one function: this is the one place that spells
    out the signatures the chains of :attr:`GemmConfig.epilogue` yield (a name is the
    kernel's global symbol).

    Raises
    ------
    ValueError
        ``names`` is a parameter list no chain of ``make_gemm`` yields.
    """
    a, b, c = specs["A"], specs["B"], specs["C"]
    v, r, s = specs.get("Bias"), specs.get("Residual"), specs.get("Scales")
    if names == ("A", "B", "C"):

        @T.function
        def hopper_gemm(A: a, B: b, C: c):
            body(A, B, C, ())

        return hopper_gemm
    if names == ("A", "B", "Bias", "C"):

        @T.function
        def hopper_gemm_bias(A: a, B: b, Bias: v, C: c):
            body(A, B, C, (Bias,))

        return hopper_gemm_bias
    if names == ("A", "B", "Residual", "C"):

        @T.function
        def hopper_gemm_residual(A: a, B: b, Residual: r, C: c):
            body(A, B, C, (Residual,))

        return hopper_gemm_residual
    if names == ("A", "B", "Bias", "Residual", "C"):

        @T.function
        def hopper_gemm_bias_residual(A: a, B: b, Bias: v, Residual: r, C: c):
            body(A, B, C, (Bias, Residual))

        return hopper_gemm_bias_residual
    if names == ("A", "B", "C", "Scales"):

        @T.function
        def hopper_gemm_fp8(A: a, B: b, C: c, Scales: s):
            body(A, B, C, (Scales,))

        return hopper_gemm_fp8
    if names == ("A", "B", "Bias", "C", "Scales"):

        @T.function
        def hopper_gemm_fp8_bias(A: a, B: b, Bias: v, C: c, Scales: s):
            body(A, B, C, (Bias, Scales))

        return hopper_gemm_fp8_bias
    raise ValueError(f"make_gemm: no kernel signature {names} (the epilogue chain's parameters)")
