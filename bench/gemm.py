"""bf16 GEMM on tensor cores written with tile operations only: C = A @ B^T.

A is (M, K), B is (N, K) (both bf16, row-major), C is (M, N) float32.  A CTA
of 8 warps computes a 128 x 128 tile; each warp a 64 x 32 sub-tile as 4 x 4
``mma.sync.m16n8k16`` per 16-wide k step, accumulating in registers.  K is
walked in 32-wide tiles through a two-stage shared-memory pipeline filled
with ``cp.async.cg`` (16-byte chunks, committed and waited explicitly);
fragments come from shared memory with ``ldmatrix``.  Shared rows are padded
to 80 bytes so the eight rows an ``ldmatrix`` reads fall in different banks.

    python bench/gemm.py          # on a GPU: check against torch.matmul, time, table
    python bench/gemm.py --cpu    # no GPU: compile, assemble, print ptxas register use
"""

from __future__ import annotations

import os
import sys

# bench/ holds copy.py, which would shadow the standard library's copy module:
# import the helpers as the package `bench`, from the repository root.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

import argparse  # noqa: E402

from tvm.tirx.layout import Axis, S, TileLayout  # noqa: E402

import tvm_tirx  # noqa: E402
from tvm_tirx import testing  # noqa: E402
from tvm_tirx.script import tirx as T  # noqa: E402

from bench._timing import median_cuda_ms, table  # noqa: E402

L = Axis.laneid
BM, BN, BK = 128, 128, 32
PAD = 8  # bf16 elements of padding per shared row (16 bytes)
WARPS_M, WARPS_N = 2, 4
MR, NR = 4, 4  # 16 x 8 mma tiles per warp along M and N

# Register layouts.  The mma fragment maps (PTX ISA 9.7.14.5.8) with g = lane / 4
# and t = lane % 4: A word (row 8h + g, word 4q + t) -> register h + 2q; B word
# (n = g, word 4q + t) -> register q; C (row 8h + g, col 2t + e) -> register 2h + e.
A_FRAG = TileLayout(S[(MR, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ L, 2, 1 @ L)])  # (mr, k, 16, 8 words)
A_LDM = TileLayout(S[(MR, 4, 8, 4) : (4, 1, 4 @ L, 1 @ L)])  # the same registers as 4 ldmatrix matrices
B_FRAG = TileLayout(S[(NR, 1, 8, 2, 4) : (2, 2, 4 @ L, 1, 1 @ L)])  # (nr, k, 8 n, 8 words)
B_LDM = TileLayout(S[(NR, 2, 8, 4) : (2, 1, 4 @ L, 1 @ L)])
ACC = TileLayout(S[(MR, NR, 2, 8, 4, 2) : (16, 4, 2, 4 @ L, 1 @ L, 1)])  # (mr, nr, 16, 8)
ACC_ROWS = TileLayout(S[(8, 4, MR, NR, 2, 2) : (4 @ L, 1 @ L, 16, 4, 2, 1)])  # (lane, mr, nr, h, pair)


def make_gemm(m: int, n: int, k: int, out_dtype: str = "float32"):
    """C (m, n) = A (m, k) @ B (n, k)^T, bf16 inputs, fp32 accumulation."""
    if m % BM or n % BN or k % BK:
        raise ValueError(f"sizes must be multiples of ({BM}, {BN}, {BK})")
    kt_count = k // BK

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
        sa = T.alloc_shared((2, BM, BK + PAD), "bfloat16", align=16)
        sb = T.alloc_shared((2, BN, BK + PAD), "bfloat16", align=16)
        acc = T.alloc_local((MR, NR, 16, 8), "float32", layout=ACC)
        a = T.alloc_local((MR, 1, 16, 8), "uint32", layout=A_FRAG)
        b = T.alloc_local((NR, 1, 8, 8), "uint32", layout=B_FRAG)
        a_tiles = A.view(m // BM, BM, kt_count, BK).sub[bm, :, :, :]
        b_tiles = B.view(n // BN, BN, kt_count, BK).sub[bn, :, :, :]
        T.cuda.tile.apply(T.ptx["mov.b32"], acc.local().view(MR * NR * 4, 1), T.float32(0))
        # prologue: tile 0 -> stage 0 (each thread two 16-byte chunks of A and of B)
        T.cuda.tile.apply(
            T.ptx["cp.async.cg.shared.global"],
            sa.sub[0, :, 0:BK].view(2, 64, 4, 8).sub[:, tid // 4, tid % 4, :],
            a_tiles.sub[:, 0, :].view(2, 64, 4, 8).sub[:, tid // 4, tid % 4, :],
        )
        T.cuda.tile.apply(
            T.ptx["cp.async.cg.shared.global"],
            sb.sub[0, :, 0:BK].view(2, 64, 4, 8).sub[:, tid // 4, tid % 4, :],
            b_tiles.sub[:, 0, :].view(2, 64, 4, 8).sub[:, tid // 4, tid % 4, :],
        )
        T.ptx["cp.async.commit_group"]()
        for kt in T.serial(kt_count):
            nxt = (kt + 1) % 2
            more = kt + 1 < kt_count
            # next tile -> the other stage; past the end, pred zero-fills instead
            T.cuda.tile.apply(
                T.ptx["cp.async.cg.shared.global"],
                sa.sub[nxt, :, 0:BK].view(2, 64, 4, 8).sub[:, tid // 4, tid % 4, :],
                a_tiles.sub[:, T.min(kt + 1, kt_count - 1), :].view(2, 64, 4, 8).sub[:, tid // 4, tid % 4, :],
                pred=more,
            )
            T.cuda.tile.apply(
                T.ptx["cp.async.cg.shared.global"],
                sb.sub[nxt, :, 0:BK].view(2, 64, 4, 8).sub[:, tid // 4, tid % 4, :],
                b_tiles.sub[:, T.min(kt + 1, kt_count - 1), :].view(2, 64, 4, 8).sub[:, tid // 4, tid % 4, :],
                pred=more,
            )
            T.ptx["cp.async.commit_group"]()
            T.ptx["cp.async.wait_group"](1)  # tile kt has landed
            T.cuda.cta_sync()
            cur = kt % 2
            sa_w = sa.view("uint32").sub[cur, wm * 64 : wm * 64 + 64, :]
            sb_w = sb.view("uint32").sub[cur, wn * 32 : wn * 32 + 32, :]
            for ks in T.unroll(BK // 16):
                T.cuda.tile.apply(
                    T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
                    a.view(MR, 4, 8, 4, layout=A_LDM),
                    sa_w.sub[:, ks * 8 : ks * 8 + 8].view(MR, 2, 8, 2, 4).permute(0, 3, 1, 2, 4).view(MR, 4, 8, 4),
                    scope="warp",
                )
                T.cuda.tile.apply(
                    T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"],
                    b.view(NR, 2, 8, 4, layout=B_LDM),
                    sb_w.sub[:, ks * 8 : ks * 8 + 8].view(NR, 8, 2, 4).permute(0, 2, 1, 3),
                    scope="warp",
                )
                T.cuda.tile.apply(
                    T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"], acc, a, b, acc, scope="warp"
                )
            T.cuda.cta_sync()  # every warp is done with stage `cur` before it is refilled
        c_tile = C.view(m // BM, BM, n // BN, BN).sub[bm, :, bn, :]
        c_warp = c_tile.view(WARPS_M, MR, 2, 8, WARPS_N, NR, 4, 2).sub[wm, :, :, :, wn, :, :, :]
        T.cuda.tile.apply(
            T.ptx["st.global.v2.f32"],
            c_warp.permute(2, 4, 0, 3, 1, 5).view(32, MR, NR, 2, 2),
            acc.view(32, MR, NR, 2, 2, layout=ACC_ROWS),
            scope="warp",
        )

    return gemm


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile and assemble only")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--sizes", type=int, nargs="*", default=[4096, 8192])
    args = parser.parse_args(argv)
    if args.cpu or not testing.has_cuda():
        kernel = tvm_tirx.compile(make_gemm(*(args.sizes[0],) * 3), target="cuda", arch="sm_90a")
        cubin = testing.assemble(kernel)
        print(f"gemm {args.sizes[0]}^3 bf16: assembled for sm_90a ({len(cubin)} bytes)")
        return 0

    import torch

    rows = []
    for size in args.sizes:
        a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(size, size, device="cuda", dtype=torch.float32)
        kernel = tvm_tirx.compile(make_gemm(size, size, size), target="cuda")
        kernel(a, b, c)
        ref = torch.matmul(a.float(), b.float().t())
        err = (torch.linalg.norm(c - ref) / torch.linalg.norm(ref)).item()
        assert err < 1e-2, f"relative Frobenius error {err}"
        flops = 2 * size**3
        torch_ms = median_cuda_ms(torch, lambda: torch.matmul(a, b.t()), args.runs)
        tile_ms = median_cuda_ms(torch, lambda: kernel(a, b, c), args.runs)
        tf = lambda ms: flops / (ms * 1e-3) / 1e12  # noqa: E731
        rows.append([f"{size}^3", f"{tile_ms:.3f}", f"{tf(tile_ms):.0f}", f"{torch_ms:.3f}", f"{tf(torch_ms):.0f}", f"{torch_ms / tile_ms:.2f}", f"{err:.1e}"])
        del a, b, c, ref
        torch.cuda.empty_cache()
    print(f"bf16 GEMM (fp32 accumulate and output), median of {args.runs} runs (CUDA events)")
    print(table(["size", "tile ms", "tile TFLOP/s", "torch ms", "torch TFLOP/s", "x torch", "rel. error"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
