"""``ops.linear`` against ``F.linear`` on the suite and the shape classes users call (bench/gemm.py --ops).

Each row is checked against an fp32 product first, then timed as users call it: the GPU
time per call of a CUDA graph of 50 calls (host cost removed) and the wall time per call
of eager calls back to back (host cost included), each next to ``F.linear`` on the same
tensors, and with ``triton`` the Triton GEMM of bench/_triton_matmul.py (autotuned per
shape) by the same graph timing.  The ``plan`` column is the kernel the planner
(:func:`tvm_tirx.kernels.gemm.planner.choose_gemm`) gave the call, as
:func:`tvm_tirx.ops.check` reports it; ``--plans`` prints that column alone, on the CPU.
"""

from __future__ import annotations

import math
import statistics

from bench._timing import table

#: shape classes (M x N x K) beside bench/gemm.py's suite
CLASSES = {
    "decode": [(m, 4096, 4096) for m in (1, 8, 16, 32, 48, 64)]
    + [(1, 14336, 4096), (16, 4096, 14336), (64, 14336, 4096)],
    "square": [(s, s, s) for s in (512, 1000, 1536, 2048, 3072, 4096, 5000, 5120)],
    "ragged-m": [(m, 4096, 4096) for m in (100, 1000, 3000, 4095)],
    "narrow-n": [(8192, 1024, 4096), (4096, 512, 4096), (2048, 256, 8192), (16384, 1024, 1024)],
    "llama3-8b": [(m, n, k) for n, k in ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336))
                  for m in (512, 2048, 16384)],
    "llama3-70b": [(m, n, k) for n, k in ((10240, 8192), (57344, 8192), (8192, 28672)) for m in (512, 4096, 16384)],
}


def plan_name(key) -> str:
    """A kernel key (:mod:`tvm_tirx.ops.gemm_kernels`) as a short plan."""
    from tvm_tirx.kernels.gemm.spec import SmallMSpec

    if isinstance(key, SmallMSpec):
        return f"small-M bm{key.block_m} s{key.splits}"
    return f"tile {key.block_m}x{key.block_n}" + (f" split{key.splits}" if key.splits > 1 else "")


def _keys(m: int, n: int, k: int) -> list:
    """The keys of the kernels ``ops.linear`` launches for ``(m, k) @ (n, k)^T`` in bf16
    (``ops.check`` on ``meta`` tensors: no GPU)."""
    import torch
    from tvm_tirx import ops

    x = torch.empty(m, k, dtype=torch.bfloat16, device="meta")
    return ops.check(ops.linear, x, torch.empty(n, k, dtype=torch.bfloat16, device="meta"))


def _plan(m: int, n: int, k: int) -> str:
    keys = _keys(m, n, k)
    if not keys:
        return "torch"
    padded = keys[0].k - k  # planner.k_padding's zero columns
    return plan_name(keys[0]) + (f" k+{padded}" if padded else "")


def plans(shapes) -> None:
    """Print the planner's kernel per shape (no GPU: ``meta`` tensors through ``ops.check``)."""
    rows = [[f"{m}x{n}x{k}", _plan(m, n, k)] for m, n, k in shapes]
    print("the planner's kernel per shape (ops.check, as on an H200)")
    print(table(["M x N x K", "plan"], rows))


def _triton_us(torch, x, w, ref, repeats) -> str:
    """Triton's GPU time per call (bench/_triton_matmul.py), checked against ``ref`` first."""
    from bench._triton_matmul import matmul_tn
    from bench.launch import _graph_us

    c = torch.empty(x.shape[0], w.shape[0], device="cuda", dtype=torch.bfloat16)
    matmul_tn(x, w, c)  # autotunes this shape
    assert ((c.float() - ref).abs().max() / ref.abs().max()).item() < 1e-2
    return f"{_graph_us(torch, lambda: matmul_tn(x, w, c), repeats):.1f}"


def _row(torch, ops, shape, repeats, triton):
    from bench.launch import _graph_us, per_call_us

    m, n, k = shape
    torch.manual_seed(m + n + k)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / math.sqrt(k)
    F = torch.nn.functional
    ref = x.float() @ w.float().t()
    err = ((ops.linear(x, w).float() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-2, (shape, err)
    ours, theirs = _graph_us(torch, lambda: ops.linear(x, w), repeats), _graph_us(torch, lambda: F.linear(x, w), repeats)
    tri = _triton_us(torch, x, w, ref, repeats) if triton and k % 64 == 0 else "-"
    calls = max(20, min(500, int(2e5 / max(theirs, 1.0))))
    eager = per_call_us(lambda: ops.linear(x, w), calls, repeats, torch.cuda.synchronize, host_only=False)
    eager_t = per_call_us(lambda: F.linear(x, w), calls, repeats, torch.cuda.synchronize, host_only=False)
    tflops = 2 * m * n * k / ours / 1e6
    return [f"{m}x{n}x{k}", _plan(m, n, k), f"{ours:.1f}", f"{theirs:.1f}", f"{theirs / ours:.2f}", tri, f"{tflops:.0f}",
            f"{eager:.1f}", f"{eager_t:.1f}", f"{eager_t / eager:.2f}"], theirs / ours, eager_t / eager


def _prim_func(key):
    """The PrimFunc of an operator kernel's key (module level: the compile workers pickle it)."""
    return key.prim_func()


def compile_ahead(shapes) -> None:
    """Compile the kernels the operator takes for ``shapes`` in parallel worker processes
    (:func:`tvm_tirx.testing.sweep` without timing): they fill the compile cache, so each
    row's first call loads its kernel instead of compiling it."""
    from tvm_tirx import testing

    keys = {key for shape in shapes for key in _keys(*shape)}
    result = testing.sweep(_prim_func, [{"key": key} for key in keys], (), arch="sm_90a", measure=False,
                           progress=False)
    failed = [row for row in result.rows if row.error]
    print(f"compiled ahead: {len(keys) - len(failed)} kernels" + "".join(f"; {r.error}" for r in failed), flush=True)


def main_ops(shapes, repeats: int, triton: bool = False) -> None:
    """The GPU table (module docstring) with the geometric means and minima last."""
    import torch
    from tvm_tirx import ops

    compile_ahead(shapes)
    rows, graph, eager = [], [], []
    for shape in shapes:
        row, g, e = _row(torch, ops, shape, repeats, triton)
        rows.append(row)
        print("  ".join(row), flush=True)  # as measured: a cut-off run keeps its rows
        graph.append(g)
        eager.append(e)
    print("ops.linear against F.linear, bf16: GPU us per call (CUDA graph of 50) and eager us per call")
    print(table(["M x N x K", "plan", "ops (graph)", "F.linear (graph)", "x F.linear", "Triton (graph)", "TFLOP/s",
                 "ops (eager)", "F.linear (eager)", "x F.linear"], rows))
    geo = lambda v: math.exp(statistics.fmean(math.log(r) for r in v))  # noqa: E731
    print(f"graph: geomean {geo(graph):.3f}, min {min(graph):.3f}; eager: geomean {geo(eager):.3f}, "
          f"min {min(eager):.3f} ({len(shapes)} shapes)")
