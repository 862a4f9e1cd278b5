"""16384 x 16384 fp32 transpose staged through shared memory, against x.t().contiguous().

A CTA of 32 x 8 threads moves one 32 x 32 tile: each thread loads 4 elements
of a tile column (rows ty, ty+8, ...; a warp reads one 128-byte row per
instruction), stores them to shared memory, and after a barrier reads the
transposed column and stores it.  The shared tile is padded to 33 columns, so
both the row writes and the column reads touch 32 different banks
(bank = word address mod 32; CUDA C++ Programming Guide, "Shared Memory").

    python bench/transpose.py          # on a GPU: check, time, print the table
    python bench/transpose.py --cpu    # no GPU: compile and assemble
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

from bench._timing import table  # noqa: E402

N = 16384
TILE = 32
ROWS = 8  # threads along y; each thread moves TILE / ROWS elements


def make_transpose(n: int = N, pad: int = 1):
    """Transpose of an ``n x n`` float32 matrix; ``pad`` extra shared columns per row."""
    tiles = n // TILE
    per_thread = TILE // ROWS

    @T.function
    def transpose(A: T.Tensor((n, n), "float32", align=16), B: T.Tensor((n, n), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(tiles, tiles), block=(TILE, ROWS)))
        tx = T.cuda.thread_idx("x")
        ty = T.cuda.thread_idx("y")
        bx = T.cuda.block_idx("x")
        by = T.cuda.block_idx("y")
        smem = T.alloc_shared((TILE, TILE + pad), "float32", align=16)
        tile = smem.sub[:, 0:TILE]
        r = T.alloc_local((per_thread, 1), "float32")
        a = A.view(tiles, TILE, tiles, TILE).sub[by, :, bx, :]
        b = B.view(tiles, TILE, tiles, TILE).sub[bx, :, by, :]
        T.cuda.tile.apply(T.ptx["ld.global.f32"], r, a.sub[ty::ROWS, tx : tx + 1])
        T.cuda.tile.apply(T.ptx["st.shared.f32"], tile.sub[ty::ROWS, tx : tx + 1], r)
        T.cuda.cta_sync()
        T.cuda.tile.apply(T.ptx["ld.shared.f32"], r, tile.sub[tx, :].sub[ty::ROWS].view(per_thread, 1))
        T.cuda.tile.apply(T.ptx["st.global.f32"], b.sub[ty::ROWS, tx : tx + 1], r)

    return transpose


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile and assemble only")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    if args.cpu or not testing.has_cuda():
        kernel = tvm_tirx.compile(make_transpose(), target="cuda", arch="sm_90a")
        print(f"transpose {N}x{N}: assembled for sm_90a ({len(testing.assemble(kernel))} bytes)")
        return 0

    import torch

    from bench.copy import make_copy  # the copy kernel, for the bandwidth ceiling

    x = torch.randn(N, N, device="cuda")
    y = torch.empty_like(x)
    kernel = tvm_tirx.compile(make_transpose(), target="cuda")
    kernel(x, y)
    torch.cuda.synchronize()
    assert torch.equal(y, x.t()), "transpose is wrong"
    gbs = lambda ms: 2 * N * N * 4 / (ms * 1e-3) / 1e9  # noqa: E731
    torch_ms = testing.do_bench(lambda: x.t().contiguous(), runs=args.runs).median
    tile_ms = testing.do_bench(lambda: kernel(x, y), runs=args.runs).median
    flat_x, flat_y = x.view(-1), y.view(-1)
    copy_kernel = tvm_tirx.compile(make_copy(N * N, 4, 1024, "ld.global.v4.b32", "st.global.v4.b32"), target="cuda")
    copy_ms = testing.do_bench(lambda: copy_kernel(flat_x, flat_y), runs=args.runs).median
    rows = [
        ["torch x.t().contiguous()", f"{torch_ms:.3f}", f"{gbs(torch_ms):.0f}", "1.00", f"{copy_ms / torch_ms:.2f}"],
        ["tile transpose (padded smem)", f"{tile_ms:.3f}", f"{gbs(tile_ms):.0f}", f"{torch_ms / tile_ms:.2f}", f"{copy_ms / tile_ms:.2f}"],
        ["tile copy (ceiling)", f"{copy_ms:.3f}", f"{gbs(copy_ms):.0f}", f"{torch_ms / copy_ms:.2f}", "1.00"],
    ]
    print(f"{N}x{N} fp32 transpose, median of {args.runs} runs (CUDA events)")
    print(table(["kernel", "ms", "GB/s", "x torch", "x copy"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
