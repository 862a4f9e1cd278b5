"""Launch cost: one call of a small 2-tensor kernel, against torch and Triton.

Each row is the host time of one call (wall clock over many calls in a loop,
the GPU synchronised once at the end; median of several such loops), all in
this process:

* ``tvm_tirx Kernel(a, b)``: every argument check, then the launch;
* ``executable[name](a, b)``: apache-tvm's lookup of the function, then the
  launch (no checks) -- what each call cost before the Kernel cached it;
* ``raw function``: the function fetched once, called directly (no checks);
* ``torch copy_``: ``b.copy_(a)`` on the same tensors;
* ``triton``: a trivial Triton copy kernel, when Triton is importable.

    python bench/launch.py          # on a GPU: the table
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


def per_call_us(fn, calls: int, repeats: int, sync=None) -> float:
    """Median over ``repeats`` loops of the wall time per call of ``fn()`` (µs)."""
    for _ in range(max(calls // 10, 10)):
        fn()
    if sync:
        sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        if sync:
            sync()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
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


def gpu_table(calls: int, repeats: int) -> None:
    import torch  # pylint: disable=import-outside-toplevel

    kernel = tvm_tirx.compile(small_copy, target="cuda")
    a = torch.randn(N, device="cuda")
    b = torch.empty_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b), "small_copy is wrong"
    raw = kernel.executable[kernel.name]
    sync = torch.cuda.synchronize
    rows = {
        "tvm_tirx Kernel(a, b)": per_call_us(lambda: kernel(a, b), calls, repeats, sync),
        "executable[name](a, b)": per_call_us(lambda: kernel.executable[kernel.name](a, b), calls, repeats, sync),
        "raw function, fetched once": per_call_us(lambda: raw(a, b), calls, repeats, sync),
        "torch copy_": per_call_us(lambda: b.copy_(a), calls, repeats, sync),
    }
    triton_copy = _triton_copy(torch)
    if triton_copy is not None:
        rows["triton (trivial copy)"] = per_call_us(lambda: triton_copy(a, b), calls, repeats, sync)
    copy = rows["torch copy_"]
    print(f"host time per call, us ({calls} calls per loop, median of {repeats} loops)")
    print(table(["call", "us", "x copy_"], [[k, f"{v:.2f}", f"{v / copy:.2f}"] for k, v in rows.items()]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile, and time the checks alone on the CPU")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if args.cpu or not testing.has_cuda():
        cpu_checks(args.calls, args.repeats)
    else:
        gpu_table(args.calls, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
