"""LowerTileApply: before/after IR, repeat loops, counts, predication and parameters."""

import tvm
from tvm import tirx
from tvm.tirx.layout import S, TileLayout

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.script import tirx as T

from test_roundtrip import predicated

permuted = TileLayout(S[(2, 3, 4) : (4, 8, 1)])


@T.function
def twelve_floats(A: T.Tensor((64, 12), "float32", align=16), B: T.Tensor((64, 12), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((3, 4), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :].view(3, 4))
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :].view(3, 4), r)


def test_repeat_axes_become_unrolled_loops_with_one_call_each():
    lowered = testing.lower(twelve_floats)
    loops = []

    def visit(node):
        if isinstance(node, tirx.For):
            loops.append(node)

    import tvm_ffi

    tvm_ffi.structural_walk(lowered.body, (tirx.For, visit))
    assert [int(l.extent) for l in loops] == [3, 3]
    assert all(l.kind == tirx.ForKind.UNROLLED for l in loops)
    for loop in loops:
        assert isinstance(loop.body, tirx.Evaluate)  # exactly one PTX call per coordinate
    assert testing.count_ptx(lowered, "ld.*") == 3
    assert testing.count_ptx(lowered, "st.*") == 3


def test_lowered_ir_matches_hand_written_ptx_calls():
    @T.function
    def expected(A: T.Tensor((64, 12), "float32", align=16), B: T.Tensor((64, 12), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((3, 4), "float32")
        a = A.sub[tid, :].view(3, 4)
        for r0 in T.unroll(3):
            T.ptx["ld.global.v4.b32"](r[r0, 0], r[r0, 1], r[r0, 2], r[r0, 3], a.ptr_to([r0, 0]))
        b = B.sub[tid, :].view(3, 4)
        for r0 in T.unroll(3):
            T.ptx["st.global.v4.b32"](b.ptr_to([r0, 0]), r[r0, 0], r[r0, 1], r[r0, 2], r[r0, 3])

    testing.assert_lowers_to(twelve_floats, expected)


def test_register_slots_follow_the_layout():
    @T.function
    def k(A: T.Tensor((2, 3, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
        r = T.alloc_local((2, 3, 4), "float32", layout=permuted)
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A)

    kernel = tvm_tirx.compile(k, target="cuda", arch="sm_90a")
    src = kernel.cuda_source
    import re

    calls = re.findall(r"ld_vec_global_v4_b32_f32\((\w+)\[(\d+)\], \w+\[(\d+)\], \w+\[(\d+)\], \w+\[(\d+)\]", src)
    # coordinate (i, j, k) lives in slot 4*i + 8*j + k
    slots = [tuple(int(x) for x in c[1:]) for c in calls]
    expected = [tuple(4 * i + 8 * j + k for k in range(4)) for i in range(2) for j in range(3)]
    assert slots == expected
    assert re.search(r"float \w+\[24\];", src)  # the layout permutes 24 slots


def test_predication_and_preserve_dst_reach_the_asm():
    kernel = tvm_tirx.compile(predicated, target="cuda", arch="sm_90a")
    src = kernel.cuda_source
    helper = next(line for line in src.splitlines() if "ld.global.L2::cache_hint.v4.b32" in line and "asm" in line)
    assert "@p ld.global.L2::cache_hint.v4.b32" in helper
    assert '"+f"' in helper  # destinations bound read-write: keep old values when pred is false
    if testing.has_nvcc():
        assert len(testing.assemble(kernel)) > 0


def test_scalar_source_is_reused_at_every_repeat():
    lowered = testing.lower(predicated)
    text = lowered.script()
    assert text.count("T.float32(-1.0)") == 1  # inside the single unrolled loop body
    assert testing.count_ptx(lowered, "mov.*") == 4


def test_lower_tile_apply_pass_in_a_pipeline():
    mod = tvm.IRModule({"main": twelve_floats})
    lowered = tvm_tirx.LowerTileApply()(mod)
    assert "tile.apply" not in lowered.script()
    assert testing.count_ptx(lowered["main"]) == 6
