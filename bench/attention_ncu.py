"""One attention row under Nsight Compute: our kernel (the schedule table's choice for the
row's length) and torch SDPA's cuDNN kernel on the same tensors.

Both are launched twice untimed, then once each between ``cudaProfilerStart`` and
``cudaProfilerStop``, so ``ncu --profile-from-start off`` profiles exactly those two
launches (cuDNN may add a small preparation kernel of its own)::

    ncu --clock-control none --profile-from-start off --section SpeedOfLight \\
        --section WarpStateStats python bench/attention_ncu.py 16,32,1024,128 --causal

Without a GPU it says so and exits.
"""

from __future__ import annotations

import argparse
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

import tvm_tirx  # noqa: E402
from tvm_tirx import testing  # noqa: E402
from tvm_tirx.kernels.attention import choose_schedule, make_attention  # noqa: E402
from tvm_tirx.script import tirx as T  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("row", help="B,H,L,D")
    parser.add_argument("--causal", action="store_true")
    args = parser.parse_args(argv)
    b, h, n, d = (int(x) for x in args.row.split(","))
    if not testing.has_cuda():
        print("attention_ncu: needs a GPU")
        return 0
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    schedule = choose_schedule(d, args.causal, n)
    kernel = tvm_tirx.compile(make_attention(T.dynamic("B"), T.dynamic("L"), h, d, causal=args.causal, **schedule),
                              target="cuda")
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(b, h, n, device="cuda")
    views = [t.transpose(1, 2) for t in (q, k, v)]
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for _ in range(2):
            kernel(q, k, v, o, lse)
            torch.nn.functional.scaled_dot_product_attention(*views, is_causal=args.causal)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        kernel(q, k, v, o, lse)
        torch.nn.functional.scaled_dot_product_attention(*views, is_causal=args.causal)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    print(f"attention_ncu {args.row} causal={args.causal}: {schedule}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
