"""``tvm_tirx.kernels.gemm.make_gemm`` on any shape: odd static sizes, run-time m and k.

CPU: odd shapes and run-time-m kernels compile and assemble for sm_90a (bf16 and float32
output); the guarded epilogue's bound guards are in the kernel (float32, and bf16 whose
rows the TMA cannot store) (and without such a guard
the bounds rule refuses the store); a K row stride the TMA cannot use is refused, statically
with a ValueError and on the host for a run-time k; sizes and options outside the supported
ones are ValueErrors; the grouped tile order visits every tile once with a short last group.
GPU (marker ``gpu``): the results against an fp32 torch product, NaN-filled outputs, one
compiled run-time-m kernel at M = 1 .. 16385.
"""

import re

import pytest

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.kernels.gemm import choose_tile, make_gemm, tile_order
from tvm_tirx.kernels.gemm.geometry import deepest_ring
from tvm_tirx.script import tirx as T

FP32 = dict(out_dtype="float32", stages=4)
STORE_V2 = "tvm_builtin_ptx_st_vec_global_v2_f32"
STORE_1 = "tvm_builtin_ptx_st_global_f32"
TMA_STORE = "ptx_cp_async_bulk_tensor_s2g_async_bulk_tensor_2d_global_shared__cta_bulk_group"
_BUILT = {}


def _kernel(name, m, n, k, **options):
    """The kernel compiled for sm_90a and assembled, once per test session."""
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    if name not in _BUILT:
        kernel = tvm_tirx.compile(make_gemm(m, n, k, **options), target="cuda", arch="sm_90a")
        assert len(testing.assemble(kernel)) > 0
        _BUILT[name] = kernel
    return _BUILT[name]


def _body(kernel):
    return kernel.cuda_source[kernel.cuda_source.index("__global__") :]


def _guarded_stores(kernel, store, m, last_col):
    """Stores of the kernel's body each under ``if (row < m && col <= last_col)``."""
    guard = rf"if \(\(row_ptr(_\d+)?\[0\] < {m}\) && \(col_ptr(_\d+)?\[0\] <= {last_col}\)\) \{{\s*{store}\("
    return len(re.findall(guard, _body(kernel)))


# -- CPU: compile and assemble ----------------------------------------------------------------


def test_odd_static_shape_float32_stores_one_element_at_a_time_under_guards():
    kernel = _kernel("odd-fp32", 4097, 4095, 4104, **FP32)  # 4104 bf16 = 8208 bytes: a multiple of 16
    # n = 4095 is odd: rows are 4-byte aligned only, so st.global.f32, each under its guard
    assert _body(kernel).count(STORE_1 + "(") == 128 and STORE_V2 + "(" not in _body(kernel)
    assert _guarded_stores(kernel, STORE_1, 4097, 4094) == 128
    assert "i_1 * 65" in _body(kernel)  # 65 K tiles of 64: the last one half past k, zero-filled


def test_odd_static_shape_bf16_is_stored_by_clipped_tma_boxes():
    kernel = _kernel("odd-bf16", 4097, 4104, 4104)  # n = 4104: 8208-byte rows of C
    assert len(re.findall(rf"\btvm_builtin_{TMA_STORE}\(", _body(kernel))) == 4
    assert "row_ptr" not in _body(kernel)  # no guards: the TMA clips the boxes at C's edge


@pytest.mark.parametrize(
    "n,store,atoms",
    [(4095, "tvm_builtin_ptx_st_global_b16_bf16", 128), (4094, "tvm_builtin_ptx_st_global_b32", 64)],
    ids=["odd-n-b16", "even-n-b32"],
)
def test_bf16_rows_the_tma_cannot_store_take_guarded_stores(n, store, atoms):
    # n * 2 bytes not a multiple of 16: no TMA store; bf16 (odd n) or bf16x2 words (even n)
    m = T.dynamic("m")
    kernel = _kernel(f"rt-m-bf16-{n}", m, n, 4104)
    assert not re.search(rf"\btvm_builtin_{TMA_STORE}\(", _body(kernel))
    assert _body(kernel).count(store + "((&") == atoms
    columns = n if atoms == 128 else n // 2  # of C, or of C seen as bf16 pairs
    assert _guarded_stores(kernel, store, "m", columns - 1) == atoms


def _sass_or_skip(kernel):
    from tvm_tirx import cli

    try:
        return cli.disassemble(testing.assemble(kernel))
    except cli.CliError as err:
        pytest.skip(f"needs a disassembler (the test extra's nvidia-cuda-nvdisasm): {err}")


@pytest.mark.parametrize(
    "name,n,options,reader",
    [("rt-m-bf16-4095", 4095, {}, "F2FP"), ("rt-m-bf16-4094", 4094, {}, "F2FP"), ("rt-m-bf16", 4096, {}, "F2FP"),
     ("rt-m-fp32", 4096, FP32, "STG"), ("rt-m-bf16-4095-bn64", 4095, dict(block_n=64), "F2FP")],
    ids=["bf16-b16", "bf16-b32", "bf16-tma", "fp32-v2", "bf16-b16-block-n-64"],
)
def test_the_epilogue_reads_the_accumulators_after_the_last_wgmma_wait_in_sass(name, n, options, reader):
    # ptxas 13.0 moved the F2FP of two fused cvt.rn.bf16.f32 above the WARPGROUP.DEPBAR of
    # wgmma.wait_group 0 (the n = 4095 epilogue lost the last K tile on the H200); the
    # epilogue's first conversion (bf16) or store (fp32) must come after that wait
    kernel = _kernel(name, T.dynamic("m"), n, 4104 if n != 4096 else 4096, **options)
    sass = _sass_or_skip(kernel).splitlines()
    wait = next(i for i, line in enumerate(sass) if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in line)
    first = next(i for i, line in enumerate(sass) if re.search(rf"\b{reader}\b", line))
    assert first > wait, f"{sass[first].strip()} at line {first}, before the wait at line {wait}"


@pytest.mark.parametrize("block_n", [64, 128, 192])
def test_narrow_tiles_issue_the_narrow_wgmma_and_store_their_columns(block_n):
    # the tile's columns set the wgmma N, the B box rows, the TMA store boxes (64 columns
    # each) and the guarded stores (block_n / 8 register pairs x 2 row halves per thread)
    m = T.dynamic("m")
    tma = _kernel(f"rt-m-bf16-bn{block_n}", m, 4096, 4096, block_n=block_n, persistent=False, group_m=16)
    assert f"wgmma.mma_async.sync.aligned.m64n{block_n}k16.f32.bf16.bf16" in tma.cuda_source
    assert "m64n256k16" not in tma.cuda_source
    assert len(re.findall(rf"\btvm_builtin_{TMA_STORE}\(", _body(tma))) == block_n // 64
    script = make_gemm(m, 4096, 4096, block_n=block_n, persistent=False, group_m=16).script()
    assert f"T.cta_id([(m + 128 - 1) // 128 * {-(-4096 // block_n)}])" in script  # the grid: one CTA per tile
    # and each CTA computes its one tile: no run-time loop around it (such a loop, of one
    # trip, cost 6% at 16384 x 14336 x 4096 on the H200)
    assert script.count("for i in range(1):") == 2
    fp32 = _kernel(f"odd-fp32-bn{block_n}", 4097, 4095, 4104, block_n=block_n, **FP32)
    assert _guarded_stores(fp32, STORE_1, 4097, 4094) == block_n // 2
    assert f"m64n{block_n}k16" in fp32.cuda_source
    fp8 = _kernel(f"fp8-bn{block_n}", 512, 1024, 1024, block_n=block_n, in_dtype="float8_e4m3fn")
    assert f"m64n{block_n}k32.f32.e4m3.e4m3" in fp8.cuda_source


#: widths that are not whole 64-column TMA store boxes (wgmma's N in steps of 8)
UNBOXED = [72, 144, 152, 200, 248]


@pytest.mark.parametrize("block_n", UNBOXED)
def test_widths_in_steps_of_8_store_per_thread_and_assemble(block_n):
    # wgmma's N is the width; bf16 output goes out by guarded per-thread pair stores (no
    # TMA store: the tile is not whole 64-column boxes), block_n / 8 pairs x 2 row halves
    m = T.dynamic("m")
    bf16 = _kernel(f"rt-m-bf16-bn{block_n}", m, 4104, 4096, block_n=block_n, persistent=False, group_m=16)
    assert f"wgmma.mma_async.sync.aligned.m64n{block_n}k16.f32.bf16.bf16" in bf16.cuda_source
    assert TMA_STORE not in bf16.cuda_source
    assert _guarded_stores(bf16, "tvm_builtin_ptx_st_global_b32", "m", 2051) == block_n // 4
    fp32 = _kernel(f"odd-fp32-bn{block_n}", 4097, 4095, 4104, block_n=block_n, **FP32)
    assert _guarded_stores(fp32, STORE_1, 4097, 4094) == block_n // 2
    exact = _kernel(f"exact-fp32-bn{block_n}", 1280, 4 * block_n, 512, block_n=block_n, persistent=True,
                    **FP32)
    assert STORE_V2 in exact.cuda_source and "row_ptr" not in _body(exact)  # whole tiles: no guards
    fp8 = _kernel(f"fp8-bn{block_n}", 512, 1024, 1024, block_n=block_n, in_dtype="float8_e4m3fn")
    assert f"m64n{block_n}k32.f32.e4m3.e4m3" in fp8.cuda_source


def test_widths_in_steps_of_8_take_deeper_rings_and_their_rules():
    from tvm_tirx.kernels.gemm import gemm_smem_bytes
    from tvm_tirx.kernels.gemm.config import deepest_ring

    # no bf16 output tile to stage (a token 1 KiB, as for float32): the ring gets the room
    assert gemm_smem_bytes(6, "bfloat16", 144) == gemm_smem_bytes(6, "float32", 144) == 6 * 272 * 128 + 1024 + 96 + 1024
    assert (deepest_ring(144, "bfloat16"), deepest_ring(176, "bfloat16"), deepest_ring(240, "bfloat16")) == (6, 5, 4)
    cluster = _kernel("cluster-bn160", 4096, 4104, 4104, block_n=160, cluster=2, persistent=False, group_m=16)
    assert "m64n160k16" in cluster.cuda_source and "multicast::cluster" in cluster.cuda_source
    with pytest.raises(ValueError, match=r"cluster=2 multicasts halves of B's stage.*multiple of 16, found 152"):
        make_gemm(4096, 4104, 4104, block_n=152, cluster=2, persistent=False, group_m=16)
    with pytest.raises(ValueError, match=r"b_major='n' stores B's stage as 64-column chunks: it needs block_n a "
                                         r"multiple of 64, found 144"):
        make_gemm(4096, 4096, 4096, block_n=144, b_major="n")
    for bad in (60, 100, 264, 8):
        with pytest.raises(ValueError, match=rf"block_n must be a multiple of 8 from 16 to 256 \(wgmma's N\), "
                                             rf"found {bad}"):
            make_gemm(4096, 4096, 4096, block_n=bad)


def test_narrow_tiles_fit_more_stages():
    from tvm_tirx.kernels.gemm import gemm_smem_bytes

    # a stage is (128 + block_n) rows of 128 bytes; the bf16 epilogue tiles 256 * block_n bytes
    assert gemm_smem_bytes(3, "bfloat16", 64) == 3 * 192 * 128 + 256 * 64 + 16 * 3 + 1024
    make_gemm(1024, 1024, 1024, block_n=128, stages=6)
    with pytest.raises(ValueError, match=r"\(263280 bytes with bfloat16 output and block_n=128\), found 7"):
        make_gemm(1024, 1024, 1024, block_n=128, stages=7)


@pytest.mark.parametrize(
    "m,n,block_n",
    [(128, 8192, 64), (128, 10240, 128), (128, 57344, 256), (1024, 8192, 256),
     (2048, 2048, 256), (16384, 8192, 256), (1, 40, 64),
     (3072, 3072, 192), (1536, 1536, 192), (4096, 4096, 256), (8192, 1024, 256), (6144, 6144, 256)],
)
def test_the_tile_table_picks_what_the_h200_measured_fastest(m, n, block_n):
    # bench/gemm.py --tiles on the H200: at m = 128 the 64-column tile won for n = 8192 (427
    # TFLOP/s against 161 for 128 x 256), the 128-column one for n = 10240 (441 / 247), the
    # 256-column one for n = 57344 (491 / 432); n = 40 fills more of a narrow tile; on
    # 2026-12-05 the 192-column tile won at 3072^3 (686 / 535 for 256 / 602 for 128) and
    # 1536^3 (438 / 356 / 334), and 256 at 4096^3 and 8192 x 1024 x 4096 (on an H100 too,
    # against the 256-row tiles: 752 / 714 for 256 x 128, 689 / 691; at 6144^3 781 / 784 for
    # 256 x 192 and 8192 x 8192 x 4096 763 / 754: the 128-row tile keeps them)
    assert choose_tile(m, n) == {"block_n": block_n, "stages": choose_tile(m, n)["stages"]}


@pytest.mark.parametrize("m,n", [(512, 512), (2048, 256), (300, 1024)])
def test_the_tile_table_takes_a_64_row_tile_where_128_row_ones_leave_sms_idle(m, n):
    # bench/gemm.py --tiles on an H100 (2026-12-06): 64 x 64 against 128 x 64, TFLOP/s, 50 / 45 at
    # 512^3, 332 / 263 at 2048 x 256 x 8192, 203 / 151 at 300 x 1024 x 8192; at one 128-row tile of
    # C it lost (100 x 4096 x 4096: 141 / 152, 128 x 4096 x 4096: 240 / 268): not taken there
    assert choose_tile(m, n) == {"block_n": 64, "stages": 8, "block_m": 64}
    assert "block_m" not in choose_tile(100, 4096) and "block_m" not in choose_tile(128, 4096)
    assert "block_m" not in choose_tile(1000, 1000)  # 113 / 141 there


@pytest.mark.parametrize("m,n,block_n", [(1024, 10240, 160), (5000, 5000, 160)])
def test_the_tile_table_takes_a_cooperative_tile_where_it_measured_faster(m, n, block_n):
    # bench/gemm.py --tiles --only 256x on an H100 (2026-12-05), TFLOP/s: 1024 x 10240 x 8192
    # 256 x 160 712 against 652 for 128 x 256 (the table's pick before); 5000^3 256 x 160 416
    # against 403 (256 x 192 ran at 491 there: the wave model does not see why, tiles.py)
    assert choose_tile(m, n) == {"block_n": block_n, "stages": 4, "block_m": 256}
    assert "block_m" not in choose_tile(m, n, gated=True)  # a gated GEMM has 128-row tiles only
    # a fused epilogue: no cooperative tile wider than 128 (the wider ones spill, ptxas -v)
    fused = choose_tile(m, n, fused=True)
    assert fused.get("block_m", 128) == 128 or fused["block_n"] <= 128


def test_the_tile_table_takes_the_deepest_ring_that_fits_and_checks_its_arguments():
    from tvm_tirx.kernels.gemm import gemm_smem_bytes
    from tvm_tirx.kernels.gemm.config import SMEM_LIMIT

    for out_dtype in ("bfloat16", "float32"):
        for block_n in (64, 128, 256):
            stages = choose_tile(128, 4 * block_n, out_dtype, sms=4)["stages"]
            assert gemm_smem_bytes(stages, out_dtype, block_n) <= SMEM_LIMIT
            assert stages == 8 or gemm_smem_bytes(stages + 1, out_dtype, block_n) > SMEM_LIMIT
    assert choose_tile(128, 8192, sms=32)["block_n"] == 256  # 32 tiles fill 32 SMs
    for bad in (dict(m=0, n=8), dict(m=8, n=True), dict(m=8, n=8, sms=2.0)):
        with pytest.raises(ValueError, match="choose_tile: .* must be a positive int"):
            choose_tile(**bad)
    with pytest.raises(ValueError, match=r"choose_tile: out_dtype must be one of \['bfloat16', 'float32'\], found 'bf16'"):
        choose_tile(8, 8, "bf16")


FUSED = [dict(bias="bfloat16"), dict(activation="silu"), dict(bias="float32", activation="gelu_tanh"),
         dict(bias="bfloat16", activation="relu")]


@pytest.mark.parametrize("options", FUSED, ids=["bias", "silu", "bias-gelu", "bias-relu"])
def test_the_fused_epilogue_adds_the_clamped_bias_and_issues_the_activation(options):
    m = T.dynamic("m")
    kernel = _kernel(f"fused-{sorted(options.items())}", m, 1000, 256, block_n=128, persistent=False, **options)
    body = _body(kernel)
    assert ("Bias" in body) == ("bias" in options)  # the vector is an argument only with a bias
    if "bias" in options:  # 64 loads per thread (128 columns / 2), each clamped to column n - 1 = 999
        assert len(re.findall(r"Bias_ptr\[min\(col_ptr(_\d+)?\[0\], 999\)\]", body)) == 64, "clamped to n - 1"
    counts = {"silu": ("ex2_approx_ftz_f32", "rcp_approx_ftz_f32"), "gelu_tanh": ("tanh_approx_f32",),
              "relu": ()}.get(options.get("activation"), ())
    for name in counts:  # one per accumulator register: 64 per thread
        assert len(re.findall(rf"\b\w*{name}\w*\(", body)) == 64, name
    script = make_gemm(m, 1000, 256, block_n=128, **options).script()
    params = re.search(r"def \w+\((.*?)\):", script).group(1)
    assert ("Bias: T.Buffer((1000,)" in params) == ("bias" in options), params
    if "bias" in options:  # inputs first, the output after them (Relax's call_tir order)
        assert params.index("B: ") < params.index("Bias: ") < params.index("C: "), params


def test_the_fused_epilogue_follows_the_fp8_scales():
    kernel = _kernel("fused-fp8", 512, 1024, 1024, in_dtype="float8_e4m3fn", bias="bfloat16", activation="relu",
                     block_n=128)
    assert kernel.name == "hopper_gemm_fp8_bias"
    script = make_gemm(512, 1024, 1024, in_dtype="float8_e4m3fn", bias="bfloat16", activation="relu",
                       block_n=128).script()
    params = re.search(r"def \w+\((.*?)\):", script).group(1)
    assert re.findall(r"(\w+): T.Buffer", params) == ["A", "B", "Bias", "C", "Scales"], params
    body = _body(kernel)  # C = relu(Scales[0] * Scales[1] * A B^T + Bias): the scale first
    assert body.index("mul_rn_f32") < body.index("Bias_ptr[")


@pytest.mark.parametrize("options,match", [(dict(bias="float16"), r"bias must be one of \[None, 'bfloat16', 'float32'\]"),
                                           (dict(activation="gelu"), r"activation must be one of \[None, 'relu', 'silu', "
                                                                     r"'gelu_tanh'\], found 'gelu'")])
def test_fused_options_it_does_not_take_are_value_errors(options, match):
    with pytest.raises(ValueError, match=match):
        make_gemm(256, 256, 64, **options)


def test_run_time_m_float32_kernel_has_its_bound_guards():
    m = T.dynamic("m")
    kernel = _kernel("rt-m-fp32", m, 4096, 4096, **FP32)
    # 32 column blocks x 2 row halves of v2 stores per thread, each under row < m, col + 2 <= n
    assert _body(kernel).count(STORE_V2 + "(") == 64
    assert _guarded_stores(kernel, STORE_V2, "m", 4094) == 64
    script = make_gemm(m, 4096, 4096, **FP32).script()
    assert script.count("if row < m and col + 2 <= 4096:") == 1  # the one guarded call, in unrolled loops


def test_run_time_m_bf16_kernel_loops_over_a_run_time_tile_count():
    m = T.dynamic("m")
    kernel = _kernel("rt-m-bf16", m, 4096, 4096)
    assert len(re.findall(rf"\btvm_builtin_{TMA_STORE}\(", _body(kernel))) == 4
    script = make_gemm(m, 4096, 4096).script()
    # the persistent loops (producer, consumers) run over ceil(ceil(m / 128) * 16 / 132) rounds
    assert script.count("for i in range(((m + 127) // 128 * 16 + 131) // 132):") == 2
    assert script.count("T.min((m + 128 - 1) // 128") == 4  # the short last group: bm, bn in both loops


def test_run_time_m_one_cta_per_tile_and_run_time_k():
    m, k = T.dynamic("m"), T.dynamic("k")
    kernel = _kernel("rt-mk-fp32-one-tile", m, 4095, k, persistent=False, group_m=16, **FP32)
    assert _guarded_stores(kernel, STORE_1, "m", 4094) == 128
    lowered = testing.lower(make_gemm(m, 4095, k, persistent=False, group_m=16, **FP32)).script()
    # the TMA maps' stride rule, checked on the host before each launch
    assert "global stride not a multiple of 16 bytes: expected the byte stride k * 2 of A" in lowered
    assert "global stride not a multiple of 16 bytes: expected the byte stride k * 2 of B" in lowered


@pytest.mark.parametrize("m, n", [(T.dynamic("m"), 1), (1, 256), (128, 1)], ids=["run-time m, n=1", "m=1", "n=1"])
def test_a_single_row_of_a_or_b_is_a_legal_tma_tensor(m, n):
    # B (1, k) or A (1, k): its row axis has one coordinate and a layout stride of 0 between
    # coordinates 0 and 1; refused before ("global stride not a multiple of 16 bytes ...
    # found byte strides (0,)"), though nn.Linear(d, 1) heads have exactly that weight
    lowered = testing.lower(make_gemm(m, n, 64)).script()
    assert lowered.count("T.tensormap_encode_tiled(") >= 2


@pytest.mark.parametrize("n, out_dtype", [(24, "float32"), (1001, "bfloat16")], ids=["fp32", "bf16-odd-n"])
def test_the_guarded_store_keeps_the_output_named_c(n, out_dtype):
    # a name bound to C itself inside the kernel once renamed the parameter to it: the
    # call-time argument errors said 'dst'
    func = make_gemm(T.dynamic("m"), n, 64, out_dtype=out_dtype, stages=4 if out_dtype == "float32" else 3)
    assert [p.name for p in func.params] == ["A", "B", "C"]
    assert re.search(r"\bC: T\.Buffer", func.script())


def test_exact_shapes_keep_the_unguarded_epilogue():
    kernel = _kernel("exact-fp32", 1024, 1024, 1024, **FP32)
    assert _body(kernel).count(STORE_V2 + "(") == 64 and "row_ptr" not in _body(kernel)


def test_an_unguarded_store_at_run_time_m_is_refused():
    # the guard is what proves the float32 stores in bounds: without it the rule refuses
    m = T.dynamic("m")

    @T.function
    def unguarded(C: T.Tensor((m, 256), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(m, 128), block=128))
        regs = T.alloc_local((2,), "float32")
        row = T.cuda.block_idx("x") * 128 + T.cuda.thread_idx("x")
        T.cuda.tile.apply(T.ptx["st.global.v2.f32"], C.sub[row, 0:2], regs)

    with pytest.raises(TileError, match="view not provably within the tensor's bounds"):
        testing.lower(unguarded)


@pytest.mark.parametrize("n", [4096, 4095, 4094], ids=["fp32-v2", "bf16-b16", "bf16-b32"])
def test_a_guard_one_row_too_loose_is_refused(monkeypatch, n):
    # the generator's own stores: with row <= m instead of row < m the bounds rule refuses them
    from tvm_tirx.kernels.parts.epilogue import stores  # pylint: disable=import-outside-toplevel

    monkeypatch.setattr(stores, "bound_guard", lambda row, col, m, atom, columns: T.And(row <= m, col + atom <= columns))
    options = FP32 if n == 4096 else {}
    with pytest.raises(TileError, match="view not provably within the tensor's bounds"):
        testing.lower(make_gemm(T.dynamic("m"), n, 4104, **options))


def test_a_column_guard_one_element_too_loose_is_refused(monkeypatch):
    from tvm_tirx.kernels.parts.epilogue import stores  # pylint: disable=import-outside-toplevel

    monkeypatch.setattr(stores, "bound_guard", lambda row, col, m, atom, columns: T.And(row < m, col + atom <= columns + 1))
    with pytest.raises(TileError, match="view not provably within the tensor's bounds"):
        testing.lower(make_gemm(T.dynamic("m"), 4095, 4104, out_dtype="float32", stages=4))


# -- CPU: errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,options,match",
    [
        ((1024, 256, 100), {}, r"TMA row stride not a multiple of 16 bytes: k: A \(m, k\) and B \(n, k\) rows of 100 "
                               r"bfloat16 take 200 bytes"),
        ((1024, 256, 72), dict(in_dtype="float8_e4m3fn"), r"72 float8_e4m3fn take 72 bytes"),
        (("m", 256, 64), dict(in_dtype="float8_e4m3fn"), r"a run-time m needs in_dtype='bfloat16'"),
        (("m", 256, 64), dict(cluster=2), r"cluster=2 .* needs a static m"),
        ((1024, "n", 64), {}, r"n must be an int \(a run-time n is not supported\)"),
        ((0, 256, 64), {}, r"m must be in 1 \.\. 2147483519 \(int32 row indices\), found 0"),
        ((2**31 + 64, 2, 8), {}, r"m must be in 1 \.\. 2147483519"),
        ((2**30, 2, 8), dict(out_dtype="float32"), r"A \(m, k\) = \(1073741824, 8\) holds 8589934592 elements; "
                                                    r"at most 2147483647"),
        ((True, 256, 64), {}, r"m must be a positive Python int .* found True \(bool\)"),
        ((1024, 256, 64), dict(out_dtype="float16"), r"out_dtype must be one of"),
        ((1024, 256, 64), dict(stages=4), r"stages must be a positive int whose ring and epilogue fit 232448 bytes "
                                          r"of shared memory \(263232 bytes with bfloat16 output and block_n=256\), found 4"),
        ((1024, 256, 64), dict(wait_depth=2), r"wait_depth must be 0 or 1, found 2"),
        ((1024, 256, 64), dict(block_n=100), r"block_n must be a multiple of 8 from 16 to 256 \(wgmma's N\), found 100"),
        ((1024, 256, 64), dict(block_n=64.0), r"block_n must be a multiple of 8 from 16 to 256 \(wgmma's N\), found 64.0"),
    ],
    ids=["k-stride", "k-stride-fp8", "fp8-run-time-m", "cluster-run-time-m", "run-time-n",
         "m-zero", "m-over-int32", "c-over-int32-elements", "m-bool", "out-dtype", "stages", "wait-depth",
         "block-n", "block-n-float"],
)
def test_unsupported_sizes_and_options_are_value_errors(shape, options, match):
    shape = [T.dynamic(s) if isinstance(s, str) else s for s in shape]
    with pytest.raises(ValueError, match=match):
        make_gemm(*shape, **options)


def test_an_int64_run_time_m_is_refused():
    with pytest.raises(ValueError, match="int32 run-time extent .*found the run-time extent m of dtype int64"):
        make_gemm(T.dynamic("m", "int64"), 256, 64)


# -- the tile order ----------------------------------------------------------------------------


@pytest.mark.parametrize("group_m", [1, 2, 3, 8])
def test_tile_order_visits_every_tile_once_with_a_short_last_group(group_m):
    for tiles_m in range(1, 20):
        for tiles_n in (1, 2, 5):
            order = [tile_order(t, tiles_m, tiles_n, group_m) for t in range(tiles_m * tiles_n)]
            assert sorted(order) == [(i, j) for i in range(tiles_m) for j in range(tiles_n)], (tiles_m, tiles_n)


def test_tile_order_pairs_share_b_columns_when_cluster_2_is_allowed():
    # cluster=2 needs an even number of row tiles and an even group_m: then tiles 2p and
    # 2p + 1 (the two CTAs of a cluster) always have the same column tile
    for tiles_m in range(2, 24, 2):
        for group_m in (2, 4, 6, 8):
            for t in range(0, tiles_m * 3, 2):
                assert tile_order(t, tiles_m, 3, group_m)[1] == tile_order(t + 1, tiles_m, 3, group_m)[1]


# -- on the GPU --------------------------------------------------------------------------------

RUN_TIME_MS = (1, 127, 128, 1000, 4096, 16385)
TOLERANCE = {"bfloat16": 1e-2, "float32": 1e-4}
PAD_ROWS = 3  # NaN rows after C: a store past row m - 1 shows there


def _check(torch, kernel, m, n, k, out_dtype, seed=0):
    """Run ``kernel`` on random (m, k) x (n, k) bf16 inputs into a NaN-filled C that is the
    first m rows of a taller buffer; compare with the fp32 product, and check the rows
    after C were not written."""
    torch.manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    buffer = torch.full((m + PAD_ROWS, n), float("nan"), device="cuda", dtype=getattr(torch, out_dtype))
    c = buffer[:m]
    kernel(a, b, c)
    torch.cuda.synchronize()
    ref = a.float() @ b.float().t()
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()  # NaN (unwritten) fails too
    assert err <= TOLERANCE[out_dtype], f"{(m, n, k)} {out_dtype}: max relative error {err:.2e}"
    assert torch.isnan(buffer[m:].float()).all(), f"{(m, n, k)}: rows past m were written"


@pytest.mark.gpu
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "one-tile"])
def test_run_time_m_on_gpu_from_one_kernel(torch_cuda, out_dtype, persistent):
    options = dict(out_dtype=out_dtype, stages=3 if out_dtype == "bfloat16" else 4, persistent=persistent)
    kernel = tvm_tirx.compile(make_gemm(T.dynamic("m"), 4096, 4096, **options), target="cuda")
    for m in RUN_TIME_MS:
        _check(torch_cuda, kernel, m, 4096, 4096, out_dtype, seed=m)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [4095, 4094])
def test_run_time_m_bf16_guarded_stores_on_gpu(torch_cuda, n):
    kernel = tvm_tirx.compile(make_gemm(T.dynamic("m"), n, 4104), target="cuda")
    for m in RUN_TIME_MS:
        _check(torch_cuda, kernel, m, n, 4104, "bfloat16", seed=m)


@pytest.mark.gpu
def test_run_time_m_and_k_on_gpu_from_one_kernel(torch_cuda):
    kernel = tvm_tirx.compile(make_gemm(T.dynamic("m"), 4095, T.dynamic("k"), **FP32), target="cuda")
    for m, k in [(1, 8), (127, 4104), (1000, 64), (4097, 200), (300, 4096)]:
        _check(torch_cuda, kernel, m, 4095, k, "float32", seed=m + k)
    a = torch_cuda.zeros(128, 4100, device="cuda", dtype=torch_cuda.bfloat16)  # 8200-byte rows
    b = torch_cuda.zeros(4095, 4100, device="cuda", dtype=torch_cuda.bfloat16)
    c = torch_cuda.zeros(128, 4095, device="cuda")
    with pytest.raises(ValueError, match="global stride not a multiple of 16 bytes"):
        kernel(a, b, c)


ODD_GPU_CASES = [
    ((4000, 4096, 4096), "bfloat16"),
    ((4000, 4096, 4096), "float32"),
    ((4097, 4095, 4104), "float32"),
    ((4097, 4095, 4104), "bfloat16"),  # 8190-byte rows of C: guarded st.global.b16, no TMA store
    ((4097, 4094, 4104), "bfloat16"),  # 8188-byte rows: guarded st.global.b32 of bf16 pairs
    ((4097, 4104, 4104), "bfloat16"),  # the last column tile: one box partly, three wholly past n
    ((129, 264, 72), "bfloat16"),
    ((129, 263, 72), "float32"),
    ((1280, 512, 200), "bfloat16"),  # exact tiles (no guards), 10 row tiles: a short last group of 2
    ((1280, 512, 200), "float32"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,out_dtype", ODD_GPU_CASES, ids=[f"{'x'.join(map(str, s))}-{o}" for s, o in ODD_GPU_CASES])
@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "one-tile"])
def test_odd_static_shapes_on_gpu(torch_cuda, shape, out_dtype, persistent):
    options = dict(out_dtype=out_dtype, stages=3 if out_dtype == "bfloat16" else 4, persistent=persistent)
    kernel = tvm_tirx.compile(make_gemm(*shape, **options), target="cuda")
    _check(torch_cuda, kernel, *shape, out_dtype)


NARROW_BLOCK_NS = (64, 128, 192)
NARROW_GPU_CASES = [
    ((4097, 4095, 4104), "bfloat16", {}),  # guarded st.global.b16
    ((4000, 4104, 4104), "bfloat16", {}),  # TMA stores clipped at the last column tile
    ((129, 263, 72), "float32", dict(stages=6)),
    ((4000, 4104, 4104), "bfloat16", dict(cluster=2)),
    ((1280, 512, 200), "float32", dict(persistent=True, stages=6)),  # exact tiles, unguarded
]


@pytest.mark.gpu
@pytest.mark.parametrize("block_n", NARROW_BLOCK_NS)
@pytest.mark.parametrize("shape,out_dtype,options", NARROW_GPU_CASES,
                         ids=["odd-b16", "tma-clipped", "fp32-guarded", "cluster-2", "fp32-exact"])
def test_narrow_tiles_on_gpu(torch_cuda, block_n, shape, out_dtype, options):
    _check_tile(torch_cuda, block_n, shape, out_dtype, options)


def _tile_gemm(block_n, shape, out_dtype, options):
    """``make_gemm`` of one CTA per tile of ``block_n`` columns (plus ``options``); a
    requested ``stages`` is capped at the deepest ring that fits this tile and output."""
    options = dict(dict(persistent=False, group_m=16, out_dtype=out_dtype), **options)
    if "stages" in options:
        rows = options.get("block_m", 128)
        options["stages"] = min(options["stages"], deepest_ring(block_n, out_dtype, block_m=rows))
    return make_gemm(*shape, block_n=block_n, **options)


def _check_tile(torch, block_n, shape, out_dtype, options):
    """One CTA per tile of ``block_n`` columns (plus ``options``) against the fp32 product."""
    kernel = tvm_tirx.compile(_tile_gemm(block_n, shape, out_dtype, options), target="cuda")
    _check(torch, kernel, *shape, out_dtype)


NARROW_RUN_TIME_M_WIDTHS = (64, 128, 176, 192)


def _run_time_m_gemm(block_n):
    return make_gemm(T.dynamic("m"), 4096, 4096, block_n=block_n, persistent=False, group_m=16,
                     stages=min(5, deepest_ring(block_n, "bfloat16")))


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
def test_every_width_takes_shapes_its_tiles_cover_exactly(out_dtype):
    # bf16 output on exact tiles of a width that is not whole 64-column boxes (1024 x 10240
    # at 160 columns) was refused by the float32-only ExactStore (found on the H200)
    from tvm_tirx.kernels.gemm.config import BLOCK_NS

    for block_n in BLOCK_NS:
        make_gemm(256, 2 * block_n, 128, block_n=block_n, out_dtype=out_dtype, stages=2)


def test_every_gpu_tile_case_is_a_valid_configuration():
    # the GPU tests below build these on the device only: a configuration make_gemm refuses
    # (a ring too deep for its width, 2026-12-05) must fail here, in CI, instead
    for block_n in NARROW_BLOCK_NS:
        for shape, out_dtype, options in NARROW_GPU_CASES:
            _tile_gemm(block_n, shape, out_dtype, options)
    for block_n, shape, out_dtype, options in UNBOXED_GPU_CASES:
        _tile_gemm(block_n, shape, out_dtype, options)
    for block_n in NARROW_RUN_TIME_M_WIDTHS:
        _run_time_m_gemm(block_n)
    for block_n, shape, out_dtype, options in COOPERATIVE_GPU_CASES:  # test_gemm_cooperative.py's
        _tile_gemm(block_n, shape, out_dtype, options)


@pytest.mark.gpu
@pytest.mark.parametrize("block_n", NARROW_RUN_TIME_M_WIDTHS)
def test_narrow_tiles_run_time_m_on_gpu_from_one_kernel(torch_cuda, block_n):
    kernel = tvm_tirx.compile(_run_time_m_gemm(block_n), target="cuda")
    for m in RUN_TIME_MS:
        _check(torch_cuda, kernel, m, 4096, 4096, "bfloat16", seed=m)


UNBOXED_GPU_CASES = [
    (144, (4097, 4095, 4104), "bfloat16", {}),  # guarded st.global.b16 (odd n)
    (152, (4000, 4104, 4104), "bfloat16", {}),  # guarded pairs, the last column tile partial
    (200, (1000, 1000, 1000), "float32", dict(stages=5)),
    (160, (4096, 4104, 4104), "bfloat16", dict(cluster=2)),  # multicast halves of 80 rows
    (248, (1280, 992, 512), "float32", dict(persistent=True, stages=4)),  # exact tiles, unguarded
]


@pytest.mark.gpu
@pytest.mark.parametrize("block_n,shape,out_dtype,options", UNBOXED_GPU_CASES,
                         ids=["144-odd-b16", "152-pairs", "200-fp32", "160-cluster-2", "248-fp32-exact"])
def test_widths_in_steps_of_8_on_gpu(torch_cuda, block_n, shape, out_dtype, options):
    _check_tile(torch_cuda, block_n, shape, out_dtype, options)


#: 256-row (cooperative, ``block_m=256``) tiles on the GPU (test_gemm_cooperative.py runs them):
#: (block_n, shape, out_dtype, options), m never a multiple of 256 but where the tiles are exact
COOPERATIVE = dict(block_m=256)
COOPERATIVE_GPU_CASES = [
    (128, (1000, 1000, 512), "bfloat16", dict(COOPERATIVE, stages=4)),  # TMA stores clipped at both edges
    (128, (4096, 1024, 4096), "bfloat16", dict(COOPERATIVE, stages=4)),
    (192, (4096, 1024, 4096), "bfloat16", dict(COOPERATIVE, stages=3)),
    (160, (4000, 4104, 4104), "bfloat16", dict(COOPERATIVE, stages=4)),  # guarded pairs (160: no whole boxes)
    (128, (4097, 4095, 4104), "bfloat16", dict(COOPERATIVE, stages=4)),  # guarded st.global.b16 (odd n)
    (128, (1000, 1000, 512), "float32", dict(COOPERATIVE, stages=4)),  # guarded v2 stores
    (192, (1024, 1152, 512), "float32", dict(COOPERATIVE, persistent=True, stages=4)),  # exact tiles, unguarded
    (128, (4096, 4104, 4104), "bfloat16", dict(COOPERATIVE, cluster=2)),  # 16 row tiles: pairs share B
    (128, (4000, 4096, 4096), "bfloat16", dict(COOPERATIVE, persistent=True, group_m=8)),  # 2 rounds a CTA
    (64, (1000, 264, 72), "bfloat16", dict(COOPERATIVE, stages=5)),
]
COOPERATIVE_IDS = ["256x128-clipped", "256x128-4096", "256x192-4096", "256x160-pairs", "256x128-odd-b16",
                   "256x128-fp32", "256x192-fp32-exact", "256x128-cluster-2", "256x128-persistent", "256x64-small"]


def _activation_reference(torch, x, name):
    f = torch.nn.functional
    return {None: x, "relu": f.relu(x), "silu": f.silu(x), "gelu_tanh": f.gelu(x, approximate="tanh")}[name]


@pytest.mark.gpu
@pytest.mark.parametrize("options", FUSED, ids=["bias", "silu", "bias-gelu", "bias-relu"])
@pytest.mark.parametrize("shape,out_dtype,block_n,block_m", [
    ((1000, 1000, 256), "bfloat16", 256, 128), ((129, 999, 72), "bfloat16", 64, 128),
    ((300, 513, 200), "float32", 128, 128),
    ((50, 1000, 256), "bfloat16", 128, 64), ((129, 999, 72), "float32", 64, 64),  # the 64-row tile (one consumer)
], ids=["tma-store", "guarded-b16", "fp32", "64-row-tma-store", "64-row-fp32"])
def test_the_fused_epilogue_on_gpu(torch_cuda, options, shape, out_dtype, block_n, block_m):
    torch = torch_cuda
    m, n, k = shape
    kernel = tvm_tirx.compile(make_gemm(T.dynamic("m"), n, k, out_dtype=out_dtype, block_n=block_n, block_m=block_m,
                                        persistent=False, **options), target="cuda")
    torch.manual_seed(1)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=getattr(torch, out_dtype))
    ref = a.float() @ b.float().t()
    args = [a, b, c]
    if "bias" in options:  # (A, B, Bias, C)
        bias = torch.randn(n, device="cuda", dtype=getattr(torch, options["bias"])) * 4
        ref, args = ref + bias.float(), [a, b, bias, c]
    ref = _activation_reference(torch, ref, options.get("activation"))
    kernel(*args)
    torch.cuda.synchronize()
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()  # NaN (unwritten) fails too
    # bf16 output: its rounding; float32: the .approx instructions (tanh.approx: ~2^-11 absolute)
    assert err <= (1e-2 if out_dtype == "bfloat16" else 2e-3), f"{options} {shape}: max relative error {err:.2e}"


@pytest.mark.gpu
def test_odd_shape_with_cluster_2_on_gpu(torch_cuda):
    # 4000 rows: 32 row tiles (even), the last short; group_m 8
    kernel = tvm_tirx.compile(make_gemm(4000, 4104, 4104, cluster=2), target="cuda")
    _check(torch_cuda, kernel, 4000, 4104, 4104, "bfloat16")
