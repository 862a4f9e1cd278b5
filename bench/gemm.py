"""Hopper bf16 GEMM written with tile operations, against torch.matmul (cuBLAS) and Triton.

C = A @ B^T with A (M, K) and B (N, K) bf16, fp32 accumulation, C bf16 or float32.  The
kernel is :func:`tvm_tirx.kernels.gemm.make_gemm`: TMA loads into a multi-stage mbarrier ring,
one producer and two consumer warpgroups issuing ``wgmma.m64n{64,128,256}k16`` (the tile
width per shape from :func:`~tvm_tirx.kernels.gemm.choose_tile`), a persistent grid
in grouped tile order, optional 2-CTA clusters with B multicast, a TMA-store epilogue for
bf16.  Each result, written into a NaN-filled C (an element left unwritten fails), is
checked against an fp32 reference (bf16 out: max error relative to the largest reference
value <= 1e-2; fp32 out: <= 1e-4) before it is timed (CUDA events,
median of ``--runs`` runs after a warm-up, random inputs).

    python bench/gemm.py           # GPU: the suite (bf16), torch, Triton, geomean and min
    python bench/gemm.py --fp32    # GPU: also float32 output rows (torch.mm out_dtype)
    python bench/gemm.py --sweep   # GPU: every variant at one size, fastest first
    python bench/gemm.py --sweep --run-time-m  # the same, kernels made for every m (the ops' kind)
    python bench/gemm.py --tiles   # GPU: every tile variant on every shape, the fastest per shape
    python bench/gemm.py --tiles --only 256x  # ... the 256-row (cooperative) variants only (and 128x256)
    python bench/gemm.py --tiles --only split 128x128 128x64 --sizes 1000x1000x1000  # split-K against its tiles
    python bench/gemm.py --layouts # GPU: A and B K- or MN-major (TN, NN, NT, TT) against torch.matmul
    python bench/gemm.py --cpu     # no GPU: compile and assemble, ptxas and SASS counts
    python bench/gemm.py --hang-cost  # GPU: the cost of options={"detect_hangs": True}
    python bench/gemm.py --ops     # GPU: ops.linear against F.linear on the suite and the classes
    python bench/gemm.py --ops --classes decode square  # ... on some classes only (bench/_ops_table.py)
    python bench/gemm.py --ops --classes decode --triton  # ... with Triton in the same run
    python bench/gemm.py --plans   # no GPU: the planner's kernel per shape of the suite and the classes
"""

from __future__ import annotations

import os
import sys

# bench/ holds copy.py, which would shadow the standard library's copy module:
# import the helpers as the package `bench`, from the repository root.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

import argparse  # noqa: E402
import statistics  # noqa: E402

import tvm_tirx  # noqa: E402
from tvm_tirx import testing  # noqa: E402

from bench._ops_table import CLASSES, main_ops, plans  # noqa: E402
from bench._sass import report  # noqa: E402
from bench._timing import table  # noqa: E402
from tvm_tirx.kernels.gemm import choose_tile, make_gemm  # noqa: E402
from tvm_tirx.script import tirx as T  # noqa: E402

SIZES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048), (6144, 6144, 12288)]
#: Issue 26's suite: squares, two long-K/short-K shapes, the Llama-3-70B layers (N, K) at
#: four token counts M, and two sizes that are not multiples of the tile.
SUITE = ([(s, s, s) for s in (512, 1024, 2048, 4096, 8192)] + [(8192, 8192, 2048), (6144, 6144, 12288)]
         + [(m, n, k) for n, k in ((10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672))
            for m in (128, 1024, 4096, 16384)]
         + [(4000, 4096, 4096), (4097, 4095, 4104)])
#: The configuration the table uses per output type (the sweep's fastest on the H200), with
#: the tile width and ring depth of :func:`tvm_tirx.kernels.gemm.choose_tile` per shape.
BEST = {
    "bfloat16": dict(stages=3, wait_depth=1, persistent=False, group_m=16),
    "float32": dict(stages=4, wait_depth=1, persistent=False, group_m=16),
}
FP8 = dict(in_dtype="float8_e4m3fn", stages=3, persistent=False, group_m=16)
#: What ``--sweep`` compares: one change at a time, from the plain warp-specialized kernel.
VARIANTS = {
    "1 tile/CTA, fp32 out, 4 stages": dict(out_dtype="float32", stages=4, persistent=False, group_m=16),
    "1 tile/CTA, group_m 16, bf16": dict(persistent=False, group_m=16),
    "1 tile/CTA + cluster 2, group_m 16, bf16": dict(persistent=False, cluster=2, group_m=16),
    "persistent, group_m 16, bf16": dict(persistent=True, group_m=16),
    "persistent, group_m 16, wait 0, bf16": dict(persistent=True, group_m=16, wait_depth=0),
}
#: What ``--tiles`` compares on every shape of the suite: the tile's rows and columns and the
#: ring's depth.  The first is the reference of the rates (``_print_tile_rates``).
TILE_VARIANTS = {
    "128x256 s3": dict(BEST["bfloat16"]),
    "128x192 s4": dict(BEST["bfloat16"], block_n=192, stages=4),
    # widths that are not whole 64-column TMA boxes store per thread (GuardedStore)
    "128x176 s5": dict(BEST["bfloat16"], block_n=176, stages=5),
    "128x160 s6": dict(BEST["bfloat16"], block_n=160, stages=6),
    "128x144 s6": dict(BEST["bfloat16"], block_n=144, stages=6),
    "128x128 s5": dict(BEST["bfloat16"], block_n=128, stages=5),
    "128x128 s6": dict(BEST["bfloat16"], block_n=128, stages=6),
    "128x64 s6": dict(BEST["bfloat16"], block_n=64, stages=6),
    "128x64 s8": dict(BEST["bfloat16"], block_n=64, stages=8),
    # the cooperative 256-row tiles (block_m=256: two 64-row blocks per consumer warpgroup), each
    # with the deepest ring that fits; not in tiles.TILE_RATE (the planner) until measured here
    "256x128 s4": dict(BEST["bfloat16"], block_m=256, block_n=128, stages=4),
    "256x160 s4": dict(BEST["bfloat16"], block_m=256, block_n=160, stages=4),
    "256x192 s3": dict(BEST["bfloat16"], block_m=256, block_n=192, stages=3),
    # split-K (planner.choose_split; its costs FILL_TILES and REDUCE_TILES wait on these):
    # splits CTAs per tile over parts of K, met in a workspace the bench passes
    "128x128 s6 split2": dict(BEST["bfloat16"], block_n=128, stages=6, splits=2),
    "128x128 s6 split4": dict(BEST["bfloat16"], block_n=128, stages=6, splits=4),
    "128x64 s8 split2": dict(BEST["bfloat16"], block_n=64, stages=8, splits=2),
    # decode (C of one row tile): narrow tiles over the whole K, alone or in 2-CTA clusters that
    # share A (x) by multicast: cuBLAS's 64 x 32 tile in 1 x 2 clusters at 64 x 4096 x 4096
    "128x64 s8 cluster2": dict(BEST["bfloat16"], block_n=64, stages=8, cluster=2),
    "128x32 s8": dict(BEST["bfloat16"], block_n=32, stages=8),
    "128x32 s8 cluster2": dict(BEST["bfloat16"], block_n=32, stages=8, cluster=2),
    "128x16 s8": dict(BEST["bfloat16"], block_n=16, stages=8),
    "128x16 s8 cluster2": dict(BEST["bfloat16"], block_n=16, stages=8, cluster=2),
    # 64-row tiles (one consumer warpgroup): no A rows past m = 64 for the TMA to fill
    "64x64 s8": dict(BEST["bfloat16"], block_m=64, block_n=64, stages=8),
    "64x64 s8 cluster2": dict(BEST["bfloat16"], block_m=64, block_n=64, stages=8, cluster=2),
    "64x32 s8": dict(BEST["bfloat16"], block_m=64, block_n=32, stages=8),
    "64x32 s12": dict(BEST["bfloat16"], block_m=64, block_n=32, stages=12),
    "64x32 s8 cluster2": dict(BEST["bfloat16"], block_m=64, block_n=32, stages=8, cluster=2),
    "64x32 s12 cluster2": dict(BEST["bfloat16"], block_m=64, block_n=32, stages=12, cluster=2),
    "64x16 s12": dict(BEST["bfloat16"], block_m=64, block_n=16, stages=12),
    "64x64 s12": dict(BEST["bfloat16"], block_m=64, block_n=64, stages=12),
    "64x48 s12": dict(BEST["bfloat16"], block_m=64, block_n=48, stages=12),
    "64x96 s8": dict(BEST["bfloat16"], block_m=64, block_n=96, stages=8),
    "64x128 s6": dict(BEST["bfloat16"], block_m=64, block_n=128, stages=6),
}
TOLERANCE = {"bfloat16": 1e-2, "float32": 1e-4}


def _check(c, ref, out_dtype):
    """Max |C - ref| / max |ref|; raises AssertionError above the output type's bound."""
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
    assert err <= TOLERANCE[out_dtype], f"{out_dtype} output: relative error {err:.2e}"
    return err


def _tflops(shape, ms):
    m, n, k = shape
    return 2 * m * n * k / (ms * 1e-3) / 1e12


def _peers(a, b, out_dtype, runs):
    """(torch ms, Triton ms or None, Triton error) for the same product."""
    import torch

    torch_ms = testing.do_bench(_torch_product(a, b, out_dtype), runs=runs).median
    try:
        from bench._triton_matmul import matmul_tn
    except ImportError:
        return torch_ms, None, None
    if a.shape[1] % 64:  # the Triton kernel has no K mask
        return torch_ms, None, None
    c = torch.empty(a.shape[0], b.shape[0], device="cuda", dtype=getattr(torch, out_dtype))
    matmul_tn(a, b, c)
    err = _check(c, torch.matmul(a.float(), b.float().t()), out_dtype)
    return torch_ms, testing.do_bench(lambda: matmul_tn(a, b, c), runs=runs).median, err


def _torch_product(a, b, out_dtype):
    """torch's call for the same product: ``torch.mm(..., out_dtype=float32)`` where this
    torch has it (cuBLAS writing fp32), else the bf16 product."""
    import torch

    if out_dtype == "float32":
        try:
            torch.mm(a[:64, :64], b[:64, :64].t(), out_dtype=torch.float32)
            return lambda: torch.mm(a, b.t(), out_dtype=torch.float32)
        except TypeError:
            pass
    return lambda: torch.matmul(a, b.t())


def _run_one(shape, config, a, b, runs, options=None, run_time_m=False):
    """Compile (with ``options``; ``run_time_m``: for every m), check and time one
    configuration: (kernel, ms, error)."""
    import torch

    m, n, k = shape
    out_dtype = config.get("out_dtype", "bfloat16")
    kernel = tvm_tirx.compile(make_gemm(T.dynamic("m") if run_time_m else m, n, k, **config), target="cuda",
                              options=options)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=getattr(torch, out_dtype))  # unwritten: NaN
    args = (a, b, c)
    kernel(*args)
    err = _check(c, torch.matmul(a.float(), b.float().t()), out_dtype)
    return kernel, testing.do_bench(lambda: kernel(*args), runs=runs).median, err


def _inputs(shape):
    import torch

    m, n, k = shape
    torch.manual_seed(0)
    return torch.randn(m, k, device="cuda", dtype=torch.bfloat16), torch.randn(n, k, device="cuda", dtype=torch.bfloat16)


def main_table(sizes, runs, sass, fp8=True, out_dtypes=("bfloat16",)):
    rows, kernel, ratios = [], None, {}
    for shape in sizes:
        a, b = _inputs(shape)
        for out_dtype in out_dtypes:
            config = dict(BEST[out_dtype], out_dtype=out_dtype, **choose_tile(shape[0], shape[1], out_dtype))
            kernel, ms, err = _run_one(shape, config, a, b, runs)
            torch_ms, triton_ms, _ = _peers(a, b, out_dtype, runs)
            ratios.setdefault(out_dtype, []).append(torch_ms / ms)
            tri = [f"{_tflops(shape, triton_ms):.0f}", f"{triton_ms / ms:.3f}"] if triton_ms else ["-", "-"]
            rows.append(["x".join(map(str, shape)), out_dtype, _tile_label(config), f"{ms:.3f}",
                         f"{_tflops(shape, ms):.0f}",
                         f"{_tflops(shape, torch_ms):.0f}", f"{torch_ms / ms:.3f}", *tri, f"{err:.1e}"])
            print(rows[-1], flush=True)
        del a, b
    if fp8:
        for shape in [s for s in sizes if s[0] == s[1] == s[2] and s[0] >= 2048]:
            rows.append(fp8_row(shape, runs))
            print(rows[-1], flush=True)
    print(f"GEMM C = A B^T, bf16 inputs, median of {runs} runs (CUDA events); x = their time / ours")
    print(table(["M x N x K", "C", "tile", "ms", "TFLOP/s", "torch TFLOP/s", "x torch", "Triton TFLOP/s",
                 "x Triton", "max rel. err"], rows))
    for out_dtype, r in ratios.items():
        print(f"{out_dtype} out, x torch over {len(r)} shapes: geometric mean {statistics.geometric_mean(r):.3f}, "
              f"minimum {min(r):.3f}, shapes at >= 1.00x: {sum(x >= 1.0 for x in r)}")
    if sass:
        print(report(kernel))


def _tile_label(config) -> str:
    """A configuration's CTA tile, ``{block_m}x{block_n}`` (make_gemm's defaults 128 and 256)."""
    return f"{config.get('block_m', 128)}x{config.get('block_n', 256)}"


def fp8_row(shape, runs):
    """FP8 e4m3 x e4m3 -> bf16 with per-tensor scales, against torch._scaled_mm."""
    import torch

    m, n, k = shape
    a, b = _inputs(shape)
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    scales = torch.tensor([0.5, 0.25], device="cuda", dtype=torch.float32)
    sa, sb = scales[0].clone(), scales[1].clone()  # cuBLAS wants each scale on its own allocation
    kernel = tvm_tirx.compile(make_gemm(m, n, k, **FP8), target="cuda")
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    args = (a8, b8, c, scales)
    kernel(*args)
    ref = (a8.float() @ b8.float().t()) * 0.125
    err = _check(c, ref, "bfloat16")
    ms = testing.do_bench(lambda: kernel(*args), runs=runs).median
    torch_ms = testing.do_bench(lambda: torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
                                runs=runs).median
    return ["x".join(map(str, shape)), "e4m3->bf16", "128x256", f"{ms:.3f}", f"{_tflops(shape, ms):.0f}",
            f"{_tflops(shape, torch_ms):.0f}", f"{torch_ms / ms:.3f}", "-", "-", f"{err:.1e}"]


def main_sweep(shape, runs, only=None, run_time_m=False):
    a, b = _inputs(shape)
    rows = []
    for name, config in VARIANTS.items():
        if only and not any(o in name for o in only):
            continue
        try:
            _, ms, err = _run_one(shape, config, a, b, runs, run_time_m=run_time_m)
            rows.append([name, f"{ms:.3f}", f"{_tflops(shape, ms):.0f}", f"{err:.1e}"])
        except (AssertionError, ValueError, tvm_tirx.TileError) as e:  # report, go on
            rows.append([name, "-", "-", str(e)[:60]])
        print(rows[-1], flush=True)
    for out_dtype in TOLERANCE:
        torch_ms = testing.do_bench(_torch_product(a, b, out_dtype), runs=runs).median
        rows.append([f"torch ({out_dtype} out)", f"{torch_ms:.3f}", f"{_tflops(shape, torch_ms):.0f}", ""])
    kind = "kernels for every m (m at run time)" if run_time_m else "static shapes"
    print(f"variants at {'x'.join(map(str, shape))}, {kind}, median of {runs} runs")
    print(table(["variant", "ms", "TFLOP/s", "max rel. err"], rows))


class _ShapeArgs:
    """``(A, B, C)`` for a sweep configuration's shape; one shape's tensors held at a time."""

    def __init__(self):
        self.shape, self.args = None, None

    def __call__(self, config):
        import torch

        shape = (config["m"], config["n"], config["k"])
        if shape != self.shape:
            self.shape, self.args = None, None
            a, b = _inputs(shape)
            self.shape, self.args = shape, (a, b, torch.empty(shape[0], shape[1], device="cuda", dtype=torch.bfloat16))
        a, b, c = self.args
        return (a, b, *_workspaces(config, shape), c)


def _workspaces(config, shape) -> tuple:
    """A split-K variant's ``(Partial, Counters)`` (``make_gemm(splits=...)``), else ``()``."""
    import torch

    splits, block_n = config.get("splits", 1), config.get("block_n", 256)
    if splits == 1:
        return ()
    m, n, _ = shape
    counters = torch.zeros(m, -(-n // block_n), device="cuda", dtype=torch.int32).view(torch.uint32)
    return torch.empty(m, splits * n, device="cuda"), counters


def main_tiles(sizes, runs, only=None):
    """Every :data:`TILE_VARIANTS` (those whose name contains one of ``only``, and the
    first, the reference) on every shape (compiled in parallel by
    :func:`tvm_tirx.testing.sweep`), the fastest per shape checked against fp32 and set
    against torch; the geometric means of the default tile and of the fastest per shape."""
    names = [name for i, name in enumerate(TILE_VARIANTS) if i == 0 or not only or any(o in name for o in only)]
    configs = [dict(m=m, n=n, k=k, **TILE_VARIANTS[name]) for m, n, k in sizes for name in names]
    result = testing.sweep(make_gemm, configs, _ShapeArgs(), timer=lambda fn: testing.do_bench(fn, runs=runs))
    rows, ratios = [], {"default": [], "best": []}
    full_waves = []  # per shape whose every variant fills the SMs: each variant's time over 128 x 256's
    for i, shape in enumerate(sizes):
        group = result.rows[i * len(names) : (i + 1) * len(names)]
        times = [r.timing.median if r.timing else float("inf") for r in group]
        if _fills_the_sms(shape):
            full_waves.append([times[0] / t for t in times])
        best = min(range(len(names)), key=times.__getitem__)
        a, b = _inputs(shape)
        err = _run_checked(group[best].kernel, a, b, _workspaces(TILE_VARIANTS[names[best]], shape))
        torch_ms = testing.do_bench(_torch_product(a, b, "bfloat16"), runs=runs).median
        ratios["default"].append(torch_ms / times[0])
        ratios["best"].append(torch_ms / times[best])
        rows.append(["x".join(map(str, shape)), *(f"{_tflops(shape, t):.0f}" for t in times), names[best],
                     f"{_tflops(shape, torch_ms):.0f}", f"{torch_ms / times[best]:.3f}", err])
        print(rows[-1], flush=True)
        del a, b
    print(f"GEMM bf16 -> bf16 per tile variant, TFLOP/s, median of {runs} runs; x torch = torch time / best time")
    print(table(["M x N x K", *names, "best", "torch", "x torch", "max rel. err"], rows))
    for what, r in ratios.items():
        print(f"{what}: x torch geometric mean {statistics.geometric_mean(r):.3f}, minimum {min(r):.3f}, "
              f">= 1.00x: {sum(x >= 1.0 for x in r)} of {len(r)}")
    _print_tile_rates(names, full_waves)


def _fills_the_sms(shape, sms: int = 132, waves: int = 4) -> bool:
    """Whether ``shape`` makes at least ``waves`` full waves of 128 x 256 tiles (so every
    width keeps every SM busy and its time measures its rate, not wave quantization)."""
    m, n, _ = shape
    return -(-m // 128) * -(-n // 256) >= waves * sms


def _print_tile_rates(names, full_waves) -> None:
    """Each tile's rate relative to 128 x 256 (geometric mean over the shapes that fill
    the SMs; the best ring of each tile): the 128-row widths in the form of
    ``tiles.TILE_RATE``, the 256-row tiles (keyed ``(block_m, block_n)``) apart, as they
    are not in the planner's table yet."""
    if not full_waves:
        print("TILE_RATE: no shape here makes 4 full waves of 128 x 256 tiles; add one (e.g. 8192x8192x4096)")
        return
    rates = {}
    for j, name in enumerate(names):
        if TILE_VARIANTS[name].get("splits", 1) > 1 or TILE_VARIANTS[name].get("cluster", 1) > 1:
            continue  # a split's cost, a cluster's sharing are not a tile's rate
        tile = (TILE_VARIANTS[name].get("block_m", 128), TILE_VARIANTS[name].get("block_n", 256))
        rate = statistics.geometric_mean(r[j] for r in full_waves)
        rates[tile] = max(rates.get(tile, 0.0), rate)
    plain = {bn: round(r, 2) for (bm, bn), r in sorted(rates.items(), reverse=True) if bm == 128}
    print(f"TILE_RATE measured on {len(full_waves)} shapes of >= 4 full waves: {plain}")
    coop = {tile: round(r, 2) for tile, r in sorted(rates.items(), reverse=True) if tile[0] != 128}
    if coop:
        print(f"256-row tiles (block_m, block_n) -> rate relative to 128 x 256, same shapes: {coop}")


def _run_checked(kernel, a, b, workspaces=()) -> str:
    """Run ``kernel`` into a NaN-filled C (after A and B, ``workspaces``: a split-K
    kernel's): its error against the fp32 product, or WRONG."""
    import torch

    c = torch.full((a.shape[0], b.shape[0]), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernel(a, b, *workspaces, c)
    try:
        return f"{_check(c, torch.matmul(a.float(), b.float().t()), 'bfloat16'):.1e}"
    except AssertionError as err:
        return f"WRONG ({err})"


def main_hang_cost(sizes, runs):
    """The GEMM built with and without ``options={"detect_hangs": True}`` (every mbarrier
    wait bounded), both checked against fp32, timed in the same run with torch."""
    rows = []
    for shape in sizes:
        a, b = _inputs(shape)
        config = dict(BEST["bfloat16"], out_dtype="bfloat16")
        _, plain_ms, plain_err = _run_one(shape, config, a, b, runs)
        _, hang_ms, hang_err = _run_one(shape, config, a, b, runs, options={"detect_hangs": True})
        torch_ms = testing.do_bench(_torch_product(a, b, "bfloat16"), runs=runs).median
        rows.append(["x".join(map(str, shape)), f"{plain_ms:.3f}", f"{hang_ms:.3f}", f"{hang_ms / plain_ms - 1:+.1%}",
                     f"{_tflops(shape, plain_ms):.0f}", f"{_tflops(shape, hang_ms):.0f}", f"{_tflops(shape, torch_ms):.0f}",
                     f"{max(plain_err, hang_err):.1e}"])
        print(rows[-1], flush=True)
    print(f"bf16 GEMM with the hang detector, median of {runs} runs")
    print(table(["M x N x K", "ms", "ms detect_hangs", "cost", "TFLOP/s", "TFLOP/s detect_hangs", "torch TFLOP/s",
                 "max rel. err"], rows))


#: ``--layouts``: (name, a_major, b_major); "TN" is A (m, k) @ B (n, k)^T, "NN" a row-major B (k, n)
LAYOUTS = [("TN", "k", "k"), ("NN", "k", "n"), ("NT", "m", "k"), ("TT", "m", "n")]


def _stored(a, b, a_major, b_major):
    """The operands as the kernel of these majors takes them, and the same product's
    (m, k) and (k, n) views for torch.matmul (no copy: cuBLAS picks its own layout)."""
    a_s = a if a_major == "k" else a.t().contiguous()
    b_s = b if b_major == "k" else b.t().contiguous()
    return (a_s, b_s), (a_s if a_major == "k" else a_s.t(), b_s.t() if b_major == "k" else b_s)


def main_layouts(sizes, runs):
    """Each layout of :data:`LAYOUTS` at each size: ours against torch.matmul on the same
    stored operands, checked against fp32 first."""
    import torch

    rows = []
    for shape in sizes:
        a, b = _inputs(shape)
        ref = torch.matmul(a.float(), b.float().t())
        for name, a_major, b_major in LAYOUTS:
            config = dict(BEST["bfloat16"], **choose_tile(shape[0], shape[1]), a_major=a_major, b_major=b_major)
            kernel = tvm_tirx.compile(make_gemm(*shape, **config), target="cuda")
            (a_s, b_s), (a_v, b_v) = _stored(a, b, a_major, b_major)
            c = torch.full(shape[:2], float("nan"), device="cuda", dtype=torch.bfloat16)
            kernel(a_s, b_s, c)
            err = _check(c, ref, "bfloat16")
            ms = testing.do_bench(lambda: kernel(a_s, b_s, c), runs=runs).median
            torch_ms = testing.do_bench(lambda: torch.matmul(a_v, b_v), runs=runs).median
            rows.append(["x".join(map(str, shape)), name, f"{_tflops(shape, ms):.0f}", f"{_tflops(shape, torch_ms):.0f}",
                         f"{torch_ms / ms:.3f}", f"{err:.1e}"])
            print(rows[-1], flush=True)
    print(f"GEMM layouts, bf16 in and out, median of {runs} runs; x = torch's time / ours")
    print(table(["M x N x K", "layout", "TFLOP/s", "torch TFLOP/s", "x torch", "max rel. err"], rows))


def main_cpu(sass):
    m, n, k = SIZES[0]
    for out_dtype, config in [*BEST.items(), ("bfloat16", FP8)]:
        kernel = tvm_tirx.compile(make_gemm(m, n, k, **dict(config, out_dtype=out_dtype)), target="cuda", arch="sm_90a")
        print(f"{kernel.name} {m}x{n}x{k} {out_dtype} out {config}: assembled for sm_90a "
              f"({len(testing.assemble(kernel))} bytes)")
        if sass:
            print(report(kernel))


def _ops_shapes(classes):
    """The shapes of ``classes`` (None: the suite and every class of bench/_ops_table.py)."""
    chosen = classes or ["suite", *CLASSES]
    unknown = sorted(set(chosen) - {"suite", *CLASSES})
    if unknown:
        raise SystemExit(f"--classes: unknown {unknown}; known: suite, {', '.join(CLASSES)}")
    return [s for c in chosen for s in (SUITE if c == "suite" else CLASSES[c])]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile and assemble only")
    parser.add_argument("--sweep", action="store_true", help="time every variant at --sweep-size")
    parser.add_argument("--sweep-size", type=int, nargs=3, default=[8192, 8192, 8192])
    parser.add_argument("--only", type=str, nargs="*", default=None,
                        help="--sweep / --tiles: variants whose name contains one of these")
    parser.add_argument("--run-time-m", action="store_true", help="--sweep with kernels made for every m (as the ops)")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--sizes", type=str, nargs="*", default=None, help="MxNxK shapes for the table")
    parser.add_argument("--sass", action="store_true", help="print ptxas register use and SASS counts")
    parser.add_argument("--no-fp8", action="store_true", help="leave out the FP8 rows")
    parser.add_argument("--fp32", action="store_true", help="float32 output rows as well as bfloat16")
    parser.add_argument("--hang-cost", action="store_true", help="the GEMM with and without detect_hangs")
    parser.add_argument("--tiles", action="store_true", help="every tile variant on every shape (the suite or --sizes)")
    parser.add_argument("--layouts", action="store_true", help="TN, NN, NT and TT at --sizes (default: 4096^3, 8192^3)")
    parser.add_argument("--ops", action="store_true", help="ops.linear against F.linear on the suite and the classes")
    parser.add_argument("--plans", action="store_true", help="the planner's kernel per shape (no GPU)")
    parser.add_argument("--triton", action="store_true", help="--ops: a Triton column (autotuned per shape)")
    parser.add_argument("--classes", type=str, nargs="*", default=None, help="--ops / --plans: these classes only "
                        f"(of {', '.join(['suite', *CLASSES])})")
    args = parser.parse_args(argv)
    if args.ops or args.plans:
        shapes = _ops_shapes(args.classes)
        if args.plans or not testing.has_cuda():
            plans(shapes)
        else:
            main_ops(shapes, args.runs, args.triton)
    elif args.cpu or not testing.has_cuda():
        main_cpu(args.sass)
    elif args.tiles:
        main_tiles([tuple(int(x) for x in s.split("x")) for s in args.sizes] if args.sizes else SUITE, args.runs,
                   args.only)
    elif args.hang_cost:
        sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes] if args.sizes else SIZES[:2]
        main_hang_cost(sizes, args.runs)
    elif args.layouts:
        main_layouts([tuple(int(x) for x in s.split("x")) for s in args.sizes] if args.sizes else SIZES[:2], args.runs)
    elif args.sweep:
        main_sweep(tuple(args.sweep_size), args.runs, args.only, args.run_time_m)
    else:
        sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes] if args.sizes else SUITE
        out_dtypes = ("bfloat16", "float32") if args.fp32 else ("bfloat16",)
        main_table(sizes, args.runs, args.sass, fp8=not args.no_fp8, out_dtypes=out_dtypes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
