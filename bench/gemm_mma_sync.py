"""bf16 GEMM on tensor cores written with tile operations only: C = A @ B^T.

A is (M, K), B is (N, K) (both bf16, row-major), C is (M, N) float32.  A CTA
of 8 warps computes a 128 x 128 tile; each warp a 64 x 32 sub-tile as 4 x 4
``mma.sync.m16n8k16`` per 16-wide k step, accumulating in registers.  K is
walked in 32-wide tiles through a multi-stage shared-memory pipeline filled
with ``cp.async.cg`` (16-byte chunks, committed and waited explicitly) --
three stages by default; fragments come from shared memory with ``ldmatrix``.
The shared tiles are XOR-swizzled (or padded) so that the eight rows an
``ldmatrix`` reads fall in different banks.

Pipeline depth and swizzle are swept with :func:`tvm_tirx.testing.sweep`
(configurations compiled in parallel worker processes, timed on the GPU);
the fastest is checked against torch.matmul and reported.

    python bench/gemm.py          # on a GPU: sweep, check the fastest, time, table
    python bench/gemm.py --cpu    # no GPU: compile the sweep, assemble one
"""

from __future__ import annotations

import os
import sys

# bench/ holds copy.py, which would shadow the standard library's copy module:
# import the helpers as the package `bench`, from the repository root.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

import argparse  # noqa: E402

from tvm.tirx.layout import Axis, ComposeLayout, S, TileLayout  # noqa: E402

import tvm_tirx  # noqa: E402
from tvm_tirx import testing  # noqa: E402
from tvm_tirx.script import tirx as T  # noqa: E402
from tvm_tirx.tile.fragments import accumulator_tile, mma_accumulator_layout  # noqa: E402

from bench._sass import report  # noqa: E402
from bench._timing import table  # noqa: E402

L = Axis.laneid
BM, BN, BK = 128, 128, 32
PAD = 8  # bf16 elements of padding per shared row (16 bytes)
WARPS_M, WARPS_N = 2, 4
MR, NR = 4, 4  # 16 x 8 mma tiles per warp along M and N

# Register layouts.  The mma fragment maps (PTX ISA 9.7.14.5.8) with g = lane / 4
# and t = lane % 4: A word (row 8h + g, word 4q + t) -> register h + 2q; B word
# (n = g, word 4q + t) -> register q; C (row 8h + g, col 2t + e) -> register 2h + e.
KS = BK // 16  # k16 steps per tile
A_FRAG = TileLayout(S[(MR, KS, 2, 8, 2, 4) : (8, 4, 1, 4 @ L, 2, 1 @ L)])  # (mr, ks, 16, 8 words)
A_LDM = TileLayout(S[(MR, KS, 4, 8, 4) : (8, 4, 1, 4 @ L, 1 @ L)])  # the same registers as ldmatrix matrices
B_FRAG = TileLayout(S[(NR, KS, 8, 2, 4) : (4, 2, 4 @ L, 1, 1 @ L)])  # (nr, ks, 8 n, 8 words)
B_LDM = TileLayout(S[(NR, KS, 2, 8, 4) : (4, 2, 1, 4 @ L, 1 @ L)])
ACC = mma_accumulator_layout(MR, NR)  # (mr, nr, 16, 8): S[(MR, NR, 2, 8, 4, 2) : (16, 4, 2, 4 @ L, 1 @ L, 1)]


def _by_thread(tile):
    """A (128, BK) bf16 tile as (warp, lane, j, 8): thread 32w + l's two 16-byte
    chunks, at row 64j + t/4, chunk t % 4 of the tile."""
    return tile.view(2, 64, 4, 8).permute(1, 2, 0, 3).view(8, 32, 2, 8)


def _smem_layout(stages: int, rows: int, swizzle: bool):
    """Shared tiles (stages, rows, BK) bf16: an XOR swizzle of the 16-byte chunks
    (chunk ^= (row / 2) % 4, ``ComposeLayout(3, 2, 3, ...)``) or, without it,
    rows padded to 80 bytes.  Either way the eight rows one ldmatrix reads sit
    in different banks."""
    if swizzle:
        return (stages, rows, BK), ComposeLayout(3, 2, 3, TileLayout(S[(stages, rows, BK)]))
    return (stages, rows, BK + PAD), "default"


def make_gemm(m: int, n: int, k: int, out_dtype: str = "float32", stages: int = 3, swizzle: bool = True):
    """C (m, n) = A (m, k) @ B (n, k)^T, bf16 inputs, fp32 accumulation.

    ``stages`` shared-memory buffers: while tile ``kt`` is multiplied, tiles up
    to ``kt + stages - 1`` are in flight (``cp.async.wait_group(stages - 2)``).
    """
    if m % BM or n % BN or k % BK:
        raise ValueError(f"sizes must be multiples of ({BM}, {BN}, {BK})")
    kt_count = k // BK
    a_shape, a_layout = _smem_layout(stages, BM, swizzle)
    b_shape, b_layout = _smem_layout(stages, BN, swizzle)
    ahead = stages - 1

    @T.function
    def gemm(
        A: T.Tensor((m, k), "bfloat16", align=16),
        B: T.Tensor((n, k), "bfloat16", align=16),
        C: T.Tensor((m, n), out_dtype, align=16),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(n // BN, m // BM), block=256))
        tid = T.cuda.thread_idx("x")
        bn = T.cuda.block_idx("x")
        bm = T.cuda.block_idx("y")
        warp = T.cuda.warp_id()
        wm = warp // WARPS_N
        wn = warp % WARPS_N
        sa = T.alloc_shared(a_shape, "bfloat16", align=128, layout=a_layout)
        sb = T.alloc_shared(b_shape, "bfloat16", align=128, layout=b_layout)
        acc = T.alloc_local((MR, NR, 16, 8), "float32", layout=ACC)
        a = T.alloc_local((MR, KS, 16, 8), "uint32", layout=A_FRAG)
        b = T.alloc_local((NR, KS, 8, 8), "uint32", layout=B_FRAG)
        a_tiles = A.view(m // BM, BM, kt_count, BK).sub[bm, :, :, :]
        b_tiles = B.view(n // BN, BN, kt_count, BK).sub[bn, :, :, :]
        T.cuda.tile.apply(T.ptx["mov.b32"], acc.local().view(MR * NR * 4, 1), T.float32(0))
        for kt in T.serial(kt_count + ahead):
            if kt >= ahead:
                T.ptx["cp.async.wait_group"](stages - 2)  # tile kt - ahead has landed
            T.cuda.cta_sync()  # ... for every thread, and stage (kt % stages) is free again
            # tile kt -> stage kt % stages: at CTA scope, thread 32w + l copies the
            # 16-byte chunks (row 64j + t/4, chunk t%4), j = 0, 1; past the end,
            # pred turns the copy into a zero fill of a clamped address
            src_kt = T.min(kt, kt_count - 1)
            T.cuda.tile.apply(
                T.ptx["cp.async.cg.shared.global"],
                _by_thread(sa.sub[kt % stages, :, 0:BK]),
                _by_thread(a_tiles.sub[:, src_kt, :]),
                pred=kt < kt_count,
                scope="cta",
            )
            T.cuda.tile.apply(
                T.ptx["cp.async.cg.shared.global"],
                _by_thread(sb.sub[kt % stages, :, 0:BK]),
                _by_thread(b_tiles.sub[:, src_kt, :]),
                pred=kt < kt_count,
                scope="cta",
            )
            T.ptx["cp.async.commit_group"]()
            if kt >= ahead:
                cur = (kt - ahead) % stages
                sa_w = sa.view("uint32").sub[cur, wm * 64 : wm * 64 + 64, 0 : BK // 2]
                sb_w = sb.view("uint32").sub[cur, wn * 32 : wn * 32 + 32, 0 : BK // 2]
                # A: (mr, 8h + r, 8ks + 4q + w) -> matrix h + 2q of (mr, ks); B: (nr, n, 8ks + 4q + w)
                T.cuda.tile.apply(
                    T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
                    a.view(MR, KS, 4, 8, 4, layout=A_LDM),
                    sa_w.view(MR, 2, 8, KS, 2, 4).permute(0, 3, 4, 1, 2, 5).view(MR, KS, 4, 8, 4),
                    scope="warp",
                )
                T.cuda.tile.apply(
                    T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"],
                    b.view(NR, KS, 2, 8, 4, layout=B_LDM),
                    sb_w.view(NR, 8, KS, 2, 4).permute(0, 2, 3, 1, 4),
                    scope="warp",
                )
                T.cuda.tile.apply(
                    T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"], acc, a, b, acc, scope="warp"
                )
        c_tile = C.view(m // BM, BM, n // BN, BN).sub[bm, :, bn, :]
        c_warp = c_tile.view(WARPS_M, MR * 16, WARPS_N, NR * 8).sub[wm, :, wn, :]  # this warp's (64, 32)
        T.cuda.tile.apply(T.ptx["st.global.v2.f32"], *accumulator_tile(c_warp, acc, "mma.sync"), scope="warp")

    return gemm


def _configs(size: int, stages, swizzles) -> list:
    return [dict(m=size, n=size, k=size, stages=st, swizzle=sw) for st in stages for sw in swizzles]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile (the whole sweep) and assemble only")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--sizes", type=int, nargs="*", default=[4096, 8192])
    parser.add_argument("--stages", type=int, nargs="*", default=[2, 3, 4], help="pipeline depths to sweep")
    parser.add_argument("--swizzle", choices=["both", "on", "off"], default="both",
                        help="swizzled shared tiles, padded rows, or both (swept)")
    parser.add_argument("--workers", type=int, default=None, help="compile worker processes (0: compile here)")
    parser.add_argument("--sass", action="store_true", help="print ptxas register use and SASS counts")
    args = parser.parse_args(argv)
    swizzles = {"both": [True, False], "on": [True], "off": [False]}[args.swizzle]
    if args.cpu or not testing.has_cuda():
        found = testing.sweep(make_gemm, _configs(args.sizes[0], args.stages, swizzles), (), arch="sm_90a",
                              workers=args.workers, measure=False)
        print(f"gemm {args.sizes[0]}^3 sweep (compile only)")
        print(found.table())
        kernel = next(r.kernel for r in found.rows if r.kernel is not None)
        cubin = testing.assemble(kernel)
        print(f"gemm {args.sizes[0]}^3 bf16: assembled for sm_90a ({len(cubin)} bytes)")
        if args.sass:
            print(report(kernel))
        return 0

    import torch

    rows = []
    for size in args.sizes:
        a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(size, size, device="cuda", dtype=torch.float32)
        found = testing.sweep(make_gemm, _configs(size, args.stages, swizzles), (a, b, c), workers=args.workers,
                              timer=lambda fn: testing.do_bench(fn, runs=args.runs))
        print(f"gemm {size}^3 sweep")
        print(found.table())
        best = found.best
        kernel = best.kernel
        kernel(a, b, c)
        ref = torch.matmul(a.float(), b.float().t())
        err = (torch.linalg.norm(c - ref) / torch.linalg.norm(ref)).item()
        assert err < 1e-2, f"relative Frobenius error {err}"
        flops = 2 * size**3
        torch_ms = testing.do_bench(lambda: torch.matmul(a, b.t()), runs=args.runs).median
        tile_ms = best.timing.median
        tf = lambda ms: flops / (ms * 1e-3) / 1e12  # noqa: E731
        config = f"stages={best.config['stages']}, {'swizzle' if best.config['swizzle'] else 'padded'}"
        rows.append([f"{size}^3", config, f"{tile_ms:.3f}", f"{tf(tile_ms):.0f}", f"{torch_ms:.3f}", f"{tf(torch_ms):.0f}", f"{torch_ms / tile_ms:.2f}", f"{err:.1e}"])
        del a, b, c, ref
        torch.cuda.empty_cache()
    if args.sass:
        print(report(kernel))
    print(f"bf16 GEMM (fp32 accumulate and output), the sweep's fastest, median of {args.runs} runs (CUDA events)")
    print(table(["size", "config", "tile ms", "tile TFLOP/s", "torch ms", "torch TFLOP/s", "x torch", "rel. error"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
