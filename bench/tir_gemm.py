"""A hand-scheduled TIR GEMM tensorized with our fragment intrinsics or apache-tvm's.

``C (M, N) f32 = A (M, K) f16 @ B (N, K)^T`` as a plain ``s_tir`` PrimFunc, scheduled
the usual TVM way (16 x 16 blockize, 128 x 128 CTA tiles, 8 warps of 64 x 32,
shared caches padded by ``storage_align``, ``"warp"`` fragment caches laid out
with the 16 x 16 fragment map) and tensorized with one of two intrinsic sets:

* ``OURS``: :mod:`tvm_tirx.schedule.tensor_intrin` (checked tile calls, built with
  ``tvm_tirx.compile``);
* ``STOCK``: apache-tvm's ``mma_*`` intrinsics (raw PTX, built with ``tvm.compile``).

apache-tvm 0.27's stock ldmatrix intrinsics are float16 only, so the comparison is
f16; ours also runs bf16.  Peers in the same run: Triton (``tl.dot``, f32 out) and
``torch.mm`` (cuBLAS, f16 out).  Every kernel is checked against a float64
product on fresh random inputs, its output pre-filled with NaN.

    python bench/tir_gemm.py          # GPU: check both against torch, time them
    python bench/tir_gemm.py --cpu    # no GPU: build both, assemble ours
"""

from __future__ import annotations

import argparse
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

import tvm  # noqa: E402
from tvm import s_tir  # noqa: E402
from tvm.s_tir.tensor_intrin import cuda as stock  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

import tvm_tirx.schedule.tensor_intrin  # noqa: E402,F401
from tvm_tirx.schedule.tensor_intrin._fragments import fragment_index  # noqa: E402

OURS_BY_DTYPE = {
    dtype: dict(ldA=f"tvm_tirx.ldmatrix_x4_{short}", ldB=f"tvm_tirx.ldmatrix_x4_{short}",
                mma=f"tvm_tirx.mma_m16n16k16_f32_{short}", fill="tvm_tirx.mma_fill_16x16_f32",
                store="tvm_tirx.mma_store_16x16_f32_global")
    for dtype, short in (("float16", "f16"), ("bfloat16", "bf16"))
}  # fmt: skip
OURS = OURS_BY_DTYPE["float16"]
#: m16n8k16 blocks: B as 8 x 16 fragments (``ldmatrix.x2``), C as 16 x 8
OURS_N8 = dict(ldA="tvm_tirx.ldmatrix_x4_f16", ldB="tvm_tirx.ldmatrix_x2_f16", mma="tvm_tirx.mma_m16n8k16_f32_f16",
               fill="tvm_tirx.mma_fill_16x8_f32", store="tvm_tirx.mma_store_16x8_f32_global")  # fmt: skip
STOCK = dict(ldA=stock.LDMATRIX_f16_A_INTRIN, ldB=stock.LDMATRIX_f16_B_TRANS_INTRIN, mma=stock.MMA_f16f16f32_TRANS_B_INTRIN,
             fill=stock.MMA_fill_16x16_f32_INTRIN, store=stock.MMA_store_16x16_f32_global_INTRIN)  # fmt: skip


def matmul(M, N, K, dtype="float16"):
    """``C (M, N) f32 = A (M, K) @ B (N, K)^T`` as one ``s_tir`` block, ``dtype`` inputs."""

    @T.prim_func(s_tir=True)
    def gemm(A: T.Buffer((M, K), dtype), B: T.Buffer((N, K), dtype), C: T.Buffer((M, N), "float32")):
        for i, j, k in T.grid(M, N, K):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vj, vk])

    return gemm


def _fetch_to_shared(sch, block, index, k_loop, warps):
    """Stage operand ``index`` of ``block`` in shared memory at ``k_loop``: one
    16-byte vector per thread, rows padded by 8 elements (``storage_align``)."""
    read = sch.cache_read(block, index, "shared")
    sch.compute_at(read, k_loop)
    fused = sch.fuse(*sch.get_loops(read)[-2:])
    _, ty, tx, vec = sch.split(fused, factors=[None, warps, 32, 8])
    sch.bind(tx, "threadIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.vectorize(vec)
    sch.storage_align(read, 0, axis=-2, factor=32, offset=8)


def _fragment_loops(sch, block, rows, cols, buffer):
    """Split ``block``'s last two loops into ``rows x cols`` fragments, lay its
    ``"warp"`` buffer (``buffer``: ``("read", 0)`` or ``("write", 0)``) out as
    ``(i / rows, j / cols, lane, slot)`` with the fragment map, and return the
    fragment's first inner loop."""
    i, j = sch.get_loops(block)[-2:]
    i0, i1 = sch.split(i, factors=[None, rows])
    j0, j1 = sch.split(j, factors=[None, cols])
    sch.reorder(i0, j0, i1, j1)
    index = fragment_index(rows, cols)
    place = lambda i, j: (i // rows, j // cols, *index(i % rows, j % cols))  # noqa: E731
    sch.transform_layout(block, buffer, place)
    return i1


def schedule(func, names, *, n=16, i_factors=(None, 1, 2, 4, 1), j_factors=(1, None, 4, 2, 1), k_factors=(None, 2, 1)):
    """The hand schedule of ``func`` (:func:`matmul`) tensorized with ``names``
    (``OURS``, ``OURS_N8`` or ``STOCK``): 16 x ``n`` x 16 blockized updates
    (``n`` 16 or 8), tiles of ``i_factors`` x ``j_factors`` such blocks (CTA:
    blockIdx x, y; warps: threadIdx.y), K steps of ``k_factors``; A and B
    staged in padded shared memory, fragments in ``"warp"`` caches laid out
    with the fragment map (A 16 x 16, B ``n`` x 16, C 16 x ``n``), C
    accumulated in a ``"warp"`` cache and stored from it."""
    sch = s_tir.Schedule(func)
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    i, i_tc = sch.split(i, factors=[None, 16])
    j, j_tc = sch.split(j, factors=[None, n])
    k, k_tc = sch.split(k, factors=[None, 16])
    sch.reorder(i, j, k, i_tc, j_tc, k_tc)
    block_outer, block_inner = sch.blockize(i_tc), block
    warps = i_factors[2] * j_factors[2]
    i0, i1, i2, i3, i4 = sch.split(i, factors=list(i_factors))
    j0, j1, j2, j3, j4 = sch.split(j, factors=list(j_factors))
    k0, k1, k2 = sch.split(k, list(k_factors))
    sch.reorder(i0, j0, i1, j1, j2, i2, k0, k1, i3, j3, k2, i4, j4)
    sch.bind(sch.fuse(i0, j0), "blockIdx.x")
    sch.bind(sch.fuse(i1, j1), "blockIdx.y")
    sch.bind(sch.fuse(j2, i2), "threadIdx.y")
    _fetch_to_shared(sch, block_outer, 0, k0, warps)
    _fetch_to_shared(sch, block_outer, 1, k0, warps)
    a_warp = sch.cache_read(block_outer, 0, "warp")
    b_warp = sch.cache_read(block_outer, 1, "warp")
    sch.compute_at(a_warp, k1)
    sch.compute_at(b_warp, k1)
    c_warp = sch.cache_write(block_outer, 0, "warp")
    sch.reverse_compute_at(c_warp, sch.get_loops(block_outer)[2])
    _fragment_loops(sch, c_warp, 16, n, ("read", 0))
    sch.decompose_reduction(block_outer, sch.get_loops(block_outer)[3])
    loop_a = _fragment_loops(sch, a_warp, 16, 16, ("write", 0))
    loop_b = _fragment_loops(sch, b_warp, n, 16, ("write", 0))
    sch.tensorize(loop_a, names["ldA"])
    sch.tensorize(loop_b, names["ldB"])
    sch.tensorize(sch.get_loops(block_inner)[-3], names["mma"])
    sch.tensorize(sch.get_loops(sch.get_sblock("C_init"))[-2], names["fill"])
    sch.tensorize(sch.get_loops(c_warp)[-2], names["store"])
    return sch


def build(m, n, k, which, dtype="float16"):
    """The kernel for ``which`` (``"ours"``: tvm_tirx.compile; ``"stock"``: tvm.compile)."""
    import tvm_tirx  # pylint: disable=import-outside-toplevel

    if which == "ours":
        return tvm_tirx.compile(schedule(matmul(m, n, k, dtype), OURS_BY_DTYPE[dtype]).mod, target="cuda")
    return tvm.compile(schedule(matmul(m, n, k, dtype), STOCK).mod, target="cuda")


def _rows(size, runs):
    """One table row per kernel: ours f16 and bf16, apache-tvm's f16, Triton, torch."""
    import torch  # pylint: disable=import-outside-toplevel

    from tvm_tirx import testing  # pylint: disable=import-outside-toplevel

    flops = 2 * size**3
    rows = []
    for which, dtype in (("ours", "float16"), ("stock", "float16"), ("ours", "bfloat16")):
        a = torch.randn(size, size, device="cuda").to(getattr(torch, dtype))
        b = torch.randn(size, size, device="cuda").to(getattr(torch, dtype))
        ref = a.double() @ b.double().T
        kernel = build(size, size, size, which, dtype)
        c = torch.full((size, size), float("nan"), device="cuda")
        kernel(a, b, c)
        torch.cuda.synchronize()
        err = (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()
        assert err < 1e-5, f"{which} {dtype}: relative error {err:.2e}"
        ms = testing.do_bench(lambda: kernel(a, b, c), runs=runs).median
        intrinsics = "tvm_tirx" if which == "ours" else "apache-tvm"
        rows.append((f"TIR schedule + {intrinsics} intrinsics", dtype, f"{ms:.3f}", f"{flops / ms / 1e9:.0f}", f"{err:.1e}"))
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    c = torch.empty(size, size, device="cuda")
    try:
        from bench._triton_matmul import matmul_tn  # pylint: disable=import-outside-toplevel

        matmul_tn(a, b, c)
        ms = testing.do_bench(lambda: matmul_tn(a, b, c), runs=runs).median
        rows.append(("Triton tl.dot, f32 out", "float16", f"{ms:.3f}", f"{flops / ms / 1e9:.0f}", "-"))
    except ImportError:
        pass
    ms = testing.do_bench(lambda: torch.mm(a, b.T), runs=runs).median
    rows.append(("torch.mm (cuBLAS), f16 out", "float16", f"{ms:.3f}", f"{flops / ms / 1e9:.0f}", "-"))
    return rows


def main(argv=None) -> int:
    """Run the benchmark (``--cpu``: build both at 1024^3 and assemble ours)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    import tvm_tirx  # pylint: disable=import-outside-toplevel
    from tvm_tirx import testing  # pylint: disable=import-outside-toplevel

    if args.cpu:
        for dtype in OURS_BY_DTYPE:
            kernel = tvm_tirx.compile(schedule(matmul(1024, 1024, 1024, dtype), OURS_BY_DTYPE[dtype]).mod,
                                      target="cuda", arch="sm_90a")  # fmt: skip
            testing.assemble(kernel)
        print("tir_gemm: ours (f16, bf16) assembled for sm_90a")
        return 0
    from bench._timing import table  # pylint: disable=import-outside-toplevel

    print(f"C (f32) = A @ B^T, {args.size}^3, median of {args.runs} runs")
    print(table(["kernel", "inputs", "ms", "TFLOP/s", "rel. err"], _rows(args.size, args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
