"""ldmatrix / stmatrix / mma.sync / cp.async: lane maps, checks, assembly and GPU values."""

import os
import sys

import numpy as np
import pytest
from tvm.tirx.layout import Axis, S, TileLayout

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T

from matrix_kernels import c_frag, interleaved_ldmatrix, warp_mma

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bench.gemm_mma_sync import make_gemm  # noqa: E402

L = Axis.laneid


def test_warp_mma_counts_and_assembly():
    lowered = testing.lower(warp_mma)
    assert testing.count_ptx(lowered, "ldmatrix.*") == 2
    assert testing.count_ptx(lowered, "mma.*") == 1
    assert testing.count_ptx(lowered, "cp.async.ca.*") == 2
    if testing.has_nvcc():
        kernel = tvm_tirx.compile(warp_mma, target="cuda", arch="sm_90a")
        assert len(testing.assemble(kernel)) > 0
        src = kernel.cuda_source
        # lane 8m + r gives row (m, r): A's matrix m = h + 2q sits at row 8h + r, word 4q
        assert "(((int)threadIdx.x) & 15) * 8) + ((((int)threadIdx.x) >> 4) * 4)" in src


def test_interleaved_rows_and_gapped_registers():
    kernel = tvm_tirx.compile(interleaved_ldmatrix, target="cuda", arch="sm_90a")
    src = kernel.cuda_source
    call = next(l for l in src.splitlines() if "ldmatrix_sync_aligned_m8n8_x2_shared_b16(" in l and "__device__" not in l)
    assert "[0], " in call and "[2], " in call  # registers 0 and 2 of a 3-slot span
    # row (m, r) = shared row 2r + m: the address is ((lane & 7) * 2 + (lane >> 3) & 1) * 4 words
    assert "* 8)" in call and "* 4)" in call
    if testing.has_nvcc():
        assert len(testing.assemble(kernel)) > 0


def test_mma_wrong_lane_owner():
    wrong = TileLayout(S[(2, 8, 4, 2) : (2, 1 @ L, 8 @ L, 1)])  # g and t swapped

    @T.function
    def k(C: T.Tensor((16, 8), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        a = T.alloc_local((16, 8), "uint32", layout=TileLayout(S[(2, 8, 2, 4) : (1, 4 @ L, 2, 1 @ L)]))
        b = T.alloc_local((8, 8), "uint32", layout=TileLayout(S[(8, 2, 4) : (4 @ L, 1, 1 @ L)]))
        c = T.alloc_local((16, 8), "float32", layout=wrong)
        T.cuda.tile.apply(T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"], c, a, b, c, scope="warp")

    with pytest.raises(TileError) as info:
        testing.lower(k)
    msg = str(info.value)
    assert "owned by another thread" in msg and "D (operand 1)" in msg and "fragment map" in msg


def test_ldmatrix_misaligned_row():
    @T.function
    def k(Out: T.Tensor((1,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        sm = T.alloc_shared((8, 5), "uint32", align=16)
        r = T.alloc_local((1, 8, 4), "uint32", layout=TileLayout(S[(1, 8, 4) : (1, 4 @ L, 1 @ L)]))
        T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x1.shared.b16"], r, sm.sub[:, 1:5].view(1, 8, 4), scope="warp")

    with pytest.raises(TileError) as info:
        testing.lower(k)
    assert "not provably aligned" in str(info.value) and "src (operand 2)" in str(info.value)


def test_cp_async_cg_rejects_an_8_byte_chunk():
    with pytest.raises(TileError) as info:

        @T.function
        def k(A: T.Tensor((32, 4), "bfloat16", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            s = T.alloc_shared((32, 4), "bfloat16", align=16)
            T.cuda.tile.apply(T.ptx["cp.async.cg.shared.global"], s.sub[tid, :], A.sub[tid, :])

    msg = str(info.value)
    assert "chunk size not allowed" in msg and "16 bytes" in msg and "8 bytes" in msg


def test_cp_async_pred_becomes_src_size():
    @T.function
    def k(A: T.Tensor((32, 8), "bfloat16", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((32, 8), "bfloat16", align=16)
        T.cuda.tile.apply(T.ptx["cp.async.cg.shared.global"], s.sub[tid, :], A.sub[tid, :], pred=tid < 16)

    src = tvm_tirx.compile(k, target="cuda", arch="sm_90a").cuda_source
    helpers = [l for l in src.splitlines() if "cp.async.cg.shared.global" in l and "asm" in l]
    assert len(helpers) == 1
    assert "@p" not in helpers[0] and "[%1], 16, %2;" in helpers[0]  # src-size operand, no predication
    call = next(l for l in src.splitlines() if "cp_async_cg" in l and "__device__" not in l and "threadIdx" in l)
    assert "((((int)threadIdx.x) < 16) ? (uint)16 : (uint)0)" in call  # src-size = pred ? 16 : 0


def test_collective_at_thread_scope_is_an_error():
    @T.function
    def k(C: T.Tensor((16, 8), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        a = T.alloc_local((16, 8), "uint32", layout=TileLayout(S[(2, 8, 2, 4) : (1, 4 @ L, 2, 1 @ L)]))
        b = T.alloc_local((8, 8), "uint32", layout=TileLayout(S[(8, 2, 4) : (4 @ L, 1, 1 @ L)]))
        c = T.alloc_local((16, 8), "float32", layout=c_frag)
        T.cuda.tile.apply(T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"], c, a, b, c)

    with pytest.raises(TileError, match="warp-collective instruction at thread scope"):
        testing.lower(k)


def test_gemm_kernel_counts_and_assembly():
    from bench.gemm_mma_sync import KS, MR, NR

    func = make_gemm(256, 256, 64, stages=3)
    lowered = testing.lower(func)
    # the K loop runs 2 tiles + 2 pipeline-fill iterations; each (guarded) body
    # issues MR*NR*KS mma and (MR + NR)*KS ldmatrix per thread, and 2 x 2 cp.async
    iterations = 2 + 2
    assert testing.count_ptx(lowered, "mma.*") == iterations * MR * NR * KS
    assert testing.count_ptx(lowered, "ldmatrix.*") == iterations * (MR + NR) * KS
    assert testing.count_ptx(lowered, "cp.async.cg.*") == iterations * 2 * 2
    if testing.has_nvcc():
        kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
        assert len(testing.assemble(kernel)) > 0


@pytest.mark.gpu
def test_warp_mma_on_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(warp_mma, target="cuda")
    a = torch.randn(16, 16, device="cuda", dtype=torch.float16)
    b = torch.randn(8, 16, device="cuda", dtype=torch.float16)
    c = torch.full((16, 8), float("nan"), device="cuda")
    kernel(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a.float() @ b.float().t(), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_interleaved_ldmatrix_on_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(interleaved_ldmatrix, target="cuda")
    src = torch.randint(0, 2**31, (16, 4), device="cuda", dtype=torch.int64).to(torch.uint32)
    out = torch.zeros(2, 8, 4, device="cuda", dtype=torch.uint32)
    kernel(src, out)
    torch.cuda.synchronize()
    s = src.cpu().numpy()
    expect = np.stack([s[m::2] for m in range(2)])  # out[m, r] = shared row 2r + m
    np.testing.assert_array_equal(out.cpu().numpy(), expect)


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,stages,swizzle", [(256, 256, 256, 3, True), (128, 384, 512, 3, True), (256, 128, 96, 2, False)])
def test_gemm_on_gpu(torch_cuda, m, n, k, stages, swizzle):
    torch = torch_cuda
    kernel = tvm_tirx.compile(make_gemm(m, n, k, stages=stages, swizzle=swizzle), target="cuda")
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda")
    kernel(a, b, c)
    torch.cuda.synchronize()
    ref = a.float() @ b.float().t()
    assert (torch.linalg.norm(c - ref) / torch.linalg.norm(ref)).item() < 1e-2
