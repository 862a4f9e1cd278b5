"""A hand-scheduled TIR GEMM tensorized with our fragment intrinsics or apache-tvm's.

``C (M, N) f32 = A (M, K) f16 @ B (N, K)^T`` as a plain ``s_tir`` PrimFunc, scheduled
the usual TVM way (16 x 16 blockize, 128 x 128 CTA tiles, 8 warps of 64 x 32,
shared caches padded by ``storage_align``, ``"warp"`` fragment caches laid out
with the 16 x 16 fragment map) and tensorized with one of two intrinsic sets:

* ``OURS``: :mod:`tvm_tirx.tensor_intrin` (checked tile calls, built with
  ``tvm_tirx.compile``);
* ``STOCK``: apache-tvm's ``mma_*`` intrinsics (raw PTX, built with ``tvm.compile``).

apache-tvm 0.27's stock ldmatrix intrinsics are float16 only, so the comparison is f16.

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
from tvm.s_tir.tensor_intrin.cuda import shared_16x16_to_ldmatrix_32x8_layout as imap  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

import tvm_tirx.tensor_intrin  # noqa: E402,F401

OURS = dict(ldA="tvm_tirx.ldmatrix_x4_f16", ldB="tvm_tirx.ldmatrix_x4_f16", mma="tvm_tirx.mma_m16n16k16_f32_f16",
            fill="tvm_tirx.mma_fill_16x16_f32", store="tvm_tirx.mma_store_16x16_f32_global")  # fmt: skip
STOCK = dict(ldA=stock.LDMATRIX_f16_A_INTRIN, ldB=stock.LDMATRIX_f16_B_TRANS_INTRIN, mma=stock.MMA_f16f16f32_TRANS_B_INTRIN,
             fill=stock.MMA_fill_16x16_f32_INTRIN, store=stock.MMA_store_16x16_f32_global_INTRIN)  # fmt: skip


def matmul(M, N, K, dtype="float16"):
    @T.prim_func(s_tir=True)
    def gemm(A: T.Buffer((M, K), dtype), B: T.Buffer((N, K), dtype), C: T.Buffer((M, N), "float32")):
        for i, j, k in T.grid(M, N, K):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vj, vk])
    return gemm

def schedule(func, names, *, i_factors=(None, 1, 2, 4, 1), j_factors=(1, None, 4, 2, 1), k_factors=(None, 2, 1)):
    sch = s_tir.Schedule(func)
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    i, i_tc = sch.split(i, factors=[None, 16])
    j, j_tc = sch.split(j, factors=[None, 16])
    k, k_tc = sch.split(k, factors=[None, 16])
    sch.reorder(i, j, k, i_tc, j_tc, k_tc)
    block_inner = sch.blockize(i_tc)
    block_outer, block_inner = block_inner, block
    num_ty = i_factors[2] * j_factors[2]
    i0, i1, i2, i3, i4 = sch.split(i, factors=list(i_factors))
    j0, j1, j2, j3, j4 = sch.split(j, factors=list(j_factors))
    k0, k1, k2 = sch.split(k, list(k_factors))
    sch.reorder(i0, j0, i1, j1, j2, i2, k0, k1, i3, j3, k2, i4, j4)
    sch.bind(sch.fuse(i0, j0), "blockIdx.x")
    sch.bind(sch.fuse(i1, j1), "blockIdx.y")
    sch.bind(sch.fuse(j2, i2), "threadIdx.y")
    def fetch_to_shared(idx):
        block_read = sch.cache_read(block_outer, idx, "shared")
        sch.compute_at(block_read, k0)
        fused = sch.fuse(*sch.get_loops(block_read)[-2:])
        _, f1, f2, f3 = sch.split(fused, factors=[None, num_ty, 32, 8])
        sch.bind(f2, "threadIdx.x")
        sch.bind(f1, "threadIdx.y")
        sch.vectorize(f3)
        sch.storage_align(block_read, 0, axis=-2, factor=32, offset=8)
    fetch_to_shared(0); fetch_to_shared(1)
    A_warp = sch.cache_read(block_outer, 0, "warp")
    B_warp = sch.cache_read(block_outer, 1, "warp")
    sch.compute_at(A_warp, k1)
    sch.compute_at(B_warp, k1)
    C_warp = sch.cache_write(block_outer, 0, "warp")
    sch.reverse_compute_at(C_warp, sch.get_loops(block_outer)[2])
    ii, jj = sch.get_loops(C_warp)[-2:]
    io, ii = sch.split(ii, factors=[None, 16])
    jo, ji = sch.split(jj, factors=[None, 16])
    sch.reorder(io, jo, ii, ji)
    sch.decompose_reduction(block_outer, sch.get_loops(block_outer)[3])
    block_init_c = sch.get_sblock("C_init")
    def frag(block_read):
        i, j = sch.get_loops(block_read)[-2:]
        i0, i1 = sch.split(i, factors=[None, 16])
        j0, j1 = sch.split(j, factors=[None, 16])
        sch.reorder(i0, j0, i1, j1)
        return i1
    loop_a = frag(A_warp); loop_b = frag(B_warp)
    m = lambda i, j: (i // 16, j // 16, *imap(i % 16, j % 16))
    sch.transform_layout(A_warp, ("write", 0), m)
    sch.transform_layout(B_warp, ("write", 0), m)
    sch.transform_layout(C_warp, ("read", 0), m)
    sch.tensorize(loop_a, names["ldA"])
    sch.tensorize(loop_b, names["ldB"])
    sch.tensorize(sch.get_loops(block_inner)[-3], names["mma"])
    sch.tensorize(sch.get_loops(block_init_c)[-2], names["fill"])
    if names.get("store"):
        sch.tensorize(sch.get_loops(C_warp)[-2], names["store"])
    return sch


def build(m, n, k, which):
    """The kernel for ``which`` (``"ours"`` or ``"stock"``)."""
    import tvm_tirx  # pylint: disable=import-outside-toplevel

    if which == "ours":
        return tvm_tirx.compile(schedule(matmul(m, n, k), OURS).mod, target="cuda")
    return tvm.compile(schedule(matmul(m, n, k), STOCK).mod, target="cuda")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args(argv)
    import tvm_tirx  # pylint: disable=import-outside-toplevel
    from tvm_tirx import testing  # pylint: disable=import-outside-toplevel

    if args.cpu:
        kernel = tvm_tirx.compile(schedule(matmul(1024, 1024, 1024), OURS).mod, target="cuda", arch="sm_90a")
        testing.assemble(kernel)
        print("tir_gemm: ours assembled for sm_90a")
        return 0
    import torch  # pylint: disable=import-outside-toplevel

    s = args.size
    a = torch.randn(s, s, device="cuda", dtype=torch.float16)
    b = torch.randn(s, s, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float().T
    rows = []
    for which in ("ours", "stock"):
        kernel = build(s, s, s, which)
        c = torch.full((s, s), float("nan"), device="cuda")
        kernel(a, b, c)
        torch.cuda.synchronize()
        err = ((c - ref).abs().max() / ref.abs().max()).item()
        assert err < 1e-4, f"{which}: relative error {err:.2e}"
        ms = testing.do_bench(lambda: kernel(a, b, c)).median
        rows.append((which, f"{ms:.3f}", f"{2 * s**3 / ms / 1e9:.0f}", f"{err:.1e}"))
    ms = testing.do_bench(lambda: a @ b.T).median
    rows.append(("torch f16 out", f"{ms:.3f}", f"{2 * s**3 / ms / 1e9:.0f}", "-"))
    from bench._timing import table  # pylint: disable=import-outside-toplevel

    print(table(["kernel", "ms", "TFLOP/s", "max rel. err"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
