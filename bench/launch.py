"""Launch cost: host time per call of the torch operators and of a raw Kernel, against torch.

Host time is the wall clock over back-to-back calls with no synchronisation inside
(``--calls`` / ``--op-calls`` per loop, the clock stopped when the last call returns,
the GPU synchronised between loops; median of ``--repeats`` loops, the operators' and
torch's loops interleaved), all in this process, on the same tensors as the torch
call next to it:

* the operators as users call them -- ``ops.linear`` (plain, with a bias, with a
  residual), ``ops.matmul``, ``ops.glu_linear``, ``ops.attention`` (also on inputs that
  need a gradient, as in training) -- next to
  ``F.linear``, ``torch.addmm``, ``torch.matmul``, the unfused SwiGLU
  ``silu(F.linear(x, w_gate)) * F.linear(x, w_up)`` and SDPA;
* ``ops.linear`` end to end at M = 1, 16, 128: the time per call of many calls in a row
  (GPU-bound when the kernel is longer than the host's work) against the kernel's GPU
  time (a CUDA graph of the kernel's launches) plus ``F.linear``'s host time;
* a small 2-tensor kernel: ``Kernel(a, b)`` (every check, then the launch), the
  function of ``Kernel.launcher`` (no checks), ``executable[name]`` (apache-tvm's lookup
  on every call) next to ``torch copy_`` and a trivial Triton kernel.

    python bench/launch.py          # on a GPU: the tables
    python bench/launch.py --cpu    # no GPU: compile, then time the argument
                                    # checks alone on CPU tensors (launch stubbed)
"""

from __future__ import annotations

import os
import sys

# bench/ holds copy.py, which would shadow the standard library's copy module:
# import the helpers as the package `bench`, from the repository root.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import tvm_tirx  # noqa: E402
from tvm_tirx import testing  # noqa: E402
from tvm_tirx.build.arguments import build_checker  # noqa: E402
from tvm_tirx.script import tirx as T  # noqa: E402

from bench._timing import table  # noqa: E402

N = 1024  # float32 elements per tensor: 256 threads x one 16-byte vector


@T.function
def small_copy(A: T.Tensor((N,), "float32", align=16), B: T.Tensor((N,), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=N // 4))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(N // 4, 4).sub[tid, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.view(N // 4, 4).sub[tid, :], r)


def per_call_us(fn, calls: int, repeats: int, sync=None, host_only: bool = True) -> float:
    """Median over ``repeats`` loops of the wall time per call of ``fn()`` (µs).

    ``host_only``: the clock stops when the last call returns (the host's time; the GPU is
    synchronised after it, untimed, so each loop starts with an idle GPU); otherwise it
    stops after the synchronisation (time per call end to end).
    """
    for _ in range(max(calls // 10, 10)):
        fn()
    if sync:
        sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        if sync and not host_only:
            sync()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
        if sync and host_only:
            sync()
    return statistics.median(samples)


def _triton_copy(torch):
    """A trivial Triton copy kernel as ``fn(a, b)``, or None without Triton."""
    try:
        import triton  # pylint: disable=import-outside-toplevel
        import triton.language as tl  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None

    @triton.jit
    def copy_kernel(a_ptr, b_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(b_ptr + offs, tl.load(a_ptr + offs, mask=offs < n), mask=offs < n)

    return lambda a, b: copy_kernel[(1,)](a, b, N, BLOCK=N)


def cpu_checks(calls: int, repeats: int) -> None:
    """Time the argument checks alone: CPU tensors, the launcher replaced by a no-op."""
    import torch  # pylint: disable=import-outside-toplevel

    kernel = tvm_tirx.compile(small_copy, target="cuda", arch="sm_90a")
    print(f"compiled {kernel.name} for sm_90a ({len(kernel.cuda_source)} bytes of CUDA)")
    kernel._check = build_checker(kernel._params, kernel.name, cuda=False)  # pylint: disable=protected-access
    kernel.__dict__["_function"] = lambda *args: None
    a = torch.randn(N)
    b = torch.empty_like(a)
    checks = per_call_us(lambda: kernel(a, b), calls, repeats)
    copy = per_call_us(lambda: b.copy_(a), calls, repeats)
    print("host cost on this CPU (no GPU: launch stubbed, CPU tensors)")
    print(table(["call", "us", "x copy_"], [
        ["Kernel(a, b): checks only", f"{checks:.2f}", f"{checks / copy:.2f}"],
        ["torch copy_ (CPU, 4 KiB)", f"{copy:.2f}", "1.00"],
    ]))


def kernel_table(calls: int, repeats: int) -> None:
    """The raw Kernel rows: a small copy kernel called through each layer."""
    import torch  # pylint: disable=import-outside-toplevel

    kernel = tvm_tirx.compile(small_copy, target="cuda")
    a = torch.randn(N, device="cuda")
    b = torch.empty_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b), "small_copy is wrong"
    launch = kernel.launcher(a, b)
    sync = torch.cuda.synchronize
    rows = {
        "tvm_tirx Kernel(a, b)": per_call_us(lambda: kernel(a, b), calls, repeats, sync),
        "Kernel.launcher(a, b) function": per_call_us(lambda: launch(a, b), calls, repeats, sync),
        "executable[name](a, b)": per_call_us(lambda: kernel.executable[kernel.name](a, b), calls, repeats, sync),
        "torch copy_": per_call_us(lambda: b.copy_(a), calls, repeats, sync),
    }
    triton_copy = _triton_copy(torch)
    if triton_copy is not None:
        rows["triton (trivial copy)"] = per_call_us(lambda: triton_copy(a, b), calls, repeats, sync)
    copy = rows["torch copy_"]
    print(f"host time per call, us ({calls} calls per loop, median of {repeats} loops)")
    print(table(["call", "us", "x copy_"], [[k, f"{v:.2f}", f"{v / copy:.2f}"] for k, v in rows.items()]))


def op_pairs(torch, ops):
    """``[(row, ours, torch's)]``: each operator call and the torch call it replaces, on the
    same tensors (bf16, n = k = 4096; attention 1 x 1024 x 32 x 128 causal), each checked
    against the other first."""
    F = torch.nn.functional
    bf16 = dict(device="cuda", dtype=torch.bfloat16)
    w, w_up = (torch.randn(4096, 4096, **bf16) / 64 for _ in range(2))
    bias, pairs = torch.randn(4096, **bf16), []
    for m in (1, 16, 128):
        x = torch.randn(m, 4096, **bf16)
        pairs.append((f"linear m={m} vs F.linear", lambda x=x: ops.linear(x, w), lambda x=x: F.linear(x, w)))
    x = torch.randn(16, 4096, **bf16)
    r = torch.randn(16, 4096, **bf16)
    pairs += [
        ("linear+bias m=16 vs F.linear", lambda: ops.linear(x, w, bias), lambda: F.linear(x, w, bias)),
        ("linear+residual m=16 vs addmm", lambda: ops.linear(x, w, residual=r), lambda: torch.addmm(r, x, w.t())),
        ("matmul m=16 vs torch.matmul", lambda: ops.matmul(x, w.t()), lambda: torch.matmul(x, w.t())),
        ("glu_linear m=16 vs torch's 4 ops", _glu(ops, x, w, w_up), lambda: F.silu(F.linear(x, w)) * F.linear(x, w_up)),
    ]
    q, k, v = (torch.randn(1, 1024, 32, 128, **bf16) for _ in range(3))
    sdpa = lambda: F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True)  # noqa: E731
    pairs.append(("attention causal vs SDPA", lambda: ops.attention(q, k, v, causal=True), sdpa))
    # a training forward: autograd records each call (ours under a torch.autograd.Function)
    wg = w.detach().requires_grad_(True)
    pairs.append(("linear m=16, weight needs grad, vs F.linear", lambda: ops.linear(x, wg), lambda: F.linear(x, wg)))
    qg, kg, vg = (t.detach().requires_grad_(True) for t in (q, k, v))
    sdpa_grad = lambda: F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (qg, kg, vg)),  # noqa: E731
                                                       is_causal=True)
    pairs.append(("attention causal, inputs need grad, vs SDPA", lambda: ops.attention(qg, kg, vg, causal=True),
                  sdpa_grad))
    return pairs


def _glu(ops, x, w_gate, w_up):
    """``ops.glu_linear`` on the gate and up weights (its SiLU-gated GEMM)."""
    return lambda: ops.glu_linear(x, w_gate, w_up)


def _check(torch, ours, theirs, row: str) -> None:
    got, want = ours(), theirs()
    if row.startswith("attention"):
        want = want.transpose(1, 2)
    err = (got.float() - want.float()).abs().max().item() / max(want.float().abs().max().item(), 1e-6)
    assert err < 2e-2, f"{row}: relative error {err}"


def ops_table(calls: int, repeats: int) -> None:
    """Host time per call of each operator next to torch's (same tensors, same loops)."""
    import torch  # pylint: disable=import-outside-toplevel
    from tvm_tirx import ops  # pylint: disable=import-outside-toplevel

    sync, rows = torch.cuda.synchronize, []
    for row, ours, theirs in op_pairs(torch, ops):
        _check(torch, ours, theirs, row)
        # rounds interleaved (ours, torch's, ours, ...): a noisy host slows both alike
        rounds = [[per_call_us(f, calls, 1, sync) for f in (ours, theirs)] for _ in range(repeats)]
        us, them = (statistics.median(r[i] for r in rounds) for i in (0, 1))
        rows.append([row, f"{us:.2f}", f"{them:.2f}", f"{us / them:.2f}"])
    print(f"operators: host time per call, us ({calls} calls per loop, median of {repeats} interleaved rounds)")
    print(table(["call", "tvm_tirx", "torch", "x torch"], rows))


def end_to_end_table(repeats: int) -> None:
    """``ops.linear`` per call, back to back, against its kernel's GPU time (a CUDA graph of
    the launches) plus ``F.linear``'s host time."""
    import torch  # pylint: disable=import-outside-toplevel
    from tvm_tirx import ops  # pylint: disable=import-outside-toplevel

    F, rows = torch.nn.functional, []
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) / 64
    for m in (1, 16, 128):
        x = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
        e2e = per_call_us(lambda: ops.linear(x, w), 2000, repeats, torch.cuda.synchronize, host_only=False)
        host = per_call_us(lambda: F.linear(x, w), 200, repeats, torch.cuda.synchronize)
        gpu = _graph_us(torch, lambda: ops.linear(x, w), repeats)
        torch_gpu = _graph_us(torch, lambda: F.linear(x, w), repeats)
        rows.append([f"m={m}", f"{e2e:.2f}", f"{gpu:.2f}", f"{host:.2f}", f"{gpu + host:.2f}",
                     "yes" if e2e <= gpu + host else "no", f"{torch_gpu:.2f}"])
    print("ops.linear end to end per call (2000 calls back to back), n = k = 4096, us")
    print(table(["M", "ops.linear", "kernel GPU", "F.linear host", "GPU + torch host", "within", "cuBLAS GPU"],
                rows))


def _graph_us(torch, fn, repeats: int, launches: int = 50) -> float:
    """GPU time per launch of ``fn``: a CUDA graph of ``launches`` calls, replayed
    (median of ``repeats`` timings with CUDA events)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()  # warm: plans and kernels made outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            fn()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / launches)
    return statistics.median(samples)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile, and time the checks alone on the CPU")
    parser.add_argument("--calls", type=int, default=3000, help="calls per loop of the Kernel rows")
    parser.add_argument("--op-calls", type=int, default=200,
                        help="calls per loop of the operator rows (few enough that the GPU's queue never fills)")
    parser.add_argument("--repeats", type=int, default=9, help="loops (rounds) per median")
    args = parser.parse_args(argv)
    if args.cpu or not testing.has_cuda():
        cpu_checks(args.calls, args.repeats)
    else:
        kernel_table(args.calls, args.repeats)
        ops_table(args.op_calls, args.repeats)
        end_to_end_table(args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
