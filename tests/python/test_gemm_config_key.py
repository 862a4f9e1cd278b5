"""One hashable spec per compiled GEMM kernel (``kernels/gemm/spec.py``): it is the torch
operators' compile-cache key and gives the kernel's name, whoever spells it (the spec
itself, ``gemm_prim_func``'s options, the torch operators' checks, the Relax offload).
CPU only: nothing is compiled for the GPU."""

import pytest
import tvm

from tvm_tirx.kernels.gemm import GemmSpec, SmallMSpec, make_gemm
from tvm_tirx.kernels.gemm.planner import SmallMPlan
from tvm_tirx.kernels.gemm.tiles import deepest_ring
from tvm_tirx.ops import gemm_kernels, relax_gemm
from tvm_tirx.ops.gemm_kernels import CONFIG, gemm_prim_func, gemm_spec


def test_the_torch_operators_defaults_are_the_ones_of_before():
    assert CONFIG == {"bfloat16": dict(stages=3, wait_depth=1, persistent=False, group_m=16),
                      "float32": dict(stages=4, wait_depth=1, persistent=False, group_m=16)}
    assert gemm_kernels.GemmKey is GemmSpec  # the documented name, an alias


@pytest.mark.parametrize("short, long", [
    (GemmSpec(256, 64), GemmSpec(256, 64, "bfloat16", "bfloat16", "sm_90a", 256, stages=3, wait_depth=1,
                                 persistent=False, group_m=16, ctas=132, cluster=1, spin=False)),
    (GemmSpec(256, 64, out_dtype="float32"), gemm_spec(256, 64, "bfloat16", "float32")),
    (GemmSpec(256, 64, block_n=64), gemm_spec(256, 64, block_n=64, stages=8)),
    (GemmSpec(256, 64, block_n=128, gated=True),
     GemmSpec(256, 64, block_n=128, gated=True, stages=deepest_ring(128, "bfloat16", gated=True))),
    (GemmSpec(256, 64).replace(n=128, block_n=128, activation="silu", gated=True),
     GemmSpec(128, 64, block_n=128, activation="silu", gated=True)),
    (GemmSpec(256, 64, block_n=64).replace(bias="float32"), GemmSpec(256, 64, block_n=64, stages=8, bias="float32")),
])
def test_two_spellings_of_one_kernel_are_one_spec(short, long):
    assert short == long and hash(short) == hash(long) and short.name == long.name


def test_replace_keeps_a_ring_that_was_given():
    assert GemmSpec(256, 64, stages=2).replace(block_n=64).stages == 2
    assert GemmSpec(256, 64).replace(block_n=64).stages == 8  # the derived ring, derived again


@pytest.fixture
def fake_compiler(monkeypatch):
    compiled = []

    def fake_compile(key):
        compiled.append(key)
        return object()

    monkeypatch.setattr(gemm_kernels, "_compile", fake_compile)
    gemm_kernels.clear_kernels()
    yield compiled
    gemm_kernels.clear_kernels()


def test_equal_specs_share_one_compiled_kernel(fake_compiler):
    first = gemm_kernels.gemm_kernel(GemmSpec(1024, 512, block_n=128))
    assert gemm_kernels.gemm_kernel(gemm_spec(1024, 512, block_n=128, stages=6)) is first
    assert gemm_kernels.gemm_kernel(gemm_kernels.GemmKey(1024, 512, "bfloat16", "bfloat16", "sm_90a", 128)) is first
    assert fake_compiler == [GemmSpec(1024, 512, block_n=128)]
    assert list(gemm_kernels.cached_kernels()) == [GemmSpec(1024, 512, block_n=128)]
    small = SmallMSpec.of(GemmSpec(4096, 4096), SmallMPlan(8, 4, 8))
    spelled = SmallMSpec(4096, 4096, "bfloat16", "sm_90a", 8, 4, 8)
    assert gemm_kernels.gemm_kernel(spelled) is gemm_kernels.gemm_kernel(small)
    assert len(fake_compiler) == 2


def test_equal_specs_share_one_prim_func():
    func = GemmSpec(256, 64, block_n=64).prim_func()
    assert gemm_prim_func(256, 64, block_n=64, stages=8) is func
    assert str(func.attrs["global_symbol"]) == "tvm_tirx_gemm_n256_k64_bf16_bf16_bn64"


NAMES = [
    (dict(), "tvm_tirx_gemm_n1024_k512_bf16_bf16"),
    (dict(out_dtype="float32", block_n=64), "tvm_tirx_gemm_n1024_k512_bf16_f32_bn64"),
    (dict(block_n=128, bias="float32", residual=True), "tvm_tirx_gemm_n1024_k512_bf16_bf16_bn128_bias_f32_residual"),
    (dict(bias="bfloat16", activation="relu"), "tvm_tirx_gemm_n1024_k512_bf16_bf16_bias_bf16_relu"),
    (dict(block_n=128, gated=True, activation="silu"), "tvm_tirx_gemm_n1024_k512_bf16_bf16_bn128_silu_glu"),
    (dict(out_dtype="float32", gated=True, activation="gelu_tanh", b_major="n"),
     "tvm_tirx_gemm_n1024_k512_bf16_f32_gelu_tanh_glu_b_kn"),
    (dict(a_major="m", b_major="n"), "tvm_tirx_gemm_n1024_k512_bf16_bf16_a_km_b_kn"),
    # the schedule, where it is not the operators' default: kernels of one shape never share a name
    (dict(persistent=True, stages=2, group_m=8), "tvm_tirx_gemm_n1024_k512_bf16_bf16_s2_persistent132_gm8"),
    (dict(block_n=128, stages=6, wait_depth=0, spin=True),
     "tvm_tirx_gemm_n1024_k512_bf16_bf16_bn128_wd0_spin"),  # 6: the deepest ring of 128 columns
]


def test_specs_that_differ_only_in_their_schedule_have_different_names():
    base = GemmSpec(1024, 512)
    variants = [base, base.replace(stages=2), base.replace(wait_depth=0), base.replace(persistent=True),
                base.replace(persistent=True, ctas=66), base.replace(group_m=8), base.replace(cluster=2),
                base.replace(spin=True)]
    assert len({spec.name for spec in variants}) == len(variants)


@pytest.mark.parametrize("options, name", NAMES)
def test_the_name_of_each_option_set(options, name):
    spec = GemmSpec(1024, 512, **options)
    assert spec.name == name
    assert str(spec.prim_func().attrs["global_symbol"]) == name


def test_the_small_m_name():
    spec = SmallMSpec(1000, 200, "float32", "sm_90a", 64, 1, 8)
    assert spec.name == "tvm_tirx_gemm_small_m_n1000_k200_bm64_s1_f32"
    assert SmallMSpec(4096, 4096, "bfloat16", "sm_90a", 8, 4, 8).name == "tvm_tirx_gemm_small_m_n4096_k4096_bm8_s4_bf16"
    assert spec.in_dtype == "bfloat16" and spec.a_major == "k"


def test_make_gemm_is_its_spec_built():
    ours = make_gemm(1024, 1024, 1024, out_dtype="float32", block_n=128, stages=5)
    spec = GemmSpec(1024, 1024, out_dtype="float32", block_n=128, stages=5, persistent=True, group_m=8)
    tvm.ir.assert_structural_equal(ours, spec.build(1024))


@pytest.mark.parametrize("options, message", [
    (dict(stages=99), "make_gemm: stages must be a positive int whose ring and epilogue fit 232448 bytes"),
    (dict(block_n=100), r"make_gemm: block_n must be a multiple of 8 from 16 to 256 \(wgmma's N\), found 100"),
    (dict(gated=True, block_n=64), r"make_gemm: a gated GEMM needs block_n in \(128, 256\)"),
    (dict(residual=1), "make_gemm: residual must be a bool, found 1"),
    (dict(bias="float16"), "make_gemm: bias must be one of"),
    (dict(cluster=2), "make_gemm: cluster=2 pairs CTAs on tiles of the same B columns"),
    (dict(in_dtype="float8_e4m3fn"), "make_gemm: a run-time m needs in_dtype='bfloat16'"),
])
def test_invalid_options_raise_the_errors_of_before(options, message):
    spec = GemmSpec(1000, 512, **options)  # a spec is checked when built, by GemmConfig
    with pytest.raises(ValueError, match=message):
        # build, not the cached prim_func: residual=1 equals residual=True (as a dict key did before)
        spec.build(tvm.tirx.Var("m", "int32"))
    with pytest.raises(ValueError, match=message):
        make_gemm(tvm.tirx.Var("m", "int32"), 1000, 512, **options)


def test_prim_func_raises_what_build_raises():
    with pytest.raises(ValueError, match="make_gemm: stages must be a positive int"):
        GemmSpec(1000, 512, stages=99).prim_func()


def test_an_unknown_output_dtype_or_row_stride_is_refused():
    with pytest.raises(ValueError, match="gemm_prim_func: out_dtype must be one of"):
        gemm_prim_func(1024, 512, out_dtype="float16")
    with pytest.raises(ValueError, match="make_gemm: TMA row stride not a multiple of 16 bytes"):
        GemmSpec(1024, 500).prim_func()
    with pytest.raises(ValueError, match="make_gemm: out_dtype must be one of"):
        GemmSpec(1024, 512, out_dtype="float16").prim_func()  # no ring derived: GemmConfig says why


@pytest.mark.parametrize("m, n, k, out, b_major", [
    (4096, 4096, 512, "bfloat16", "k"), (128, 8192, 512, "bfloat16", "k"), (200, 40, 64, "float32", "k"),
    (128, 1024, 256, "bfloat16", "n"), (8192, 1024, 256, "float32", "n"),
])
def test_the_torch_operators_and_the_relax_offload_make_one_spec(torch_cpu, m, n, k, out, b_major):
    torch = torch_cpu
    from tvm_tirx import ops

    out_dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[out]
    x = torch.empty(m, k, dtype=torch.bfloat16, device="meta")
    w = torch.empty(n, k, dtype=torch.bfloat16, device="meta") if b_major == "k" else \
        torch.empty(k, n, dtype=torch.bfloat16, device="meta").t()
    gemm_kernels.clear_kernels()
    (key,) = ops.check(ops.linear, x, w, out_dtype=out_dtype)
    match = relax_gemm.GemmMatch(None, None, b_major == "n", (m,), m, n, k, "bfloat16", out)
    spec = relax_gemm.match_spec(match, relax_gemm.fusable_options(None))
    assert key == spec and hash(key) == hash(spec) and key.b_major == b_major
    assert key == GemmSpec(n, k, "bfloat16", out, block_n=key.block_n, block_m=key.block_m, b_major=b_major)
