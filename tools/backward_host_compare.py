"""The host's share of one ``ops.attention`` backward call against SDPA's cuDNN backend (GPU).

At 4 x 32 x 8 x 2048 x 128 causal, bf16, bshd (K and V repeated to the query heads for
cuDNN), for each backward, 30 calls of ``torch.autograd.grad`` each after a synchronize:
the host's time in the call (``time.perf_counter``, no GPU wait) and the call's time
between CUDA events (what ``bench/attention.py --backward`` reports, host latency before
the first launch included); then 10 calls back to back, where the host's work overlaps
the GPU's.  Prints one line per backward; nothing is asserted (a measurement).
"""
import statistics
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from tvm_tirx import ops

SHAPE = (4, 32, 8, 2048, 128)  # B, H, KV, L, D


def _calls():
    """``{"ours": fn, "cudnn": fn}``: one backward each (``torch.autograd.grad`` of a forward made once)."""
    b, h, kv, n, d = SHAPE
    torch.manual_seed(0)
    q, g = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(b, n, kv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ours = tuple(x.requires_grad_(True) for x in (q.clone(), k.clone(), v.clone()))
    o = ops.attention(*ours, causal=True)
    theirs = tuple(x.transpose(1, 2).detach().requires_grad_(True)
                   for x in (q, k.repeat_interleave(h // kv, 2), v.repeat_interleave(h // kv, 2)))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        o_sdpa = torch.nn.functional.scaled_dot_product_attention(*theirs, is_causal=True)
    return {"ours": lambda: torch.autograd.grad(o, ours, g, retain_graph=True),
            "cudnn": lambda: torch.autograd.grad(o_sdpa, theirs, g.transpose(1, 2), retain_graph=True)}


def _measure(fn):
    """``(host us, per call us, back to back us)``: medians over 30 synchronized calls, and 10 calls queued."""
    for _ in range(5):
        fn()
    host, total = [], []
    for _ in range(30):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t = time.perf_counter()
        fn()
        host.append((time.perf_counter() - t) * 1e6)
        end.record()
        end.synchronize()
        total.append(start.elapsed_time(end) * 1e3)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        fn()
    end.record()
    end.synchronize()
    return statistics.median(host), statistics.median(total), start.elapsed_time(end) * 1e3 / 10


def main() -> None:
    """Print, per backward, its host time, its time per call and back to back (us)."""
    for name, fn in _calls().items():
        host, total, queued = _measure(fn)
        print(f"{name}: host per call median {host:.0f} us; per call (events) median {total:.0f} us; "
              f"10 calls back to back {queued:.0f} us each")


if __name__ == "__main__":
    main()
