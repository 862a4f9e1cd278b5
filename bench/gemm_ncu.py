"""One GEMM shape under Nsight Compute: our kernel (the tile table's choice) and torch.matmul.

Both are launched twice untimed, then once each between ``cudaProfilerStart`` and
``cudaProfilerStop``, so ``ncu --profile-from-start off`` profiles exactly those two
launches::

    ncu --clock-control none --profile-from-start off --section SpeedOfLight \\
        --section WarpStateStats --section LaunchStats python bench/gemm_ncu.py 1024x1024x1024

``--option name=value`` (repeatable; the value a Python literal) overrides one of
:func:`~tvm_tirx.kernels.gemm.make_gemm`'s options, e.g. ``--option persistent=True``.

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

from bench.gemm import BEST  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shape", help="MxNxK")
    parser.add_argument("--option", action="append", default=[], help="name=value: a make_gemm option")
    args = parser.parse_args(argv)
    m, n, k = (int(x) for x in args.shape.split("x"))
    if not testing.has_cuda():
        print("gemm_ncu: needs a GPU")
        return 0
    import torch

    config = dict(BEST["bfloat16"], **choose_tile(m, n))
    for option in args.option:
        name, _, value = option.partition("=")
        config[name] = ast.literal_eval(value)
    kernel = tvm_tirx.compile(make_gemm(m, n, k, **config), target="cuda")
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(2):
        kernel(a, b, c)
        torch.matmul(a, b.t())
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    kernel(a, b, c)
    torch.matmul(a, b.t())
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"gemm_ncu {args.shape}: {config}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
