"""The tile kernel's decode forms: tiles narrower than 64 columns (``block_n`` 16..56) and
2-CTA clusters that share A when C has one row tile (``GemmConfig.multicast == "A"``:
every column tile reads the same rows of ``x``, so each CTA of a pair loads half of A's
stage and multicasts it to both, cuBLAS's 64 x 32 decode tile in 1 x 2 clusters).

CPU: the configurations, the instructions they issue and their refusals (compiled for
sm_90a and assembled by ptxas).  GPU (marker ``gpu``): results against the fp32 product,
into NaN-filled outputs, at odd shapes.
"""

import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.gemm import GemmConfig, make_gemm
from tvm_tirx.script import tirx as T

from test_kernels_gemm import RUN_TIME_MS, TMA_STORE, _check, _kernel, _tile_gemm

DECODE = dict(persistent=False, group_m=16)
LOAD = "cp_async_bulk_tensor_g2s_cluster_async_bulk_tensor_2d_shared__cluster_global_mbarrier__complete_tx__bytes"
#: a TMA load call in the kernel's body: (multicast suffix, smem offset expression, tensor map)
LOAD_CALL = re.compile(rf"tvm_builtin_ptx_{LOAD}(_multicast__cluster)?\(tvm_builtin_cuda_cvta_generic_to_shared"
                       r"\(\(&\(\(\(nv_bfloat16\*\)dyn_smem_ptr\)\[(.*?)\]\)\)\), \(\(void\*\)\(\(unsigned long long\)"
                       r"\(&\((\w)_tmap\)\)\)\)")


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
], ids=["three-row-tiles", "odd-grid"])
def test_clusters_that_pair_neither_way_are_refused(shape, options, match):
    with pytest.raises(ValueError, match=match):
        make_gemm(*shape, cluster=2, **DECODE, **options)


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
]
DECODE_IDS = ["16-odd", "32-cluster-a", "32-cluster-a-m1", "16-cluster-fp32", "48-partial", "24-fp32",
              "256x32-cluster-a"]


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
@pytest.mark.parametrize("block_n", [16, 32])
def test_narrow_tiles_run_time_m_on_gpu_from_one_kernel(torch_cuda, block_n):
    kernel = tvm_tirx.compile(make_gemm(T.dynamic("m"), 4096, 4096, block_n=block_n, **DECODE), target="cuda")
    for m in RUN_TIME_MS:
        _check(torch_cuda, kernel, m, 4096, 4096, "bfloat16", seed=m)
