"""A warp-specialized Hopper GEMM written with tile operations: C = A @ B^T.

A is (M, K), B is (N, K), both bf16 and row-major ("TN", like ``torch.matmul(a, b.t())``);
C is (M, N), bf16 or float32, fp32 accumulation.

One CTA computes a 128 x 256 tile of C with three warpgroups (384 threads):

* warpgroup 0, the **producer**, gives up registers (``setmaxnreg.dec`` to 40) and one of
  its threads streams the K tiles of A (128 x 64) and B (256 x 64) into a ring of
  ``stages`` shared buffers with TMA loads (128-byte swizzle), each stage guarded by two
  mbarriers: ``full[s]`` (armed with the stage's bytes, completed by the TMA) and
  ``empty[s]`` (one arrival per consumer warpgroup when it is done reading);
* warpgroups 1 and 2, the **consumers**, take registers (``setmaxnreg.inc`` to 232) and
  each multiplies its 64 rows of A by all of B with ``wgmma.m64n256k16`` (four per K
  tile), keeping ``wait_depth`` wgmma batches in flight before releasing a stage;
* the **epilogue** of each consumer: bf16 output is converted to packed ``bf16x2``,
  written into a 128-byte-swizzled shared tile (conflict-free ``st.shared.b32``) and
  stored by one TMA store per 64-column box; float32 output is stored straight from the
  accumulators (``st.global.v2.f32``).

``persistent=True`` launches one CTA per SM that walks the output tiles in a grouped
order (``group_m`` row tiles at a time, so that consecutive tiles share B in L2); the
producer runs ahead into the next tile while the consumers finish the epilogue.
``cluster=2`` pairs CTAs that compute vertically adjacent tiles (same B columns): each
loads half of the B tile and multicasts it to both, halving B's L2 traffic.

Hardware facts: PTX ISA 9.7.15 (wgmma, fragment map 9.7.15.5.1.1), 9.7.9.25.5.1 (TMA),
9.7.13.15 (mbarrier), 9.7.13.1 (named barriers), 9.7.19.5 (setmaxnreg).
"""

from __future__ import annotations

from tvm.runtime import DataType

from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.tma import swizzled_layout
from tvm_tirx.tile.fragments import accumulator_layout, accumulator_registers, accumulator_tile

BM, BN = 128, 256
BK_BYTES = 128  # bytes of K per row of a stage: one 128-byte swizzle row (64 bf16, 128 fp8)
#: input dtype -> (wgmma opcode, K per instruction) (PTX ISA 9.7.15.5)
INPUTS = {
    "bfloat16": (f"wgmma.mma_async.sync.aligned.m64n{BN}k16.f32.bf16.bf16", 16),
    "float8_e4m3fn": (f"wgmma.mma_async.sync.aligned.m64n{BN}k32.f32.e4m3.e4m3", 32),
}
WG_M = 64  # rows of C per consumer warpgroup
CONSUMERS = 2
LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
LOAD_MC = LOAD + ".multicast::cluster"
REMOTE_ARRIVE = "mbarrier.arrive.shared::cluster.b64"  # .release.cta, as CUTLASS arrives on a peer
STORE = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"
@T.macro
def _wait(bar, phase, flag, spin):
    """Wait until the phase of parity ``phase`` of ``bar`` completes: apache-tvm's
    ``mbarrier_wait`` (``try_wait`` with a suspend-time hint), or with ``spin`` a loop of
    plain ``try_wait.parity`` (the hardware's own time limit), as CUTLASS waits."""
    if spin:
        flag[0] = T.uint32(0)
        while flag[0] == T.uint32(0):
            T.cuda.tile.apply(T.ptx["mbarrier.try_wait.parity.shared::cta.b64"], flag, bar, phase=T.Cast("uint32", phase))
    else:
        T.cuda.mbarrier_wait_phase(bar, phase)


@T.macro
def _release(empty, s, tid, cluster):
    """Thread 0 of a consumer warpgroup arrives on ``empty[s]``: of its own CTA, or
    with ``cluster=2`` of both CTAs (the peer's producer fills this CTA's buffer too)."""
    if tid % 128 == 0:
        if cluster == 2:
            for r in T.unroll(2):
                T.cuda.tile.apply(T.ptx[REMOTE_ARRIVE], empty.sub[s, :],
                                  remote_cta_id=r)
        else:
            T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], empty.sub[s, :])


@T.macro
def _epilogue_bf16(acc, words, out, C, row0, col0, tid, c):
    """Round a consumer's (64, 256) fp32 accumulators to bf16 pairs, write them into its
    swizzled shared tile ``out`` (4 boxes of 64 x 32 words) and TMA-store the 4 boxes to
    ``C[row0 : row0 + 64, col0 : col0 + 256]``.  The store issued for the previous tile
    must have read ``out`` first (``wait_group.read 0``); named barrier ``1 + c`` joins
    the warpgroup's 128 threads (the named-barrier family checks, when lowering, that
    exactly those 128 threads use barrier ``1 + c``).  ``accumulator_registers`` / ``accumulator_tile`` view
    the registers and the tile (as ``(rows, boxes, words)``) by the wgmma fragment map."""
    rows = accumulator_registers(acc, "wgmma")  # (warp, lane, j, h, e): columns 8 j + 2 t + e
    T.cuda.tile.apply(T.ptx["cvt.rn.bf16x2.f32"], accumulator_registers(words, "wgmma"),
                      rows.sub[:, :, :, :, 1:2], rows.sub[:, :, :, :, 0:1], scope="warpgroup")
    if tid % 128 == 0:
        T.ptx["cp.async.bulk.wait_group.read"](0)
    T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.uint32(1 + c), count=T.uint32(128))
    T.cuda.tile.apply(T.ptx["st.shared.b32"], *accumulator_tile(out.permute(1, 0, 2), words, "wgmma"),
                      scope="warpgroup")
    T.ptx["fence.proxy.async.shared::cta"]()
    T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.uint32(1 + c), count=T.uint32(128))
    if tid % 128 == 0:
        T.cuda.tile.apply(T.ptx[STORE], C.view("uint32"), out, coords=(row0, col0 // 2), coord_steps=((0, 32),),
                          swizzle=3)
        T.ptx["cp.async.bulk.commit_group"]()


def gemm_smem_bytes(stages: int, out_dtype: str) -> int:
    """Dynamic shared memory of :func:`make_gemm`, bytes: the A and B rings, the bf16
    epilogue tiles, the mbarriers and 1 KiB for aligning the swizzled tiles."""
    ring = stages * (BM + BN) * BK_BYTES
    epilogue = CONSUMERS * WG_M * BN * 2 if out_dtype == "bfloat16" else 1024
    return ring + epilogue + 16 * stages + 1024


def tile_order(t, tiles_m: int, tiles_n: int, group_m: int):
    """Output tile ``t`` -> (row tile, column tile), grouped: ``group_m`` row tiles
    walk the column tiles together (tile ``t`` of a group is row ``t % group_m``)."""
    per_group = group_m * tiles_n
    return (t // per_group) * group_m + t % group_m, (t % per_group) // group_m


def make_gemm(m: int, n: int, k: int, out_dtype: str = "bfloat16", in_dtype: str = "bfloat16", stages: int = 3, wait_depth: int = 1,
              persistent: bool = True, ctas: int = 132, group_m: int = 8, cluster: int = 1,
              spin: bool = False):
    """The kernel for ``C (m, n) = A (m, k) @ B (n, k)^T`` (a ``T.function``).

    ``in_dtype``: bf16, or e4m3 (``float8_e4m3fn``; the function then takes a fourth
    argument, ``Scales`` (2,) float32, and computes ``C = Scales[0] Scales[1] A B^T``).
    ``m`` must be a multiple of ``BM * group_m`` (128 x 8 by default), ``n`` of 256
    and ``k`` of one 128-byte row (64 bf16, 128 e4m3).  ``stages``: shared buffers in the ring (48 KiB each; with bf16
    output at most 3, as the epilogue tiles take 64 KiB).  ``wait_depth``: wgmma
    batches a consumer leaves in flight (0 or 1) before releasing the stage it read.
    ``ctas``: the persistent grid (one per SM); ``cluster``: 1, or 2 for B multicast.
    ``spin``: wait on mbarriers with a loop of plain ``try_wait`` (see :func:`_wait`).

    Raises ``ValueError`` for sizes or options outside those.
    """
    if in_dtype not in INPUTS:
        raise ValueError(f"in_dtype must be one of {sorted(INPUTS)}, found {in_dtype!r}")
    mma, kstep = INPUTS[in_dtype]
    bk = BK_BYTES * 8 // DataType(in_dtype).bits  # K elements per 128-byte row
    tiles_m, tiles_n, k_tiles = m // BM, n // BN, k // bk
    if m % (BM * group_m) or n % BN or k % bk:
        raise ValueError(f"(m, n, k) = ({m}, {n}, {k}) must be multiples of ({BM * group_m}, {BN}, {bk})")
    if gemm_smem_bytes(stages, out_dtype) > 227 * 1024 or wait_depth not in (0, 1) or cluster not in (1, 2):
        raise ValueError(f"stages={stages} with {out_dtype} output, wait_depth={wait_depth}, cluster={cluster}")
    n_tiles = tiles_m * tiles_n
    grid = ctas if persistent else n_tiles
    rounds = (n_tiles + grid - 1) // grid
    if cluster == 2 and grid % 2:
        raise ValueError(f"a 2-CTA cluster needs an even grid, found {grid}")
    stage_bytes = (BM + BN) * BK_BYTES
    b_rows = BN // cluster  # rows of B each CTA of the cluster loads
    tma_dtype = "uint8" if DataType(in_dtype).bits == 8 else in_dtype  # the TMA moves fp8 as bytes
    ring_a = swizzled_layout((stages, BM, bk), in_dtype, 3)
    ring_b = swizzled_layout((stages, BN, bk), in_dtype, 3)
    bf16_out = out_dtype == "bfloat16"
    # the bf16 epilogue's tiles: per consumer 4 boxes of 64 rows x 32 words (a token 1 KiB for fp32)
    out_shape = (CONSUMERS, BN // 64, WG_M, 32) if bf16_out else (1, 1, 8, 32)
    out_layout = swizzled_layout(out_shape, "uint32", 3)
    launch = T.cuda.LaunchConfig(grid=grid, block=128 * (1 + CONSUMERS), min_blocks_per_sm=1,
                                 dynamic_smem_bytes=gemm_smem_bytes(stages, out_dtype), cluster=cluster)

    @T.macro
    def produce_tile(A, B, sa, sb, full, empty, t, g0, flag, rank):
        """Thread 0 of the producer: the K tiles of output tile ``t`` into the ring, ring
        iterations ``g0 ..`` (stage ``g % stages``, phase ``g // stages``)."""
        bm = tile_order(t, tiles_m, tiles_n, group_m)[0]
        bn = tile_order(t, tiles_m, tiles_n, group_m)[1]
        for kt in T.serial(k_tiles):
            s = (g0 + kt) % stages
            _wait(empty.sub[s, :], ((g0 + kt) // stages + 1) % 2, flag, spin)
            T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], full.sub[s, :], tx=T.uint32(stage_bytes))
            T.cuda.tile.apply(T.ptx[LOAD], sa.sub[s].view(tma_dtype), A.view(tma_dtype), mbar=full.sub[s, :],
                              coords=(bm * BM, kt * bk), swizzle=3, l2_promotion=3)
            if cluster == 2:  # half of B from each CTA of the pair, into both
                T.cuda.tile.apply(T.ptx[LOAD_MC], sb.sub[s, rank * b_rows : rank * b_rows + b_rows, :].view(tma_dtype),
                                  B.view(tma_dtype), mbar=full.sub[s, :], coords=(bn * BN + rank * b_rows, kt * bk),
                                  swizzle=3, l2_promotion=3, cta_mask=T.uint16(3))
            else:
                T.cuda.tile.apply(T.ptx[LOAD], sb.sub[s].view(tma_dtype), B.view(tma_dtype), mbar=full.sub[s, :],
                                  coords=(bn * BN, kt * bk), swizzle=3, l2_promotion=3)

    @T.macro
    def consume_tile(C, scales, sa, sb, so, full, empty, acc, words, factor, t, g0, flag, tid, c):
        """Consumer warpgroup ``c``: its 64 x 256 part of output tile ``t`` (ring
        iterations ``g0 ..``), then the epilogue."""
        bm = tile_order(t, tiles_m, tiles_n, group_m)[0]
        bn = tile_order(t, tiles_m, tiles_n, group_m)[1]
        for kt in T.serial(k_tiles):
            s = (g0 + kt) % stages
            _wait(full.sub[s, :], ((g0 + kt) // stages) % 2, flag, spin)
            T.ptx["wgmma.fence.sync.aligned"]()
            T.cuda.tile.apply(
                T.ptx[mma],
                acc,
                sa.sub[s, c * WG_M : c * WG_M + WG_M, :].view(1, WG_M, bk // kstep, kstep).permute(0, 2, 1, 3),
                sb.sub[s].view(BN, bk // kstep, kstep).permute(1, 0, 2),
                scope="warpgroup",
                scale_d=kt > 0,
            )
            T.ptx["wgmma.commit_group.sync.aligned"]()
            T.ptx["wgmma.wait_group.sync.aligned"](wait_depth)
            if wait_depth == 0 or kt > 0:
                _release(empty, (g0 + kt - wait_depth) % stages, tid, cluster)
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        if wait_depth == 1:
            _release(empty, (g0 + k_tiles - 1) % stages, tid, cluster)
        if scales is not None:  # fp8: C = scale_a * scale_b * (A B^T)
            factor[0] = scales[0] * scales[1]
            T.cuda.tile.apply(T.ptx["mul.rn.f32"], acc.local().view(BN // 2, 1), acc.local().view(BN // 2, 1), factor[0])
        if bf16_out:
            _epilogue_bf16(acc, words, so.sub[c], C, bm * BM + c * WG_M, bn * BN, tid, c)
        else:
            c_tile = C.view(tiles_m * 2, WG_M, tiles_n, BN).sub[bm * 2 + c, :, bn, :]
            T.cuda.tile.apply(T.ptx["st.global.v2.f32"], *accumulator_tile(c_tile, acc, "wgmma"), scope="warpgroup")

    @T.macro
    def body(A, B, C, scales):
        T.device_entry(launch=launch)
        sa = T.alloc_shared((stages, BM, bk), in_dtype, scope="shared.dyn", align=1024, layout=ring_a)
        sb = T.alloc_shared((stages, BN, bk), in_dtype, scope="shared.dyn", align=1024, layout=ring_b)
        so = T.alloc_shared(out_shape, "uint32", scope="shared.dyn", align=1024, layout=out_layout)
        full = T.alloc_shared((stages, 1), "uint64", scope="shared.dyn", align=8)
        empty = T.alloc_shared((stages, 1), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        bx = T.cuda.block_idx("x")
        wg = T.cuda.warp_id() // 4
        rank = T.cuda.cluster_ctaid("x")
        flag = T.alloc_local((1,), "uint32")
        if tid == 0:
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], full, count=T.uint32(1))
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], empty, count=T.uint32(CONSUMERS * cluster))
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
                        produce_tile(A, B, sa, sb, full, empty, t, i * k_tiles, flag, rank)
        else:  # two consumer warpgroups, 64 rows of the tile each
            T.cuda.tile.apply(T.ptx["setmaxnreg.inc.sync.aligned.u32"], scope="warpgroup", nreg=232)
            c = wg - 1
            acc = T.alloc_local((WG_M, BN), "float32", layout=accumulator_layout(BN))
            words = T.alloc_local((WG_M, BN // 2), "uint32", layout=accumulator_layout(BN, packed=True))
            factor = T.alloc_local((1,), "float32")
            for i in T.serial(rounds):
                t = bx + i * grid
                if t < n_tiles:
                    consume_tile(C, scales, sa, sb, so, full, empty, acc, words, factor, t, i * k_tiles, flag, tid, c)
            if bf16_out:
                if tid % 128 == 0:
                    T.ptx["cp.async.bulk.wait_group.read"](0)  # the last store has read its tile
        if cluster == 2:
            T.cuda.cluster_sync()  # no CTA leaves while its peer may still signal or fill it

    a_spec, b_spec = T.Tensor((m, k), in_dtype, align=16), T.Tensor((n, k), in_dtype, align=16)
    c_spec = T.Tensor((m, n), out_dtype, align=16)
    if in_dtype == "bfloat16":

        @T.function
        def hopper_gemm(A: a_spec, B: b_spec, C: c_spec):
            body(A, B, C, None)

        return hopper_gemm

    @T.function
    def hopper_gemm_fp8(A: a_spec, B: b_spec, C: c_spec, Scales: T.Tensor((2,), "float32", align=8)):
        body(A, B, C, Scales)

    return hopper_gemm_fp8
