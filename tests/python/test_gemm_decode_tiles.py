"""The tile kernel's decode forms: tiles narrower than 64 columns (``block_n`` 16..56), tiles
of 64 rows (``block_m=64``: one consumer warpgroup, 256 threads) and 2-CTA clusters that
share A when C has one row tile (``GemmConfig.multicast == "A"``: every column tile reads
the same rows of ``x``, so each CTA of a pair loads half of A's stage and multicasts it to
both, cuBLAS's 64 x 32 decode tile in 1 x 2 clusters).

CPU: the configurations, the instructions they issue and their refusals (compiled for
sm_90a and assembled by ptxas).  GPU (marker ``gpu``): results against the fp32 product,
into NaN-filled outputs, at odd shapes.
"""

import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.gemm import GemmConfig, gemm_smem_bytes, make_gemm
from tvm_tirx.kernels.gemm.config import deepest_ring
from tvm_tirx.script import tirx as T

from test_kernels_gemm import RUN_TIME_MS, TMA_STORE, _check, _kernel, _tile_gemm

DECODE = dict(persistent=False, group_m=16)
LOAD = "cp_async_bulk_tensor_g2s_cluster_async_bulk_tensor_2d_shared__cluster_global_mbarrier__complete_tx__bytes"
#: a TMA load call in the kernel's body: (multicast suffix, smem offset expression, tensor map)
LOAD_CALL = re.compile(rf"tvm_builtin_ptx_{LOAD}(_multicast__cluster)?\(tvm_builtin_cuda_cvta_generic_to_shared"
                       r"\(\(&\(\(\(nv_bfloat16\*\)dyn_smem_ptr\)\[(.*?)\]\)\)\), \(\(void\*\)\(\(unsigned long long\)"
                       r"\(&\((\w)_tmap\)\)\)\)")


INIT = re.compile(r"tvm_builtin_ptx_mbarrier_init_init_shared__cta_b64\(.*?\), \(uint\)(\d+)\);")
EXPECT_TX = re.compile(r"mbarrier_arrive_expect_tx\w*\(.*?\), \(uint\)(\d+)\);")


def _loads(kernel):
    """``{tensor map: (multicast?, smem offset)}`` of the kernel's TMA loads."""
    body = kernel.cuda_source[kernel.cuda_source.index("__global__") :]
    return {tmap: (bool(mc), offset) for mc, offset, tmap in LOAD_CALL.findall(body)}


# -- CPU ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("block_n", [16, 24, 32, 48])
def test_narrow_tiles_issue_their_width_and_store_per_thread(block_n):
    kernel = _kernel(f"decode-bn{block_n}", 64, 4096, 4096, block_n=block_n, **DECODE)
    assert f"wgmma.mma_async.sync.aligned.m64n{block_n}k16.f32.bf16.bf16" in kernel.cuda_source
    assert TMA_STORE not in kernel.cuda_source  # narrower than a 64-column box: stored per thread
    report = testing.ptxas_report(kernel)
    assert "0 bytes spill stores, 0 bytes spill loads" in report, report


def test_one_row_tile_in_clusters_multicasts_halves_of_a():
    config = GemmConfig(4096, 4096, m=64, block_n=32, cluster=2, **DECODE)
    assert config.multicast == "A"
    kernel = _kernel("decode-cluster-a", 64, 4096, 4096, block_n=32, cluster=2, **DECODE)
    loads = _loads(kernel)
    assert loads["A"][0] and not loads["B"][0], loads
    # each CTA of the pair loads 64 of the 128 rows of A's stage (64 bf16 each): rank * 4096 elements in
    assert "tvm_builtin_cluster_ctaid_x()) * 4096)" in loads["A"][1], loads


def test_an_even_number_of_row_tiles_multicasts_halves_of_b():
    assert GemmConfig(4096, 4096, m=4096, block_n=128, cluster=2, **DECODE).multicast == "B"
    assert GemmConfig(4096, 4096, m=64, block_n=32, **DECODE).multicast is None
    kernel = _kernel("cluster-b-bn128", 512, 4096, 4096, block_n=128, cluster=2, **DECODE)
    loads = _loads(kernel)
    assert loads["B"][0] and not loads["A"][0], loads


@pytest.mark.parametrize("shape, options, match", [
    ((300, 4096, 4096), dict(block_n=32), r"one or an even number of 128-row tiles"),
    ((64, 4104, 4096), dict(block_n=32), r"a 2-CTA cluster needs an even grid .* found 129"),
    # persistent: an even grid, but the pair walking 3 tiles would split at the last one (a hang)
    ((64, 192, 4096), dict(block_m=64, block_n=64, persistent=True, ctas=2),
     r"the CTAs of a 2-CTA cluster take their tiles together \(each loads half of A's stage for both\): it "
     r"needs an even number of tiles, found 3"),
], ids=["three-row-tiles", "odd-grid", "persistent-odd-tiles"])
def test_clusters_that_pair_neither_way_are_refused(shape, options, match):
    with pytest.raises(ValueError, match=match):
        make_gemm(*shape, cluster=2, **{**DECODE, **options})


@pytest.mark.parametrize("cluster", [1, 2])
def test_the_64_row_tile_has_one_consumer_warpgroup(cluster):
    config = GemmConfig(4096, 4096, m=64, block_m=64, block_n=32, stages=4, cluster=cluster, **DECODE)
    assert (config.consumers, config.blocks, config.multicast) == (1, 1, "A" if cluster == 2 else None)
    kernel = _kernel(f"decode-64x32-cluster{cluster}", 64, 4096, 4096, block_m=64, block_n=32, stages=4,
                     cluster=cluster, **DECODE)
    assert "__launch_bounds__(256, 1)" in kernel.cuda_source  # a producer and one consumer warpgroup
    # full[s] counts the producer's arrival; empty[s] one release per consumer warpgroup of each CTA
    assert [int(c) for c in INIT.findall(kernel.cuda_source)] == [1] * 4 + [cluster] * 4
    assert [int(b) for b in EXPECT_TX.findall(kernel.cuda_source)] == [(64 + 32) * 128]  # a stage's bytes
    loads = _loads(kernel)
    assert loads["A"][0] == (cluster == 2) and not loads["B"][0], loads
    if cluster == 2:  # each CTA loads 32 of the 64 rows: rank * 2048 elements in
        assert "tvm_builtin_cluster_ctaid_x()) * 2048)" in loads["A"][1], loads


def test_the_64_row_tile_takes_one_warpgroup_s_shared_memory():
    # the ring's stages of 64 + block_n rows, and one 64-row bf16 output tile (TMA store) instead of two
    assert gemm_smem_bytes(8, "bfloat16", 32, block_m=64) == 8 * 96 * 128 + 1024 + 8 * 16 + 1024
    assert gemm_smem_bytes(4, "bfloat16", 128, block_m=64) == 4 * 192 * 128 + 64 * 128 * 2 + 4 * 16 + 1024
    assert gemm_smem_bytes(4, "bfloat16", 128) == 4 * 256 * 128 + 2 * 64 * 128 * 2 + 4 * 16 + 1024
    assert deepest_ring(256, "bfloat16", block_m=64) == 4 and deepest_ring(256, "bfloat16") == 3
    kernel = _kernel("decode-64x256", 64, 4096, 4096, block_m=64, block_n=256, **DECODE)
    assert TMA_STORE in kernel.cuda_source
    assert "0 bytes spill stores, 0 bytes spill loads" in testing.ptxas_report(kernel)


def test_the_64_row_tile_holds_a_fused_epilogue_without_spills():
    # bias, GELU and residual on one accumulator set per thread (its GPU test: test_kernels_gemm.py's
    # test_the_fused_epilogue_on_gpu, 64-row cases)
    kernel = _kernel("decode-64x128-fused", T.dynamic("m"), 1000, 256, block_m=64, block_n=128, bias="float32",
                     activation="gelu_tanh", residual=True, **DECODE)
    assert "__launch_bounds__(256, 1)" in kernel.cuda_source
    assert "0 bytes spill stores, 0 bytes spill loads" in testing.ptxas_report(kernel)


def test_widths_below_16_are_refused():
    with pytest.raises(ValueError, match=r"block_n must be a multiple of 8 from 16 to 256 \(wgmma's N\), found 8"):
        make_gemm(64, 4096, 4096, block_n=8)


# -- GPU ---------------------------------------------------------------------------------------

#: (block_n, (m, n, k), out_dtype, options): every m of one row tile, odd n and k, both outputs
DECODE_GPU_CASES = [
    (16, (1, 4095, 4104), "bfloat16", {}),  # guarded st.global.b16 (odd n)
    (32, (64, 4096, 4096), "bfloat16", dict(cluster=2)),  # A multicast
    (32, (1, 4096, 4096), "bfloat16", dict(cluster=2)),  # rank 1's half of A all past m: zero-filled
    (16, (33, 992, 1000), "float32", dict(cluster=2)),  # 62 column tiles; fp32 v2 stores
    (48, (100, 1000, 264), "bfloat16", dict(stages=6)),  # the last column tile partial
    (24, (128, 1000, 72), "float32", {}),  # every row of the tile; 3 bf16 pairs a thread per row
    (32, (64, 4096, 4096), "bfloat16", dict(cluster=2, block_m=256, stages=4)),  # 128-row halves of A
    (32, (64, 4096, 4096), "bfloat16", dict(block_m=64)),  # one consumer warpgroup
    (32, (64, 4096, 4096), "bfloat16", dict(block_m=64, cluster=2)),  # 32-row halves of A
    (16, (7, 992, 1000), "bfloat16", dict(block_m=64, cluster=2)),  # rank 1's half past m
    (128, (100, 1000, 264), "bfloat16", dict(block_m=64)),  # TMA stores clipped at both edges
    (64, (1000, 1000, 1000), "float32", dict(block_m=64)),  # 16 row tiles, guarded v2 stores
    (256, (130, 4104, 512), "bfloat16", dict(block_m=64, stages=4)),  # the widest, 3 row tiles
    (64, (128, 1000, 264), "bfloat16", dict(block_m=64, cluster=2)),  # 2 row tiles: pairs share B
    (64, (64, 4096, 1024), "bfloat16", dict(block_m=64, cluster=2, persistent=True, ctas=16)),  # 4 rounds a pair
]
DECODE_IDS = ["16-odd", "32-cluster-a", "32-cluster-a-m1", "16-cluster-fp32", "48-partial", "24-fp32",
              "256x32-cluster-a", "64x32", "64x32-cluster-a", "64x16-cluster-a-m7", "64x128-tma-clipped",
              "64x64-fp32", "64x256", "64x64-cluster-b", "64x64-cluster-a-persistent"]


def test_every_decode_gpu_case_is_a_valid_configuration():
    for block_n, shape, out_dtype, options in DECODE_GPU_CASES:
        _tile_gemm(block_n, shape, out_dtype, options)  # make_gemm raises on one it refuses
    assert GemmConfig(4096, 4096, m=64, block_n=32, cluster=2, block_m=256, stages=4, **DECODE).multicast == "A"


@pytest.mark.gpu
@pytest.mark.parametrize("block_n,shape,out_dtype,options", DECODE_GPU_CASES, ids=DECODE_IDS)
def test_decode_tiles_on_gpu(torch_cuda, block_n, shape, out_dtype, options):
    kernel = tvm_tirx.compile(_tile_gemm(block_n, shape, out_dtype, options), target="cuda")
    _check(torch_cuda, kernel, *shape, out_dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("block_m,block_n", [(128, 16), (128, 32), (64, 32), (64, 128)])
def test_decode_tiles_run_time_m_on_gpu_from_one_kernel(torch_cuda, block_m, block_n):
    kernel = tvm_tirx.compile(make_gemm(T.dynamic("m"), 4096, 4096, block_m=block_m, block_n=block_n, **DECODE),
                              target="cuda")
    for m in RUN_TIME_MS:
        _check(torch_cuda, kernel, m, 4096, 4096, "bfloat16", seed=m)
