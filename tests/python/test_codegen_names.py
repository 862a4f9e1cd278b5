"""Generated CUDA compiles whatever the kernel's names are, and whatever literal a
``T.reinterpret`` is given.

apache-tvm's C codegen keeps a TVMScript name as the C++ name and reserves only 27 C
keywords; a kernel variable named ``half`` (a CUDA type), ``uint`` (a macro of
apache-tvm's preamble), ``threadIdx`` or ``bool`` produced CUDA that nvcc rejected.
It also renders a reinterpret as ``*(T *)(&(x))``, which needs an lvalue: a literal
operand gave ``*(uint *)(&(0x1p+0f))``.
"""

import keyword
import re

import pytest
import tvm

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.build.cuda_source import CUDA_RESERVED, RESERVED_PREFIXES
from tvm_tirx.script import tirx as T

pytestmark = testing.requires_nvcc

ARCH = "sm_90a"

# One name of each kind that clashed: CUDA types (cuda_fp16.h, cuda_bf16.h, vector
# types), apache-tvm preamble macros, CUDA built-in variables, C++ keywords and
# literals, reserved identifiers, math functions the kernel then calls, apache-tvm's
# PTX helper functions.
CLASHING = [
    "half",
    "nv_bfloat16",
    "half2",
    "uint",
    "ushort",
    "threadIdx",
    "blockDim",
    "bool",
    "auto",
    "new",
    "this",
    "signed",
    "true",
    "nullptr",
    "NULL",
    "__half",
    "__shfl_sync",
    "expf",
    "hexp",
    "max",
    "tvm_builtin_ptx_ld_vec_global_v2_b32",
    "tvm_builtin_ptx_mov_b32",
]

# Every name is bound (an ``int`` in the CUDA) before the kernel uses the float16/bfloat16 types, the
# uint32 casts of its views, threadIdx, expf and the PTX helpers, so that a name
# kept as it is shadows what the code refers to after it.
NAMES_KERNEL = '''\
from tvm_tirx.script import tirx as T


@T.function
def names_kernel(A: T.Tensor((64, 4), "float16", align=8), B: T.Tensor((64, 4), "float16", align=8),
                 C: T.Tensor((64,), "float32", align=4), D: T.Tensor((64,), "int32", align=4)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
{bindings}
    tid = T.cuda.thread_idx("x")
    regs = T.alloc_local((4,), "float16", layout="default")
    wide = T.alloc_local((2,), "bfloat16", layout="default")
    acc = T.alloc_local((1,), "float32", layout="default")
    T.cuda.tile.apply(T.ptx["ld.global.v2.b32"], regs.view("uint32"), A.sub[tid, :].view("uint32"))
    T.cuda.tile.apply(T.ptx["mov.b32"], wide.view("uint32"), regs.view("uint32").sub[0:1])
    T.cuda.tile.apply(T.ptx["st.global.v2.b32"], B.sub[tid, :].view("uint32"), regs.view("uint32"))
    T.cuda.tile.apply(T.ptx["ld.global.b32"], acc, C.sub[tid:tid + 1])
    T.cuda.tile.ewise(lambda v: T.max(T.exp(v), T.float32(0)), acc, acc)
    T.cuda.tile.apply(T.ptx["st.global.b32"], C.sub[tid:tid + 1], acc)
    T.cuda.tile.apply(T.ptx["st.global.b32"], D.sub[tid:tid + 1], {total})
'''


def _names_kernel(tmp_path, names):
    lines = [f'    {names[0]} = T.cuda.thread_idx("x")']
    lines += [f"    {name}: T.let[T.int32] = {prev} * 1 + {i % 2} - {i % 2}" for i, (prev, name) in enumerate(zip(names, names[1:]))]
    source = NAMES_KERNEL.format(bindings="\n".join(lines), total=" + ".join(names))
    return testing.load_kernel(source, tmp_path, "names_kernel")


def test_variables_named_like_cuda_identifiers_compile(tmp_path):
    kernel = tvm_tirx.compile(_names_kernel(tmp_path, CLASHING), target="cuda", arch=ARCH)
    source = kernel.cuda_source
    body = source[source.index("names_kernel_kernel(") :]
    for name in CLASHING:
        # no declaration of a local variable under the clashing name
        assert not re.search(rf"^\s*[\w ]+[ *]{re.escape(name)} = ", body, re.M), name
    testing.assemble(kernel)  # nvcc/ptxas accept it


def test_every_reserved_name_compiles(tmp_path):
    # the whole list the renaming pass knows, and a name under each reserved prefix
    names = sorted(n for n in CUDA_RESERVED if not keyword.iskeyword(n))
    names += [prefix + "x" for prefix in RESERVED_PREFIXES] + ["__x", "_X"]
    kernel = tvm_tirx.compile(_names_kernel(tmp_path, names), target="cuda", arch=ARCH)
    testing.assemble(kernel)


def test_loop_variable_named_half_around_half_registers(tmp_path):
    source = '''\
from tvm_tirx.script import tirx as T


@T.function
def loop_kernel(A: T.Tensor((128, 4), "float16", align=8), B: T.Tensor((128, 4), "float16", align=8)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    for half in T.serial(2):
        regs = T.alloc_local((4,), "float16", layout="default")
        T.cuda.tile.apply(T.ptx["ld.global.v2.b32"], regs.view("uint32"), A.sub[tid * 2 + half, :].view("uint32"))
        T.cuda.tile.apply(T.ptx["st.global.v2.b32"], B.sub[tid * 2 + half, :].view("uint32"), regs.view("uint32"))
'''
    kernel = tvm_tirx.compile(testing.load_kernel(source, tmp_path, "loop_kernel"), target="cuda", arch=ARCH)
    testing.assemble(kernel)


def test_renaming_keeps_tile_error_names(tmp_path):
    # names are legalized after LowerTileApply: its messages use the user's names
    source = '''\
from tvm_tirx.script import tirx as T


@T.function
def oob_kernel(A: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    half = T.cuda.thread_idx("x")
    regs = T.alloc_local((4,), "float32", layout="default")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], regs, A.sub[(half + 1) % 65, :])
'''
    func = testing.load_kernel(source, tmp_path, "oob_kernel")
    with pytest.raises(tvm_tirx.TileError, match="half"):
        tvm_tirx.compile(func, target="cuda", arch=ARCH)


REINTERPRET_KERNEL = '''\
from tvm_tirx.script import tirx as T


@T.function
def reinterpret_kernel(A: T.Tensor((64,), "{dst}", align={size})):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((1,), "{dst}", layout="default")
    T.cuda.tile.apply(T.ptx["mov.b{bits}"], r, T.reinterpret("{dst}", {literal}))
    T.cuda.tile.apply(T.ptx["st.global.b{bits}"], A.sub[tid:tid + 1], r)
'''


@pytest.mark.parametrize(
    "dst, literal",
    [
        ("uint32", "T.float32(1.0)"),
        ("uint32", "T.int32(-1)"),
        ("float32", "T.uint32(0x7FC00001)"),
        ("uint16", "T.float16(-2.5)"),
        ("int64", "T.float64(0.1)"),
    ],
)
def test_reinterpret_of_a_literal_compiles(tmp_path, dst, literal):
    bits = int(re.search(r"\d+$", dst).group())
    source = REINTERPRET_KERNEL.format(dst=dst, literal=literal, bits=bits, size=bits // 8)
    func = testing.load_kernel(source, tmp_path, "reinterpret_kernel")
    kernel = tvm_tirx.compile(func, target="cuda", arch=ARCH)
    assert not re.search(r"\(&\((-?0x|-?\d)", kernel.cuda_source), "address of a literal"
    testing.assemble(kernel)


def test_legal_name():
    from tvm_tirx.build.cuda_source import legal_name

    assert legal_name("tid") == "tid"
    assert legal_name("half") == "v_half"
    assert legal_name("__half") == "v_half"
    assert legal_name("tvm_builtin_ptx_mov_b32") == "v_tvm_builtin_ptx_mov_b32"
    assert legal_name("myfunc", reserved={"myfunc"}) == "v_myfunc"
    assert legal_name("") == ""  # apache-tvm names an unnamed variable itself


def test_rename_reserved_names_renames_definitions_and_uses():
    import tvm_ffi
    from tvm.ir import Var
    from tvm_tirx.build.cuda_source import rename_reserved_names

    @T.prim_func
    def before(A: T.Buffer((4,), "int32")):
        for half in range(4):
            A[half] = half

    after = rename_reserved_names(before)
    names = set()
    tvm_ffi.structural_walk(after, (Var, lambda v: names.add(v.name)))
    assert "half" not in names and "v_half" in names
    assert "A" in names  # buffers keep their names
    tvm.ir.assert_structural_equal(after, before)  # only names changed


def test_symbolic_extent_named_half(tmp_path):
    # a size variable becomes a kernel argument; its name reaches the CUDA as well
    source = '''\
import tvm
from tvm_tirx.script import tirx as T

half = tvm.tirx.Var("half", "int32")


@T.function
def sized_kernel(A: T.Tensor((half, 4), "float16", align=8), B: T.Tensor((half, 4), "float16", align=8)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    regs = T.alloc_local((4,), "float16", layout="default")
    if tid < half:
        T.cuda.tile.apply(T.ptx["ld.global.v2.b32"], regs.view("uint32"), A.sub[tid, :].view("uint32"))
        T.cuda.tile.apply(T.ptx["st.global.v2.b32"], B.sub[tid, :].view("uint32"), regs.view("uint32"))
'''
    kernel = tvm_tirx.compile(testing.load_kernel(source, tmp_path, "sized_kernel"), target="cuda", arch=ARCH)
    testing.assemble(kernel)
