"""Plain region operands: ``A[0:64, 1:2]`` (a ``tvm.ir.TensorRegion``) is the view
``A.sub[0:64, 1:2]``: the same IR, and through every operand rule the same error."""

import pytest
import tvm

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.build.stages import KernelFileError
from tvm_tirx.script import tirx as T

# -- the same IR -------------------------------------------------------------------------------


@T.function
def pack_regions(A: T.Tensor((8,), "float32", align=16), Out: T.Tensor((4,), "uint32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    a = T.alloc_local((4, 2), "float32")
    d = T.alloc_local((4, 1), "uint32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], a.view(2, 4), A.view(2, 4))
    T.cuda.tile.apply(T.ptx["cvt.rn.f16x2.f32"], d, a[:, 1:2], a[:, 0:1])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out[0:4], d.view(4))


@T.function
def pack_views(A: T.Tensor((8,), "float32", align=16), Out: T.Tensor((4,), "uint32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    a = T.alloc_local((4, 2), "float32")
    d = T.alloc_local((4, 1), "uint32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], a.view(2, 4), A.view(2, 4))
    T.cuda.tile.apply(T.ptx["cvt.rn.f16x2.f32"], d, a.sub[:, 1:2], a.sub[:, 0:1])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out, d.view(4))


@T.function
def rows_regions(A: T.Tensor((128, 4), "float32", align=16), B: T.Tensor((64, 8), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((2, 4), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r[0:2, 0:4], A[2 * tid : 2 * tid + 2, 0:4])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B[tid, 4:8], r[1, 0:4])


@T.function
def rows_views(A: T.Tensor((128, 4), "float32", align=16), B: T.Tensor((64, 8), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((2, 4), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[2 * tid : 2 * tid + 2, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid : tid + 1, 4:8], r.sub[1:2, :])


def _named(func, name="k"):
    return func.with_attr("global_symbol", name)


@pytest.mark.parametrize("regions, views", [(pack_regions, pack_views), (rows_regions, rows_views)], ids=["cvt-pack", "rows"])
def test_region_operands_parse_and_lower_to_the_view_form(regions, views):
    # Before: the parsed kernels are the same IR; Expected: so are the lowered ones
    tvm.ir.assert_structural_equal(_named(regions), _named(views), map_free_vars=True)
    with tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}):
        lowered_regions, lowered_views = testing.lower(regions), testing.lower(views)
    tvm.ir.assert_structural_equal(_named(lowered_regions), _named(lowered_views), map_free_vars=True)
    assert testing.count_ptx(lowered_regions) == testing.count_ptx(lowered_views) > 0


def test_region_kernel_compiles_and_assembles():
    kernel = tvm_tirx.compile(pack_regions, target="cuda", arch="sm_90a")
    assert '"cvt.rn.f16x2.f32 %0, %1, %2;"' in kernel.cuda_source
    if testing.has_nvcc():
        assert testing.assemble(kernel)


def test_a_region_keeps_every_axis():
    # A[tid, 0:4] parses to the region A[tid:tid + 1, 0:4]: its index is an axis of extent 1
    @T.function
    def one_row(A: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((1, 4), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A[tid, 0:4])

    (call,) = _tile_calls(one_row)
    assert [int(tvm.sym.Analyzer().simplify(s)) for s in call.args[2].shape] == [1, 4]


def _tile_calls(func):
    import tvm_ffi

    from tvm_tirx.tile.rules.op import is_tile_call

    found = []
    tvm_ffi.structural_walk(func.body, (tvm.ir.Call, lambda c: found.append(c) if is_tile_call(c) else None))
    return found


# -- the same errors ---------------------------------------------------------------------------
# Each case: parameters, set-up lines, and the call written with regions and with views.

HEADER = '''import tvm
from tvm.tirx.layout import S, TileLayout
from tvm_tirx.script import tirx as T

N = tvm.tirx.Var("N", "int32")


@T.function
def {name}({params}):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
'''

A64x4 = 'A: T.Tensor((64, 4), "float32", align=16)'
R14 = 'r = T.alloc_local((1, 4), "float32")'
LD = 'T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], {})'

CASES = {
    "wrong atom shape": (A64x4, 'r = T.alloc_local((1, 3), "float32")', "r, A[tid, 0:3]", "r, A.sub[tid:tid + 1, 0:3]"),
    "repeat shapes differ": (A64x4, 'r = T.alloc_local((4,), "float32")', "r, A[tid, 0:4]", "r, A.sub[tid:tid + 1, :]"),
    "bit width": ('A: T.Tensor((64, 8), "float16", align=16)', R14, "r, A[tid, 0:4]", "r, A.sub[tid:tid + 1, 0:4]"),
    "wrong state space": (
        "",
        R14 + '\n    s = T.alloc_shared((64, 4), "float32", align=16)',
        "r, s[tid, 0:4]",
        "r, s.sub[tid:tid + 1, :]",
    ),
    "not contiguous": (
        'A: T.Tensor((4, 64), "float32", align=16)',
        'r = T.alloc_local((1, 4), "float32")',
        "r, A.permute(1, 0)[tid, 0:4]",
        "r, A.permute(1, 0).sub[tid:tid + 1, :]",
    ),
    "register destination not local": (
        A64x4 + ', B: T.Tensor((64, 4), "float32", align=16)',
        "",
        "B[tid, 0:4], A[tid, 0:4]",
        "B.sub[tid:tid + 1, :], A.sub[tid:tid + 1, :]",
    ),
    "overlapping register destinations": (
        A64x4,
        "r = T.alloc_local((4, 4), \"float32\", layout=TileLayout(S[(4, 4):(0, 1)]))",
        "r[2:4, 0:4], A[0:2, 0:4]",
        "r.sub[2:4, :], A.sub[0:2, :]",
    ),
    "not provably aligned": ('A: T.Tensor((64, 5), "float32", align=16)', R14, "r, A[tid, 0:4]", "r, A.sub[tid:tid + 1, 0:4]"),
    "provably out of bounds": (A64x4, R14, "r, A[tid + 1, 0:4]", "r, A.sub[tid + 1:tid + 2, :]"),
    "not provably within bounds": ('A: T.Tensor((N, 4), "float32", align=16)', R14, "r, A[tid, 0:4]", "r, A.sub[tid:tid + 1, :]"),
}

#: The words of each case's rule (docs/errors.rst lists them).
RULE_WORDS = {
    "wrong atom shape": "wrong atom shape",
    "repeat shapes differ": "repeat shapes differ",
    "bit width": "bit width",
    "wrong state space": "wrong state space",
    "not contiguous": "not contiguous",
    "register destination not local": "wrong state space",
    "overlapping register destinations": "overlapping register destinations",
    "not provably aligned": "not provably aligned",
    "provably out of bounds": "provably out of the tensor's bounds",
    "not provably within bounds": "not provably within the tensor's bounds",
}


def _error(tmp_path, name, params, setup, operands):
    body = (f"    {setup}\n" if setup else "") + "    " + LD.format(operands) + "\n"
    source = HEADER.format(name=name, params=params) + body
    with pytest.raises(TileError) as info:
        try:
            kernel = testing.load_kernel(source, tmp_path, name)
        except KernelFileError as err:  # the kernel's file raised while it was parsed
            raise err.__cause__ from None
        with tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}):
            testing.lower(kernel)
    return info.value


@pytest.mark.parametrize("case", sorted(CASES))
def test_region_operand_breaks_the_rule_the_view_breaks(tmp_path, case):
    params, setup, regions, views = CASES[case]
    by_region = _error(tmp_path, "by_region", params, setup, regions)
    by_view = _error(tmp_path, "by_view", params, setup, views)
    parts = ("opcode", "operand", "rule", "expected", "found")
    assert {p: getattr(by_region, p) for p in parts} == {p: getattr(by_view, p) for p in parts}
    assert RULE_WORDS[case] in by_region.rule, str(by_region)
    assert by_region.location and "by_region.py:" in by_region.location


def test_ewise_takes_regions_as_views():
    def build():
        @T.function
        def k(A: T.Tensor((4,), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            a = T.alloc_local((4,), "float32")
            b = T.alloc_local((4,), "float32")
            T.cuda.tile.ewise(lambda x: x * T.float32(2), b[0:2], a[0:4])

    with pytest.raises(TileError) as info:
        build()
    assert "(2,)" in str(info.value) and "(4,)" in str(info.value)

    @T.function
    def twice(A: T.Tensor((4,), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
        a = T.alloc_local((4,), "float32")
        b = T.alloc_local((4,), "float32")
        T.cuda.tile.ewise(lambda x: x * T.float32(2), b[0:2], a[2:4])

    @T.function
    def twice_views(A: T.Tensor((4,), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
        a = T.alloc_local((4,), "float32")
        b = T.alloc_local((4,), "float32")
        T.cuda.tile.ewise(lambda x: x * T.float32(2), b.sub[0:2], a.sub[2:4])

    tvm.ir.assert_structural_equal(_named(twice), _named(twice_views), map_free_vars=True)
