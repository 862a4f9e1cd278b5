"""Register arithmetic, conversion, packing and ewise: IR, assembly and GPU values."""

import numpy as np
import pytest

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T

import arith_kernels as K

# kernel -> (PTX calls per thread by prefix)
COUNTS = {
    "two_a_plus_one": {"fma": 4, "ld": 1, "st": 1},
    "relu_2a1_cta": {"fma": 4, "max": 4, "ld": 1, "st": 1},
    "neg_abs": {"abs": 4, "neg": 4},
    "sqrt_quarter": {"div": 4, "sqrt": 4},
    "exp2": {"ex2": 4},
    "pack_f16x2": {"cvt": 4, "ld": 2},
    "add_f16x2": {"add": 4, "ld": 2},
    "pack_unpack_b64": {"mov": 4, "st": 2},
    "silu": {"ld": 1, "st": 1},
}


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_counts_and_assembly(name):
    func = getattr(K, name)
    lowered = testing.lower(func)
    for prefix, n in COUNTS[name].items():
        assert testing.count_ptx(lowered, f"{prefix}.*") == n, prefix
    if testing.has_nvcc():
        assert len(testing.assemble(tvm_tirx.compile(func, target="cuda", arch="sm_90a"))) > 0


def test_exact_instruction_reaches_the_asm():
    src = tvm_tirx.compile(K.two_a_plus_one, target="cuda", arch="sm_90a").cuda_source
    assert '"fma.rn.f32 %0, %1, %2, %3;"' in src
    src = tvm_tirx.compile(K.pack_f16x2, target="cuda", arch="sm_90a").cuda_source
    assert '"cvt.rn.f16x2.f32 %0, %1, %2;"' in src


def test_scalar_inputs_broadcast_in_the_ir():
    text = testing.lower(K.two_a_plus_one).script()
    assert "T.float32(2.0), T.float32(1.0)" in text


def test_no_conversion_through_a_dtype_mismatch():
    def build():
        @T.function
        def k(A: T.Tensor((4,), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            a = T.alloc_local((4, 1), "float32")
            d = T.alloc_local((4, 1), "int32")
            T.cuda.tile.apply(T.ptx["add.f32"], d, a, a)

    with pytest.raises(TileError, match=r"dst \(operand 1\): dtype not accepted.*int32"):
        build()


def test_destination_repeats_must_not_alias():
    from tvm.tirx.layout import S, TileLayout

    aliased = TileLayout(S[(4, 1) : (0, 1)])

    def build():
        @T.function
        def k(A: T.Tensor((4,), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            a = T.alloc_local((4, 1), "float32")
            d = T.alloc_local((4, 1), "float32", layout=aliased)
            T.cuda.tile.apply(T.ptx["add.f32"], d, a, a)

    with pytest.raises(TileError, match="overlapping register destinations"):
        build()


def test_packed_cvt_names_its_operands_hi_and_lo():
    def build():
        @T.function
        def k(A: T.Tensor((4,), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            a = T.alloc_local((4, 1), "float32")
            d = T.alloc_local((4, 1), "uint32")
            T.cuda.tile.apply(T.ptx["cvt.rn.f16x2.f32"], d, a, a.view(2, 2))

    with pytest.raises(TileError, match=r"lo \(operand 3\)"):
        build()


def test_ewise_result_dtype_must_match():
    def build():
        @T.function
        def k(A: T.Tensor((4,), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            a = T.alloc_local((4,), "float32")
            d = T.alloc_local((4,), "float16")
            T.cuda.tile.ewise(lambda v: v * T.float32(2), d, a)

    with pytest.raises(TileError, match="result dtype differs from dst"):
        build()


def test_ewise_parameter_annotation_must_match():
    def twice(v: T.float16):
        return v * T.float16(2)

    def build():
        @T.function
        def k(A: T.Tensor((4,), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            a = T.alloc_local((4,), "float32")
            d = T.alloc_local((4,), "float32")
            T.cuda.tile.ewise(twice, d, a)

    with pytest.raises(TileError, match="input dtype differs from the function's parameter"):
        build()


def _run(torch, func, *arrays, outs):
    kernel = tvm_tirx.compile(func, target="cuda")
    args = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in arrays]
    out = [torch.zeros(shape, dtype=getattr(torch, dt), device="cuda") for shape, dt in outs]
    kernel(*args, *out)
    torch.cuda.synchronize()
    return [o.cpu().numpy() for o in out]


@pytest.mark.gpu
def test_values_on_gpu(torch_cuda):
    torch = torch_cuda
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 4)).astype("float32")
    (out,) = _run(torch, K.two_a_plus_one, a, outs=[((64, 4), "float32")])
    np.testing.assert_array_equal(out, 2 * a + 1)
    (out,) = _run(torch, K.relu_2a1_cta, a, outs=[((64, 4), "float32")])
    np.testing.assert_array_equal(out, np.maximum(2 * a + 1, 0))
    (out,) = _run(torch, K.neg_abs, a, outs=[((64, 4), "float32")])
    np.testing.assert_array_equal(out, -np.abs(a))
    (out,) = _run(torch, K.sqrt_quarter, np.array([4, 16, 36, 64], "float32"), outs=[((4,), "float32")])
    np.testing.assert_array_equal(out, [1, 2, 3, 4])
    (out,) = _run(torch, K.exp2, np.array([-1, 0, 1, 2], "float32"), outs=[((4,), "float32")])
    np.testing.assert_allclose(out, [0.5, 1, 2, 4], rtol=1e-6)
    x = np.linspace(-2, 2, 8).astype("float32")
    (out,) = _run(torch, K.pack_f16x2, x, outs=[((4,), "uint32")])
    bits = x.astype(np.float16).view(np.uint16).astype(np.uint32)
    np.testing.assert_array_equal(out, (bits[1::2] << 16) | bits[0::2])
    h1 = rng.standard_normal(8).astype("float16")
    h2 = rng.standard_normal(8).astype("float16")
    (out,) = _run(torch, K.add_f16x2, h1, h2, outs=[((8,), "float16")])
    np.testing.assert_array_equal(out, h1 + h2)
    w = rng.integers(0, 2**32, 4, dtype=np.uint64).astype(np.uint32)
    out, wide = _run(torch, K.pack_unpack_b64, w, outs=[((4,), "uint32"), ((2,), "uint64")])
    np.testing.assert_array_equal(out, w)
    expect = w[0::2].astype(np.uint64) | (w[1::2].astype(np.uint64) << np.uint64(32))
    np.testing.assert_array_equal(wide, expect)
    (out,) = _run(torch, K.silu, a, outs=[((64, 4), "float32")])
    ref = a.astype(np.float64) / (1 + np.exp(-a.astype(np.float64)))
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-7)
