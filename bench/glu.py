"""The SwiGLU up-projection ``silu(x @ w_gate^T) * (x @ w_up^T)``: one gated GEMM against torch.

Ours is ``tvm_tirx.ops.glu_linear`` (``make_gemm(gated=True)``: the gate and up weights
interleaved by eight rows, the SiLU and the product in the epilogue, the two (m, n)
intermediates never written).  The peers, in the same run:

* ``torch``: two ``F.linear`` (cuBLAS), ``F.silu``, a multiply -- Llama as written;
* ``torch merged``: one ``F.linear`` on the concatenated weight ``(2 n, k)``, then
  ``silu(y[:, :n]) * y[:, n:]`` (the merged gate_up projection serving engines use);
* ``torch.compile``: the first form compiled (cuBLAS GEMMs, one fused Triton kernel for
  the SiLU and the product).

Each result is checked against the float32 product (max |y - ref| / max |ref| <= 1e-2),
then timed (CUDA events, median of ``--runs``).  TFLOP/s counts the two GEMMs' ``4 m n k``.

    python bench/glu.py            # GPU: the table
    python bench/glu.py --cpu      # no GPU: compile and assemble the gated kernels for sm_90a
"""

from __future__ import annotations

import argparse
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

from tvm_tirx import testing  # noqa: E402
from tvm_tirx.kernels.gemm import choose_tile, make_gemm  # noqa: E402

from bench._compile import assemble_each, compile_all  # noqa: E402
from bench._timing import table  # noqa: E402

#: (m, n, k): Llama-3-8B's MLP (n 14336, k 4096) at several token counts, Llama-3-70B's (28672, 8192)
SHAPES = ((128, 14336, 4096), (1024, 14336, 4096), (4096, 14336, 4096), (16384, 14336, 4096), (4096, 28672, 8192))
TOLERANCE = 1e-2


def main_cpu() -> int:
    """Compile and assemble the gated kernel each shape gets (the tile of ``choose_tile``)."""
    params = [dict(m=m, n=n, k=k, gated=True, activation="silu", persistent=False, group_m=16,
                   **choose_tile(m, n, gated=True)) for m, n, k in SHAPES]
    kernels = compile_all(make_gemm, params, [f"{m}x{n}x{k}" for m, n, k in SHAPES], "glu", arch="sm_90a")
    sizes = assemble_each(kernels)
    print(table(["m x n x k", "block_n", "cubin bytes"],
                [[f"{p['m']}x{p['n']}x{p['k']}", p["block_n"], len(c)] for p, c in zip(params, sizes)]))
    print("glu: all kernels assembled")
    return 0


def _variants(torch, x, g, u):
    """name -> a callable computing the product on ``x``."""
    from tvm_tirx import ops  # pylint: disable=import-outside-toplevel

    f = torch.nn.functional
    n = g.shape[0]
    w_cat = torch.cat([g, u]).contiguous()

    def unfused(t):
        return f.silu(f.linear(t, g)) * f.linear(t, u)

    def merged(t):
        y = f.linear(t, w_cat)
        return f.silu(y[:, :n]) * y[:, n:]

    compiled = torch.compile(unfused)
    return {"tvm_tirx glu_linear": lambda: ops.glu_linear(x, g, u), "torch": lambda: unfused(x),
            "torch merged": lambda: merged(x), "torch.compile": lambda: compiled(x)}


def main_gpu(runs: int) -> int:
    import torch  # pylint: disable=import-outside-toplevel

    rows, names = [], None
    for m, n, k in SHAPES:
        torch.manual_seed(0)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        g, u = (torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5 for _ in range(2))
        ref = torch.nn.functional.silu(x.float() @ g.float().t()) * (x.float() @ u.float().t())
        variants = _variants(torch, x, g, u)
        names, cells, times = list(variants), [f"{m}x{n}x{k}"], {}
        for name, fn in variants.items():
            err = ((fn().float() - ref).abs().max() / ref.abs().max()).item()
            times[name] = testing.do_bench(fn, runs=runs).median
            flag = "" if err <= TOLERANCE else f" WRONG ({err:.1e})"
            cells.append(f"{4 * m * n * k / times[name] / 1e9:.0f}{flag}")
        best_peer = min(t for name, t in times.items() if not name.startswith("tvm_tirx"))
        rows.append(cells + [f"{best_peer / times[names[0]]:.3f}"])
    print("SwiGLU up-projection (bf16), TFLOP/s (4 m n k / time), median of", runs, "runs (CUDA events)")
    print(table(["m x n x k", *names, "x best torch"], rows))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile and assemble only")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    if args.cpu or not testing.has_cuda():
        return main_cpu()
    return main_gpu(args.runs)


if __name__ == "__main__":
    sys.exit(main())
