"""``make_gemm(block_m=256)``: the cooperative 256-row tile (issue 40), each consumer
warpgroup 128 rows as two 64-row blocks with their own accumulators.

CPU: 256-row kernels compile and assemble for sm_90a (bf16 and float32 output, TMA,
guarded and exact stores, bias and activation, residual, run-time m, MN-major operands,
cluster=2, fp8) and issue two wgmma per K step of the 128-row kernel's one -- into two
accumulator sets, from A rows 64 apart, in one commit group -- and twice its stores; the
epilogue's row arithmetic per block; the shared memory and ring depths of 256 rows; the
options it refuses (gated, block_n above 192, rings that do not fit); the name and the
compile-cache key; overrides that reach the torch operators and the Relax offload; no
register spills (``ptxas -v``) for the plain 256 x 128 / 160 / 192 bf16 kernels.
GPU (marker ``gpu``): the cases of ``test_kernels_gemm.COOPERATIVE_GPU_CASES`` against the
fp32 product into NaN-filled outputs, one run-time-m kernel at m = 1 .. 16385, a fused
bias + gelu + residual epilogue, MN-major operands and fp8.
"""

import os
import re
import sys

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.gemm import GemmSpec, make_gemm, planner
from tvm_tirx.kernels.gemm.geometry import BLOCK_MS, SMEM_LIMIT, deepest_ring, gemm_smem_bytes
from tvm_tirx.kernels.parts.epilogue import Geometry, TilePlace
from tvm_tirx.script import tirx as T

from test_gemm_layouts import _run as _run_majors
from test_kernels_gemm import (COOPERATIVE_GPU_CASES, COOPERATIVE_IDS, FP32, RUN_TIME_MS, STORE_1, STORE_V2,
                               TMA_STORE, _body, _check, _check_tile, _guarded_stores, _kernel)

COOP = dict(block_m=256)
WGMMA = r"tvm_builtin_ptx_wgmma_\w+_ss_mma_async_sync_aligned_m64n(\d+)k\d+\w*"
ENCODE_A = r"ptx_wgmma_encode_matrix_descriptor\(\(&\(A_desc\w*\[0\]\)\), \(&\(\(\(\w+\*\)dyn_smem_ptr\)\[(.*?)\]\)\)"


def _wgmma_accumulators(kernel):
    """The first accumulator register of each wgmma call site of the kernel's body, in order."""
    return re.findall(WGMMA + r"\((\w+)\[0\]", _body(kernel))


def _calls(kernel, name):
    return len(re.findall(rf"\b{name}\(", _body(kernel)))


# -- CPU: compile, assemble, what is issued -----------------------------------------------------

M = T.dynamic("m")
#: name -> (m, n, k, options): every kind of store, fused stage, layout and schedule
CPU_CASES = {
    "256x128-bf16-s4": (4096, 4096, 4096, dict(COOP, block_n=128, stages=4)),
    "256x192-run-time-m": (M, 4096, 4096, dict(COOP, block_n=192, stages=3, persistent=False, group_m=16)),
    "256x160-guarded-pairs": (M, 4104, 4096, dict(COOP, block_n=160, stages=4, persistent=False, group_m=16)),
    "256x128-fp32-odd": (4097, 4095, 4104, dict(COOP, block_n=128, **FP32)),
    "256x128-fp32-exact": (1024, 1024, 512, dict(COOP, block_n=128, **FP32)),
    "256x128-bias-gelu": (M, 1000, 256, dict(COOP, block_n=128, bias="float32", activation="gelu_tanh",
                                             persistent=False)),
    "256x128-residual": (M, 1000, 256, dict(COOP, block_n=128, residual=True, persistent=False)),
    "256x128-am-bn": (4104, 4104, 4104, dict(COOP, block_n=128, a_major="m", b_major="n")),
    "256x128-cluster-2": (4096, 4104, 4104, dict(COOP, block_n=128, cluster=2, persistent=False, group_m=16)),
    "256x128-fp8": (1024, 1024, 1024, dict(COOP, block_n=128, stages=4, in_dtype="float8_e4m3fn")),
}


def _coop(name):
    m, n, k, options = CPU_CASES[name]
    return _kernel(f"cooperative {name}", m, n, k, **options)


@pytest.mark.parametrize("name", sorted(CPU_CASES))
def test_every_256_row_kernel_issues_two_wgmma_per_k_step_into_two_accumulator_sets(name):
    # per K tile: 4 K steps (k16 bf16, k32 e4m3: 128 bytes of K) x 2 blocks, one fence, one
    # commit group; block 0's four into one register set, then block 1's into the other
    kernel = _coop(name)
    accs = _wgmma_accumulators(kernel)
    block_n = CPU_CASES[name][3]["block_n"]
    assert [int(n) for n, _ in accs] == [block_n] * 8, accs
    names = [acc for _, acc in accs]
    assert names[:4] == [names[0]] * 4 and names[4:] == [names[4]] * 4 and names[0] != names[4], names
    assert _calls(kernel, "tvm_builtin_ptx_wgmma_fence_fence_sync_aligned") == 1
    assert _calls(kernel, "tvm_builtin_ptx_wgmma_commit_group_commit_group_sync_aligned") == 1


def test_the_128_row_kernel_issues_half_of_them_and_the_blocks_read_a_rows_64_apart():
    two = _coop("256x128-bf16-s4")
    one = _kernel("cooperative 128x128-bf16-s4", 4096, 4096, 4096, block_n=128, stages=4)
    assert len(_wgmma_accumulators(one)) == 4 and len({acc for _, acc in _wgmma_accumulators(one)}) == 1
    # A's stage: 256 rows of 64 bf16 (16384 elements), warpgroup c's rows from 128 c, block 1's 64 rows on
    a0, a1 = re.findall(ENCODE_A, _body(two))
    assert "* 16384)" in a0 and "(c_ptr[0] * 8192)" in a0 and a1 == f"({a0} + 4096)", (a0, a1)
    (b0,) = re.findall(ENCODE_A, _body(one))
    assert "* 8192)" in b0 and "(c_ptr[0] * 4096)" in b0, b0
    # the producer: 256 rows of A (one box at row 256 bm) + 128 of B per stage, 49152 bytes
    assert "(uint)49152" in _body(two) and "(bm_ptr[0] * 256)" in _body(two)
    assert "(uint)32768" in _body(one) and "(bm_ptr[0] * 128)" in _body(one)
    # each block is stored by its own TMA stores (two 64-column boxes each), twice the 128-row tile's
    assert _calls(two, f"tvm_builtin_{TMA_STORE}") == 2 * _calls(one, f"tvm_builtin_{TMA_STORE}") == 4


def test_the_epilogue_runs_per_block():
    # every store, fused stage and prefetch is issued once per 64-row block: twice the 128-row counts
    assert _guarded_stores(_coop("256x128-fp32-odd"), STORE_1, 4097, 4094) == 2 * 128 // 2
    exact = _coop("256x128-fp32-exact")
    assert _calls(exact, STORE_V2) == 2 * 128 // 4 and "row_ptr" not in _body(exact)
    assert _guarded_stores(_coop("256x160-guarded-pairs"), "tvm_builtin_ptx_st_global_b32", "m", 2051) == 2 * 160 // 4
    fused = _body(_coop("256x128-bias-gelu"))
    assert len(re.findall(r"Bias_ptr\[min\(col_ptr(_\d+)?\[0\], 999\)\]", fused)) == 2 * 64
    assert len(re.findall(r"\b\w*tanh_approx_f32\w*\(", fused)) == 2 * 64
    # the residual's pairs: out_block_n / 4 words per block
    assert _calls(_coop("256x128-residual"), "tvm_builtin_ptx_ld_global_b32") == 2 * 128 // 4
    assert "multicast::cluster" in _coop("256x128-cluster-2").cuda_source
    assert "m64n128k32.f32.e4m3.e4m3" in _coop("256x128-fp8").cuda_source


def test_a_run_time_m_launches_one_cta_per_256_row_tile():
    script = make_gemm(M, 4096, 4096, block_m=256, block_n=192, stages=3, persistent=False, group_m=16).script()
    assert "T.cta_id([(m + 256 - 1) // 256 * 22])" in script  # ceil(4096 / 192) = 22 column tiles
    assert script.count("for i in range(1):") == 2


# -- CPU: the epilogue's rows, shared memory, refusals -----------------------------------------


def test_each_block_stores_its_own_rows():
    # row0 = 256 bm + 128 c + 64 sub: warpgroup c's block sub of tile bm
    coop = Geometry(4096, 4096, "bfloat16", 128, 128, 4096, tile_m=256, blocks=2)
    for bm in range(3):
        for c in (0, 1):
            for sub in (0, 1):
                assert coop.row0(TilePlace(bm, 0, 0, c, sub)) == 256 * bm + 128 * c + 64 * sub
                assert coop.block(TilePlace(bm, 0, 0, c, sub)) == 2 * c + sub
    rows = sorted(coop.row0(TilePlace(1, 0, 0, c, sub)) for c in (0, 1) for sub in (0, 1))
    assert rows == [256, 320, 384, 448]  # the tile's 4 blocks, each once
    plain = Geometry(4096, 4096, "bfloat16", 128, 128, 4096)  # the 128-row tile: one block per warpgroup
    assert [plain.row0(TilePlace(2, 0, 0, c)) for c in (0, 1)] == [256, 320]
    assert TilePlace(0, 0, 0, 1).sub == 0


def test_shared_memory_and_ring_depths_of_256_rows():
    assert BLOCK_MS == (64, 128, 256)
    # a stage: (256 + block_n) rows of 128 bytes; the bf16 epilogue tiles stay 2 x 64 rows (32 KiB at 128)
    assert gemm_smem_bytes(4, "bfloat16", 128, block_m=256) == 4 * 384 * 128 + 32768 + 64 + 1024 == 230464
    assert gemm_smem_bytes(4, "bfloat16", 128, block_m=256) <= SMEM_LIMIT < gemm_smem_bytes(5, "bfloat16", 128,
                                                                                            block_m=256)
    assert gemm_smem_bytes(3, "bfloat16", 192, block_m=256) == 3 * 448 * 128 + 49152 + 48 + 1024
    assert gemm_smem_bytes(4, "float32", 160, block_m=256) == 4 * 416 * 128 + 1024 + 64 + 1024
    assert gemm_smem_bytes(3, "bfloat16", 128) == gemm_smem_bytes(3, "bfloat16", 128, block_m=128)
    depths = {(bn, out): deepest_ring(bn, out, block_m=256) for bn in (64, 128, 160, 192)
              for out in ("bfloat16", "float32")}
    assert depths == {(64, "bfloat16"): 5, (128, "bfloat16"): 4, (160, "bfloat16"): 4, (192, "bfloat16"): 3,
                      (64, "float32"): 5, (128, "float32"): 4, (160, "float32"): 4, (192, "float32"): 4}


@pytest.mark.parametrize("options,match", [
    (dict(block_m=256, block_n=128, gated=True, stages=3), r"block_m=256 .* cannot be gated .* found gated=True"),
    (dict(block_m=256, block_n=256), r"block_m=256 needs block_n at most 192 .* found 256"),
    (dict(block_m=256, block_n=200), r"block_m=256 needs block_n at most 192 .* found 200"),
    (dict(block_m=256, block_n=128, stages=5), r"stages must be a positive int whose ring and epilogue fit 232448 "
                                               r"bytes of shared memory \(279632 bytes with bfloat16 output and "
                                               r"block_n=128, block_m=256\), found 5"),
    (dict(block_m=256, block_n=192, stages=4), r"\(279616 bytes with bfloat16 output and block_n=192, block_m=256\)"),
    (dict(block_m=192), r"block_m must be one of \[64, 128, 256\] \(rows of C per CTA tile\), found 192"),
    (dict(block_m=256.0, block_n=128), r"block_m must be one of \[64, 128, 256\] .* found 256.0"),
    (dict(block_m=True), r"block_m must be one of \[64, 128, 256\] .* found True"),
], ids=["gated", "block-n-256", "block-n-200", "stages-5", "192-stages-4", "block-m-192", "float", "bool"])
def test_what_a_256_row_tile_refuses(options, match):
    with pytest.raises(ValueError, match=match):
        make_gemm(1024, 1024, 1024, **options)


def test_cluster_2_needs_an_even_number_of_256_row_tiles():
    make_gemm(1024, 1024, 1024, block_m=256, block_n=128, cluster=2, persistent=False, group_m=16)  # 4 row tiles
    with pytest.raises(ValueError, match=r"cluster=2 .* one or an even number of 256-row tiles, .* found m=1280"):
        make_gemm(1280, 1024, 1024, block_m=256, block_n=128, cluster=2, persistent=False, group_m=16)


# -- CPU: names, the cache key, the planner -----------------------------------------------------


def test_the_name_and_key_show_256_rows_only():
    plain = GemmSpec(4096, 4096, block_n=128)
    assert plain == GemmSpec(4096, 4096, block_n=128, block_m=128) and plain.name.endswith("_bf16_bf16_bn128")
    coop = GemmSpec(4096, 4096, block_n=128, block_m=256)
    assert coop != plain and coop.stages == 4 and coop.name == "tvm_tirx_gemm_n4096_k4096_bf16_bf16_bm256_bn128"
    assert GemmSpec(4096, 4096, block_n=128, block_m=256, stages=3).name.endswith("_bm256_bn128_s3")
    assert plain.replace(block_m=256) == coop  # the ring derived again for 256 rows
    assert str(coop.prim_func().attrs["global_symbol"]) == coop.name


def test_an_override_takes_256_rows_to_the_torch_operators_and_the_relax_offload(torch_cpu):
    torch = torch_cpu
    from tvm_tirx import ops
    from tvm_tirx.ops import gemm_kernels, relax_gemm

    x = torch.empty(4096, 512, dtype=torch.bfloat16, device="meta")
    w = torch.empty(8192, 512, dtype=torch.bfloat16, device="meta")
    match = relax_gemm.GemmMatch(None, None, False, (4096,), 4096, 8192, 512, "bfloat16", "bfloat16")
    planner.clear_overrides()
    try:
        planner.override(8192, 512, {"block_n": 192, "block_m": 256})
        assert planner.choose_gemm(4096, 8192, 512) == {"block_n": 192, "stages": 3, "block_m": 256}
        gemm_kernels.clear_kernels()
        (key,) = ops.check(ops.linear, x, w)
        assert (key.block_m, key.block_n, key.stages) == (256, 192, 3) and "_bm256_bn192" in key.name
        assert relax_gemm.match_spec(match) == key
        with pytest.raises(ValueError, match="override: "):
            planner.override(8192, 512, {"block_n": 128, "block_m": 192})
    finally:
        planner.clear_overrides()
        gemm_kernels.clear_kernels()


def _bench_gemm():
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from bench import gemm  # pylint: disable=import-outside-toplevel

    return gemm


def test_every_bench_tile_variant_is_a_valid_configuration_named_by_its_tile():
    bench = _bench_gemm()
    assert {"256x128 s4", "256x160 s4", "256x192 s3"} <= set(bench.TILE_VARIANTS)
    for name, config in bench.TILE_VARIANTS.items():
        make_gemm(4096, 4096, 4096, **config)
        split = f" split{config['splits']}" if config.get("splits", 1) > 1 else ""
        split += f" cluster{config['cluster']}" if config.get("cluster", 1) > 1 else ""
        assert name == f"{bench._tile_label(config)} s{config['stages']}{split}"


def test_the_bench_reports_256_row_rates_apart_from_tile_rate(capsys):
    bench = _bench_gemm()
    names = list(bench.TILE_VARIANTS)
    bench._print_tile_rates(names, [[1.0 - i / 100 for i in range(len(names))]])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("TILE_RATE measured on 1 shapes") and "(256" not in lines[0]
    assert re.search(r"\{256: 1\.0, 192: 0\.99, 176: 0\.98, 160: 0\.97, 144: 0\.96, 128: 0\.95, 64: 0\.93, 32: 0\.84, "
                     r"16: 0\.82\}", lines[0])
    assert lines[1].startswith("256-row tiles") and "(256, 192): 0.89, (256, 160): 0.9, (256, 128): 0.91" in lines[1]


# -- CPU: registers ----------------------------------------------------------------------------


@pytest.mark.parametrize("block_n,stages,options", [(128, 4, {}), (160, 4, {}), (192, 3, {}),
                                                    (128, 4, dict(bias="float32", activation="gelu_tanh",
                                                                  residual=True))],
                         ids=["256x128", "256x160", "256x192", "256x128-bias-gelu-residual"])
def test_the_consumers_hold_two_accumulator_sets_without_spills(block_n, stages, options):
    # 2 x block_n / 2 fp32 accumulators per consumer thread under setmaxnreg 232: 192 at block_n 192.
    # (A fused epilogue at 160 or 192 columns spills: its scratch registers come on top.)
    kernel = _kernel(f"cooperative spills {block_n} {sorted(options.items())}", M, 4096, 4096, block_m=256,
                     block_n=block_n, stages=stages, persistent=False, group_m=16, **options)
    report = testing.ptxas_report(kernel)
    assert "0 bytes spill stores, 0 bytes spill loads" in report, report
    assert not re.search(r"C75\d\d", report), report  # wgmma serialised


# -- on the GPU --------------------------------------------------------------------------------


def _run_time_m_gemm(block_n, stages, persistent):
    return make_gemm(M, 4096, 4096, block_m=256, block_n=block_n, stages=stages, persistent=persistent, group_m=16)


def _fused_gemm(out_dtype):
    return make_gemm(M, 1000, 512, out_dtype=out_dtype, block_m=256, block_n=128, stages=4, persistent=False,
                     bias="float32", activation="gelu_tanh", residual=True)


def _majors_gemm(a_major, b_major):
    return make_gemm(1000, 1000, 1000, block_m=256, block_n=128, stages=4, a_major=a_major, b_major=b_major)


def _fp8_gemm():
    return make_gemm(1000, 1024, 1024, in_dtype="float8_e4m3fn", block_m=256, block_n=128, stages=4)


RUN_TIME_M_CASES = [(128, 4), (192, 3)]
MAJOR_CASES = [("k", "n"), ("m", "k"), ("m", "n")]


def test_every_gpu_kernel_below_is_a_valid_configuration():
    # built on the device only: a configuration make_gemm refuses must fail here, in CI, instead
    for block_n, stages in RUN_TIME_M_CASES:
        for persistent in (True, False):
            _run_time_m_gemm(block_n, stages, persistent)
    for out_dtype in ("bfloat16", "float32"):
        _fused_gemm(out_dtype)
    for a_major, b_major in MAJOR_CASES:
        _majors_gemm(a_major, b_major)
    _fp8_gemm()


@pytest.mark.gpu
@pytest.mark.parametrize("block_n,shape,out_dtype,options", COOPERATIVE_GPU_CASES, ids=COOPERATIVE_IDS)
def test_cooperative_tiles_on_gpu(torch_cuda, block_n, shape, out_dtype, options):
    _check_tile(torch_cuda, block_n, shape, out_dtype, options)


@pytest.mark.gpu
@pytest.mark.parametrize("block_n,stages", RUN_TIME_M_CASES)
@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "one-tile"])
def test_cooperative_run_time_m_on_gpu_from_one_kernel(torch_cuda, block_n, stages, persistent):
    kernel = tvm_tirx.compile(_run_time_m_gemm(block_n, stages, persistent), target="cuda")
    for m in RUN_TIME_MS:
        _check(torch_cuda, kernel, m, 4096, 4096, "bfloat16", seed=m)


@pytest.mark.gpu
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
def test_cooperative_fused_bias_gelu_residual_on_gpu(torch_cuda, out_dtype):
    torch = torch_cuda
    n, k = 1000, 512
    kernel = tvm_tirx.compile(_fused_gemm(out_dtype), target="cuda")
    for m in (1, 255, 1000, 4097):
        torch.manual_seed(m)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        bias = torch.randn(n, device="cuda", dtype=torch.float32) * 4
        residual = torch.randn(m, n, device="cuda", dtype=getattr(torch, out_dtype)) * 8
        c = torch.full((m, n), float("nan"), device="cuda", dtype=getattr(torch, out_dtype))
        kernel(a, b, bias, residual, c)
        torch.cuda.synchronize()
        ref = torch.nn.functional.gelu(a.float() @ b.float().t() + bias, approximate="tanh") + residual.float()
        err = ((c.float() - ref).abs().max() / ref.abs().max()).item()  # NaN (unwritten) fails too
        assert err <= (1e-2 if out_dtype == "bfloat16" else 2e-3), f"m={m} {out_dtype}: max relative error {err:.2e}"


@pytest.mark.gpu
@pytest.mark.parametrize("a_major,b_major", MAJOR_CASES, ids=["Ak-Bn", "Am-Bk", "Am-Bn"])
def test_cooperative_mn_major_operands_on_gpu(torch_cuda, a_major, b_major):
    kernel = tvm_tirx.compile(_majors_gemm(a_major, b_major), target="cuda")
    _run_majors(torch_cuda, kernel, 1000, 1000, 1000, a_major, b_major)


@pytest.mark.gpu
def test_cooperative_fp8_on_gpu(torch_cuda):
    torch = torch_cuda
    m, n, k = 1000, 1024, 1024
    kernel = tvm_tirx.compile(_fp8_gemm(), target="cuda")
    torch.manual_seed(0)
    a8 = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b8 = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    scales = torch.tensor([0.5, 0.25], device="cuda", dtype=torch.float32)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernel(a8, b8, c, scales)
    torch.cuda.synchronize()
    ref = (a8.float() @ b8.float().t()) * 0.125
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
    assert err <= 1e-2, f"fp8 256 x 128: max relative error {err:.2e}"
