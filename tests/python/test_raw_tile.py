"""Raw ``T.ptx`` calls with address operands are checked as the tile call they spell
(issue 44, deliverable 1): each refused case has its accepted twin beside it."""

import pytest

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.lower.lower import LOWERED, lower_tile_apply


def _lowered(func):
    return testing.lower(func)


@T.function
def load_b32(A: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    t = T.alloc_local((1,), "int32")
    T.ptx["ld.global.b32"](t[0], T.address_of(A[3]))


@T.function
def load_f32_into_int32(A: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    t = T.alloc_local((1,), "int32")
    T.ptx["ld.global.f32"](t[0], T.address_of(A[3]))


@T.function
def load_guarded(A: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    t = T.alloc_local((1,), "int32")
    if T.cuda.thread_idx("x") < 64:
        T.ptx["ld.global.b32"](t[0], T.address_of(A[T.cuda.thread_idx("x")]))


@T.function
def load_unguarded(A: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    t = T.alloc_local((1,), "int32")
    T.ptx["ld.global.b32"](t[0], T.address_of(A[T.cuda.thread_idx("x")]))


@T.function
def load_v4_aligned(A: T.Tensor((64,), "int32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=16))
    t = T.alloc_local((4,), "int32")
    T.ptx["ld.global.v4.b32"](t[0], t[1], t[2], t[3], T.address_of(A[T.cuda.thread_idx("x") * 4]))


@T.function
def load_v4_misaligned(A: T.Tensor((64,), "int32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=16))
    t = T.alloc_local((4,), "int32")
    T.ptx["ld.global.v4.b32"](t[0], t[1], t[2], t[3], T.address_of(A[T.cuda.thread_idx("x") * 4 + 2]))


@T.function
def store_shared_window(Out: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    slot = T.alloc_shared((4, 8), "int32", align=16)
    t = T.alloc_local((4,), "int32")
    T.ptx["ld.shared.v4.b32"](t[0], t[1], t[2], t[3], slot.ptr_to([1, 4]))


@T.function
def store_shared_window_past_the_row(Out: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    slot = T.alloc_shared((4, 8), "int32", align=16)
    t = T.alloc_local((4,), "int32")
    T.ptx["ld.shared.v4.b32"](t[0], t[1], t[2], t[3], slot.ptr_to([3, 6]))


@T.function
def computed_address(A: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    t = T.alloc_local((1,), "int32")
    T.ptx["ld.global.b32"](t[0], T.reinterpret("handle", T.reinterpret("uint64", T.address_of(A[0])) + T.uint64(4)))


PAIRS = {
    "dtype": (load_b32, load_f32_into_int32, r"ld.global.f32: dst \(operand 1\): dtype not accepted by the PTX type"),
    "bounds": (load_guarded, load_unguarded, r"src \(operand 2\): view provably out of the tensor's bounds"),
    "alignment": (load_v4_aligned, load_v4_misaligned, r"vector atom not provably aligned"),
    "shared window": (store_shared_window, store_shared_window_past_the_row, r"raw address past the tensor.s extent"),
}


@pytest.mark.parametrize("good, bad, match", PAIRS.values(), ids=PAIRS.keys())
def test_a_raw_call_with_addresses_is_checked_as_its_tile_form(good, bad, match):
    lowered = _lowered(good)
    assert lowered.attrs[LOWERED]
    with pytest.raises(TileError, match=r"test_raw_tile.py:\d+: .*" + match):
        _lowered(bad)


def test_a_raw_call_whose_address_is_computed_is_left_to_the_protocol_rules():
    # no element to name: the call spells no tile call, and is not refused
    assert testing.count_ptx(_lowered(computed_address), "ld.global.*") == 1


def test_the_lowering_runs_once_per_kernel():
    # the expansions are raw calls of views the second run would not see; a lowered
    # function is marked and left alone
    lowered = lower_tile_apply(load_v4_aligned)
    assert lower_tile_apply(lowered).same_as(lowered)


@T.function
def raw_ldmatrix():
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    sm = T.alloc_shared((8, 8), "uint16", align=16)
    r = T.alloc_local((1,), "uint32")
    lane = T.cuda.lane_id()
    T.ptx["ldmatrix.sync.aligned.m8n8.x1.shared.b16"](r[0], sm.ptr_to([lane % 8, 0]))


def test_a_raw_collective_is_not_read_as_a_thread_scope_tile_call():
    # each lane passes its own row's address: legal raw code, which no thread-scope tile call spells
    assert testing.count_ptx(_lowered(raw_ldmatrix), "ldmatrix.*") == 1
