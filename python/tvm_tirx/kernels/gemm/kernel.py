"""The kernel: shared memory, barriers, the producer and consumer warpgroups."""

from __future__ import annotations

from tvm.script import tirx as T

from ...tile.families.tma import swizzled_layout
from ...tile.fragments import accumulator_layout
from .config import WG_M, GemmConfig, gemm_smem_bytes
from .geometry import tma_epilogue
from ..parts.epilogue import Registers
from .consumer import make_consumer
from .producer import make_producer
from .shared import Shared, Work
from ..parts.split_k import Workspace
from .block_scales import BLOCK, FACTORS, Scales

__all__ = ["build"]


def _blocks(accs: tuple, out, words, tmp, factor) -> tuple:
    """A consumer thread's :class:`~tvm_tirx.kernels.parts.epilogue.Registers`, one per
    64-row block of its warpgroup (``accs``: one accumulator set per block): block 0
    stores ``out`` (``acc`` itself unless gated), a 256-row tile's block 1 its own
    accumulators (it is never gated); the packed words and the scratch registers are
    shared (the blocks' epilogues run one after the other)."""
    return tuple(Registers(acc, out if j == 0 else acc, words, tmp, factor) for j, acc in enumerate(accs))


def _cluster_rank(clusters):
    """The CTA's rank in its cluster (0 in a launch without clusters)."""
    return T.cuda.cluster_ctaid("x") if clusters else 0


def _output_tile(cfg: GemmConfig) -> tuple:
    """``(shape, layout)`` of the bf16 epilogue's shared tiles: per consumer ``out_block_n /
    64`` boxes of 64 rows x 32 words, 128-byte swizzled (a token 1 KiB for fp32 and for the
    per-thread stores of widths that are not whole boxes)."""
    if tma_epilogue(cfg.out_dtype, cfg.block_n, cfg.gated):
        shape = (cfg.consumers, cfg.out_block_n // 64, WG_M, 32)
    else:
        shape = (1, 1, 8, 32)
    return shape, swizzled_layout(shape, "uint32", 3)


def _launch(cfg: GemmConfig) -> tuple:
    """``(launch config, cluster size or None)``: :attr:`~.config.GemmConfig.launch_grid`,
    one producer and :attr:`~.config.GemmConfig.consumers` consumer warpgroups, the dynamic
    shared memory of :func:`~.config.gemm_smem_bytes`.  A
    run-time grid (one CTA per tile of a run-time m) cannot be launched in clusters, not
    even of one CTA: it is a plain launch then (cluster=2 needs a static m)."""
    clusters = cfg.cluster if isinstance(cfg.grid, int) else None
    smem = gemm_smem_bytes(cfg.stages, cfg.out_dtype, cfg.block_n, cfg.gated, cfg.block_m, cfg.splits)
    return T.cuda.LaunchConfig(grid=cfg.launch_grid, block=128 * (1 + cfg.consumers), min_blocks_per_sm=1,
                               dynamic_smem_bytes=smem, cluster=clusters), clusters


def _make_consumer_role(cfg: GemmConfig):
    """The macro ``consumer(C, extra, aux, smem, flag, at)`` (``at`` = ``(tid, bx, wg)``: the
    thread, the CTA, the warpgroup 1 or 2; the rest :func:`_make_body`'s): a
    consumer warpgroup's registers (``setmaxnreg`` to 232; the accumulators, with
    ``cfg.blocks`` sets, the gated output, the packed words, the split-K and block-scale
    registers where the options need them), its walk over the CTA's tiles
    (:func:`~.consumer.make_consumer`'s ``consume_tile``) and the TMA store's drain."""
    bn, out_bn, gated, blocks, splits = cfg.block_n, cfg.out_block_n, cfg.gated, cfg.blocks, cfg.splits
    n_tiles, grid, rounds, k_tiles, block_scales = cfg.n_tiles, cfg.grid, cfg.rounds, cfg.split_tiles, cfg.block_scales
    consume_tile, epilogue, drain = make_consumer(cfg), cfg.epilogue, cfg.epilogue.drain
    scratch = cfg.split_k.part_registers if splits > 1 else 1  # the split-K gather's registers

    @T.macro
    def consumer(C, extra, aux, smem, flag, at):
        T.cuda.tile.apply(T.ptx["setmaxnreg.inc.sync.aligned.u32"], scope="warpgroup", nreg=232)
        c = at[2] - 1
        acc = T.alloc_local((WG_M, bn), "float32", layout=accumulator_layout(bn))
        if blocks == 2:  # the accumulators of the warpgroup's second 64 rows
            acc1 = T.alloc_local((WG_M, bn), "float32", layout=accumulator_layout(bn))
        # what the epilogue stores: a gated GEMM's act(gate) * up, else acc itself
        out = T.alloc_local((WG_M, out_bn), "float32", layout=accumulator_layout(out_bn)) if gated else acc
        words = T.alloc_local((WG_M, out_bn // 2), "uint32", layout=accumulator_layout(out_bn, packed=True))
        factor = T.alloc_local((1,), "float32")
        tmp = T.alloc_local((out_bn // 2,), "float32")  # the fused activation's scratch registers
        if splits > 1:  # the split-K reduction's count (shared: the leader publishes it) and registers
            slot = T.alloc_shared((1,), "uint32", scope="shared.dyn", align=4)
            got = T.alloc_local((1,), "uint32")
            part = T.alloc_local((scratch,), "float32")
        if block_scales:  # fp8 block scales: a second accumulator set, the scales of a block
            scaled = T.alloc_local((WG_M, bn), "float32", layout=accumulator_layout(bn))
            scale_regs = T.alloc_local((FACTORS,), "float32")
        for i in T.serial(rounds):
            t = at[1] + i * grid
            if t < n_tiles:
                consume_tile(C, epilogue.bind(extra), smem,
                             _blocks((acc, acc1) if blocks == 2 else (acc,), out, words, tmp, factor), flag,
                             Work(t, i * k_tiles, at[0], c, cfg.split_of(),
                                  Workspace(aux[0], aux[1], slot, got, part) if splits > 1 else None,
                                  Scales(aux[0], aux[1], scaled, scale_regs) if block_scales else None))
        if drain is not None:  # the TMA store's last read of the shared tile
            drain(at[0])

    return consumer


def _make_body(cfg: GemmConfig):
    """The macro ``body(A, B, C, extra, aux)`` (``extra`` the tuple of the epilogue's
    parameters, in ``cfg.epilogue.params``' order; ``aux`` the split-K workspaces
    ``(Partial, Counters)`` with splits, the fp8 block scales ``(ScalesA, ScalesB)`` with
    ``block_scales``, else ``()``): the launch, the shared ring and
    barriers, the producer warpgroup 0 and the consumer warpgroups 1 and 2 (1 alone in a
    64-row tile), each walking
    this CTA's output tiles ``t = blockIdx.x + i * grid`` for ``i < rounds`` while ``t <
    n_tiles`` (with splits, split ``blockIdx.y``: :attr:`~.config.GemmConfig.launch_grid`),
    with ``cfg.blocks`` accumulator sets per consumer thread (two in a 256-row tile)."""
    stages, in_dtype, cluster = cfg.stages, cfg.in_dtype, cfg.cluster
    n_tiles, grid, rounds, k_tiles = cfg.n_tiles, cfg.grid, cfg.rounds, cfg.split_tiles
    produce_tile, consumer, ring = make_producer(cfg), _make_consumer_role(cfg), cfg.ring
    op_a, op_b = cfg.operand_a, cfg.operand_b
    out_shape, out_layout = _output_tile(cfg)
    launch, clusters = _launch(cfg)

    @T.macro
    def body(A, B, C, extra, aux):
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
                        produce_tile(A, B, Shared(sa, sb, so, full, empty), flag, t, i * k_tiles, rank,
                                     cfg.split_of())
        else:  # the consumer warpgroups, 64 rows of the tile each (128 of a 256-row tile)
            consumer(C, extra, aux, Shared(sa, sb, so, full, empty), flag, (tid, bx, wg))
        if cluster == 2:
            T.cuda.cluster_sync()  # no CTA leaves while its peer may still signal or fill it

    return body


def build(cfg: GemmConfig):
    """The ``T.function`` of the checked configuration ``cfg`` (the body of
    :func:`~tvm_tirx.kernels.gemm.make_gemm`, reached through
    :meth:`~tvm_tirx.kernels.gemm.spec.GemmSpec.build`): its parameters are
    :func:`_prim_func`'s, its body :func:`_make_body`'s."""
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
    if cfg.block_scales:  # fp8 block scales after C, as the per-tensor Scales (a plain product)
        blocks = -(-cfg.k // BLOCK)
        specs["ScalesA"] = T.Tensor((cfg.m, blocks), "float32", align=4)
        specs["ScalesB"] = T.Tensor((-(-cfg.n // BLOCK), blocks), "float32", align=4)
        names = ("A", "B", "C", "ScalesA", "ScalesB")
    if cfg.splits > 1:  # the split-K workspaces, before C (a plain product: GemmConfig's checks)
        # 8-byte aligned: the reduction moves register pairs as .v2 where n is even (SplitK.pairs)
        specs["Partial"] = T.Tensor((cfg.m, cfg.splits * cfg.n), "float32", align=8)
        specs["Counters"] = T.Tensor((cfg.m, cfg.tiles_n), "uint32", align=4)
        names = ("A", "B", "Partial", "Counters", "C")
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
            body(A, B, C, (), ())

        return hopper_gemm
    if names == ("A", "B", "Partial", "Counters", "C"):
        p, n = specs["Partial"], specs["Counters"]

        @T.function
        def hopper_gemm_split(A: a, B: b, Partial: p, Counters: n, C: c):
            body(A, B, C, (), (Partial, Counters))

        return hopper_gemm_split
    if names == ("A", "B", "C", "ScalesA", "ScalesB"):
        sa, sb = specs["ScalesA"], specs["ScalesB"]

        @T.function
        def hopper_gemm_fp8_block_scaled(A: a, B: b, C: c, ScalesA: sa, ScalesB: sb):
            body(A, B, C, (), (ScalesA, ScalesB))

        return hopper_gemm_fp8_block_scaled
    if names == ("A", "B", "Bias", "C"):

        @T.function
        def hopper_gemm_bias(A: a, B: b, Bias: v, C: c):
            body(A, B, C, (Bias,), ())

        return hopper_gemm_bias
    if names == ("A", "B", "Residual", "C"):

        @T.function
        def hopper_gemm_residual(A: a, B: b, Residual: r, C: c):
            body(A, B, C, (Residual,), ())

        return hopper_gemm_residual
    if names == ("A", "B", "Bias", "Residual", "C"):

        @T.function
        def hopper_gemm_bias_residual(A: a, B: b, Bias: v, Residual: r, C: c):
            body(A, B, C, (Bias, Residual), ())

        return hopper_gemm_bias_residual
    if names == ("A", "B", "C", "Scales"):

        @T.function
        def hopper_gemm_fp8(A: a, B: b, C: c, Scales: s):
            body(A, B, C, (Scales,), ())

        return hopper_gemm_fp8
    if names == ("A", "B", "Bias", "C", "Scales"):

        @T.function
        def hopper_gemm_fp8_bias(A: a, B: b, Bias: v, C: c, Scales: s):
            body(A, B, C, (Bias, Scales), ())

        return hopper_gemm_fp8_bias
    raise ValueError(f"make_gemm: no kernel signature {names} (the epilogue chain's parameters)")
