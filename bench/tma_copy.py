"""Device-to-device copy through a TMA pipeline, against torch.Tensor.copy_ (1 and 4 GiB fp32).

The array is viewed as rows of ``COLS`` float32; a tile is ``box_rows`` rows.  Each CTA
(one per SM) walks the tiles ``t = blockIdx.x + k * gridDim.x`` through ``stages`` shared
buffers, with two warps and two mbarriers per stage:

* the producer (one thread of warp 0) waits until buffer ``s`` is ``empty``, arms ``full[s]``
  with the tile's bytes (``mbarrier.arrive.expect_tx``) and issues the TMA load of the tile
  into it, completing on ``full[s]``;
* the consumer (one thread of warp 1) waits until ``full[s]`` completes, issues the TMA
  store of buffer ``s`` (``.bulk_group``), and once the store before it has read its
  buffer (``cp.async.bulk.wait_group.read 1``) marks that buffer ``empty``.

The phase of stage ``s`` at iteration ``k`` is ``(k // stages) % 2``; the producer waits for
the opposite parity, which a fresh barrier reports complete, so the first round starts at
once.  The barriers are raw ``T.ptx["mbarrier..."]`` calls for now.

    python bench/tma_copy.py          # on a GPU: check, time, print the table
    python bench/tma_copy.py --cpu    # no GPU: compile and assemble
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

COLS = 256  # the longest box row (256 elements)
LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
STORE = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"
GIB = 1 << 30


def make_tma_copy(n: int, box_rows: int = 32, stages: int = 4, ctas: int = 132, l2_promotion: int = 3):
    """A TMA copy kernel for ``n`` float32 viewed as ``(n // COLS, COLS)``.

    ``n // COLS`` must be a multiple of ``box_rows``; shared memory is
    ``stages * box_rows * COLS * 4`` bytes plus the barriers.
    """
    rows = n // COLS
    if n % COLS or rows % box_rows:
        raise ValueError(f"n={n} is not a multiple of {COLS * box_rows}")
    tiles = rows // box_rows
    rounds = (tiles + ctas - 1) // ctas
    tile_bytes = box_rows * COLS * 4
    smem = stages * tile_bytes + 16 * stages + 1024

    @T.function
    def tma_copy(A: T.Tensor((rows, COLS), "float32", align=16), B: T.Tensor((rows, COLS), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=ctas, block=64, dynamic_smem_bytes=smem))
        buf = T.alloc_shared((stages, box_rows, COLS), "float32", scope="shared.dyn", align=1024)
        full = T.alloc_shared((stages,), "uint64", scope="shared.dyn", align=8)
        empty = T.alloc_shared((stages,), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        bx = T.cuda.block_idx("x")
        if tid == 0:
            for s in T.unroll(stages):
                T.ptx["mbarrier.init.shared::cta.b64"](full.ptr_to([s]), T.uint32(1))
                T.ptx["mbarrier.init.shared::cta.b64"](empty.ptr_to([s]), T.uint32(1))
            T.ptx["fence.mbarrier_init.release.cluster"]()
        T.cuda.cta_sync()
        flag = T.alloc_local((1,), "uint32")
        if tid == 0:  # producer
            for k in T.serial(rounds):
                t = bx + k * ctas
                s = k % stages
                if t < tiles:
                    flag[0] = T.uint32(0)
                    while flag[0] == T.uint32(0):
                        T.ptx["mbarrier.try_wait.parity.shared::cta.b64"](
                            flag[0], empty.ptr_to([s]), T.Cast("uint32", (k // stages + 1) % 2)
                        )
                    T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](full.ptr_to([s]), T.uint32(tile_bytes))
                    T.cuda.tile.apply(
                        T.ptx[LOAD], buf.sub[s], A, mbar=full.sub[s : s + 1], coords=(t * box_rows, 0),
                        l2_promotion=l2_promotion,
                    )  # fmt: skip
        if tid == 32:  # consumer
            for k in T.serial(rounds):
                t = bx + k * ctas
                s = k % stages
                if t < tiles:
                    flag[0] = T.uint32(0)
                    while flag[0] == T.uint32(0):
                        T.ptx["mbarrier.try_wait.parity.shared::cta.b64"](
                            flag[0], full.ptr_to([s]), T.Cast("uint32", (k // stages) % 2)
                        )
                    T.cuda.tile.apply(T.ptx[STORE], B, buf.sub[s], coords=(t * box_rows, 0), l2_promotion=l2_promotion)
                    T.ptx["cp.async.bulk.commit_group"]()
                    # the store issued one iteration earlier has read its buffer: free it
                    T.ptx["cp.async.bulk.wait_group.read"](1)
                    if k > 0:
                        T.ptx["mbarrier.arrive.shared::cta.b64"](empty.ptr_to([(k + stages - 1) % stages]))
            T.ptx["cp.async.bulk.wait_group"](0)

    return tma_copy


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile and assemble only")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--box-rows", type=int, default=32)
    parser.add_argument("--ctas", type=int, default=132, help="CTAs (one per SM of an H200)")
    args = parser.parse_args(argv)
    sizes = (1, 4)
    make = lambda gib: make_tma_copy(gib * GIB // 4, args.box_rows, args.stages, args.ctas)  # noqa: E731
    if args.cpu or not testing.has_cuda():
        for gib in sizes:
            kernel = tvm_tirx.compile(make(gib), target="cuda", arch="sm_90a")
            print(f"tma copy {gib} GiB: assembled for sm_90a ({len(testing.assemble(kernel))} bytes)")
        return 0

    import torch

    rows = []
    for gib in sizes:
        n = gib * GIB // 4
        x = torch.randn(n // COLS, COLS, device="cuda")
        y = torch.empty_like(x)
        kernel = tvm_tirx.compile(make(gib), target="cuda")
        kernel(x, y)
        torch.cuda.synchronize()
        assert torch.equal(x, y), "the TMA copy is wrong"
        gbs = lambda ms: 2 * n * 4 / (ms * 1e-3) / 1e9  # noqa: E731, B023
        torch_ms = testing.do_bench(lambda: y.copy_(x), runs=args.runs).median  # noqa: B023
        tma_ms = testing.do_bench(lambda: kernel(x, y), runs=args.runs).median  # noqa: B023
        rows.append([f"{gib} GiB", f"{torch_ms:.3f}", f"{gbs(torch_ms):.0f}", f"{tma_ms:.3f}", f"{gbs(tma_ms):.0f}", f"{torch_ms / tma_ms:.3f}"])
        del x, y
    print(f"fp32 copy, TMA pipeline ({args.stages} stages, {args.box_rows}x{COLS} boxes, {args.ctas} CTAs), median of {args.runs} runs (CUDA events)")
    print(table(["size", "copy_ ms", "copy_ GB/s", "TMA ms", "TMA GB/s", "x copy_"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
