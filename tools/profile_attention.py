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
    parser.add_argument("--cudnn", action="store_true", help="run SDPA's cuDNN backend instead of ours (K and V "
                        "repeated to the query heads), for ncu")
    parser.add_argument("--launch", action="store_true", help="print the host's time (no GPU wait) of each "
                        "step of the operator's backward call: allocations, the Dsum and main kernels' launches")
    parser.add_argument("--timeline", action="store_true", help="print when the host issued each launch of one "
                        "backward call and when the GPU ran it, for ours and SDPA's cuDNN backend")
    args = parser.parse_args(argv)
    b, h, kv, length, d = (int(x) for x in args.shape.split(","))
    torch.manual_seed(0)
    q = torch.randn(b, length, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(b, length, kv, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(b, length, kv, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(b, length, h, d, device="cuda", dtype=torch.bfloat16)
    for _ in range(args.calls):
        if args.cudnn:
            _sdpa_leaves(q, k, v, args.causal)[0].backward(grad.transpose(1, 2))
        else:
            ops.attention(q, k, v, causal=args.causal).backward(grad)
    torch.cuda.synchronize()
    if args.table:
        _table(q, k, v, grad, args)
    if args.host:
        _host(q, k, v, grad, args)
    if args.timeline:
        _timeline(q, k, v, grad, args)
    if args.launch:
        _launch(q, k, v, grad, args)
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

    o = ops.attention(q, k, v, causal=args.causal)
    samples = _host_samples(lambda: torch.autograd.grad(o, (q, k, v), grad, retain_graph=True), 20)
    print(f"host time per backward call: median {statistics.median(samples):.0f} us, min {min(samples):.0f} us")
    torch.cuda.synchronize()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(20):
        torch.autograd.grad(o, (q, k, v), grad, retain_graph=True)
        torch.cuda.synchronize()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def _host_samples(fn, repeats: int = 30) -> list:
    """The host's time of ``fn()`` in us, ``repeats`` times, each after a synchronize (the
    GPU's queue empty)."""
    import time

    samples = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return samples


def _launch(q, k, v, grad, args) -> None:
    """The host's time of each step of one backward call through the operator's kernel path."""
    import statistics

    from tvm_tirx.ops import attention_backward_kernels as kernels
    from tvm_tirx.ops.attention_backward_ops import backward_key, kernel_grads
    from tvm_tirx.ops.attention_checks import resolve_scale

    o, lse = ops.attention(q, k, v, causal=args.causal, return_lse=True)
    key = backward_key(q, k, v, args.causal, resolve_scale(None, q.shape[-1]), "bshd")  # the operator's
    main, dsum_kernel = kernels.backward_kernel(key), kernels.dsum_kernel(key)
    dsum = torch.empty(q.shape[0], q.shape[2], q.shape[1], device="cuda")
    dq_acc = torch.empty(q.shape, device="cuda")
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    main_args = (q, k, v, grad, lse, dsum, dq_acc, dk, dv)
    main_launch, dsum_launch = main.launcher(*main_args), dsum_kernel.launcher(grad, o, dsum, dq_acc)
    steps = {"torch.empty (dQacc)": lambda: torch.empty(q.shape, device="cuda"),
             "dq_acc.to(bf16)": lambda: dq_acc.to(q.dtype),
             "Dsum launch (unchecked)": lambda: dsum_launch(grad, o, dsum, dq_acc),
             "main launch (unchecked)": lambda: main_launch(*main_args),
             "main call (checked)": lambda: main(*main_args),
             "kernel_grads": lambda: kernel_grads(main_launch, grad, None, q, k, v, o, lse, "bshd",
                                                  dsum_kernel=dsum_launch),
             "torch.autograd.grad": lambda: torch.autograd.grad(o, (q, k, v), grad, retain_graph=True)}
    for name, fn in steps.items():
        print(f"host {name}: median {statistics.median(_host_samples(fn)):.1f} us")


#: the trace categories of a launch on the host and of what it runs on the GPU
_HOST_CATEGORIES, _GPU_CATEGORIES = ("cuda_runtime", "cuda_driver"), ("kernel", "gpu_memset", "gpu_memcpy")


def _sdpa_leaves(q, k, v, causal: bool):
    """``(O, leaves)``: SDPA's cuDNN backend on (b, h, s, d) leaves made from bshd q, k, v
    (K and V repeated to the query heads)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    leaves = [x.detach().transpose(1, 2).repeat_interleave(q.shape[2] // x.shape[2], 1).requires_grad_(True)
              for x in (q, k, v)]
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal), leaves


def _timeline(q, k, v, grad, args) -> None:
    """For ours and SDPA's cuDNN backend: one backward call (after three unprofiled ones and
    a synchronize) under torch's profiler, each launch as ``host issue (us) | GPU start - end (us) | name``
    from the call's start, and the call's end."""
    import json
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    o_sdpa, leaves = _sdpa_leaves(q, k, v, args.causal)
    o_ours = ops.attention(q, k, v, causal=args.causal)
    calls = {"ours": lambda: torch.autograd.grad(o_ours, (q, k, v), grad, retain_graph=True),
             "cudnn": lambda: torch.autograd.grad(o_sdpa, leaves, grad.transpose(1, 2), retain_graph=True)}
    for name, call in calls.items():
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            with torch.profiler.record_function("backward call"):
                call()
            torch.cuda.synchronize()
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            prof.export_chrome_trace(f.name)
            with open(f.name, encoding="utf-8") as trace:  # written by its name
                events = json.load(trace)["traceEvents"]
        _print_timeline(name, events)


def _print_timeline(name: str, events) -> None:
    """Print the launches of a chrome trace's ``backward call`` range (see :func:`_timeline`)."""
    call = next(e for e in events if e.get("name") == "backward call" and e.get("cat") == "user_annotation")
    t0 = call["ts"]
    gpu = {e["args"].get("correlation"): e for e in events if e.get("cat") in _GPU_CATEGORIES}
    print(f"== {name}: host call {call['dur']:.0f} us")
    for e in sorted((e for e in events if e.get("cat") in _HOST_CATEGORIES), key=lambda e: e["ts"]):
        run = gpu.get(e.get("args", {}).get("correlation"))
        if run is None:
            continue
        print(f"  host {e['ts'] - t0:8.1f} | GPU {run['ts'] - t0:8.1f} - {run['ts'] + run['dur'] - t0:8.1f} | "
              f"{e['name']}: {run['name'][:70]}")


if __name__ == "__main__":
    main()
