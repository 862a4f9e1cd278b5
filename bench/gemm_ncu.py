"""One GEMM shape under Nsight Compute: our kernel (the tile table's choice) and torch.matmul.

Both are launched twice untimed, then once each between ``cudaProfilerStart`` and
``cudaProfilerStop``, so ``ncu --profile-from-start off`` profiles exactly those two
launches::

    ncu --clock-control none --profile-from-start off --section SpeedOfLight \\
        --section WarpStateStats --section LaunchStats python bench/gemm_ncu.py 1024x1024x1024

``--option name=value`` (repeatable; the value a Python literal) overrides one of
:func:`~tvm_tirx.kernels.gemm.make_gemm`'s options, e.g. ``--option persistent=True``; a
split-K kernel (``--option splits=2 --option persistent=False``) gets its workspaces.
``--ops`` profiles ``tvm_tirx.ops.linear`` (the kernel the planner takes, small-M included)
and ``F.linear`` instead.

Without a GPU it says so and exits.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

import tvm_tirx  # noqa: E402
from tvm_tirx import testing  # noqa: E402
from tvm_tirx.kernels.gemm import choose_tile, make_gemm  # noqa: E402

from bench.gemm import BEST, _workspaces  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shape", help="MxNxK")
    parser.add_argument("--option", action="append", default=[], help="name=value: a make_gemm option")
    parser.add_argument("--ops", action="store_true", help="profile ops.linear and F.linear")
    args = parser.parse_args(argv)
    m, n, k = (int(x) for x in args.shape.split("x"))
    if not testing.has_cuda():
        print("gemm_ncu: needs a GPU")
        return 0
    import torch

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    ours, what = _ops(a, b) if args.ops else _kernel(a, b, args.option)
    for _ in range(2):
        ours()
        torch.matmul(a, b.t())
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    ours()
    torch.matmul(a, b.t())
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"gemm_ncu {args.shape}: {what}")
    return 0


def _kernel(a, b, options):
    """The tile kernel of ``choose_tile`` with ``options`` (``name=value``) over it, as a
    call on ``a`` and ``b``, and its configuration."""
    import torch

    (m, k), n = a.shape, b.shape[0]
    config = dict(BEST["bfloat16"], **choose_tile(m, n))
    for option in options:
        name, _, value = option.partition("=")
        config[name] = ast.literal_eval(value)
    kernel = tvm_tirx.compile(make_gemm(m, n, k, **config), target="cuda")
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    workspaces = _workspaces(config, (m, n, k))
    return (lambda: kernel(a, b, *workspaces, c)), config


def _ops(a, b):
    """``ops.linear(a, b)`` as a call, and the planner's choice for its shape."""
    from tvm_tirx import ops
    from tvm_tirx.kernels.gemm.planner import choose_gemm

    return (lambda: ops.linear(a, b)), f"ops.linear, {choose_gemm(a.shape[0], b.shape[0], a.shape[1])}"


if __name__ == "__main__":
    sys.exit(main())
