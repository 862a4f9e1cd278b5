"""16384 x 16384 fp32 transpose staged through shared memory, against x.t().contiguous().

A CTA of 32 x 8 threads moves one 32 x 32 tile: each thread loads 4 elements
of a tile column (rows ty, ty+8, ...; a warp reads one 128-byte row per
instruction), stores them to shared memory, and after a barrier reads the
transposed column and stores it.  The shared tile is padded to 33 columns, so
both the row writes and the column reads touch 32 different banks
(bank = word address mod 32; CUDA C++ Programming Guide, "Shared Memory").

The TMA variant (:func:`make_tma_transpose`) loads each 32 x 32 tile with one TMA into a
128-byte-swizzled shared tile, transposes it into a second swizzled tile with the threads,
and stores that with one TMA.  With the swizzle, 16-byte chunk ``j`` of row ``r`` sits at
chunk ``j ^ (r % 8)``; lane ``l`` of warp ``w`` moves element ``(l, 4w + (l // 8 + q) % 4)``
at step ``q``, so a warp's 32 reads hit 32 different banks (the writes at most 2 per bank).

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
from tvm_tirx.tile.families.tma import swizzled_layout

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


TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
TMA_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"


def make_tma_transpose(n: int = N):
    """Transpose of an ``n x n`` float32 matrix, TMA in and out through 128-byte-swizzled tiles."""
    tiles = n // TILE
    layout = swizzled_layout((TILE, TILE), "float32", 3)
    tile_bytes = TILE * TILE * 4

    @T.function
    def tma_transpose(A: T.Tensor((n, n), "float32", align=16), B: T.Tensor((n, n), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(tiles, tiles), block=256, dynamic_smem_bytes=2 * tile_bytes + 64))
        src = T.alloc_shared((TILE, TILE), "float32", scope="shared.dyn", align=1024, layout=layout)
        dst = T.alloc_shared((TILE, TILE), "float32", scope="shared.dyn", align=1024, layout=layout)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        bx = T.cuda.block_idx("x")
        by = T.cuda.block_idx("y")
        if tid == 0:
            T.ptx["mbarrier.init.shared::cta.b64"](bar.ptr_to([0]), T.uint32(1))
            T.ptx["fence.mbarrier_init.release.cluster"]()
        T.cuda.cta_sync()
        if tid == 0:
            T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bar.ptr_to([0]), T.uint32(tile_bytes))
            T.cuda.tile.apply(T.ptx[TMA_LOAD], src, A, mbar=bar, coords=(by * TILE, bx * TILE), swizzle=3)
        done = T.alloc_local((1,), "uint32")
        done[0] = T.uint32(0)
        while done[0] == T.uint32(0):
            T.ptx["mbarrier.try_wait.parity.shared::cta.b64"](done[0], bar.ptr_to([0]), T.uint32(0))
        lane = tid % 32
        w = tid // 32
        for q in T.unroll(4):
            dst[4 * w + (lane // 8 + q) % 4, lane] = src[lane, 4 * w + (lane // 8 + q) % 4]
        T.ptx["fence.proxy.async.shared::cta"]()  # thread writes -> visible to the TMA store
        T.cuda.cta_sync()
        if tid == 0:
            T.cuda.tile.apply(T.ptx[TMA_STORE], B, dst, coords=(bx * TILE, by * TILE), swizzle=3)
            T.ptx["cp.async.bulk.commit_group"]()
            T.ptx["cp.async.bulk.wait_group.read"](0)

    return tma_transpose


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile and assemble only")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    if args.cpu or not testing.has_cuda():
        for name, make in (("transpose", make_transpose), ("TMA transpose", make_tma_transpose)):
            kernel = tvm_tirx.compile(make(), target="cuda", arch="sm_90a")
            print(f"{name} {N}x{N}: assembled for sm_90a ({len(testing.assemble(kernel))} bytes)")
        return 0

    import torch

    from bench.copy import make_copy  # the copy kernel, for the bandwidth ceiling

    x = torch.randn(N, N, device="cuda")
    y = torch.empty_like(x)
    kernel = tvm_tirx.compile(make_transpose(), target="cuda")
    kernel(x, y)
    torch.cuda.synchronize()
    assert torch.equal(y, x.t()), "transpose is wrong"
    tma_kernel = tvm_tirx.compile(make_tma_transpose(), target="cuda")
    y.zero_()
    tma_kernel(x, y)
    torch.cuda.synchronize()
    assert torch.equal(y, x.t()), "TMA transpose is wrong"
    gbs = lambda ms: 2 * N * N * 4 / (ms * 1e-3) / 1e9  # noqa: E731
    torch_ms = testing.do_bench(lambda: x.t().contiguous(), runs=args.runs).median
    tile_ms = testing.do_bench(lambda: kernel(x, y), runs=args.runs).median
    tma_ms = testing.do_bench(lambda: tma_kernel(x, y), runs=args.runs).median
    flat_x, flat_y = x.view(-1), y.view(-1)
    copy_kernel = tvm_tirx.compile(make_copy(N * N, 4, 1024, "ld.global.v4.b32", "st.global.v4.b32"), target="cuda")
    copy_ms = testing.do_bench(lambda: copy_kernel(flat_x, flat_y), runs=args.runs).median
    rows = [
        ["torch x.t().contiguous()", f"{torch_ms:.3f}", f"{gbs(torch_ms):.0f}", "1.00", f"{copy_ms / torch_ms:.2f}"],
        ["tile transpose (padded smem)", f"{tile_ms:.3f}", f"{gbs(tile_ms):.0f}", f"{torch_ms / tile_ms:.2f}", f"{copy_ms / tile_ms:.2f}"],
        ["tile transpose (TMA, 128B swizzle)", f"{tma_ms:.3f}", f"{gbs(tma_ms):.0f}", f"{torch_ms / tma_ms:.2f}", f"{copy_ms / tma_ms:.2f}"],
        ["tile copy (ceiling)", f"{copy_ms:.3f}", f"{gbs(copy_ms):.0f}", f"{torch_ms / copy_ms:.2f}", "1.00"],
    ]
    print(f"{N}x{N} fp32 transpose, median of {args.runs} runs (CUDA events)")
    print(table(["kernel", "ms", "GB/s", "x torch", "x copy"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
