"""The small-M (decode) kernel's split counts: every count per shape, timed, with the planner's pick.

``y = x (m, k) @ w (n, k)^T`` in bf16 for m of 1 to 64 rows, by the small-M kernel
(:mod:`tvm_tirx.kernels.gemm.small_m`) at each split count, each launch checked against
an fp32 reference first and timed as the GPU time per call of a CUDA graph of 50 calls:
the data that calibrates :func:`tvm_tirx.kernels.gemm.planner.choose_small_m`.  The
table of ``ops.linear`` against ``F.linear`` and Triton on these shapes is ``python
bench/gemm.py --ops --classes decode --triton`` (with ``TVM_TIRX_SMALL_M=1``; without it,
the tile kernel the operators take today).

    python bench/gemm_decode.py            # GPU: every split count per shape, planner's pick marked
    python bench/gemm_decode.py --m 64 --nk 4096x4096 --block-ms 32 64   # chosen shapes and block_m
    python bench/gemm_decode.py --cpu      # no GPU: the planner's plans, compiled and assembled
"""

from __future__ import annotations

import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

import argparse  # noqa: E402
import math  # noqa: E402

from bench._timing import table  # noqa: E402
from bench.launch import _graph_us  # noqa: E402

NKS = ((4096, 4096), (14336, 4096), (4096, 14336), (1024, 4096), (8192, 8192), (28672, 8192))


def _inputs(torch, m, n, k):
    torch.manual_seed(m * 7 + n + k)
    return (torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
            torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / math.sqrt(k))


def _error(torch, y, x, w) -> float:
    ref = x.float() @ w.float().t()
    return ((y.float() - ref).abs().max() / ref.abs().max()).item()


def main_sweep(repeats: int, ms=(1, 16, 64), nks=NKS, block_ms=None) -> None:
    """Every split count (and each of ``block_ms``, default the planner's) per shape:
    checked, then timed under a CUDA graph; the table marks the planner's pick."""
    import torch
    from tvm_tirx.kernels.gemm.planner import choose_small_m

    rows = []
    for n, k in nks:
        for m in ms:
            x, w = _inputs(torch, m, n, k)
            pick = choose_small_m(m, n, k)
            times = {}
            for block_m in block_ms or (pick.block_m,):
                for splits in sorted({1, 2, 4, 8, 16, pick.splits}):
                    if splits <= -(-k // 64):
                        times[block_m, splits] = _time_one(torch, x, w, block_m, splits, repeats)
            best = min(times, key=times.get)
            rows.append([f"{m}x{n}x{k}", f"bm{pick.block_m} s{pick.splits}", f"bm{best[0]} s{best[1]}",
                         "  ".join(f"bm{b} s{s}:{t:.1f}{'*' if (b, s) == (pick.block_m, pick.splits) else ''}"
                                   for (b, s), t in times.items())])
            print("  ".join(map(str, rows[-1])), flush=True)  # as measured: a cut-off run keeps its rows
    print("small-M kernel per block_m and split count, GPU us per call (CUDA graph); * the planner's pick")
    print(table(["M x N x K", "planner", "fastest", "times"], rows))


def _time_one(torch, x, w, block_m, splits, repeats) -> float:
    """One small-M kernel on ``x``, ``w`` (the deepest ring that fits): checked against
    fp32, then its GPU us per call."""
    from tvm_tirx.kernels.gemm.planner import small_m_stages
    from tvm_tirx.ops import gemm_kernels
    from tvm_tirx.ops.small_m_plan import workspace

    (m, k), n = x.shape, w.shape[0]
    stages = small_m_stages(block_m)
    kernel = gemm_kernels.gemm_kernel(gemm_kernels.SmallMSpec(n, k, "bfloat16", "sm_90a", block_m, splits, stages))
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    work = workspace(x.device, m, n, splits, -(-n // 128)) if splits > 1 else ()
    kernel(x, w, *work, c)
    assert _error(torch, c, x, w) < 1e-2
    return _graph_us(torch, lambda: kernel(x, w, *work, c), repeats)


def main_cpu() -> None:
    from tvm_tirx import testing
    from tvm_tirx.kernels.gemm.planner import choose_small_m
    from tvm_tirx.ops import gemm_kernels

    import tvm_tirx

    rows = []
    for n, k in NKS:
        for m in (1, 64):
            plan = choose_small_m(m, n, k)
            key = gemm_kernels.SmallMSpec(n, k, "bfloat16", "sm_90a", plan.block_m, plan.splits, plan.stages)
            kernel = tvm_tirx.compile(key.prim_func(), target="cuda", arch="sm_90a")
            size = len(testing.assemble(kernel)) if testing.has_nvcc() else 0
            rows.append([f"{m}x{n}x{k}", plan.block_m, plan.splits, plan.stages, -(-n // 128) * plan.splits,
                         size or "no nvcc"])
    print("the small-M plans (planner.choose_small_m), compiled for sm_90a and assembled")
    print(table(["M x N x K", "block_m", "splits", "stages", "CTAs", "cubin bytes"], rows))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cpu", action="store_true", help="compile and assemble the plans only")
    parser.add_argument("--m", type=int, nargs="+", default=[1, 16, 64], help="rows of x")
    parser.add_argument("--nk", nargs="+", help="NxK shapes of w (default: the Llama-like list)")
    parser.add_argument("--block-ms", type=int, nargs="+", help="block_m values (default: the planner's)")
    args = parser.parse_args(argv)
    if args.cpu:
        main_cpu()
    else:
        nks = [tuple(int(v) for v in s.split("x")) for s in args.nk] if args.nk else NKS
        main_sweep(args.repeats, args.m, nks, args.block_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
