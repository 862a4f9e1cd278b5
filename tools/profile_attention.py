"""Run ``ops.attention`` forward and backward on one shape a few times, for a profiler.

``ncu -k regex:attention_backward --launch-skip 2 --launch-count 1 python tools/profile_attention.py
1,32,32,8192,128 --causal`` profiles the third launch of the backward kernel (the first
two warm up caches and clocks); ``nsys`` or ``ncu`` on the forward kernel likewise.  With
``--table`` it runs torch's profiler itself and prints the GPU time per kernel of the
backward calls (what the operator's preparation around the kernel costs).  The
shape is ``B,H,KV,L,D`` (batch, query heads, key/value heads, sequence length, head_dim),
bf16, layout bshd.  It prints the launches it made and nothing else: the profiler reports.
"""

import argparse

import torch

from tvm_tirx import ops


def main(argv=None) -> None:
    """Parse ``shape`` (``B,H,KV,L,D``), ``--causal`` and ``--calls`` (default 3) and run
    that many forward + backward calls of ``ops.attention`` on random bf16 tensors."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", help="B,H,KV,L,D")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--table", action="store_true", help="print torch.profiler's GPU time per kernel")
    parser.add_argument("--host", action="store_true", help="print the host's time per backward call and its "
                        "Python profile")
    args = parser.parse_args(argv)
    b, h, kv, length, d = (int(x) for x in args.shape.split(","))
    torch.manual_seed(0)
    q = torch.randn(b, length, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(b, length, kv, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(b, length, kv, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(b, length, h, d, device="cuda", dtype=torch.bfloat16)
    for _ in range(args.calls):
        ops.attention(q, k, v, causal=args.causal).backward(grad)
    torch.cuda.synchronize()
    if args.table:
        _table(q, k, v, grad, args)
    if args.host:
        _host(q, k, v, grad, args)
    print(f"profile_attention: {args.calls} forward + backward calls of {args.shape} causal={args.causal}")


def _table(q, k, v, grad, args) -> None:
    """Profile ``args.calls`` backward calls (the forward made once, outside) and print the
    GPU time per kernel, summed over the calls."""
    from torch.profiler import ProfilerActivity, profile

    o = ops.attention(q, k, v, causal=args.causal)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(args.calls):
            torch.autograd.grad(o, (q, k, v), grad, retain_graph=True)
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=60))


def _host(q, k, v, grad, args) -> None:
    """The host's time to issue one backward call (the call returns before the GPU is
    done: median of 20, each after a synchronize) and the cProfile of 20 calls (the 25
    functions of most own time)."""
    import cProfile
    import pstats
    import statistics
    import time

    o = ops.attention(q, k, v, causal=args.causal)
    samples = []
    for _ in range(20):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.autograd.grad(o, (q, k, v), grad, retain_graph=True)
        samples.append((time.perf_counter() - t0) * 1e6)
    print(f"host time per backward call: median {statistics.median(samples):.0f} us, min {min(samples):.0f} us")
    torch.cuda.synchronize()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(20):
        torch.autograd.grad(o, (q, k, v), grad, retain_graph=True)
        torch.cuda.synchronize()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
