"""tile.apply calls print back as TVMScript that re-parses to a structurally equal PrimFunc."""

import tvm
from tvm.script import tirx as stock_T

import tvm_tirx
from tvm_tirx.script import tirx as T

from kernels import read_next_row, register_move, save_and_zero


def _roundtrip(func):
    text = func.script()
    assert "T.cuda.tile.apply(" in text
    reparsed = tvm.script.from_source(text)
    tvm.ir.assert_structural_equal(func, reparsed, map_free_vars=True)
    return text


def test_seed_kernels_roundtrip():
    for func in (read_next_row, save_and_zero, register_move):
        _roundtrip(func)


def test_printed_form_names_the_opcode_and_operands():
    text = _roundtrip(read_next_row)
    assert 'T.cuda.tile.apply("ld.global.v4.b32", registers, ' in text
    assert 'T.cuda.tile.apply("st.global.v4.b32", ' in text


@T.function
def predicated(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    policy = T.alloc_local((1,), "uint64")
    r = T.alloc_local((4,), "float32")
    T.ptx["createpolicy.fractional.L2::evict_last.b64"](policy[0], T.float32(1.0))
    T.cuda.tile.apply(T.ptx["mov.b32"], r.view(4, 1), T.float32(-1))
    T.cuda.tile.apply(
        T.ptx["ld.global.L2::cache_hint.v4.b32"], r, A.sub[tid, :],
        pred=tid < 32, preserve_dst=True, cache_policy=policy[0],
    )
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)


def test_pred_preserve_dst_and_params_roundtrip():
    text = _roundtrip(predicated)
    assert "scope=thread,pred,keep,param=cache_policy" in text


def test_stock_prim_func_sees_the_names():
    # `import tvm` alone installs the names into apache-tvm's own T (entry point).
    assert stock_T.cuda.tile.apply is T.cuda.tile.apply
    assert stock_T.Tensor is T.Tensor


@T.function
def bounded(A: T.Tensor((256, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256, min_blocks_per_sm=8))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], A.sub[tid, :], r)


def test_launch_bounds_roundtrip_and_reach_the_kernel():
    _roundtrip(bounded)
    src = tvm_tirx.compile(bounded, target="cuda", arch="sm_90a").cuda_source
    assert "__launch_bounds__(256, 8)" in src


def test_min_blocks_and_max_registers_exclude_each_other():
    import pytest

    with pytest.raises(ValueError, match="not both"):
        T.cuda.LaunchConfig(grid=1, block=256, min_blocks_per_sm=8, max_registers=32)
