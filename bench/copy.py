"""Device-to-device copy with ld.global.v4 / st.global.v4, against torch.Tensor.copy_.

The one-shot kernel gives each thread one 16-byte vector and launches as
many CTAs as that takes (measured at 1.00x copy_ at 1 and 4 GiB on an H200).
In the looped variants each thread moves ``unroll`` 16-byte vectors per iteration (``unroll`` loads in
flight before the first store); a grid of ``ctas`` CTAs of 256 threads walks
the array.  The layout of one iteration, ``(iteration, cta, unroll, thread, 4)``,
makes every warp's loads one contiguous 512-byte row.

    python bench/copy.py            # on a GPU: check, time, print the table
    python bench/copy.py --cpu      # no GPU: compile and assemble each variant
"""

from __future__ import annotations

import os
import sys

# bench/ holds copy.py, which would shadow the standard library's copy module:
# import the helpers as the package `bench`, from the repository root.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

import argparse

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.script import tirx as T

from bench._sass import report  # noqa: E402
from bench._timing import table  # noqa: E402

BLOCK = 256
#: (name, load opcode, store opcode)
VARIANTS = [
    ("plain", "ld.global.v4.b32", "st.global.v4.b32"),
    ("nc", "ld.global.nc.v4.b32", "st.global.v4.b32"),
    ("streaming", "ld.global.cs.v4.b32", "st.global.cs.v4.b32"),
    ("nc+L2::256B", "ld.global.nc.L2::256B.v4.b32", "st.global.v4.b32"),
    ("no_allocate", "ld.global.nc.L1::no_allocate.v4.b32", "st.global.L1::no_allocate.v4.b32"),
]


def make_copy(n: int, unroll: int, ctas: int, ld: str, st: str):
    """A copy kernel for ``n`` float32 (``n`` a multiple of 4 * 256 * unroll * ctas)."""
    per_iter = 4 * BLOCK * unroll * ctas
    if n % per_iter:
        raise ValueError(f"n={n} is not a multiple of {per_iter}")
    iters = n // per_iter

    @T.function
    def copy(A: T.Tensor((n,), "float32", align=16), B: T.Tensor((n,), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=ctas, block=BLOCK, min_blocks_per_sm=8))
        cta = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((unroll, 4), "float32")
        a = A.view(iters, ctas, unroll, BLOCK, 4)
        b = B.view(iters, ctas, unroll, BLOCK, 4)
        for i in T.serial(iters):
            T.cuda.tile.apply(T.ptx[ld], r, a.sub[i, cta, :, tid, :])
            T.cuda.tile.apply(T.ptx[st], b.sub[i, cta, :, tid, :], r)

    return copy


def make_copy_oneshot(n: int, ld: str = "ld.global.v4.b32", st: str = "st.global.v4.b32"):
    """A copy with one 16-byte vector per thread and a grid that covers the array:
    ``n / 1024`` CTAs of 256 threads, no loop (``n`` a multiple of 1024)."""
    per_cta = 4 * BLOCK
    if n % per_cta:
        raise ValueError(f"n={n} is not a multiple of {per_cta}")
    ctas = n // per_cta

    @T.function
    def copy(A: T.Tensor((n,), "float32", align=16), B: T.Tensor((n,), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=ctas, block=BLOCK))
        cta = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx[ld], r, A.view(ctas, BLOCK, 4).sub[cta, tid, :])
        T.cuda.tile.apply(T.ptx[st], B.view(ctas, BLOCK, 4).sub[cta, tid, :], r)

    return copy


def make_copy_persistent(n: int, unroll: int, ctas: int, ld: str, st: str):
    """A grid-stride copy: ``ctas`` CTAs (one wave) walk chunks of ``4 * 256 * unroll``
    floats; the last round is predicated, so any ``ctas`` works."""
    chunk = 4 * BLOCK * unroll
    if n % chunk:
        raise ValueError(f"n={n} is not a multiple of {chunk}")
    chunks = n // chunk
    rounds = (chunks + ctas - 1) // ctas

    @T.function
    def copy(A: T.Tensor((n,), "float32", align=16), B: T.Tensor((n,), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=ctas, block=BLOCK, min_blocks_per_sm=8))
        cta = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((unroll, 4), "float32")
        a = A.view(chunks, unroll, BLOCK, 4)
        b = B.view(chunks, unroll, BLOCK, 4)
        for i in T.serial(rounds):
            c = i * ctas + cta
            T.cuda.tile.apply(T.ptx[ld], r, a.sub[c, :, tid, :], pred=c < chunks)
            T.cuda.tile.apply(T.ptx[st], b.sub[c, :, tid, :], r, pred=c < chunks)

    return copy


def sweep(torch, runs: int) -> None:
    """Time a grid of launch shapes on 1 GiB (for choosing the defaults)."""
    n = 1 << 28
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    torch_ms = testing.do_bench(lambda: dst.copy_(src), runs=runs).median
    rows = []
    for name, ld, st in VARIANTS:
        for unroll, ctas in ((4, 1024), (8, 1024), (8, 2048), (16, 1024)):
            kernel = tvm_tirx.compile(make_copy(n, unroll, ctas, ld, st), target="cuda")
            ms = testing.do_bench(lambda: kernel(src, dst), runs=runs, warmup=20).median
            rows.append([name, unroll, ctas, f"{ms:.3f}", f"{torch_ms / ms:.2f}"])
    print(f"sweep, 1 GiB, torch copy_ {torch_ms:.3f} ms")
    print(table(["variant", "unroll", "ctas", "ms", "x torch"], rows))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile and assemble only")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--unroll", type=int, default=8)
    parser.add_argument("--ctas", type=int, default=2048, help="grid size (132 SMs x 8 CTAs = 1056 fit at once)")
    parser.add_argument("--sweep", action="store_true", help="time several launch shapes on 1 GiB")
    parser.add_argument("--sass", action="store_true", help="print ptxas register use and SASS counts")
    args = parser.parse_args(argv)
    if args.sweep and testing.has_cuda():
        import torch

        sweep(torch, args.runs)
        return 0
    sizes = {"1 GiB": 1 << 28, "4 GiB": 1 << 30}
    if args.cpu or not testing.has_cuda():
        for name, ld, st in VARIANTS:
            kernel = tvm_tirx.compile(make_copy(1 << 28, args.unroll, args.ctas, ld, st), target="cuda", arch="sm_90a")
            cubin = testing.assemble(kernel)
            print(f"copy[{name}]: {ld} / {st}, unroll {args.unroll}: assembled for sm_90a ({len(cubin)} bytes)")
            if args.sass:
                print(report(kernel))
        kernel = tvm_tirx.compile(make_copy_oneshot(1 << 28), target="cuda", arch="sm_90a")
        cubin = testing.assemble(kernel)
        print(f"copy[one-shot]: one ld/st.global.v4.b32 per thread, {(1 << 28) // (4 * BLOCK)} CTAs: "
              f"assembled for sm_90a ({len(cubin)} bytes)")
        return 0

    import torch

    rows = []
    for label, n in sizes.items():
        src = torch.randn(n, device="cuda")
        dst = torch.empty_like(src)
        torch_ms = testing.do_bench(lambda: dst.copy_(src), runs=args.runs).median
        gbs = lambda ms: 2 * n * 4 / (ms * 1e-3) / 1e9  # noqa: E731
        rows.append([label, "torch copy_", f"{torch_ms:.3f}", f"{gbs(torch_ms):.0f}", "1.00"])
        kernels = [("one-shot", make_copy_oneshot(n))]
        kernels += [(name, make_copy(n, args.unroll, args.ctas, ld, st)) for name, ld, st in VARIANTS]
        for name, func in kernels:
            kernel = tvm_tirx.compile(func, target="cuda")
            dst.zero_()
            kernel(src, dst)
            torch.cuda.synchronize()
            assert torch.equal(dst, src), f"copy[{name}] is wrong"
            ms = testing.do_bench(lambda: kernel(src, dst), runs=args.runs).median
            rows.append([label, f"tile {name}", f"{ms:.3f}", f"{gbs(ms):.0f}", f"{torch_ms / ms:.2f}"])
        del src, dst
        torch.cuda.empty_cache()
    if args.sass:
        print(report(kernel))
    print(f"device copy, fp32, median of {args.runs} runs (CUDA events), unroll {args.unroll}, {args.ctas} CTAs x {BLOCK}")
    print(table(["size", "kernel", "ms", "GB/s", "x torch"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
