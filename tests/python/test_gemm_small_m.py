"""The small-M (decode) GEMM (``kernels/gemm/small_m.py``) and the planner that picks it.

CPU: the planner's choice per shape (small-M up to 64 rows, split counts from the wave
model, the tile kernel past 64 rows); the options the kernel refuses; the fragment map of
the epilogue covers each element of a tile once; the kernel compiles and assembles for
every block_m, with and without splits, and issues the split-K reduction only with splits
(one slab store per accumulator, one read-back per accumulator and split, the slabs
added in order, no atomics but the count).
GPU (marker ``gpu``): against torch in fp32 for decode shapes, ragged n and k, m past
block_m, both output dtypes, NaN-filled outputs and a NaN-filled ``Partial``, the counters
zero after each launch, repeated launches bitwise equal; ``ops.linear`` on the planner's
path against ``F.linear``.
"""

import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.gemm import planner
from tvm_tirx.kernels.gemm.planner import SmallMPlan, choose_gemm, choose_small_m
from tvm_tirx.kernels.gemm.small_m import BLOCK_MS, SmallMConfig, make_small_m_gemm
from tvm_tirx.kernels.gemm.small_m_epilogue import Place, element
from tvm_tirx.script import tirx as T

from test_gemm_split_k import expected_gather, gather_order

# -- CPU: the planner ----------------------------------------------------------------------------


def test_decode_shapes_take_the_small_m_kernel_with_k_split_over_the_sms():
    # 32 column tiles of 128 rows of W; 64 K tiles: 4 splits make 128 CTAs of 16 K tiles
    assert choose_small_m(1, 4096, 4096) == SmallMPlan(block_m=8, splits=4, stages=8)
    assert choose_small_m(16, 4096, 4096).block_m == 16
    assert choose_small_m(17, 4096, 4096).block_m == 32
    assert choose_small_m(64, 4096, 4096).block_m == 64
    # 112 column tiles fill 85% of a wave: one wave of 64 K tiles (+ 4 of overhead) beats
    # 2 splits' two waves of 32 (+ 4 each)
    assert choose_small_m(1, 14336, 4096).splits == 1
    # 224 tiles are 1.7 waves: 4 splits make 7 waves of 32 + 4 (252) against 2 of 128 + 4 (264)
    assert choose_small_m(1, 28672, 8192).splits == 4
    # a narrow N takes more splits, each keeping at least MIN_SPLIT_TILES K tiles
    narrow = choose_small_m(1, 1024, 4096)
    assert narrow.splits == 16 and -(-64 // narrow.splits) >= planner.MIN_SPLIT_TILES
    assert choose_small_m(1, 1024, 128).splits == 1  # two K tiles: nothing to split
    assert choose_small_m(1, 4096, 4096, sms=64).splits == 2


@pytest.mark.parametrize("block_m", BLOCK_MS)
def test_the_ring_is_the_deepest_that_fits(block_m, monkeypatch):
    from tvm_tirx.kernels.gemm.config import SMEM_LIMIT  # pylint: disable=import-outside-toplevel
    from tvm_tirx.kernels.gemm.small_m import small_m_smem_bytes  # pylint: disable=import-outside-toplevel

    stages = planner.small_m_stages(block_m)
    assert stages == planner.MAX_STAGES and small_m_smem_bytes(stages, block_m) <= SMEM_LIMIT
    assert choose_small_m(block_m, 4096, 4096).stages == stages
    # with a deeper cap the ring stops where one more buffer would not fit
    monkeypatch.setattr(planner, "MAX_STAGES", 64)
    deep = planner.small_m_stages(block_m)
    assert small_m_smem_bytes(deep, block_m) <= SMEM_LIMIT < small_m_smem_bytes(deep + 1, block_m)


def test_choose_gemm_takes_the_tile_kernel_past_small_m():
    last = planner.SMALL_M_TILE_FROM - 1
    assert isinstance(choose_gemm(last, 4096, 4096, small_m=True), SmallMPlan)
    decode = {"block_m": 64, "block_n": 64, "stages": 8}  # the 64-row tile, then the 128-row tiles
    for m in (last + 1, 64):
        assert choose_gemm(m, 4096, 4096, small_m=True) == choose_gemm(m, 4096, 14336, small_m=True) == decode
    assert choose_gemm(1, 4096, 4096, small_m=False) == decode  # the route switched off
    assert choose_gemm(64, 4096, 4096, out_dtype="float32")["block_m"] == 64
    past = choose_gemm(planner.SMALL_M + 1, 4096, 4096, small_m=True)
    assert isinstance(past, dict) and set(past) == {"block_n", "stages"}
    with pytest.raises(ValueError, match="m must be a positive int, found 0"):
        choose_gemm(0, 8, 8)
    with pytest.raises(ValueError, match="m must be at most 64, found 65"):
        choose_small_m(65, 8, 8)


# -- CPU: the kernel -----------------------------------------------------------------------------


@pytest.mark.parametrize("options,message", [
    (dict(block_m=12), "block_m must be one of"),
    (dict(splits=5), r"splits must be an int in 1 \.\. 4"),
    (dict(stages=40), "stages must be a positive int whose ring fits"),
    (dict(out_dtype="float16"), "out_dtype must be one of"),
])
def test_the_kernel_refuses_options_out_of_range(options, message):
    with pytest.raises(ValueError, match=message):
        make_small_m_gemm(T.dynamic("m"), 256, 256, **options)


def test_a_split_without_k_tiles_is_refused():
    # 4 K tiles in splits of ceil(4 / 3) = 2: the third split would start past K
    with pytest.raises(ValueError, match="leaves no split without a K tile"):
        make_small_m_gemm(T.dynamic("m"), 256, 256, splits=3)
    make_small_m_gemm(T.dynamic("m"), 256, 256, splits=4)  # one K tile each


def test_the_planner_takes_only_split_counts_without_empty_splits():
    for k in range(64, 64 * 80, 64 * 7):
        plan = choose_small_m(1, 1024, k)
        k_tiles = k // 64
        assert (plan.splits - 1) * -(-k_tiles // plan.splits) < k_tiles, (k, plan)


def test_the_kernel_refuses_rows_the_tma_cannot_address():
    with pytest.raises(ValueError, match="TMA row stride not a multiple of 16 bytes"):
        make_small_m_gemm(T.dynamic("m"), 256, 260)


@pytest.mark.parametrize("block_m", BLOCK_MS)
def test_the_epilogue_places_each_element_of_a_tile_once(block_m):
    cfg = SmallMConfig(64, 256, 256, block_m=block_m)
    seen = []
    for tid in range(128, 384):  # the consumer warpgroups
        for b in range(block_m // 8):
            for h in range(2):
                for e in range(2):
                    seen.append(element(cfg, b, h, e, Place(0, 1, tid, tid // 128 - 1)))
    assert sorted(seen) == [(row, 128 + col) for row in range(block_m) for col in range(128)]


def _calls(source: str, name: str) -> int:
    body = source[source.index("__global__"):]
    return len(re.findall(rf"\b\w*{name}\w*\(", body))


@pytest.mark.parametrize("block_m,splits,out_dtype", [(8, 1, "bfloat16"), (8, 4, "bfloat16"), (16, 2, "float32"),
                                                      (32, 2, "bfloat16"), (64, 4, "float32")])
def test_the_kernel_assembles_and_reduces_only_with_splits(block_m, splits, out_dtype):
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    func = make_small_m_gemm(T.dynamic("m"), 1000, 200, block_m=block_m, splits=splits, out_dtype=out_dtype)
    kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
    assert len(testing.assemble(kernel)) > 0
    source = kernel.cuda_source
    assert f"m64n{block_m}k16" in source
    per_thread = block_m // 2  # accumulators of a consumer thread
    reductions = 1 if splits > 1 else 0
    assert _calls(source, "red_global") == 0  # the partials meet in slabs, not by atomic adds
    # the last CTA reads every split's slab back, and adds all but the first in order (groups of reads, then adds)
    assert gather_order(source) == (expected_gather(per_thread, splits) if splits > 1 else "")
    assert _calls(source, "atom_global_inc_u32") == reductions  # counts and wraps back to 0
    assert _calls(source, "st_global_u32") == 0  # so no counter reset store
    # the stores of C: one per accumulator, on one path (the last split's, with splits);
    # with splits, one slab store (st.global.f32) per accumulator before the count
    slab = per_thread * reductions
    if out_dtype == "bfloat16":
        assert _calls(source, "st_global_b16") == per_thread and _calls(source, "st_global_f32") == slab
    else:
        assert _calls(source, "st_global_f32") == per_thread + slab
    if splits > 1:  # split j's slab at columns j n ..: the read-back names each slab's offset
        assert all(f"(int64_t){j * 1000})" in source for j in range(1, splits))


# -- GPU -----------------------------------------------------------------------------------------

GPU_CASES = [  # (n, k, block_m, splits, out_dtype, rows tried)
    (4096, 4096, 8, 4, "bfloat16", (1, 5, 8)),
    (1000, 200, 16, 2, "float32", (1, 16, 40)),  # ragged n and k; 40 rows: three row tiles
    (2048, 1024, 64, 1, "bfloat16", (33, 64, 130)),
    (512, 4096, 32, 16, "float32", (7, 32)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("n,k,block_m,splits,out_dtype,rows", GPU_CASES)
def test_the_small_m_kernel_on_gpu(torch_cuda, n, k, block_m, splits, out_dtype, rows):
    torch = torch_cuda
    kernel = tvm_tirx.compile(make_small_m_gemm(T.dynamic("m"), n, k, block_m=block_m, splits=splits,
                                                out_dtype=out_dtype), target="cuda")
    dtype = getattr(torch, out_dtype)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    for m in rows:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        ref = x.float() @ w.float().t()
        counters = torch.zeros(m, -(-n // 128), device="cuda", dtype=torch.int32).view(torch.uint32)
        # Partial needs no initial value: NaN in it must not reach C
        work = [torch.full((m, splits * n), float("nan"), device="cuda"), counters] if splits > 1 else []
        results = []
        for _ in range(2):  # a second launch on the same workspaces: the counters were left zero
            c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
            kernel(x, w, *work, c)
            torch.cuda.synchronize()
            err = ((c.float() - ref).abs().max() / ref.abs().max()).item()  # NaN (unwritten) fails too
            assert err < (1e-2 if out_dtype == "bfloat16" else 1e-5), (m, err)
            results.append(c)
        assert torch.equal(results[0], results[1])  # the slabs add in one order: the same bits
        assert not counters.view(torch.int32).any()  # left zero (uint32 has few CUDA ops)


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 5, 16, 32, 64])
def test_linear_takes_the_small_m_kernel_on_gpu(torch_cuda, m, monkeypatch):
    # m = 64: past planner.SMALL_M_TILE_FROM, the tile kernel's 64-row tile (the same checks)
    torch = torch_cuda
    from tvm_tirx import ops
    from tvm_tirx.ops import gemm_kernels

    monkeypatch.setattr(planner, "SMALL_M_ROUTE", True)
    gemm_kernels.clear_kernels()  # no plan made with the route off

    x = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) / 64
    for _ in range(3):
        y = ops.linear(x, w)
        torch.testing.assert_close(y.float(), torch.nn.functional.linear(x, w).float(), rtol=2e-2, atol=2e-2)
    small = m < planner.SMALL_M_TILE_FROM
    assert any((isinstance(key, gemm_kernels.SmallMSpec) if small else key.block_m == 64) and key.n == 4096
               for key in gemm_kernels.cached_kernels())
    graph_out = None
    graph = torch.cuda.CUDAGraph()
    ops.linear(x, w)  # warm (plan made outside the capture)
    with torch.cuda.graph(graph):
        graph_out = ops.linear(x, w)
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(graph_out.float(), torch.nn.functional.linear(x, w).float(), rtol=2e-2,
                                   atol=2e-2)


@pytest.mark.parametrize("block_m,splits,out_dtype,reader", [(8, 1, "bfloat16", "F2FP"), (16, 1, "float32", "STG"),
                                                             (8, 4, "bfloat16", "STG"), (64, 2, "float32", "STG")])
def test_the_epilogue_reads_the_accumulators_after_the_last_wgmma_wait_in_sass(block_m, splits, out_dtype, reader):
    # as for the tile kernel (test_kernels_gemm.py): ptxas once scheduled an epilogue's
    # first read of the accumulators above the WARPGROUP.DEPBAR of wgmma.wait_group 0
    from tvm_tirx import cli

    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    kernel = tvm_tirx.compile(make_small_m_gemm(T.dynamic("m"), 4096, 4096, block_m=block_m, splits=splits,
                                                out_dtype=out_dtype), target="cuda", arch="sm_90a")
    try:
        sass = cli.disassemble(testing.assemble(kernel)).splitlines()
    except cli.CliError as err:
        pytest.skip(f"needs a disassembler (the test extra's nvidia-cuda-nvdisasm): {err}")
    wait = next(i for i, line in enumerate(sass) if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in line)
    first = next(i for i, line in enumerate(sass) if re.search(rf"\b{reader}\b", line))
    assert first > wait, f"{sass[first].strip()} at line {first}, before the wait at line {wait}"
