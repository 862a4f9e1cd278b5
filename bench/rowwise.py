"""RMSNorm and the rotary embedding (kernels.norm, kernels.rotary) against torch.

The peers, in the same run: torch eager (``F.rms_norm``; the rotate-half expression as
Llama writes it) and ``torch.compile`` of the same (one Triton kernel each).  Sizes are
the decoder block's (Llama-3-8B: hidden 4096; q 32 heads, k 8 heads of 128) at 4096 and
16384 tokens.  Each result is checked against float32 torch (max |y - ref| / max |ref|
<= 1e-2), then timed (CUDA events, median of ``--runs``); GB/s counts one read and one
write of X (the weight row and the tables are not counted).

    python bench/rowwise.py            # GPU: the table
    python bench/rowwise.py --cpu      # no GPU: compile and assemble the kernels for sm_90a
"""

from __future__ import annotations

import argparse
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

from tvm.script import tirx as T  # noqa: E402

import tvm_tirx  # noqa: E402
from tvm_tirx import testing  # noqa: E402
from tvm_tirx.kernels.norm import make_rms_norm  # noqa: E402
from tvm_tirx.kernels.rotary import make_rotary  # noqa: E402

from bench._timing import table  # noqa: E402

TOKENS = (4096, 16384)
HIDDEN, HEAD_DIM, HEADS = 4096, 128, (32, 8)
TOLERANCE = 1e-2


def _kernels(arch=None):
    opts = {"arch": arch} if arch else {}
    norm = tvm_tirx.compile(make_rms_norm(T.dynamic("M"), HIDDEN, eps=1e-5), target="cuda", **opts)
    rope = {h: tvm_tirx.compile(make_rotary(T.dynamic("B"), T.dynamic("L"), h, HEAD_DIM), target="cuda", **opts)
            for h in HEADS}
    return norm, rope


def _rope_torch(torch, x, cos, sin):
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    half = x.shape[-1] // 2
    return x * c + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * s


def _cases(torch, norm, rope):
    """(label, bytes moved, {variant: fn}, fp32 reference) per case."""
    f = torch.nn.functional
    for tokens in TOKENS:
        x = torch.randn(tokens, HIDDEN, device="cuda").bfloat16()
        w = (torch.rand(HIDDEN, device="cuda") + 0.5).bfloat16()
        y = torch.empty_like(x)
        eager = lambda x=x, w=w: f.rms_norm(x, (HIDDEN,), w, 1e-5)  # noqa: E731
        ref = f.rms_norm(x.float(), (HIDDEN,), w.float(), 1e-5)
        yield (f"rms_norm {tokens} x {HIDDEN}", 4 * x.numel(),
               {"torch": eager, "torch.compile": torch.compile(eager),
                "tvm_tirx": lambda x=x, w=w, y=y: (norm(x, w, y), y)[1]}, ref)
        for heads in HEADS:
            q = torch.randn(1, tokens, heads, HEAD_DIM, device="cuda").bfloat16()
            ang = torch.rand(tokens, HEAD_DIM, device="cuda") * 6.28
            cos, sin = ang.cos().bfloat16(), ang.sin().bfloat16()
            out = torch.empty_like(q)
            eager = lambda q=q, cos=cos, sin=sin: _rope_torch(torch, q, cos, sin)  # noqa: E731
            yield (f"rotary {tokens} x {heads} x {HEAD_DIM}", 4 * q.numel(),
                   {"torch": eager, "torch.compile": torch.compile(eager),
                    "tvm_tirx": lambda q=q, cos=cos, sin=sin, out=out: (rope[heads](q, cos, sin, out), out)[1]},
                   _rope_torch(torch, q.float(), cos.float(), sin.float()))


def main_gpu(runs: int) -> int:
    import torch

    norm, rope = _kernels()
    rows = []
    for label, nbytes, variants, ref in _cases(torch, norm, rope):
        times = {}
        for name, fn in variants.items():
            err = ((fn().float() - ref).abs().max() / ref.abs().max()).item()
            times[name] = testing.do_bench(fn, runs=runs).median
            flag = "" if err <= TOLERANCE else " WRONG"
            rows.append([label, name, f"{times[name] * 1e3:.1f}", f"{nbytes / times[name] / 1e6:.0f}",
                         f"{err:.1e}{flag}"])
        best = min(v for k, v in times.items() if k != "tvm_tirx")
        rows[-1][-1] += f"  ({best / times['tvm_tirx']:.2f}x best torch)"
    print(f"row-wise kernels (bf16), median of {runs} runs (CUDA events)")
    print(table(["case", "variant", "us", "GB/s", "max rel. err"], rows))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile and assemble only")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    if args.cpu or not testing.has_cuda():
        norm, rope = _kernels(arch="sm_90a")
        for kernel in (norm, *rope.values()):
            testing.assemble(kernel)
        print("rowwise: all kernels assembled")
        return 0
    return main_gpu(args.runs)


if __name__ == "__main__":
    sys.exit(main())
