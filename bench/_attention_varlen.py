"""``ops.attention_varlen`` (packed sequences of different lengths) against FlashAttention-2's
and cuDNN's varlen kernels (``torch.ops.aten._flash_attention_forward`` and
``_cudnn_attention_forward`` with cumulative lengths, as SDPA's nested tensors call them).

Per row (a list of lengths, :data:`ROWS`): our output and LSE checked against float32 per
sequence first, then the time per call end to end (a loop of calls, then a sync; our op
reads ``cu_seqlens`` on the host, so it cannot be captured in a CUDA graph), as TFLOP/s
over the sequences' own score matrices.  Ours is one launch per sequence by default, the
varlen kernel with ``TVM_TIRX_ATTENTION_VARLEN=1``.

    python bench/attention.py --varlen
"""

from __future__ import annotations

import itertools
import math
import random
import statistics

from bench._timing import table

_RNG = random.Random(42)
#: name -> (lengths, heads, kv_heads, head_dim, causal)
ROWS = {
    "issue 42's lengths": ([1, 17, 128, 1000, 4097], 32, 8, 128, True),
    "64 short (64-512)": ([_RNG.randint(64, 512) for _ in range(64)], 16, 16, 128, True),
    "few long": ([8192, 4096, 2048, 1024], 32, 8, 128, True),
    "mixed, head_dim 64": ([_RNG.randint(100, 3000) for _ in range(16)], 16, 16, 64, False),
}


def _inputs(torch, lengths, heads, kv_heads, head_dim, dtype):
    torch.manual_seed(sum(lengths))
    total = sum(lengths)
    q = torch.randn(total, heads, head_dim, device="cuda", dtype=dtype)
    k, v = (torch.randn(total, kv_heads, head_dim, device="cuda", dtype=dtype) for _ in range(2))
    cu = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32, device="cuda")
    return q, k, v, cu


def _peer(torch, name, q, k, v, cu, longest, causal):
    """``fn()`` calling the peer's varlen forward, or None when it refuses the row."""
    aten = torch.ops.aten
    group = q.shape[1] // k.shape[1]
    if name == "cuDNN":  # cuDNN takes equal head counts here
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        fn = lambda: aten._cudnn_attention_forward(q, k, v, None, cu, cu, longest, longest, True, 0.0,  # noqa: E731
                                                   causal)
    else:
        fn = lambda: aten._flash_attention_forward(q, k, v, cu, cu, longest, longest, 0.0, causal, False)  # noqa: E731
    try:
        fn()
        torch.cuda.synchronize()
    except (RuntimeError, TypeError):
        return None
    return fn


def _error(torch, q, k, v, cu, o, lse, causal) -> tuple[float, float]:
    """Max |O - ref| and |LSE - ref| over the sequences, against float32."""
    from bench.attention import _reference_error

    bounds, err_o, err_lse = cu.tolist(), 0.0, 0.0
    for a, b in zip(bounds, bounds[1:]):
        e_o, e_lse = _reference_error(torch, q[None, a:b], k[None, a:b], v[None, a:b], o[None, a:b],
                                      lse[None, :, a:b], causal)
        err_o, err_lse = max(err_o, e_o), max(err_lse, e_lse)
    return err_o, err_lse


def _row(torch, ops, name, dtype, repeats):
    from bench.launch import per_call_us

    lengths, heads, kv_heads, head_dim, causal = ROWS[name]
    q, k, v, cu = _inputs(torch, lengths, heads, kv_heads, head_dim, dtype)
    longest = max(lengths)
    o, lse = ops.attention_varlen(q, k, v, cu, cu, longest, longest, causal=causal, return_lse=True)
    err_o, err_lse = _error(torch, q, k, v, cu, o, lse, causal)
    assert err_o <= 2e-2 and err_lse <= 1e-3, (name, err_o, err_lse)
    calls = {"ours": lambda: ops.attention_varlen(q, k, v, cu, cu, longest, longest, causal=causal),
             **{peer: _peer(torch, peer, q, k, v, cu, longest, causal) for peer in ("FA2", "cuDNN")}}
    times = {n: per_call_us(fn, 20, repeats, torch.cuda.synchronize, host_only=False)
             for n, fn in calls.items() if fn is not None}
    flops = sum(4 * heads * n * n * head_dim / (2 if causal else 1) for n in lengths)
    peers = [t for n, t in times.items() if n != "ours"]
    cells = [name, str(len(lengths)), str(sum(lengths)), f"{heads}/{kv_heads}", str(head_dim), "yes" if causal else "no"]
    cells += [f"{flops / (times[n] * 1e-6) / 1e12:.0f}" if n in times else "-" for n in ("ours", "FA2", "cuDNN")]
    ratio = min(peers) / times["ours"] if peers else None
    return cells + [f"{ratio:.2f}" if ratio else "-", f"{err_o:.1e}", f"{err_lse:.1e}"], ratio


def main_varlen(dtype_name: str, repeats: int) -> None:
    """The GPU table, as measured, then the geometric mean."""
    import torch

    from tvm_tirx import ops
    from tvm_tirx.ops import attention_varlen_kernels

    dtype, rows, ratios = getattr(torch, dtype_name), [], []
    print("ours:", "the varlen kernel" if attention_varlen_kernels.ROUTE else "one launch per sequence")
    for name in ROWS:
        cells, ratio = _row(torch, ops, name, dtype, repeats)
        rows.append(cells)
        print("  ".join(cells), flush=True)
        ratios += [ratio] if ratio else []
    print(f"ops.attention_varlen ({dtype_name}) per call end to end, TFLOP/s over the sequences' score matrices; "
          f"x best = the fastest peer's time / ours")
    print(table(["row", "seqs", "total", "H/KV", "D", "causal", "ours", "FA2", "cuDNN", "x best", "err O",
                 "err LSE"], rows))
    if ratios:
        print(f"geomean {math.exp(statistics.fmean(math.log(r) for r in ratios)):.3f}, min {min(ratios):.3f}")


__all__ = ["ROWS", "main_varlen"]
