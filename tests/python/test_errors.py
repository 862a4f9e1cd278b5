"""One test per contract rule: the error class, the rule's words, the operand and the line."""

import inspect

import pytest
from tvm.tirx.layout import S, TileLayout

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T


def _line_of(func_src_marker):
    """Line number (in this file) of the first line containing ``func_src_marker``."""
    lines = inspect.getsource(inspect.getmodule(_line_of)).splitlines()
    for i, line in enumerate(lines, 1):
        if func_src_marker in line:
            return i
    raise AssertionError(func_src_marker)


def _parse_error(build):
    with pytest.raises(TileError) as info:
        build()
    return info.value


def _lower_error(func):
    with pytest.raises(TileError) as info:
        testing.lower(func)
    return info.value


def test_tile_error_is_a_value_error():
    assert issubclass(TileError, ValueError)


def test_wrong_atom_shape():
    def build():
        @T.function
        def k(A: T.Tensor((64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((3,), "float32")
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, 0:3])  # ATOM-LINE

    err = _parse_error(build)
    assert "wrong atom shape" in str(err)
    assert "ld.global.v4.b32" in str(err) and "dst (operand 1)" in str(err)
    assert "(4,)" in str(err) and "(3,)" in str(err)
    assert err.location.endswith(f"test_errors.py:{_line_of('# ATOM-LINE')}")
    assert str(err).splitlines()[-1] == str(err)  # one self-contained line


def test_repeat_shapes_differ():
    def build():
        @T.function
        def k(A: T.Tensor((64, 8), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((3, 4), "float32")
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :].view(2, 4))

    err = _parse_error(build)
    assert "repeat shapes differ" in str(err)
    assert "src (operand 2)" in str(err) and "(3,)" in str(err) and "(2,)" in str(err)


def test_element_width_differs_from_ptx_type():
    def build():
        @T.function
        def k(A: T.Tensor((64, 4), "float16", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((4,), "float32")
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])

    err = _parse_error(build)
    assert "bit width" in str(err) and "src (operand 2)" in str(err)
    assert "float16 (16-bit)" in str(err) and "32-bit" in str(err)


def test_typed_opcode_rejects_other_dtype_of_same_width():
    def build():
        @T.function
        def k(A: T.Tensor((64,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((1,), "float32")
            T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[tid : tid + 1])

    err = _parse_error(build)
    assert "dtype not accepted" in str(err) and "int32" in str(err)


def test_wrong_state_space():
    def build():
        @T.function
        def k(A: T.Tensor((64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((4,), "float32")
            s = T.alloc_shared((64, 4), "float32", align=16)
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, s.sub[tid, :])

    err = _parse_error(build)
    assert "wrong state space" in str(err) and "'shared'" in str(err)
    assert "src (operand 2)" in str(err)


def test_register_operand_must_be_local():
    def build():
        @T.function
        def k(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], B.sub[tid, :], A.sub[tid, :])

    err = _parse_error(build)
    assert "wrong state space" in str(err) and "dst (operand 1)" in str(err)


def test_vector_atom_not_contiguous():
    def build():
        @T.function
        def k(A: T.Tensor((4, 64), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((4,), "float32")
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[:, tid])

    err = _parse_error(build)
    assert "not contiguous" in str(err) and "src (operand 2)" in str(err) and "+64" in str(err)


def test_vector_atom_not_provably_aligned_by_index():
    @T.function
    def k(A: T.Tensor((64, 5), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, 0:4])  # ALIGN-LINE

    err = _lower_error(k)
    assert "not provably aligned" in str(err) and "multiple of 16" in str(err)
    assert "src (operand 2)" in str(err)
    assert err.location.endswith(f"test_errors.py:{_line_of('# ALIGN-LINE')}")


def test_vector_atom_not_provably_aligned_by_declared_align():
    @T.function
    def k(A: T.Tensor((64, 4), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])

    err = _lower_error(k)
    assert "not provably aligned" in str(err) and "align=4" in str(err)
    with pytest.raises(TileError):
        tvm_tirx.compile(k, target="cuda", arch="sm_90a")


def test_overlapping_register_destinations():
    overlapping = TileLayout(S[(2, 2, 1) : (1, 1, 1)])

    def build():
        @T.function
        def k(Out: T.Tensor((2, 2, 1), "uint32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            d = T.alloc_local((2, 2, 1), "uint32", layout=overlapping)
            T.cuda.tile.apply(T.ptx["mov.b32"], d, T.uint32(1))

    err = _parse_error(build)
    assert "overlapping register destinations" in str(err) and "dst (operand 1)" in str(err)
    assert "slot 1" in str(err)


def test_scalar_in_destination_slot():
    def build():
        @T.function
        def k(Out: T.Tensor((1,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            r = T.alloc_local((1,), "float32")
            T.cuda.tile.apply(T.ptx["mov.b32"], T.float32(0), r)

    err = _parse_error(build)
    assert "scalar in a destination slot" in str(err) and "dst (operand 1)" in str(err)


def test_unknown_opcode_spelling_string():
    def build():
        @T.function
        def k(A: T.Tensor((64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((4,), "float32")
            T.cuda.tile.apply("ld.global.v3.b32", r, A.sub[tid, :])

    err = _parse_error(build)
    assert "unknown or illegal opcode spelling" in str(err) and "v3" in str(err)


def test_unknown_opcode_spelling_ptx_namespace():
    def build():
        @T.function
        def k(A: T.Tensor((64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((4,), "float32")
            T.cuda.tile.apply(T.ptx["ld.globl.v4.b32"], r, A.sub[tid, :])

    err = _parse_error(build)
    assert "unknown or illegal opcode spelling" in str(err) and "globl" in str(err)


def test_incomplete_opcode():
    def build():
        @T.function
        def k(A: T.Tensor((64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((4,), "float32")
            T.cuda.tile.apply(T.ptx["ld.global.v4"], r, A.sub[tid, :])

    err = _parse_error(build)
    assert "illegal opcode" in str(err) and "type" in str(err)


def test_instruction_without_tile_family():
    def build():
        @T.function
        def k(A: T.Tensor((64,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            r = T.alloc_local((1,), "float32")
            T.cuda.tile.apply(T.ptx["popc.b32"], r, r)

    err = _parse_error(build)
    assert "no tile family" in str(err) and "popc" in str(err)


def test_generic_addressing_is_not_a_tile_form():
    def build():
        @T.function
        def k(A: T.Tensor((64,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((1,), "float32")
            T.cuda.tile.apply(T.ptx["ld.b32"], r, A.sub[tid : tid + 1])

    err = _parse_error(build)
    assert "unsupported form" in str(err) and "generic addressing" in str(err)


def test_view_provably_out_of_bounds():
    @T.function
    def k(A: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid + 1, :])

    err = _lower_error(k)
    assert "out of the tensor's bounds" in str(err) and "src (operand 2)" in str(err)
    assert "[0, 1024) of A (256 x float32)" in str(err) and "found bytes [1024, 1040) at tid=63" in str(err)


def test_view_in_bounds_is_accepted():
    @T.function
    def k(A: T.Tensor((65, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid + 1, :])

    assert testing.count_ptx(testing.lower(k)) == 1


def test_preserve_dst_without_pred():
    def build():
        @T.function
        def k(A: T.Tensor((64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((4,), "float32")
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :], preserve_dst=True)

    err = _parse_error(build)
    assert "preserve_dst without pred" in str(err)


def test_preserve_dst_without_register_destination():
    def build():
        @T.function
        def k(A: T.Tensor((64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((4,), "float32")
            T.cuda.tile.apply(
                T.ptx["st.global.v4.b32"], A.sub[tid, :], r, pred=tid < 32, preserve_dst=True
            )

    err = _parse_error(build)
    assert "without a register destination" in str(err)


def test_pred_must_be_bool():
    def build():
        @T.function
        def k(A: T.Tensor((64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((4,), "float32")
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :], pred=tid)

    err = _parse_error(build)
    assert "pred must be a bool" in str(err) and "int32" in str(err)


def test_untyped_python_scalar():
    def build():
        @T.function
        def k(Out: T.Tensor((4, 1), "uint32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            a = T.alloc_local((4, 1), "uint32")
            T.cuda.tile.apply(T.ptx["mov.b32"], a, 17)

    err = _parse_error(build)
    assert "untyped scalar" in str(err) and "T.uint32(17)" in str(err)


def test_scalar_for_a_vector_register_group():
    def build():
        @T.function
        def k(A: T.Tensor((64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            T.cuda.tile.apply(T.ptx["st.global.v4.b32"], A.sub[tid, :], T.float32(0))

    err = _parse_error(build)
    assert "scalar for a register group" in str(err) and "src (operand 2)" in str(err)


def test_operand_count():
    def build():
        @T.function
        def k(A: T.Tensor((64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((4,), "float32")
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r)

    err = _parse_error(build)
    assert "operand count" in str(err) and "2 operand(s)" in str(err)


def test_unknown_scope():
    def build():
        @T.function
        def k(A: T.Tensor((64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((4,), "float32")
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :], scope="grid")

    err = _parse_error(build)
    assert "unknown execution scope" in str(err) and "'grid'" in str(err)


def test_missing_cache_policy_parameter():
    def build():
        @T.function
        def k(A: T.Tensor((64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((4,), "float32")
            T.cuda.tile.apply(T.ptx["ld.global.L2::cache_hint.v4.b32"], r, A.sub[tid, :])

    err = _parse_error(build)
    assert "missing parameter 'cache_policy'" in str(err)


def test_thread_idx_needs_launch():
    with pytest.raises(Exception) as info:

        @T.function
        def k(A: T.Tensor((64,), "float32")):
            T.device_entry()
            tid = T.cuda.thread_idx("x")

    assert "T.device_entry(launch=T.cuda.LaunchConfig" in str(info.value)


def test_compile_without_gpu_needs_arch(monkeypatch):
    import importlib

    target_module = importlib.import_module("tvm_tirx.build.target")

    monkeypatch.setattr(target_module, "_gpu_arch", lambda: None)
    from kernels import register_move

    with pytest.raises(ValueError, match="pass arch="):
        tvm_tirx.compile(register_move, target="cuda")
