"""What every step of the Hopper GEMM tutorial does around its kernel.

``C (M, N) = A (M, K) @ B (N, K)^T`` in bf16 with fp32 accumulation, bf16 output.
Without a GPU a step compiles its kernel for ``sm_90a`` and assembles it with
``nvcc``/``ptxas``; with one it also runs the kernel on random inputs, checks it
against an fp32 product (max |C - ref| / max |ref| <= 1e-2) and times it and
``torch.matmul`` with :func:`tvm_tirx.testing.do_bench` (CUDA events, median).
"""

from __future__ import annotations

import argparse

import tvm_tirx
from tvm_tirx import testing

ON_GPU = testing.has_cuda()
#: Compile for the GPU present, or for the H100/H200's arch-specific target without one.
ARCH = None if ON_GPU else "sm_90a"
#: Bound on max |C - ref| / max |ref| for bf16 output against the fp32 product.
TOLERANCE = 1e-2


def size(default_cpu, default_gpu):
    """``(M, N, K)`` from ``--size M N K`` on the command line, else the default for
    this machine (small on the CPU, where only the compile matters)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, nargs=3, default=None, metavar=("M", "N", "K"))
    args, _ = parser.parse_known_args()
    return tuple(args.size) if args.size else (default_gpu if ON_GPU else default_cpu)


def build(func):
    """Compile ``func`` and assemble it; prints ``assembled <name> for <arch>``."""
    kernel = tvm_tirx.compile(func, target="cuda", arch=ARCH)
    arch = kernel.target.attrs["arch"]
    print(f"assembled {kernel.name} for {arch}: {len(testing.assemble(kernel))}-byte cubin")
    return kernel


def tflops(m, n, k, ms):
    """Tensor-core rate of an ``m x n x k`` product that took ``ms`` milliseconds."""
    return 2 * m * n * k / (ms * 1e-3) / 1e12


def check_and_time(kernel, m, n, k, runs=50):
    """Run ``kernel(A, B, C)`` on random bf16 inputs, check C, time it and torch.matmul.

    Returns the kernel's TFLOP/s; raises AssertionError above :data:`TOLERANCE`.
    """
    import torch  # pylint: disable=import-outside-toplevel

    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.zeros(m, n, device="cuda", dtype=torch.bfloat16)
    kernel(a, b, c)
    ref = a.float() @ b.float().t()
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
    assert err <= TOLERANCE, f"{kernel.name}: max relative error {err:.2e} > {TOLERANCE}"
    ours = tflops(m, n, k, testing.do_bench(lambda: kernel(a, b, c), runs=runs).median)
    theirs = tflops(m, n, k, testing.do_bench(lambda: torch.matmul(a, b.t()), runs=runs).median)
    print(f"{kernel.name} {m}x{n}x{k}: max rel. error {err:.1e}, {ours:.0f} TFLOP/s "
          f"(torch.matmul {theirs:.0f} TFLOP/s, {ours / theirs:.2f}x)")
    return ours


def run(func, m, n, k):
    """Build ``func``'s kernel; on a GPU also check and time it."""
    kernel = build(func)
    if ON_GPU:
        check_and_time(kernel, m, n, k)
    return kernel
