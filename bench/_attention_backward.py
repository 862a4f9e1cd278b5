"""The backward of ``ops.attention`` against cuDNN's and FlashAttention-2's through SDPA.

Per row (the forward's table, :data:`bench._attention_ops.CLASSES`): the gradients of
each implementation checked against float32 autograd of the whole score matrix (a few
heads at a time), then per backward call (the forward done once, outside the timing)

- the median time of one ``torch.autograd.grad`` call end to end (CUDA events), as TFLOP/s
  of the backward's 2.5 forward products (the convention of the FlashAttention papers);
- the peak memory one backward allocates beyond what was allocated before it.

SDPA's backends get K and V repeated to the query heads for GQA rows, as leaves (their
gradients are not summed over the group: a small advantage to the peers).

    python bench/attention.py --backward                   # GPU: the forward table's rows
    python bench/attention.py --backward --classes short
    python bench/attention.py --backward-kernels           # GPU: make_attention_backward's variants

``--backward-kernels`` (:func:`main_kernels`, bfloat16) times the backward kernel itself, per variant
of :data:`KERNEL_VARIANTS` (``dq_split``, ``stages``, ``deterministic``, ``overlap``, ``longest_first``),
on :data:`KERNEL_ROWS`: the kernel's launch alone ("kernel": LSE and O from our forward kernel, Dsum and the zeroed
dQacc prepared once) and with the preparation the operator runs around it ("+prep":
:func:`tvm_tirx.ops.attention_backward_ops.kernel_grads` with ``make_dsum``'s Dsum, the
zeroed dQacc and dQ's conversion; until 2026-12-06 it took Dsum from torch's float32
copies of dO and O instead), against one backward of
SDPA's cuDNN backend (``torch.autograd.grad`` of a forward made once).  Without a GPU it
compiles and assembles each variant.
"""

from __future__ import annotations

import math
import statistics

from bench._attention_ops import BACKENDS, CLASSES, _inputs, rows_of, tflops
from bench._timing import table


def _leaves(torch, q, k, v, group: int, sdpa: bool):
    """Fresh leaves requiring grad: ours in bshd, SDPA's in (b, h, s, d) with K and V
    repeated to the query heads."""
    if not sdpa:
        return tuple(x.detach().requires_grad_(True) for x in (q, k, v))
    k, v = (x.repeat_interleave(group, 2) for x in (k, v))
    return tuple(x.detach().transpose(1, 2).requires_grad_(True) for x in (q, k, v))


def _backward_call(torch, ops, q, k, v, grad_o, causal, backend):
    """``fn()`` running one backward (of O, given ``grad_o`` in bshd) of a forward made
    once, or None when the backend refuses the row."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    leaves = _leaves(torch, q, k, v, q.shape[2] // k.shape[2], backend is not None)
    try:
        if backend is None:
            o = ops.attention(*leaves, causal=causal)
        else:
            with sdpa_kernel(getattr(SDPBackend, backend)):
                o = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)
        grad = grad_o if backend is None else grad_o.transpose(1, 2)
        fn = lambda: torch.autograd.grad(o, leaves, grad, retain_graph=True)  # noqa: E731
        fn()
    except RuntimeError:
        return None
    return fn


def _in_bshd(grads, k_heads: int, sdpa: bool):
    """SDPA's (b, h, s, d) gradients as ours: bshd, dK and dV summed over each group."""
    if not sdpa:
        return grads
    dq, dk, dv = (g.transpose(1, 2) for g in grads)
    return dq, *(g.float().unflatten(2, (k_heads, -1)).sum(3) for g in (dk, dv))


def _reference(torch, q, k, v, causal, grad_o):
    """dQ, dK, dV by float32 autograd of the whole score matrix, a few query heads at a time."""
    group, n = q.shape[2] // k.shape[2], q.shape[1]
    step = max(1, (1 << 32) // (n * n * 4))  # heads per step: 4 GiB of scores
    dq, dk, dv = (torch.zeros_like(x, dtype=torch.float32) for x in (q, k, v))
    for h0 in range(0, q.shape[2], step):
        heads = range(h0, min(h0 + step, q.shape[2]))
        qf = q[:, :, h0:heads.stop].float().transpose(1, 2).requires_grad_(True)
        kf, vf = (x[:, :, [h // group for h in heads]].float().transpose(1, 2).requires_grad_(True) for x in (k, v))
        s = (qf @ kf.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
        o = torch.softmax(s, -1) @ vf
        gq, gk, gv = torch.autograd.grad(o, (qf, kf, vf), grad_o[:, :, h0:heads.stop].float().transpose(1, 2))
        dq[:, :, h0:heads.stop] = gq.transpose(1, 2)
        for i, h in enumerate(heads):
            dk[:, :, h // group] += gk[:, i]
            dv[:, :, h // group] += gv[:, i]
        del s, o
    return dq, dk, dv


def _relative_error(grads, ref) -> float:
    """The largest of max|g - ref| / max|ref| over dQ, dK, dV."""
    return max(((g.float() - r).abs().max() / r.abs().max()).item() for g, r in zip(grads, ref))


def _peak_mib(torch, fn) -> float:
    """MiB one call of ``fn`` allocates at its peak beyond what was allocated before it."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def _call_us(torch, fn, repeats: int) -> float:
    """Median over ``repeats`` of one call's time end to end (CUDA events around the call;
    a backward takes milliseconds, so the host's share is small)."""
    start, end, samples = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True), []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    return statistics.median(samples)


def _row(torch, ops, row, dtype, repeats):
    """The table's cells and our speed over the fastest peer's."""
    from tvm_tirx.ops.attention_backward_ops import backward_path

    q, k, v = _inputs(torch, row, dtype)
    b, h, kv, n, d, causal = row
    path = backward_path(q, k, v, causal, d ** -0.5, "bshd")
    cells, times = [",".join(map(str, row[:5])), "yes" if causal else "no", path], {}
    grad_o = torch.randn(q.shape, device="cuda", dtype=dtype, generator=torch.Generator("cuda").manual_seed(7))
    ref = _reference(torch, q, k, v, causal, grad_o)
    for name, backend in {"ours": None, **BACKENDS}.items():
        fn = _backward_call(torch, ops, q, k, v, grad_o, causal, backend)
        if fn is None:
            cells += ["-", "-", "-"]
            continue
        err = _relative_error(_in_bshd(fn(), kv, backend is not None), ref)
        times[name] = _call_us(torch, fn, repeats)
        cells += [f"{2.5 * tflops(b, h, n, d, causal, times[name] * 1e-6):.0f}", f"{_peak_mib(torch, fn):.0f}",
                  f"{err:.1e}"]
    peers = [t for name, t in times.items() if name != "ours"]
    ratio = min(peers) / times["ours"] if peers and "ours" in times else None
    return cells + [f"{ratio:.2f}" if ratio else "-"], ratio


def main_backward(classes, dtype_name: str, repeats: int) -> None:
    """The GPU table of the backward, with the geometric mean and minimum last."""
    import torch

    from tvm_tirx import ops

    dtype, rows, ratios = getattr(torch, dtype_name), [], []
    for row in rows_of(classes or ("table",)):
        cells, ratio = _row(torch, ops, row, dtype, repeats)
        rows.append(cells)
        print("  ".join(cells), flush=True)  # as measured: a cut-off run keeps its rows
        ratios += [ratio] if ratio else []
    print("ours: path = the backward kernel (kernel), SDPA's backward run again (sdpa) or torch by query blocks "
          "(blocks): tvm_tirx.ops.attention_backward_ops.backward_path")
    print(f"attention backward ({dtype_name}), per call end to end: TFLOP/s (2.5 forward products), peak MiB "
          f"beyond the inputs, max relative error of dQ/dK/dV against float32 autograd; x best = the fastest "
          f"peer's time / ours")
    heads = [f"{name} {col}" for name in ("ours", *BACKENDS) for col in ("TFLOP/s", "MiB", "err")]
    print(table(["B,H,KV,L,D", "causal", "path", *heads, "x best"], rows))
    if ratios:
        geo = math.exp(statistics.fmean(math.log(r) for r in ratios))
        print(f"geomean {geo:.3f}, min {min(ratios):.3f} ({len(ratios)} rows)")


#: (batch, heads, kv_heads, seq_len, head_dim, causal) of --backward-kernels
KERNEL_ROWS = [(1, 32, 32, 8192, 128, True), (4, 32, 8, 2048, 128, True), (4, 32, 32, 4096, 128, False),
               (8, 16, 16, 2048, 64, False), (4, 32, 32, 4096, 64, True)]
#: head_dim -> the (dq_split, stages, deterministic, overlap, longest_first) variants timed: ops.attention's
#: kernels are the first (tvm_tirx.kernels.attention_backward.PLANS, on a full row), the second (the same in
#: sections, on a causal row) and the last (DETERMINISTIC_PLANS where it has the head_dim, deterministic: the
#: one it takes under torch.use_deterministic_algorithms).  longest_first "waves": in sections of
#: wave_section(kv_heads, seq_len) key/value heads, timed on causal rows only (a full row's walks are equal).
#: overlap "ahead": overlap=True, scores_ahead=True (the next S^T under dK; not yet taken by the operator)
KERNEL_VARIANTS = {128: [("columns", 2, False, True, False), ("columns", 2, False, True, "waves"),
                         ("columns", 3, False, True, "waves"), ("columns", 2, False, "ahead", False),
                         ("columns", 2, False, "ahead", "waves"), ("columns", 2, True, True, False)],
                   64: [("rows", 2, False, False, False), ("rows", 2, False, False, "waves"),
                        ("columns", 4, False, False, False), ("columns", 4, False, "ahead", False),
                        ("rows", 2, False, True, False), ("rows", 2, False, "ahead", False),
                        ("columns", 4, True, False, False)]}
#: how a variant's overlap shows in the table
OVERLAP_NAMES = {True: " overlap", "ahead": " overlap, ahead"}


def _compiled(row, variant, dtype_name: str, arch=None):
    """The backward kernel of one ``(dq_split, stages, deterministic, overlap, longest_first)`` variant,
    static sizes (``arch``: for the CPU's assembly)."""
    import tvm_tirx
    from tvm_tirx.kernels.attention_backward import make_attention_backward, wave_section

    b, h, kv, n, d, causal = row
    dq_split, stages, deterministic, overlap, longest_first = variant
    options = {"arch": arch} if arch else {}
    section = wave_section(kv, n) if longest_first == "waves" else None
    return tvm_tirx.compile(make_attention_backward(b, n, h, d, kv_heads=kv, causal=causal, dtype=dtype_name,
                                                    stages=stages, dq_split=dq_split, deterministic=deterministic,
                                                    overlap=bool(overlap), scores_ahead=overlap == "ahead",
                                                    longest_first=bool(longest_first),
                                                    section=section),
                            target="cuda", **options)


def _forward(torch, row, q, k, v):
    """``(O, LSE)`` of our forward kernel (bf16 inputs: the forward's dtype)."""
    import tvm_tirx
    from tvm_tirx.kernels.attention import make_attention

    b, h, kv, n, d, causal = row
    fwd = tvm_tirx.compile(make_attention(b, n, h, d, kv_heads=kv, causal=causal), target="cuda")
    o, lse = torch.empty_like(q), torch.empty(b, h, n, device="cuda")
    fwd(q, k, v, o, lse)
    return o, lse


def _dsum_kernel(row, dtype_name: str):
    """The operator's Dsum kernel for ``row`` (:func:`~tvm_tirx.kernels.attention_backward.dsum.make_dsum`,
    ``zero_dq=True``)."""
    import tvm_tirx
    from tvm_tirx.kernels.attention_backward.dsum import make_dsum
    from tvm_tirx.script import tirx as T

    return tvm_tirx.compile(make_dsum(T.dynamic("B"), T.dynamic("L"), row[1], row[4], dtype_name, zero_dq=True),
                            target="cuda")


def _kernel_cells(torch, row, variant, ref, repeats):
    """``[us kernel, us +prep, TFLOP/s, max rel err]`` of one variant on one row, and the
    +prep time; ``ref`` = (q, k, v, do, o, lse, cuDNN's dq, dk, dv in bshd)."""
    from tvm_tirx.ops.attention_backward_ops import kernel_grads

    q, k, v, do, o, lse, *grads = ref
    b, h, kv, n, d, causal = row
    dtype_name = str(q.dtype).split(".")[-1]
    bwd, det, dsum_kernel = _compiled(row, variant, dtype_name), variant[2], _dsum_kernel(row, dtype_name)

    def prepared():  # what the operator runs: make_dsum's Dsum, the zeroed dQacc, the kernel, dQ's conversion
        return kernel_grads(bwd, do, None, q, k, v, o, lse, "bshd", det, dsum_kernel)

    err = _relative_error(prepared(), [g.float() for g in grads])
    dsum = (do.float() * o.float()).sum(-1).transpose(1, 2).contiguous()  # the kernel's arguments, made once
    dq_acc, dk, dv = torch.zeros(q.shape, dtype=torch.float32, device="cuda"), torch.empty_like(k), torch.empty_like(v)
    order = torch.zeros(b, h, -(-n // 64), dtype=torch.int32, device="cuda")

    def launch():  # a deterministic kernel's counts must start at 0 (a memset per launch)
        bwd(q, k, v, do, lse, dsum, dq_acc, dk, dv, *((order.zero_(),) if det else ()))

    kernel_us = _call_us(torch, launch, repeats)
    prep_us = _call_us(torch, prepared, repeats)
    return [f"{kernel_us:.0f}", f"{prep_us:.0f}", f"{2.5 * tflops(b, h, n, d, causal, kernel_us * 1e-6):.0f}",
            f"{err:.1e}"], prep_us


def _cpu_kernels(dtype_name: str) -> None:
    """No GPU: compile and assemble each variant of each row (sm_90a)."""
    from tvm_tirx import testing

    for row in KERNEL_ROWS:
        for variant in KERNEL_VARIANTS[row[4]]:
            if variant[4] and not row[5]:
                continue
            bwd = _compiled(row, variant, dtype_name, arch="sm_90a")
            print(row, variant, "assembled" if len(testing.assemble(bwd)) > 0 else "FAILED", flush=True)


def main_kernels(repeats: int) -> None:
    """The backward kernel's variants against cuDNN's backward (GPU, bfloat16), or assembled (CPU)."""
    from tvm_tirx import testing

    if not testing.has_cuda():
        return _cpu_kernels("bfloat16")
    import torch

    rows = []
    for row in KERNEL_ROWS:  # bfloat16: the forward kernel's dtype
        _, _, kv, _, d, causal = row
        q, k, v = _inputs(torch, row, torch.bfloat16)
        do = torch.randn(q.shape, device="cuda", dtype=q.dtype, generator=torch.Generator("cuda").manual_seed(7))
        fn = _backward_call(torch, None, q, k, v, do, causal, BACKENDS["cuDNN"])
        cudnn = _in_bshd(fn(), kv, True) if fn is not None else None
        cudnn_us = _call_us(torch, fn, repeats) if fn is not None else None
        o, lse = _forward(torch, row, q, k, v)
        for variant in KERNEL_VARIANTS[d]:
            if variant[4] and not causal:
                continue
            cells, prep_us = _kernel_cells(torch, row, variant, (q, k, v, do, o, lse, *cudnn), repeats) \
                if cudnn is not None else (["-"] * 4, None)
            ratio = f"{cudnn_us / prep_us:.2f}" if prep_us else "-"
            name = (f"{variant[0]}/{variant[1]}" + " determ." * variant[2] + OVERLAP_NAMES.get(variant[3], "")
                    + (f" longest first ({variant[4]})" if variant[4] else ""))
            rows.append([",".join(map(str, row[:5])), "yes" if causal else "no", name,
                         *cells, f"{cudnn_us:.0f}" if cudnn_us else "-", ratio])
            print("  ".join(rows[-1]), flush=True)
    print("make_attention_backward's variants (bfloat16): us of the kernel alone and with Dsum, the zeroed "
          "dQacc and dQ's conversion (+prep); TFLOP/s of the kernel (2.5 forward products); max relative error "
          "against cuDNN's gradients; cuDNN us per backward (autograd.grad); x cuDNN = cuDNN / +prep")
    print(table(["B,H,KV,L,D", "causal", "variant", "kernel us", "+prep us", "TFLOP/s", "err vs cuDNN",
                 "cuDNN us", "x cuDNN"], rows))
    return None


__all__ = ["main_backward", "main_kernels", "CLASSES", "KERNEL_ROWS", "KERNEL_VARIANTS"]


def _interleaved(torch, ops, rows, set_route, repeats):
    """Per row of ``rows``: ``(row, us off, us on, relative difference of the gradients)`` of
    ``ops.attention``'s backward per call with ``set_route(False)`` and ``set_route(True)``,
    in interleaved rounds (clocks and L2 drift alike for both routes)."""
    out = []
    for row in rows:
        q, k, v = _inputs(torch, row, torch.bfloat16)
        do = torch.randn(q.shape, device="cuda", dtype=q.dtype, generator=torch.Generator("cuda").manual_seed(7))
        fn = _backward_call(torch, ops, q, k, v, do, row[5], None)
        times, grads = {False: [], True: []}, {}
        for _ in range(3):
            for route in (False, True):
                set_route(route)
                grads[route] = fn()
                times[route].append(_call_us(torch, fn, repeats))
        err = _relative_error(grads[True], [g.float() for g in grads[False]])
        out.append((row, statistics.median(times[False]), statistics.median(times[True]), err))
    return out


def _print_interleaved(title, names, results) -> None:
    rows = [[",".join(map(str, row[:5])), "yes" if row[5] else "no", f"{old:.0f}", f"{new:.0f}", f"{old / new:.3f}",
             f"{err:.1e}"] for row, old, new, err in results]
    print(title)
    print(table(["B,H,KV,L,D", "causal", f"{names[0]} us", f"{names[1]} us", "speedup", "rel diff"], rows))


def main_dsum(repeats: int) -> None:
    """``ops.attention``'s backward per call with Dsum from float32 copies of dO and O
    (``TVM_TIRX_ATTENTION_DSUM=0``) and with :func:`~tvm_tirx.kernels.attention_backward.make_dsum`'s
    one pass (the default), on :data:`KERNEL_ROWS` (GPU, bfloat16): both in the same
    process, interleaved rounds, the two routes' gradients checked against each other."""
    import torch

    from tvm_tirx import ops
    from tvm_tirx.ops import attention_backward_kernels as kernels

    default = kernels.DSUM_ROUTE
    try:
        results = _interleaved(torch, ops, KERNEL_ROWS, lambda on: setattr(kernels, "DSUM_ROUTE", on), repeats)
    finally:
        kernels.DSUM_ROUTE = default
    _print_interleaved("ops.attention backward per call (us, bfloat16): Dsum from float32 copies vs make_dsum's "
                       "one pass", ("copies", "make_dsum"), results)


def main_deterministic(repeats: int) -> None:
    """``ops.attention``'s backward per call under ``torch.use_deterministic_algorithms(True)``
    (the deterministic kernel) in the default launch order and in sections
    (:data:`~tvm_tirx.ops.attention_backward_kernels.DETERMINISTIC_SECTIONS`), on the causal rows of
    :data:`KERNEL_ROWS` (GPU, bfloat16), interleaved rounds.  Both add dQ's partial sums in
    key order, so their gradients must be the same bits ("rel diff" 0)."""
    import torch

    from tvm_tirx import ops
    from tvm_tirx.ops import attention_backward_kernels as kernels

    default, mode = kernels.DETERMINISTIC_SECTIONS, torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        results = _interleaved(torch, ops, [r for r in KERNEL_ROWS if r[5]],
                               lambda on: setattr(kernels, "DETERMINISTIC_SECTIONS", on), repeats)
    finally:
        kernels.DETERMINISTIC_SECTIONS = default
        torch.use_deterministic_algorithms(mode)
    _print_interleaved("ops.attention backward per call under deterministic mode (us, bfloat16): default order vs "
                       "sections", ("default", "sections"), results)
