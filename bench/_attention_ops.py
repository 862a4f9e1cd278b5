"""``ops.attention`` as users call it, against cuDNN and FlashAttention-2 through SDPA.

The rows of issue 42 and its classes (:data:`CLASSES`).  Each row: our output and LSE
checked against float32 first (NaN-filled outputs are not possible through the op: it
allocates them, so a row that is never written shows as an error), then per call

- the GPU time of ``ops.attention`` and of each SDPA backend under a CUDA graph of 50
  calls (host cost removed), and
- the eager time per call end to end (host and GPU, a loop of calls then a sync),

with the plan the op took (``ops.check`` of the row's shapes).  The
peers get K and V repeated to the query heads for GQA rows (outside the timing): SDPA's
cuDNN and FA2 backends take equal head counts.

    python bench/attention.py --ops                   # GPU: every class
    python bench/attention.py --ops --classes short   # some classes
    python bench/attention.py --ops-plans             # no GPU: the plan per row
"""

from __future__ import annotations

import math
import statistics

from bench._timing import table

#: (batch, heads, kv_heads, seq_len, head_dim, causal) per class
CLASSES = {
    "table": [(1, 64, 8, 16384, 128, True), (1, 32, 32, 8192, 128, True), (2, 32, 32, 3000, 128, True),
              (4, 32, 8, 2048, 128, True), (8, 16, 16, 2048, 64, False), (2, 8, 8, 4096, 256, True),
              (32, 16, 16, 512, 128, False)],
    "short": [(64, 16, 16, 512, 128, False), (64, 16, 16, 512, 128, True), (32, 32, 8, 1024, 128, True),
              (32, 16, 16, 1024, 64, False)],
    "long": [(1, 32, 8, 32768, 128, True), (1, 16, 16, 16384, 64, True), (1, 8, 8, 16384, 256, False)],
    "head-dim": [(4, 32, 32, 4096, d, c) for d in (64, 128, 256) for c in (False, True)],
    "gqa": [(4, 32, 8, 4096, 128, True), (2, 64, 8, 8192, 128, True), (8, 32, 4, 2048, 64, True)],
    "ragged": [(4, 32, 32, 1000, 128, True), (2, 32, 8, 3000, 128, False), (2, 16, 16, 4097, 64, True),
               (4, 16, 16, 777, 256, False)],
}
#: every head_dim 256 row of the classes above, as a class of its own (its plan is timed alone)
CLASSES["d256"] = [r for rows in list(CLASSES.values()) for r in rows if r[4] == 256]
BACKENDS = {"cuDNN": "CUDNN_ATTENTION", "FA2": "FLASH_ATTENTION"}


def rows_of(classes) -> list:
    """The rows of ``classes`` (names of :data:`CLASSES`), in order, each once."""
    seen = []
    for name in classes:
        seen += [r for r in CLASSES[name] if r not in seen]
    return seen


def plan_of(row) -> str:
    """The plan ``ops.attention`` takes for ``row`` (``ops.check`` on meta tensors of the
    row's shapes: its schedule, ``3c`` with three consumer warpgroups, stages, keys per
    block, grid and O's store)."""
    import torch

    from tvm_tirx import ops
    from tvm_tirx.kernels.attention import HEAD_DIMS

    b, h, kv, n, d, causal = row
    q = torch.empty(b, n, h, d, dtype=torch.bfloat16, device="meta")
    k = torch.empty(b, n, kv, d, dtype=torch.bfloat16, device="meta")
    (key,) = ops.check(ops.attention, q, k, k, causal=causal)
    plan = key.plan
    grid = "persistent" if plan.persistent else "CTA/tile"
    rows = f"<={plan.persistent_rows}" if plan.persistent_rows else ""
    store = " tma" if plan.tma_store else ""
    block_n = plan.block_n or HEAD_DIMS[d]  # None: the head_dim's
    consumers = f" {plan.consumers}c" if plan.consumers != 2 else ""  # two: the default, unnamed
    o_in = f" O in {plan.o_staging}" if plan.o_staging else ""
    v_ring = " V ring" if plan.v_ring else ""
    return f"{plan.schedule}{consumers} s{plan.stages}{v_ring} bn{block_n} {grid}{rows}{store}{o_in}"


def main_plans(classes) -> None:
    """The plan per row (no GPU)."""
    print("ops.attention's plan per row (ops.check on meta tensors of the row's shapes)")
    print(table(["B,H,KV,L,D", "causal", "plan"], [[",".join(map(str, r[:5])), "yes" if r[5] else "no", plan_of(r)]
                                                   for r in rows_of(classes)]))


def tflops(b: int, h: int, n: int, d: int, causal: bool, seconds: float) -> float:
    """TFLOP/s of attention over ``b x h`` rows of ``n`` queries and keys of ``d`` elements
    in ``seconds`` (causal: half the score matrix)."""
    return 4 * b * h * n * n * d / (2 if causal else 1) / seconds / 1e12


def _tflops(row, us) -> float:
    b, h, _, n, d, causal = row
    return tflops(b, h, n, d, causal, us * 1e-6)


def _inputs(torch, row, dtype):
    b, h, kv, n, d, _ = row
    torch.manual_seed(b + h + n + d)
    q = torch.randn(b, n, h, d, device="cuda", dtype=dtype)
    k, v = (torch.randn(b, n, kv, d, device="cuda", dtype=dtype) for _ in range(2))
    return q, k, v


def peer_call(torch, q, k, v, causal, backend):
    """``fn()`` running SDPA with ``backend`` forced on the (b, h, s, d) views (K and V
    repeated to the query heads), or None when the backend refuses the row."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    group = q.shape[2] // k.shape[2]
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k.repeat_interleave(group, 2), v.repeat_interleave(group, 2)))
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def fn():
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return sdpa(qt, kt, vt, is_causal=causal)

    try:
        fn()
    except RuntimeError:
        return None
    return fn


def _row(torch, ops, row, dtype, repeats):
    from bench.attention import _reference_error
    from bench.launch import _graph_us, per_call_us

    q, k, v = _inputs(torch, row, dtype)
    causal = row[5]
    o, lse = ops.attention(q, k, v, causal=causal, return_lse=True)
    err_o, err_lse = _reference_error(torch, q, k, v, o, lse, causal)
    assert err_o <= 2e-2 and err_lse <= 1e-3, (row, err_o, err_lse)
    ours = lambda: ops.attention(q, k, v, causal=causal)  # noqa: E731
    calls = {"ours": ours, **{name: peer_call(torch, q, k, v, causal, b) for name, b in BACKENDS.items()}}
    graph = {name: _graph_us(torch, fn, repeats, launches=20) for name, fn in calls.items() if fn is not None}
    eager = {name: per_call_us(fn, 20, repeats, torch.cuda.synchronize, host_only=False)
             for name, fn in calls.items() if fn is not None}
    best = min(t for name, t in graph.items() if name != "ours") if len(graph) > 1 else None
    best_eager = min(t for name, t in eager.items() if name != "ours") if len(eager) > 1 else None
    cells = [",".join(map(str, row[:5])), "yes" if causal else "no", plan_of(row), f"{_tflops(row, graph['ours']):.0f}"]
    cells += [f"{_tflops(row, graph[n]):.0f}" if n in graph else "-" for n in BACKENDS]
    cells += [f"{best / graph['ours']:.2f}" if best else "-",
              f"{best_eager / eager['ours']:.2f}" if best_eager else "-", f"{err_o:.1e}", f"{err_lse:.1e}"]
    return cells, (best / graph["ours"] if best else None), (best_eager / eager["ours"] if best_eager else None)


def main_ops(classes, dtype_name: str, repeats: int) -> None:
    """The GPU table with the geometric means and minima last."""
    import torch

    from tvm_tirx import ops

    dtype = getattr(torch, dtype_name)
    rows, graph, eager = [], [], []
    for row in rows_of(classes):
        cells, g, e = _row(torch, ops, row, dtype, repeats)
        rows.append(cells)
        print("  ".join(cells), flush=True)  # as measured: a cut-off run keeps its rows
        graph += [g] if g else []
        eager += [e] if e else []
    print(f"ops.attention ({dtype_name}) against SDPA's cuDNN and FA2: TFLOP/s per call under a CUDA graph; "
          f"x best = the fastest peer's time / ours (graph, then eager end to end)")
    print(table(["B,H,KV,L,D", "causal", "plan", "ours", *BACKENDS, "x best (graph)", "x best (eager)", "err O",
                 "err LSE"], rows))
    geo = lambda v: math.exp(statistics.fmean(math.log(r) for r in v))  # noqa: E731
    if graph:
        print(f"graph: geomean {geo(graph):.3f}, min {min(graph):.3f}; eager: geomean {geo(eager):.3f}, "
              f"min {min(eager):.3f} ({len(graph)} rows)")
