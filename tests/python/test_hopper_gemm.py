"""``tvm_tirx.kernels.gemm.make_gemm`` (timed by bench/gemm.py): each option the benchmark uses shows in the kernel.

CPU: four configurations that together take every value of every option the
benchmark varies (output type, persistent grid, cluster, wait depth, spin waits,
group size, stages) compile, assemble for sm_90a, and issue what their options
say -- counted at the call sites of the generated CUDA and read from the
kernel's TIR, so that an ignored option fails a count. Bad sizes and options
are ValueErrors. GPU (marker ``gpu``): the benchmark's configurations on small
problems, against an fp32 torch product.
"""

import re

import pytest

import tvm_tirx
from tvm_tirx import testing

from tvm_tirx.kernels.gemm import BK_BYTES, BM, BN, gemm_smem_bytes, make_gemm, tile_order

# 16 x 10 = 160 output tiles: a persistent grid of 132 CTAs makes two rounds; 5 K tiles
# (not a multiple of 3 or 4 stages).
M, N, K = 2048, 2560, 320
TILES = (M // BM) * (N // BN)

#: Every value of every option appears at least once (defaults: stages 3, wait_depth 1,
#: group_m 8, cluster 1, spin False, ctas 132).
CPU_CONFIGS = {
    "bf16-one-tile-group16": dict(out_dtype="bfloat16", persistent=False, group_m=16),
    "bf16-persistent-cluster2-spin": dict(out_dtype="bfloat16", persistent=True, cluster=2, spin=True),
    "fp32-persistent-wait0": dict(out_dtype="float32", stages=4, persistent=True, wait_depth=0),
    "fp32-one-tile-cluster2-spin": dict(out_dtype="float32", stages=4, persistent=False, cluster=2, spin=True),
}
_BUILT = {}


def _option(config, name):
    defaults = dict(out_dtype="bfloat16", stages=3, wait_depth=1, persistent=True, ctas=132, group_m=8, cluster=1,
                    spin=False)
    return config.get(name, defaults[name])


def _built(name):
    """(TIR script, kernel) of a CPU configuration, compiled once per test session."""
    if name not in _BUILT:
        func = make_gemm(M, N, K, **CPU_CONFIGS[name])
        _BUILT[name] = (func.script(), tvm_tirx.compile(func, target="cuda", arch="sm_90a"))
    return _BUILT[name]


def _calls(kernel, helper):
    """Call sites in the kernel's body of the CUDA helper named ``tvm_builtin_<helper>``."""
    body = kernel.cuda_source[kernel.cuda_source.index("__global__") :]
    return len(re.findall(rf"\btvm_builtin_{helper}\(", body))


@pytest.fixture(params=sorted(CPU_CONFIGS), scope="module")
def config(request):
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    script, kernel = _built(request.param)
    return CPU_CONFIGS[request.param], script, kernel


def test_assembles_for_sm_90a(config):
    _, _, kernel = config
    assert str(kernel.target.attrs["arch"]) == "sm_90a"
    assert len(testing.assemble(kernel)) > 0


def test_k_loop_is_four_m64n256k16_per_k_tile(config):
    _, _, kernel = config
    assert BK_BYTES // 2 // 16 == 4  # 64 bf16 of K per stage, k16 per instruction
    assert _calls(kernel, "ptx_wgmma_bf16_ss_mma_async_sync_aligned_m64n256k16_f32_bf16_bf16_1_1_0_0") == 4
    assert _calls(kernel, "ptx_wgmma_fence_fence_sync_aligned") == 1
    assert _calls(kernel, "ptx_wgmma_commit_group_commit_group_sync_aligned") == 1


def test_registers_move_from_producer_to_consumers(config):
    _, _, kernel = config
    assert "__launch_bounds__(384, 1)" in kernel.cuda_source
    assert _calls(kernel, "ptx_setmaxnreg_dec_sync_aligned_u32_40") == 1
    assert _calls(kernel, "ptx_setmaxnreg_inc_sync_aligned_u32_232") == 1


def test_grid_and_rounds_follow_persistent(config):
    options, script, _ = config
    persistent = _option(options, "persistent")
    grid = _option(options, "ctas") if persistent else TILES
    assert f"bx = T.cta_id([{grid}])" in script
    rounds = (TILES + grid - 1) // grid
    assert rounds == (2 if persistent else 1)
    assert script.count(f"for i in range({rounds}):") == 2  # the producer's and the consumers' tile loops


def test_tile_order_follows_group_m(config):
    options, script, _ = config
    g = _option(options, "group_m")
    assert script.count(f"bm: T.int32 = t // {g * (N // BN)} * {g} + t % {g}") == 2


def test_cluster_multicasts_b_and_releases_both_ctas(config):
    options, script, kernel = config
    cluster, wait_depth = _option(options, "cluster"), _option(options, "wait_depth")
    load = "ptx_cp_async_bulk_tensor_g2s_cluster_async_bulk_tensor_2d_shared__cluster_global_mbarrier__complete_tx__bytes"
    releases = 1 + wait_depth  # in the K loop, and after it when a batch was left in flight
    assert f"T.cta_id_in_cluster([{cluster}])" in script
    if cluster == 2:
        assert _calls(kernel, load) == 1 and _calls(kernel, load + "_multicast__cluster") == 1  # A alone, B multicast
        assert _calls(kernel, "ptx_mbarrier_arrive_nocount_arrive_shared__cluster_b64") == 2 * releases
        assert _calls(kernel, "ptx_mbarrier_arrive_nocount_arrive_shared__cta_b64") == 0
        assert _calls(kernel, "cuda_cluster_sync") == 2
    else:
        assert _calls(kernel, load) == 2 and _calls(kernel, load + "_multicast__cluster") == 0
        assert _calls(kernel, "ptx_mbarrier_arrive_nocount_arrive_shared__cluster_b64") == 0
        assert _calls(kernel, "ptx_mbarrier_arrive_nocount_arrive_shared__cta_b64") == releases
        assert _calls(kernel, "cuda_cluster_sync") == 0
    # empty[s] expects one arrival per consumer warpgroup of each CTA of the cluster
    inits = re.findall(r"tvm_builtin_ptx_mbarrier_init_init_shared__cta_b64\(.*\(uint\)(\d+)\);", kernel.cuda_source)
    stages = _option(options, "stages")
    assert sorted(inits) == sorted(["1"] * stages + [str(2 * cluster)] * stages)


def test_wait_depth_leaves_batches_in_flight(config):
    options, _, kernel = config
    wait_depth = _option(options, "wait_depth")
    assert _calls(kernel, "ptx_wgmma_wait_group_wait_group_sync_aligned_1") == wait_depth
    assert _calls(kernel, "ptx_wgmma_wait_group_wait_group_sync_aligned_0") == 2 - wait_depth


def test_spin_waits_with_plain_try_wait(config):
    options, _, kernel = config
    spin = _option(options, "spin")
    assert _calls(kernel, "ptx_mbarrier_try_wait_parity_no_hint_try_wait_parity_shared__cta_b64") == (2 if spin else 0)
    assert _calls(kernel, "cuda_mbarrier_wait") == (0 if spin else 2)


def test_epilogue_follows_the_output_type(config):
    options, script, kernel = config
    bf16 = _option(options, "out_dtype") == "bfloat16"
    regs = BN // 8 * 2  # accumulator pairs (bf16x2 words) per thread
    assert _calls(kernel, "ptx_cvt_bf16x2_f32_rn_bf16x2_f32") == (regs if bf16 else 0)
    assert _calls(kernel, "ptx_st_shared_b32") == (regs if bf16 else 0)
    assert _calls(kernel, "ptx_cp_async_bulk_tensor_s2g_async_bulk_tensor_2d_global_shared__cta_bulk_group") == (
        BN // 64 if bf16 else 0)  # one TMA store per 64-column box
    assert _calls(kernel, "ptx_st_vec_global_v2_f32") == (0 if bf16 else regs)
    # the bf16 epilogue's two per-consumer named barriers (the named_barrier family's checks ran)
    assert _calls(kernel, "ptx_barrier_sync_count_sync_aligned") == (2 if bf16 else 0)
    assert script.count('T.cuda.tile.apply("barrier.sync.aligned"') == (2 if bf16 else 0)
    stages = _option(options, "stages")
    assert f'"tirx.dyn_smem_bytes": {gemm_smem_bytes(stages, _option(options, "out_dtype"))}' in script


def test_tile_order_visits_every_tile_once_in_groups():
    tiles_m, tiles_n, g = 32, 5, 8
    order = [tile_order(t, tiles_m, tiles_n, g) for t in range(tiles_m * tiles_n)]
    assert sorted(order) == [(i, j) for i in range(tiles_m) for j in range(tiles_n)]
    # g consecutive tiles share a column tile (B) and cover g consecutive row tiles
    assert order[:g] == [(i, 0) for i in range(g)] and order[g] == (0, 1)
    assert order[g * tiles_n] == (g, 0)


@pytest.mark.parametrize(
    "shape,options,match",
    [
        ((1024, 256, 100), {}, "TMA row stride not a multiple of 16 bytes"),  # 200-byte rows of A and B
        ((800, 256, 64), dict(cluster=2), "even number of 128-row tiles"),  # 7 row tiles: a CTA pair would split
        ((1024, 256, 64), dict(cluster=2, group_m=3), "even group_m"),
        ((1024, 256, 64), dict(stages=4), r"stages must be .* \(263232 bytes with bfloat16 output and block_n=256\), found 4"),  # > 227 KiB
        ((1024, 256, 64), dict(out_dtype="float32", stages=5), r"stages must be .*, found 5"),
        ((1024, 256, 64), dict(wait_depth=2), "wait_depth must be 0 or 1, found 2"),
        ((1024, 256, 64), dict(cluster=4), "cluster must be 1 or 2, found 4"),
        ((1024, 256, 64), dict(cluster=2, ctas=131), "even grid"),
    ],
)
def test_bad_sizes_and_options_are_value_errors(shape, options, match):
    with pytest.raises(ValueError, match=match):
        make_gemm(*shape, **options)


def test_the_largest_rings_fit():
    assert gemm_smem_bytes(3, "bfloat16") <= 227 * 1024 < gemm_smem_bytes(4, "bfloat16")
    assert gemm_smem_bytes(4, "float32") <= 227 * 1024 < gemm_smem_bytes(5, "float32")
    make_gemm(1024, 256, 64, out_dtype="float32", stages=4)
    make_gemm(1024, 256, 64, stages=3)


# -- on the GPU ------------------------------------------------------------------------------

#: The benchmark's best configurations (bench/gemm.py: BEST), variants covering every option
#: value, and persistent grids of 8 CTAs that walk 32 tiles each (the ring's phases carry
#: over many tiles).
GPU_CONFIGS = {
    "best-bf16": dict(stages=3, wait_depth=1, persistent=False, group_m=16),
    "best-fp32": dict(out_dtype="float32", stages=4, wait_depth=1, persistent=False, group_m=16),
    "one-tile-group16-wait0-spin": dict(persistent=False, group_m=16, wait_depth=0, spin=True),
    "one-tile-cluster2-group16": dict(persistent=False, cluster=2, group_m=16),
    "persistent-group16": dict(persistent=True, group_m=16),
    "persistent-cluster2-spin": dict(persistent=True, cluster=2, spin=True),
    "persistent-8ctas-cluster2-wait0-fp32": dict(out_dtype="float32", stages=4, persistent=True, ctas=8, cluster=2,
                                                 wait_depth=0),
    "persistent-8ctas-group16-spin": dict(persistent=True, ctas=8, group_m=16, spin=True),
}
#: 4096 rows allow group_m up to 32; 4096 x 2048 is 256 tiles (two rounds of 132 CTAs, the
#: second partial); 4096 x 768 x 320 has an odd number of column tiles and 5 K tiles.
SQUARE_ISH, NON_SQUARE = (4096, 2048, 1024), (4096, 768, 320)
GPU_CASES = [(name, SQUARE_ISH) for name in GPU_CONFIGS] + [
    (name, NON_SQUARE) for name in ("best-bf16", "best-fp32", "one-tile-cluster2-group16", "persistent-8ctas-group16-spin")
]
TOLERANCE = {"bfloat16": 1e-2, "float32": 1e-4}


@pytest.mark.gpu
@pytest.mark.parametrize("name,shape", GPU_CASES, ids=[f"{n}-{'x'.join(map(str, s))}" for n, s in GPU_CASES])
def test_matches_torch_on_gpu(torch_cuda, name, shape):
    torch = torch_cuda
    m, n, k = shape
    options = GPU_CONFIGS[name]
    out_dtype = _option(options, "out_dtype")
    kernel = tvm_tirx.compile(make_gemm(m, n, k, **options), target="cuda")
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=getattr(torch, out_dtype))  # unwritten -> NaN
    kernel(a, b, c)
    torch.cuda.synchronize()
    ref = a.float() @ b.float().t()
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
    assert err <= TOLERANCE[out_dtype], f"{name} {shape}: max relative error {err:.2e}"
    # a second call on the same output (the kernel leaves no state behind)
    c.fill_(float("nan"))
    kernel(a, b, c)
    torch.cuda.synchronize()
    assert ((c.float() - ref).abs().max() / ref.abs().max()).item() <= TOLERANCE[out_dtype]


# -- FP8 e4m3 inputs ------------------------------------------------------------------------------

FP8 = dict(in_dtype="float8_e4m3fn", persistent=False, group_m=16)


def test_fp8_issues_k32_wgmma_moves_bytes_and_scales():
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    kernel = tvm_tirx.compile(make_gemm(M, N, 2 * K, **FP8), target="cuda", arch="sm_90a")
    assert len(testing.assemble(kernel)) > 0
    # 128 e4m3 of K per stage (one 128-byte row), 32 per instruction: 4 per K tile
    assert _calls(kernel, "ptx_wgmma_fp8_ss_mma_async_sync_aligned_m64n256k32_f32_e4m3_e4m3_1_1") == 4
    assert _calls(kernel, "ptx_wgmma_bf16_ss_mma_async_sync_aligned_m64n256k16_f32_bf16_bf16_1_1_0_0") == 0
    assert _calls(kernel, "ptx_mul_rn_f32") == BN // 2  # the per-tensor scales, every accumulator
    assert "(Scales_ptr[0] * Scales_ptr[1])" in kernel.cuda_source


def test_fp8_k_must_be_a_multiple_of_16():
    make_gemm(M, N, K, **FP8)  # 320 = 2.5 rows of 128 e4m3: the TMA zero-fills the last half row
    with pytest.raises(ValueError, match=r"TMA row stride not a multiple of 16 bytes: .* 328 float8_e4m3fn"):
        make_gemm(M, N, 328, **FP8)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,block_n", [((2048, 2560, 640), 256), ((4096, 768, 384), 256), ((2048, 2560, 640), 64), ((2048, 2560, 640), 192),
                                           ((4096, 768, 384), 128), ((2048, 2560, 640), 136)], ids=str)
def test_fp8_matches_torch_on_gpu(torch_cuda, shape, block_n):
    torch = torch_cuda
    m, n, k = shape
    kernel = tvm_tirx.compile(make_gemm(m, n, k, block_n=block_n, **FP8), target="cuda")
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    scales = torch.tensor([0.5, 3.0], device="cuda")
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernel(a, b, c, scales)
    torch.cuda.synchronize()
    ref = (a.float() @ b.float().t()) * 1.5
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
    assert err <= TOLERANCE["bfloat16"], f"fp8 {shape}: max relative error {err:.2e}"
