"""Fused attention forward written with tile operations, against torch SDPA's backends.

The kernel is :func:`tvm_tirx.kernels.attention.make_attention` (Q, K, V and O in
``(batch, seq, heads, head_dim)``, bf16, a run-time sequence length).  The peers are
``torch.nn.functional.scaled_dot_product_attention`` with each backend forced
(``torch.nn.attention.sdpa_kernel``: cuDNN, FlashAttention-2), given the ``(batch, heads,
seq, head_dim)`` views of the same tensors (no copy), and JAX's Mosaic GPU
FlashAttention-3 on float16 copies when JAX is importable (:mod:`bench._mosaic_attention`).
Each of our results is checked against a float32 reference (max |O - ref| <= 2e-2, max |LSE - ref| <= 1e-3) before it
is timed (CUDA events, median of ``--runs`` runs after a warm-up, random inputs).

    python bench/attention.py          # GPU: the table of issue 27, each schedule of SCHEDULES
    python bench/attention.py --cpu    # no GPU: compile and assemble each configuration
    python bench/attention.py --ops [--classes ...] [--dtype float16]  # GPU: ops.attention per call
    python bench/attention.py --ops-plans    # no GPU: the plan ops.attention takes per row
    python bench/attention.py --backward [--classes ...]  # GPU: the backward (bench/_attention_backward.py)
    python bench/attention.py --dsum  # GPU: the backward through the op with either Dsum route
    python bench/attention.py --deterministic  # GPU: the deterministic backward, default order vs sections
    python bench/attention.py --backward-kernels  # GPU: the backward kernel's dq_split variants vs cuDNN
    python bench/attention.py --varlen   # GPU: packed sequences (bench/_attention_varlen.py)
"""

from __future__ import annotations

import argparse
import math
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

import tvm_tirx  # noqa: E402
from tvm_tirx import testing  # noqa: E402
from tvm_tirx.kernels.attention import AttentionConfig, make_attention  # noqa: E402
from tvm_tirx.script import tirx as T  # noqa: E402

from bench import _attention_backward, _attention_ops, _attention_varlen  # noqa: E402
from bench._mosaic_attention import mosaic_ms  # noqa: E402
from bench._timing import table  # noqa: E402

#: (batch, heads, seq_len, head_dim) x causal: the rows of issue 27's table
ROWS = [(s, c) for s in ((4, 32, 4096, 128), (2, 16, 16384, 128), (4, 32, 4096, 64), (4, 16, 4096, 256),
                         (16, 32, 1024, 128)) for c in (False, True)]
_KERNELS: dict = {}
#: why Mosaic GPU has no number: reason -> the rows it applies to
MOSAIC_REASONS: dict = {}


#: the schedules timed per row (overlap needs a third stage: head_dim 64 and 128 only)
SCHEDULES = {"serial": {}, "ping-pong": dict(pingpong=True), "overlap": dict(overlap=True, stages=3),
             "both": dict(pingpong=True, overlap=True, stages=3),
             "persistent ping-pong": dict(pingpong=True, persistent=True),
             "persistent overlap": dict(overlap=True, stages=3, persistent=True),
             "persistent both": dict(pingpong=True, overlap=True, stages=3, persistent=True),
             # FlashAttention-3's two stages: where a third does not fit (wider blocks)
             "both, 2 stages": dict(pingpong=True, overlap=True, stages=2),
             "persistent both, 2 stages": dict(pingpong=True, overlap=True, stages=2, persistent=True),
             # three consumer warpgroups, 192 query rows per CTA (head_dim 64)
             "overlap, 3 consumers": dict(overlap=True, stages=3, consumers=3),
             "persistent overlap, 3 consumers": dict(overlap=True, stages=3, persistent=True, consumers=3),
             # the persistent kernel's code with a grid of one CTA per tile (every CTA walks one tile)
             "persistent both, a CTA per tile": dict(pingpong=True, overlap=True, stages=3, persistent=True,
                                                     ctas=2**31 - 1),
             # the table's kernel for full rows of unknown length: persistent up to 4096 keys, chosen at launch
             "persistent both, rows <= 4096": dict(pingpong=True, overlap=True, stages=3, persistent=True,
                                                   persistent_rows=4096),
             # K's and V's halves of a stage on barriers of their own (v_ring): FlashAttention-3's two pipelines
             "ping-pong, V ring": dict(pingpong=True, v_ring=True),
             "overlap, 2 stages, V ring": dict(overlap=True, stages=2, v_ring=True),
             "both, 2 stages, V ring": dict(pingpong=True, overlap=True, stages=2, v_ring=True),
             "persistent both, 2 stages, V ring": dict(pingpong=True, overlap=True, stages=2, persistent=True,
                                                       v_ring=True),
             "persistent both, V ring": dict(pingpong=True, overlap=True, stages=3, persistent=True, v_ring=True),
             "persistent overlap, V ring": dict(overlap=True, stages=3, persistent=True, v_ring=True),
             "persistent overlap, 3 consumers, V ring": dict(overlap=True, stages=3, persistent=True, consumers=3,
                                                             v_ring=True)}
#: the same schedules with O stored through shared memory and the TMA (``tma_store``; not in
#: the default set until measured): the short rows' and head_dim 256's plans, and the
#: persistent ping-pong that keeps a buffer of its own for O at head_dim 128
SCHEDULES.update({f"{name}, TMA store": dict(SCHEDULES[name], tma_store=True)
                  for name in ("ping-pong", "persistent ping-pong", "persistent overlap", "persistent both",
                               "both, 2 stages", "persistent both, 2 stages", "overlap, 3 consumers",
                               "persistent overlap, 3 consumers", "persistent both, rows <= 4096", "ping-pong, V ring",
                               "overlap, 2 stages, V ring", "both, 2 stages, V ring",
                               "persistent both, 2 stages, V ring", "persistent both, V ring",
                               "persistent overlap, 3 consumers, V ring")})
#: O staged in the last block's K stage (``o_staging="kv"``: the head_dim 128 plan's for causal rows and
#: short full rows; the TMA-store schedules above stage it in a tile of its own, or in Q's rows)
SCHEDULES.update({f"{name}, O in K": dict(SCHEDULES[name], o_staging="kv")
                  for name in ("persistent both, TMA store", "persistent both, rows <= 4096, TMA store",
                               "persistent both, V ring, TMA store", "persistent both, 2 stages, V ring, TMA store")})
DEFAULT_SCHEDULES = tuple(name for name in SCHEDULES if "TMA store" not in name and "V ring" not in name)


def kernel_for(heads, head_dim, causal, schedule="serial", arch=None, kv_heads=None):
    """One compiled kernel per (heads, kv_heads, head_dim, causal, schedule): batch and length at run time."""
    key = (heads, kv_heads, head_dim, causal, schedule)
    if key not in _KERNELS:
        func = make_attention(T.dynamic("B"), T.dynamic("L"), heads, head_dim, kv_heads=kv_heads, causal=causal,
                              **SCHEDULES[schedule])
        _KERNELS[key] = tvm_tirx.compile(func, target="cuda", **({"arch": arch} if arch else {}))
    return _KERNELS[key]


def _reference_error(torch, q, k, v, o, lse, causal):
    """Max |O - ref| and |LSE - ref| against float32, a few heads at a time (``lse`` None:
    O only, the LSE error 0)."""
    scale, err_o, err_lse = 1 / math.sqrt(q.shape[-1]), 0.0, 0.0
    group = q.shape[2] // k.shape[2]
    k, v = (x.repeat_interleave(group, dim=2) for x in (k, v))  # query head h reads K/V head h // group
    for b in range(q.shape[0]):
        for h0 in range(0, q.shape[2], 4):
            qf, kf, vf = (x[b, :, h0 : h0 + 4].float().transpose(0, 1) for x in (q, k, v))
            s = (qf @ kf.transpose(-1, -2)) * scale
            if causal:
                s.masked_fill_(torch.ones_like(s[0], dtype=torch.bool).triu(1), float("-inf"))
            ref_lse = torch.logsumexp(s, dim=-1)
            ref_o = torch.softmax(s, dim=-1) @ vf
            err_o = max(err_o, (o[b, :, h0 : h0 + 4].float().transpose(0, 1) - ref_o).abs().max().item())
            if lse is not None:
                err_lse = max(err_lse, (lse[b, h0 : h0 + 4] - ref_lse).abs().max().item())
            del s, ref_o
    return err_o, err_lse


def _sdpa_ms(torch, q, k, v, causal, backend, runs):
    """SDPA's time with ``backend`` forced (K/V repeated to the query heads for GQA, before
    timing), or None when the backend refuses the row."""
    fn = _attention_ops.peer_call(torch, q, k, v, causal, backend)
    return None if fn is None else testing.do_bench(fn, runs=runs).median


def _tflops(shape, causal, ms):
    return _attention_ops.tflops(*shape, causal, ms * 1e-3) if ms else None


def _ours(torch, q, k, v, causal, schedule, runs):
    """(ms, O error, LSE error) of our kernel, checked before it is timed."""
    b, n, h, d = q.shape
    o = torch.full_like(q, float("nan"))
    lse = torch.full((b, h, n), float("nan"), device="cuda")
    kernel = kernel_for(h, d, causal, schedule, kv_heads=k.shape[2])
    kernel(q, k, v, o, lse)
    err_o, err_lse = _reference_error(torch, q, k, v, o, lse, causal)
    assert err_o <= 2e-2 and err_lse <= 1e-3, f"{tuple(q.shape)} causal={causal}: error O {err_o:.2e}, LSE {err_lse:.2e}"
    return testing.do_bench(lambda: kernel(q, k, v, o, lse), runs=runs).median, err_o, err_lse


def _fits(schedule, head_dim):
    """Whether ``schedule`` takes ``head_dim`` (its stages and blocks fit a CTA's shared
    memory and a consumer's registers: :class:`AttentionConfig`'s checks)."""
    try:
        AttentionConfig(1, 128, 1, 1, head_dim, **SCHEDULES[schedule])
    except ValueError:
        return False
    return True


def with_block_n(schedules, block_ns):
    """``schedules`` and, for each of ``block_ns`` (keys per block), each schedule with
    ``block_n`` set: named ``"<schedule> bn<N>"`` (added to :data:`SCHEDULES`)."""
    named = list(schedules)
    for bn in block_ns:
        for name in schedules:
            SCHEDULES[f"{name} bn{bn}"] = dict(SCHEDULES[name], block_n=bn)
            named.append(f"{name} bn{bn}")
    return tuple(named)


def row(torch, shape, causal, runs, kv_heads=None, schedules=DEFAULT_SCHEDULES):
    b, h, n, d = shape
    torch.manual_seed(0)
    q = torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, n, kv_heads or h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    timed = {name: _ours(torch, q, k, v, causal, name, runs) for name in schedules if _fits(name, d)}
    results = list(timed.values())
    if not results:
        raise SystemExit(f"head_dim {d}: none of the schedules {schedules} takes it (a third stage does not fit)")
    peers = {name: _sdpa_ms(torch, q, k, v, causal, name, runs) for name in ("CUDNN_ATTENTION", "FLASH_ATTENTION")}
    mosaic, why = mosaic_ms(torch, q, k, v, causal, runs, lambda o: _reference_error(torch, q, k, v, o, None, causal)[0])
    peers["Mosaic GPU"] = mosaic
    if mosaic is None:
        MOSAIC_REASONS.setdefault(why, []).append(",".join(map(str, shape)) + (" causal" if causal else ""))
    best = min(r[0] for r in results)
    ours = [f"{_tflops(shape, causal, timed[name][0]):.0f}" if name in timed else "-" for name in schedules]
    cells = [",".join(map(str, shape)) + (f" kv{kv_heads}" if kv_heads else ""), "yes" if causal else "no", *ours]
    for peer_ms in peers.values():
        cells += [f"{_tflops(shape, causal, peer_ms):.0f}", f"{peer_ms / best:.2f}"] if peer_ms else ["-", "-"]
    return cells + [f"{max(r[1] for r in results):.1e}", f"{max(r[2] for r in results):.1e}"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile and assemble only")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rows", nargs="*", default=None,
                        help="B,H,L,D[,KV] rows (KV: key/value heads, grouped-query) instead of issue 27's")
    parser.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    parser.add_argument("--schedules", nargs="*", choices=tuple(SCHEDULES), default=DEFAULT_SCHEDULES,
                        help="the schedules to time (default: all but the TMA-store ones)")
    parser.add_argument("--block-n", nargs="*", type=int, default=(),
                        help="also time each schedule with these keys per block (make_attention's block_n)")
    parser.add_argument("--ops", action="store_true", help="ops.attention per call (bench/_attention_ops.py)")
    parser.add_argument("--backward", action="store_true",
                        help="ops.attention's backward against SDPA's (bench/_attention_backward.py; GPU)")
    parser.add_argument("--backward-kernels", action="store_true",
                        help="make_attention_backward's variants (dq_split, stages) against cuDNN's backward "
                        "(bench/_attention_backward.py; without a GPU: assembled)")
    parser.add_argument("--dsum", action="store_true",
                        help="ops.attention's backward with either Dsum route (bench/_attention_backward.py; GPU)")
    parser.add_argument("--deterministic", action="store_true",
                        help="ops.attention's deterministic backward, default order vs sections "
                        "(bench/_attention_backward.py; GPU)")
    parser.add_argument("--varlen", action="store_true",
                        help="ops.attention_varlen against FA2's and cuDNN's varlen kernels (bench/_attention_varlen.py)")
    parser.add_argument("--ops-plans", action="store_true", help="the plan ops.attention takes per row (no GPU)")
    parser.add_argument("--classes", nargs="*", choices=tuple(_attention_ops.CLASSES), default=None,
                        help="--ops / --ops-plans (default: every class), --backward (default: table): these only")
    parser.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16", help="--ops: q, k, v's dtype")
    args = parser.parse_args(argv)
    args.schedules = with_block_n(args.schedules, args.block_n)
    if args.varlen:
        return _attention_varlen.main_varlen(args.dtype, max(5, args.runs // 2))
    if args.backward_kernels:
        return _attention_backward.main_kernels(max(5, args.runs // 2))
    if args.dsum:
        return _attention_backward.main_dsum(max(5, args.runs // 2))
    if args.deterministic:
        return _attention_backward.main_deterministic(max(5, args.runs // 2))
    if args.backward:
        return _attention_backward.main_backward(args.classes, args.dtype, max(5, args.runs // 2))
    if args.ops_plans or args.ops:
        classes = args.classes or tuple(_attention_ops.CLASSES)
        return _attention_ops.main_plans(classes) if args.ops_plans else _attention_ops.main_ops(
            classes, args.dtype, max(5, args.runs // 2))
    wanted = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    given = [tuple(map(int, r.split(","))) for r in args.rows or ()]  # (B, H, L, D[, KV])
    rows_in = [(g[:4], c) for g in given for c in (False, True)] if given else ROWS
    kv_of = {g[:4]: g[4] for g in given if len(g) == 5}
    if args.cpu or not testing.has_cuda():
        seen = set()  # the code depends on head_dim, causal and the schedule, not on the number of heads
        for (b, h, n, d), causal in (r for r in rows_in if r[1] in wanted):
            for schedule in (name for name in args.schedules if _fits(name, d)):
                if (d, causal, schedule, kv_of.get((b, h, n, d)) is None) in seen:
                    continue
                seen.add((d, causal, schedule, kv_of.get((b, h, n, d)) is None))
                kernel = kernel_for(h, d, causal, schedule, arch="sm_90a", kv_heads=kv_of.get((b, h, n, d)))
                print(f"{kernel.name} heads={h} head_dim={d} causal={causal} {schedule}: assembled for "
                      f"sm_90a ({len(testing.assemble(kernel))} bytes)")
        return 0
    import torch

    rows = []
    for shape, causal in (r for r in rows_in if r[1] in wanted):
        rows.append(row(torch, shape, causal, args.runs, kv_of.get(shape), tuple(args.schedules)))
        print(rows[-1], flush=True)
    print(f"attention forward, bf16, median of {args.runs} runs (CUDA events); x = their time / our faster variant")
    print(table(["B,H,L,D", "causal", *(f"{name} TFLOP/s" for name in args.schedules), "cuDNN TFLOP/s", "x cuDNN",
                 "FA2 TFLOP/s", "x FA2", "Mosaic fp16 TFLOP/s", "x Mosaic", "err O", "err LSE"], rows))
    for why, where in MOSAIC_REASONS.items():
        print(f"Mosaic GPU: {why}: {'; '.join(where)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
