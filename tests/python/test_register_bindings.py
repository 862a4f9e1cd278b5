"""How register operands bind to the PTX table (issue 17 items 4, 6 and 7).

- ``.f16``/``.bf16`` operands take the scalar type (``float16``, ``bfloat16``) as
  well as the ``.b16`` container ``uint16`` that apache-tvm's table binds; a
  scalar register is passed through a ``uint16`` view of the same registers, a
  typed scalar through ``reinterpret``.
- ``preserve_dst`` binds the destination read-write: ``float16``/``bfloat16``
  through a ``uint16`` view; 8-bit registers have no in-place binding and are
  refused when the call is parsed.
- ``ld``/``st`` of an 8- or 16-bit integer or bit type may use 32-bit integer
  registers (PTX ISA 9.4.1: a load sign- or zero-extends, a store truncates).

The assemble tests prove the generated CUDA binds a register class ptxas accepts.
"""

import pytest
import tvm

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T


def _assembles(func):
    return len(testing.assemble(tvm_tirx.compile(func, target="cuda", arch="sm_90a"))) > 0


# -- item 6: the scalar type of a .f16 / .bf16 operand --------------------------------------


def add_f16():
    """Kernel factory (parsing is part of what is tested)."""

    @T.function
    def add_f16(A: T.Tensor((64, 2), "float16", align=16), B: T.Tensor((64, 2), "float16", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        x = T.alloc_local((2,), "float16")
        y = T.alloc_local((2, 1), "float16")
        T.cuda.tile.apply(T.ptx["ld.global.v2.b16"], x, A.sub[tid, :])
        T.cuda.tile.apply(T.ptx["add.rn.f16"], y, x.view(2, 1), T.float16(1))
        T.cuda.tile.apply(T.ptx["st.global.v2.b16"], B.sub[tid, :], y.view(2))

    return add_f16


def cvt_f32_f16():
    """Kernel factory (parsing is part of what is tested)."""

    @T.function
    def cvt_f32_f16(A: T.Tensor((64,), "float16", align=16), B: T.Tensor((64,), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        h = T.alloc_local((1,), "float16")
        f = T.alloc_local((1,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.b16"], h, A.sub[tid : tid + 1])
        T.cuda.tile.apply(T.ptx["cvt.f32.f16"], f, h)
        T.cuda.tile.apply(T.ptx["st.global.b32"], B.sub[tid : tid + 1], f)

    return cvt_f32_f16


def fma_bf16():
    """Kernel factory (parsing is part of what is tested)."""

    @T.function
    def fma_bf16(A: T.Tensor((64,), "bfloat16", align=16), B: T.Tensor((64,), "bfloat16", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        x = T.alloc_local((1,), "bfloat16")
        T.cuda.tile.apply(T.ptx["ld.global.b16"], x, A.sub[tid : tid + 1])
        T.cuda.tile.apply(T.ptx["fma.rn.bf16"], x, x, T.bfloat16(2), T.bfloat16(0.5))
        T.cuda.tile.apply(T.ptx["st.global.b16"], B.sub[tid : tid + 1], x)

    return fma_bf16


def test_f16_registers_bind_through_their_uint16_container():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((2, 1), "float16")
        T.cuda.tile.apply(T.ptx["add.rn.f16"], x, x, T.float16(1))

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((2, 1), "float16")
        xu = T.decl_buffer((2, 1), "uint16", data=x.data)
        for r0 in T.unroll(2):
            T.ptx["add.rn.f16"](xu[r0, 0], xu[r0, 0], T.reinterpret("uint16", T.float16(1)))

    testing.assert_lowers_to(before, expected)


def test_the_uint16_container_still_binds_directly():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((1,), "uint16")
        T.cuda.tile.apply(T.ptx["add.rn.f16"], x, x, T.uint16(0x3C00))

    assert "uint16\", data=" not in testing.lower(k).script()


def test_cvt_takes_a_float16_source():
    assert testing.count_ptx(testing.lower(cvt_f32_f16()), "cvt.f32.f16") == 1


def test_f32_operands_still_refuse_integer_registers():
    with pytest.raises(TileError, match=r"add\.f32: dst \(operand 1\): dtype not accepted by the PTX type"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            x = T.alloc_local((1,), "uint32")
            T.cuda.tile.apply(T.ptx["add.f32"], x, x, x)


@testing.requires_nvcc
@pytest.mark.parametrize("kernel", [add_f16, cvt_f32_f16, fma_bf16], ids=["add.rn.f16", "cvt.f32.f16", "fma.rn.bf16"])
def test_scalar_typed_half_registers_assemble(kernel):
    assert _assembles(kernel())


@pytest.mark.gpu
def test_add_f16_on_float16_registers_matches_torch(torch_cuda):
    torch = torch_cuda
    a = torch.randn(64, 2, device="cuda").half()
    b = torch.empty_like(a)
    tvm_tirx.compile(add_f16())(a, b)
    torch.testing.assert_close(b, a + 1)


@pytest.mark.gpu
def test_fma_bf16_on_bfloat16_registers_matches_torch(torch_cuda):
    torch = torch_cuda
    a = torch.randn(64, device="cuda").bfloat16()
    b = torch.empty_like(a)
    tvm_tirx.compile(fma_bf16())(a, b)
    torch.testing.assert_close(b, a * 2 + 0.5)


# -- item 4: preserve_dst with 16-bit and 8-bit registers ------------------------------------


def _preserving_load(dtype, opcode, reg_dtype=None):
    reg_dtype = reg_dtype or dtype
    word = f"b{tvm.DataType(reg_dtype).bits}"

    @T.function
    def k(A: T.Tensor((64,), dtype, align=16), B: T.Tensor((64,), reg_dtype, align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((1,), reg_dtype)
        T.cuda.tile.apply(T.ptx[f"ld.global.{word}"], r, B.sub[tid : tid + 1])
        T.cuda.tile.apply(T.ptx[opcode], r, A.sub[tid : tid + 1], pred=tid < 32, preserve_dst=True)
        T.cuda.tile.apply(T.ptx[f"st.global.{word}"], B.sub[tid : tid + 1], r)

    return k


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_preserve_dst_of_half_registers_binds_a_uint16_view(dtype):
    script = testing.lower(_preserving_load(dtype, "ld.global.b16")).script()
    assert 'r_uint16 = r.view("uint16")' in script
    assert 'T.ptx.ld(r_uint16, T.address_of(buffer_1[0]), tid < 32, ' in script and '"pred,keep")' in script


@pytest.mark.parametrize("dtype, opcode", [("int8", "ld.global.s8"), ("uint8", "ld.global.u8")])
def test_preserve_dst_of_8_bit_registers_is_refused_when_parsed(dtype, opcode):
    with pytest.raises(TileError, match=rf"{opcode}: dst \(operand 1\): register dtype cannot be bound read-write: "
                       rf"expected int32 / uint32 registers .*found {dtype} registers"):
        _preserving_load(dtype, opcode)


@testing.requires_nvcc
@pytest.mark.parametrize("dtype, opcode, reg", [("float16", "ld.global.b16", None), ("bfloat16", "ld.global.b16", None),
                                                ("int8", "ld.global.s8", "int32")])
def test_preserve_dst_kernels_assemble(dtype, opcode, reg):
    assert _assembles(_preserving_load(dtype, opcode, reg))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_preserve_dst_of_half_registers_keeps_the_old_value(torch_cuda, dtype):
    torch = torch_cuda
    a = torch.randn(64, device="cuda").to(getattr(torch, dtype))
    b = torch.randn(64, device="cuda").to(getattr(torch, dtype))
    expected = torch.where(torch.arange(64, device="cuda") < 32, a, b)
    tvm_tirx.compile(_preserving_load(dtype, "ld.global.b16"))(a, b)
    torch.testing.assert_close(b, expected, rtol=0, atol=0)


# -- item 7: 8- and 16-bit integer loads and stores through 32-bit registers -------------------


def _widening_copy(mem_dtype, ld_type, st_type, reg_dtype):
    @T.function
    def k(A: T.Tensor((64, 4), mem_dtype, align=16), B: T.Tensor((64, 4), "int32", align=16),
          C: T.Tensor((64, 4), mem_dtype, align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), reg_dtype)
        T.cuda.tile.apply(T.ptx[f"ld.global.v4.{ld_type}"], r, A.sub[tid, :])
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)
        T.cuda.tile.apply(T.ptx[f"st.global.v4.{st_type}"], C.sub[tid, :], r)

    return k


WIDENING = [
    ("int8", "s8", "b8", "int32"),
    ("uint8", "u8", "u8", "uint32"),
    ("int16", "s16", "s16", "int32"),
    ("uint16", "u16", "b16", "int32"),
]


@pytest.mark.parametrize("mem, ld, st, reg", WIDENING, ids=[w[1] for w in WIDENING])
def test_narrow_integer_loads_and_stores_take_32_bit_registers(mem, ld, st, reg):
    lowered = testing.lower(_widening_copy(mem, ld, st, reg))
    assert testing.count_ptx(lowered, f"ld.global.v4.{ld}") == 1
    assert testing.count_ptx(lowered, f"st.global.v4.{st}") == 1


def test_a_float_register_is_not_a_widening_destination():
    with pytest.raises(TileError, match=r"ld\.global\.v4\.s8: dst \(operand 1\): dtype not accepted by the PTX type: expected "
                       r"int8 \(8-bit\) / int32 \(32-bit\) / uint32 \(32-bit\), found float32"):
        _widening_copy("int8", "s8", "b8", "float32")


def test_the_memory_operand_keeps_the_ptx_type_width():
    with pytest.raises(TileError, match=r"ld\.global\.s8: src \(operand 2\): element bit width differs"):

        @T.function
        def k(A: T.Tensor((64,), "int32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((1,), "int32")
            T.cuda.tile.apply(T.ptx["ld.global.s8"], r, A.sub[tid : tid + 1])


@testing.requires_nvcc
@pytest.mark.parametrize("mem, ld, st, reg", WIDENING, ids=[w[1] for w in WIDENING])
def test_widening_kernels_assemble(mem, ld, st, reg):
    assert _assembles(_widening_copy(mem, ld, st, reg))


@pytest.mark.gpu
@pytest.mark.parametrize("mem, ld, st, reg", WIDENING, ids=[w[1] for w in WIDENING])
def test_widening_loads_extend_and_stores_truncate(torch_cuda, mem, ld, st, reg):
    torch = torch_cuda
    info = torch.iinfo(getattr(torch, mem))
    a = torch.randint(info.min, info.max + 1, (64, 4), device="cuda", dtype=torch.int64).to(getattr(torch, mem))
    b = torch.empty(64, 4, device="cuda", dtype=torch.int32)
    c = torch.empty_like(a)
    tvm_tirx.compile(_widening_copy(mem, ld, st, reg))(a, b, c)
    # .sN sign-extends, .uN zero-extends (PTX ISA 9.4.1); the int32 view of the bits
    extended = a.to(torch.int64) if ld.startswith("s") else a.to(torch.int64) % (1 << info.bits)
    torch.testing.assert_close(b, extended.to(torch.int32), rtol=0, atol=0)
    torch.testing.assert_close(c, a, rtol=0, atol=0)
