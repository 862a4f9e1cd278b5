"""Small-M (decode) GEMMs through ``tvm_tirx.ops.linear``, against ``F.linear`` (cuBLAS) and Triton.

``y = x (m, k) @ w (n, k)^T`` in bf16 for m of 1 to 64 rows: the planner
(:func:`tvm_tirx.kernels.gemm.planner.choose_gemm`) sends these to the small-M kernel
(:mod:`tvm_tirx.kernels.gemm.small_m`).  Each row is checked against an fp32 reference
first, then timed as users call it: the GPU time per call of a CUDA graph of 50 calls
(host cost removed), and the wall time per call of eager calls back to back (host cost
included).  The ``tile kernel`` column is the 128-row tile kernel the ops launched for
these shapes before (:func:`~tvm_tirx.kernels.gemm.choose_tile`'s width), by the same
graph timing.

The table turns the ops' small-M route on (``planner.SMALL_M_ROUTE``, off by default until
this kernel has run on an H200).

    python bench/gemm_decode.py            # GPU: the table
    python bench/gemm_decode.py --sweep    # GPU: every split count per shape, planner's pick marked
    python bench/gemm_decode.py --cpu      # no GPU: the planner's plans, compiled and assembled
"""

from __future__ import annotations

import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402

from bench._timing import table  # noqa: E402
from bench.launch import _graph_us, per_call_us  # noqa: E402

MS = (1, 8, 16, 64)
NKS = ((4096, 4096), (14336, 4096), (4096, 14336), (1024, 4096), (8192, 8192), (28672, 8192))


def _inputs(torch, m, n, k):
    torch.manual_seed(m * 7 + n + k)
    return (torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
            torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / math.sqrt(k))


def _error(torch, y, x, w) -> float:
    ref = x.float() @ w.float().t()
    return ((y.float() - ref).abs().max() / ref.abs().max()).item()


def _tile_kernel(torch, x, w):
    """``f()`` launching the 128-row tile kernel the ops took for this shape before."""
    from tvm_tirx.kernels.gemm import choose_tile
    from tvm_tirx.ops import gemm_kernels

    m, n, k = x.shape[0], w.shape[0], w.shape[1]
    block_n = choose_tile(m, n, "bfloat16", torch.cuda.get_device_properties(0).multi_processor_count)["block_n"]
    kernel = gemm_kernels.gemm_kernel(gemm_kernels.GemmKey(n, k, "bfloat16", "bfloat16", "sm_90a", block_n=block_n))
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    kernel(x, w, c)
    return (lambda: kernel(x, w, c)), c


def _triton(torch, x, w):
    from bench._triton_matmul import matmul_tn

    c = torch.empty(x.shape[0], w.shape[0], device="cuda", dtype=torch.bfloat16)
    return lambda: matmul_tn(x, w, c), c


def _plan(x, w) -> str:
    from tvm_tirx.ops import gemm_kernels

    keys = [key for key in gemm_kernels.cached_kernels() if isinstance(key, gemm_kernels.SmallMKey)
            and (key.n, key.k) == tuple(w.shape)]
    bm = 8 if x.shape[0] <= 8 else 16 if x.shape[0] <= 16 else 32 if x.shape[0] <= 32 else 64
    key = next((key for key in keys if key.block_m == bm), None)
    return f"bm{key.block_m} s{key.splits}" if key else "tile"


def main_table(repeats: int, triton: bool) -> None:
    import torch
    from tvm_tirx import ops
    from tvm_tirx.kernels.gemm import planner

    planner.SMALL_M_ROUTE = True  # pylint: disable=protected-access
    F, rows, ratios, eager_ratios = torch.nn.functional, [], [], []
    for n, k in NKS:
        for m in MS:
            x, w = _inputs(torch, m, n, k)
            y = ops.linear(x, w)
            err = _error(torch, y, x, w)
            assert err < 1e-2, (m, n, k, err)
            ours = _graph_us(torch, lambda: ops.linear(x, w), repeats)
            cublas = _graph_us(torch, lambda: F.linear(x, w), repeats)
            tile_fn, tile_c = _tile_kernel(torch, x, w)
            assert _error(torch, tile_c, x, w) < 1e-2
            tile = _graph_us(torch, tile_fn, repeats)
            tri = "-"
            if triton:
                tri_fn, tri_c = _triton(torch, x, w)
                tri_fn()
                assert _error(torch, tri_c, x, w) < 1e-2
                tri = f"{_graph_us(torch, tri_fn, repeats):.1f}"
            eager = per_call_us(lambda: ops.linear(x, w), 500, repeats, torch.cuda.synchronize, host_only=False)
            eager_t = per_call_us(lambda: F.linear(x, w), 500, repeats, torch.cuda.synchronize, host_only=False)
            ratios.append(cublas / ours)
            eager_ratios.append(eager_t / eager)
            rows.append([f"{m}x{n}x{k}", _plan(x, w), f"{ours:.1f}", f"{cublas:.1f}", f"{cublas / ours:.2f}",
                         f"{tile:.1f}", tri, f"{eager:.1f}", f"{eager_t:.1f}", f"{eager_t / eager:.2f}"])
    print("decode GEMMs, bf16, GPU us per call (CUDA graph of 50 calls) and eager us per call (500 back to back)")
    print(table(["M x N x K", "plan", "ops.linear", "cuBLAS", "x cuBLAS", "tile kernel", "Triton", "eager ops",
                 "eager F.linear", "x F.linear"], rows))
    geo = lambda v: math.exp(statistics.fmean(math.log(r) for r in v))  # noqa: E731
    print(f"geomean x cuBLAS (graph) {geo(ratios):.3f}, min {min(ratios):.3f}; "
          f"geomean x F.linear (eager) {geo(eager_ratios):.3f}, min {min(eager_ratios):.3f}")


def main_sweep(repeats: int) -> None:
    import torch
    from tvm_tirx.kernels.gemm.planner import choose_small_m
    from tvm_tirx.ops import gemm_kernels

    rows = []
    for n, k in NKS:
        for m in (1, 16, 64):
            x, w = _inputs(torch, m, n, k)
            pick = choose_small_m(m, n, k)
            times = {}
            for splits in sorted({1, 2, 4, 8, 16, pick.splits}):
                if splits > -(-k // 64):
                    continue
                key = gemm_kernels.SmallMKey(n, k, "bfloat16", "sm_90a", pick.block_m, splits, pick.stages)
                kernel = gemm_kernels.gemm_kernel(key)
                c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
                counters = torch.zeros(m, -(-n // 128), device="cuda", dtype=torch.int32).view(torch.uint32)
                work = [torch.zeros(m, n, device="cuda"), counters] if splits > 1 else []
                kernel(x, w, *work, c)
                assert _error(torch, c, x, w) < 1e-2
                times[splits] = _graph_us(torch, lambda: kernel(x, w, *work, c), repeats)
            best = min(times, key=times.get)
            rows.append([f"{m}x{n}x{k}", pick.splits, best,
                         "  ".join(f"s{s}:{t:.1f}{'*' if s == pick.splits else ''}" for s, t in times.items())])
    print("small-M kernel per split count, GPU us per call (CUDA graph); * the planner's pick")
    print(table(["M x N x K", "planner", "fastest", "times"], rows))


def main_cpu() -> None:
    from tvm_tirx import testing
    from tvm_tirx.kernels.gemm.planner import choose_small_m
    from tvm_tirx.ops import gemm_kernels

    import tvm_tirx

    rows = []
    for n, k in NKS:
        for m in (1, 64):
            plan = choose_small_m(m, n, k)
            key = gemm_kernels.SmallMKey(n, k, "bfloat16", "sm_90a", plan.block_m, plan.splits, plan.stages)
            kernel = tvm_tirx.compile(gemm_kernels.small_m_prim_func(key), target="cuda", arch="sm_90a")
            size = len(testing.assemble(kernel)) if testing.has_nvcc() else 0
            rows.append([f"{m}x{n}x{k}", plan.block_m, plan.splits, plan.stages, -(-n // 128) * plan.splits,
                         size or "no nvcc"])
    print("the small-M plans (planner.choose_small_m), compiled for sm_90a and assembled")
    print(table(["M x N x K", "block_m", "splits", "stages", "CTAs", "cubin bytes"], rows))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", action="store_true", help="every split count per shape")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--no-triton", action="store_true")
    parser.add_argument("--cpu", action="store_true", help="compile and assemble the plans only")
    args = parser.parse_args(argv)
    if args.cpu:
        main_cpu()
    elif args.sweep:
        main_sweep(args.repeats)
    else:
        main_table(args.repeats, not args.no_triton)
    return 0


if __name__ == "__main__":
    sys.exit(main())
