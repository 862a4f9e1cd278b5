"""The GEMM's epilogue chain (:mod:`tvm_tirx.kernels.parts.epilogue`).

CPU: the kernel parameters a chain yields per option set, and the kernel's signature
built from them; the chain ``GemmConfig`` builds for every option combination
``make_gemm`` accepts; the chains and stages that are refused, with their messages; kernels
of several chains compile for sm_90a with each stage's instructions in them (and none of
an absent stage's).
"""

import itertools

import pytest

from tvm.runtime import DataType

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.build.arguments import ParamSpec
from tvm_tirx.kernels.gemm import GemmConfig, make_gemm
from tvm_tirx.kernels.gemm.config import ACTIVATIONS, BIAS_DTYPES, OUTPUTS
from tvm_tirx.kernels.gemm.kernel import _signature
from tvm_tirx.kernels.parts.epilogue import (Activation, Bias, Epilogue, ExactStore, Gate, Geometry, GuardedStore,
                                             Param, Residual, Scale, Tensors, TmaStore)
from tvm_tirx.script import tirx as T

FP8 = "float8_e4m3fn"


def _geometry(m=1024, n=1024, out_dtype="bfloat16", block_n=256, gated=False):
    out_bn = block_n // 2 if gated else block_n
    return Geometry(m, n, out_dtype, block_n, out_bn, 2 * n if gated else n)


def _params(chain):
    return [(p.name, tuple(p.shape), p.dtype, p.align, p.after_output) for p in chain.params]


# -- parameters ---------------------------------------------------------------------------------


@pytest.mark.parametrize("options, expected", [
    ({}, []),
    ({"bias": "bfloat16"}, [("Bias", (1024,), "bfloat16", 0, False)]),
    ({"bias": "float32", "activation": "relu"}, [("Bias", (1024,), "float32", 0, False)]),
    ({"residual": True}, [("Residual", (1024, 1024), "bfloat16", 4, False)]),
    ({"residual": True, "out_dtype": "float32"}, [("Residual", (1024, 1024), "float32", 0, False)]),
    ({"bias": "float32", "residual": True},
     [("Bias", (1024,), "float32", 0, False), ("Residual", (1024, 1024), "bfloat16", 4, False)]),
    ({"in_dtype": FP8}, [("Scales", (2,), "float32", 8, True)]),
    ({"in_dtype": FP8, "bias": "bfloat16"},
     [("Bias", (1024,), "bfloat16", 0, False), ("Scales", (2,), "float32", 8, True)]),
    # gated: the bias is indexed like B's rows, interleaved gate and up (2 * 1024)
    ({"gated": True, "activation": "silu", "bias": "bfloat16"}, [("Bias", (2048,), "bfloat16", 0, False)]),
], ids=["plain", "bias", "bias-relu", "residual", "residual-f32", "bias-residual", "fp8", "fp8-bias", "glu-bias"])
def test_the_chain_yields_the_kernel_parameters_in_order(options, expected):
    assert _params(GemmConfig(1024, 1024, m=1024, **options).epilogue) == expected


def test_an_odd_n_residual_is_read_by_element_with_no_alignment_promise():
    chain = GemmConfig(1001, 1024, m=1000, residual=True).epilogue
    assert _params(chain) == [("Residual", (1000, 1001), "bfloat16", 0, False)]
    assert chain.prefetch is None  # pairs need an even n
    assert GemmConfig(1002, 1024, m=1000, residual=True).epilogue.prefetch is not None


@pytest.mark.parametrize("options, name, params", [
    ({}, "hopper_gemm", ["A", "B", "C"]),
    ({"bias": "float32"}, "hopper_gemm_bias", ["A", "B", "Bias", "C"]),
    ({"residual": True}, "hopper_gemm_residual", ["A", "B", "Residual", "C"]),
    ({"bias": "bfloat16", "residual": True}, "hopper_gemm_bias_residual", ["A", "B", "Bias", "Residual", "C"]),
    ({"in_dtype": FP8}, "hopper_gemm_fp8", ["A", "B", "C", "Scales"]),
    ({"in_dtype": FP8, "bias": "float32"}, "hopper_gemm_fp8_bias", ["A", "B", "Bias", "C", "Scales"]),
])
def test_the_signature_is_the_chain_parameters_around_a_b_c(options, name, params):
    func = make_gemm(1024, 1024, 1024, **options)
    assert func.attrs["global_symbol"] == name
    assert [str(p.name) for p in func.params] == params
    chain = GemmConfig(1024, 1024, m=1024, **options).epilogue
    for p in chain.params:  # each parameter is the tensor the stage declared (no promise: the element's size)
        spec = ParamSpec.of(func.params[params.index(p.name)])
        assert (spec.shape, spec.dtype, spec.align) == (p.shape, p.dtype, p.align or DataType(p.dtype).bits // 8)


def test_a_signature_no_chain_yields_is_refused():
    with pytest.raises(ValueError, match=r"no kernel signature \('A', 'B', 'Residual', 'C', 'Scales'\)"):
        _signature(("A", "B", "Residual", "C", "Scales"), dict.fromkeys(("A", "B", "C", "Residual", "Scales")), None)


def test_bind_maps_the_parameters_by_name_and_counts_them():
    chain = GemmConfig(1024, 1024, m=1024, bias="float32", residual=True).epilogue
    assert chain.bind(("v", "r")) == Tensors(bias="v", residual="r", scales=None)
    assert GemmConfig(1024, 1024, m=1024, in_dtype=FP8).epilogue.bind(("s",)) == Tensors(scales="s")
    with pytest.raises(ValueError, match=r"2 tensors expected \(\['Bias', 'Residual'\]\), found 1"):
        chain.bind(("v",))


# -- the chain GemmConfig builds ---------------------------------------------------------------


def _expected_stages(m, n, in_dtype, out_dtype, bias, activation, gated, residual):
    """The chain of the options, spelled out from make_gemm's documentation."""
    act = Activation(activation) if activation else None
    stages = [Scale()] if in_dtype == FP8 else []
    stages += [Bias(bias)] if bias else []
    stages += [Gate(act)] if gated else [act] if act else []
    stages += [Residual()] if residual else []
    out_bn = 128 if gated else 256
    if out_dtype == "bfloat16" and n % 8 == 0:
        stages.append(TmaStore())
    elif out_dtype == "float32" and isinstance(m, int) and m % 128 == 0 and n % out_bn == 0:
        stages.append(ExactStore())
    else:
        stages.append(GuardedStore())
    return tuple(stages)


SHAPES = [(1024, 1024), (1000, 1000), (1000, 1001), ("m", 1024)]


@pytest.mark.parametrize("shape", SHAPES, ids=["exact", "edge", "odd-n", "run-time-m"])
def test_gemm_config_builds_the_chain_of_every_accepted_option_set(shape):
    m, n = shape
    built = 0
    for in_dtype, out_dtype, bias, activation, gated, residual in itertools.product(
            ("bfloat16", FP8), OUTPUTS, BIAS_DTYPES, ACTIVATIONS, (False, True), (False, True)):
        if (residual and in_dtype == FP8) or (m == "m" and in_dtype == FP8):
            continue  # refused by make_gemm (residual and a run-time size need bf16 inputs)
        size = T.dynamic("m") if m == "m" else m
        cfg = GemmConfig(n, 1024, in_dtype, out_dtype, m=size, stages=2, bias=bias, activation=activation,
                         gated=gated, residual=residual)
        chain = cfg.epilogue
        assert chain.stages == _expected_stages(m, n, in_dtype, out_dtype, bias, activation, gated, residual)
        assert chain is cfg.epilogue  # built once
        assert chain.geometry.out_block_n == (128 if gated else 256) and chain.geometry.product_n == cfg.b_rows
        assert (chain.drain is not None) == isinstance(chain.stages[-1], TmaStore)
        assert (chain.apply is None) == (len(chain.stages) == 1)
        built += 1
    assert built == (96 if m == "m" else 144)


def test_make_gemm_refuses_what_it_refused_before_the_chain_is_built():
    with pytest.raises(ValueError, match="residual needs in_dtype='bfloat16'"):
        GemmConfig(1024, 1024, m=1024, in_dtype=FP8, residual=True)
    with pytest.raises(ValueError, match="bias must be one of"):
        GemmConfig(1024, 1024, m=1024, bias="float16")
    with pytest.raises(ValueError, match="activation must be one of"):
        GemmConfig(1024, 1024, m=1024, activation="tanh")
    with pytest.raises(ValueError, match="a gated GEMM needs block_n in"):
        GemmConfig(1024, 1024, m=1024, gated=True, block_n=64)


# -- refused chains and stages ------------------------------------------------------------------


def test_stages_refuse_unknown_dtypes_and_activations():
    with pytest.raises(ValueError, match=r"Bias: dtype must be one of \['bfloat16', 'float32'\], found 'float16'"):
        Bias("float16")
    with pytest.raises(ValueError,
                       match=r"Activation: name must be one of \['relu', 'silu', 'gelu_tanh'\], found 'gelu'"):
        Activation("gelu")


@pytest.mark.parametrize("geometry, stages, message", [
    (_geometry(), (), "the last stage must be a store stage"),
    (_geometry(), (Bias("float32"),), "the last stage must be a store stage"),
    (_geometry(), (TmaStore(), Bias("float32"), TmaStore()), "one store stage, the last"),
    (_geometry(), (Bias("float32"), Bias("bfloat16"), TmaStore()), r"each stage at most once, found \['Bias'\]"),
    (_geometry(), (Gate(Activation("silu")), TmaStore()), "a Gate stage goes with a gated geometry"),
    (_geometry(block_n=128, gated=True), (Activation("silu"), TmaStore()), "a Gate stage goes with a gated geometry"),
    (_geometry(block_n=128, gated=True), (Gate(Activation("silu")), Activation("relu"), TmaStore()),
     "applies its activation inside the Gate stage"),
    (_geometry(out_dtype="float32"), (TmaStore(),), "TmaStore: needs bfloat16 output"),
    (_geometry(n=1001), (TmaStore(),), "TmaStore: needs bfloat16 output .* found bfloat16 with n=1001"),
    (_geometry(m=1000, out_dtype="float32"), (ExactStore(),), r"ExactStore: .* found float32 \(1000, 1024\)"),
    (_geometry(), (ExactStore(),), "ExactStore: needs float32 output"),
], ids=["empty", "no-store", "store-twice", "stage-twice", "gate-ungated", "gated-no-gate", "two-activations",
        "tma-f32", "tma-odd-n", "exact-edge", "exact-bf16"])
def test_an_invalid_chain_is_refused_when_built(geometry, stages, message):
    with pytest.raises(ValueError, match=message):
        Epilogue(geometry, stages)


def test_a_gate_without_an_activation_is_a_plain_glu():
    chain = Epilogue(_geometry(block_n=128, gated=True), (Gate(), GuardedStore()))
    assert chain.params == () and chain.apply is not None


def test_params_put_the_ones_after_the_output_last():
    chain = Epilogue(_geometry(out_dtype="float32"), (Scale(), Bias("bfloat16"), Residual(), ExactStore()))
    assert [p.name for p in chain.params] == ["Bias", "Residual", "Scales"]
    assert [p.name for p in chain.inputs] == ["Bias", "Residual"] and [p.name for p in chain.trailing] == ["Scales"]
    assert chain.params[1] == Param("Residual", (1024, 1024), "float32", 0)


# -- the kernels compile ------------------------------------------------------------------------


def _cuda(**options):
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    m, n = options.pop("m", 1024), options.pop("n", 1024)
    kernel = tvm_tirx.compile(make_gemm(m, n, 1024, **options), target="cuda", arch="sm_90a")
    body = kernel.cuda_source[kernel.cuda_source.index("__global__"):]
    return {op: body.count(f"tvm_builtin_ptx_{op}(") for op in (
        "mul_rn_f32", "ex2_approx_ftz_f32", "tanh_approx_f32", "ld_global_b32", "mov_unpack_b16x2_b32",
        "st_shared_b32", "st_vec_global_v2_f32", "st_global_f32", "st_global_b16_bf16", "st_global_b32")}


@pytest.mark.parametrize("options, present, absent", [
    ({"in_dtype": FP8, "bias": "float32", "activation": "gelu_tanh"},
     ["mul_rn_f32", "tanh_approx_f32", "st_shared_b32"],
     ["ex2_approx_ftz_f32", "ld_global_b32", "st_vec_global_v2_f32"]),
    ({"gated": True, "activation": "silu", "residual": True, "block_n": 128},
     ["ex2_approx_ftz_f32", "ld_global_b32", "mov_unpack_b16x2_b32", "st_shared_b32"],
     ["mul_rn_f32", "tanh_approx_f32"]),
    ({"gated": True, "out_dtype": "float32", "stages": 4}, ["st_vec_global_v2_f32"],
     ["ex2_approx_ftz_f32", "tanh_approx_f32", "st_shared_b32", "st_global_f32"]),
    ({"m": 1000, "n": 999, "out_dtype": "float32", "stages": 4, "residual": True}, ["st_global_f32"],
     ["ld_global_b32", "st_vec_global_v2_f32", "st_shared_b32"]),
    ({"m": T.dynamic("m"), "n": 1001, "bias": "bfloat16"}, ["st_global_b16_bf16"], ["st_shared_b32", "st_global_b32"]),
], ids=["fp8-bias-gelu-tma", "glu-silu-residual-tma", "glu-f32-exact", "f32-odd-residual-guarded", "bf16-odd-guarded"])
def test_kernels_of_several_chains_compile_with_their_stages_instructions(options, present, absent):
    counts = _cuda(**options)
    assert all(counts[op] > 0 for op in present), counts
    assert all(counts[op] == 0 for op in absent), counts
