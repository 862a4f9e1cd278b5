"""Raw ``T.ptx`` calls with address operands are checked as the tile call they spell
(issue 44, deliverable 1): each refused case has its accepted twin beside it."""

import pytest

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.tma import swizzled_layout
from tvm_tirx.tile.lower.lower import LOWERED, lower_tile_apply


def _lowered(func):
    return testing.lower(func)


@T.function
def load_b32(A: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    t = T.alloc_local((1,), "int32")
    T.ptx["ld.global.b32"](t[0], T.address_of(A[3]))


@T.function
def load_global_as_shared(A: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    t = T.alloc_local((1,), "int32")
    T.ptx["ld.shared.b32"](t[0], T.address_of(A[3]))


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
    "state space": (load_b32, load_global_as_shared, r"ld.shared.b32: src \(operand 2\): .*scope"),
    "bounds": (load_guarded, load_unguarded, r"src \(operand 2\): view provably out of the tensor's bounds"),
    # the address is the fifth argument of the raw call: the message points there
    "alignment": (load_v4_aligned, load_v4_misaligned, r"src \(operand 5\): vector atom not provably aligned"),
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


@T.function
def legal_raw_idioms(A: T.Tensor((8, 6), "int32", align=16), H: T.Tensor((64,), "float16", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    swizzled = T.alloc_shared((2, 64, 32), "uint32", align=1024, layout=swizzled_layout((2, 64, 32), "uint32", 3))
    halves = T.alloc_shared((64,), "bfloat16", align=16)
    bar = T.alloc_shared((1,), "int64", align=8)
    scalar = T.alloc_shared((), "float32")
    t = T.alloc_local((4,), "uint32")
    f = T.alloc_local((1,), "float32")
    # a swizzled tile at a run-time index: no view names the element; left to the protocol rules
    T.ptx["ld.shared.b32"](t[0], swizzled.ptr_to([tid % 2, tid, 0]))
    # words of a bf16 tensor (the widths differ: not rebuilt)
    T.ptx["ld.shared.b32"](t[0], halves.ptr_to([2 * tid]))
    # a vector of four halves as two .b32 words: the widths differ too
    T.ptx["ld.global.v2.b32"](t[0], t[1], T.address_of(H[4 * (tid % 16)]))
    # same widths, other types: checked (atom.add.u32 on int32, an mbarrier in an int64)
    T.ptx["atom.global.add.u32"](t[0], T.address_of(A[tid // 6, tid % 6]), T.uint32(1))
    T.ptx["mbarrier.init.shared::cta.b64"](bar.ptr_to([0]), T.uint32(32))
    # a vector across a row of a row-major tensor, as the address runs on
    T.ptx["ld.global.v4.b32"](t[0], t[1], t[2], t[3], T.address_of(A[0, 4]))
    # a 0-d tensor
    T.ptx["ld.shared.f32"](f[0], scalar.ptr_to([]))


def test_legal_raw_idioms_are_accepted():
    assert testing.count_ptx(_lowered(legal_raw_idioms), "ld.*") >= 4


@T.function
def atom_out_of_bounds(A: T.Tensor((8, 6), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    t = T.alloc_local((1,), "uint32")
    T.ptx["atom.global.add.u32"](t[0], T.address_of(A[T.cuda.thread_idx("x") // 6, T.cuda.thread_idx("x") % 6]),
                                 T.uint32(1))


def test_a_same_width_reinterpretation_is_still_bounds_checked():
    with pytest.raises(TileError, match=r"atom.global.add.u32: .*operand 2.*out of the tensor's bounds"):
        _lowered(atom_out_of_bounds)


@T.function
def shared_by_window():
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    slot = T.alloc_shared((8,), "int32", align=16)
    t = T.alloc_local((1,), "int32")
    T.ptx["ld.shared.b32"](t[0], slot.ptr_to([3]))


@T.function
def shared_by_element_address():
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    slot = T.alloc_shared((8,), "int32", align=16)
    t = T.alloc_local((1,), "int32")
    T.ptx["ld.shared.b32"](t[0], T.address_of(slot[3]))  # apache-tvm converts it to the .shared window


@T.function
def local_by_window():
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    m = T.alloc_buffer((4,), "float32", scope="local")
    t = T.alloc_local((1,), "float32")
    T.ptx["ld.local.f32"](t[0], T.call_pure_extern("uint64", "__cvta_generic_to_local", m.ptr_to([2])))


@T.function
def local_by_generic_address():
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    m = T.alloc_buffer((4,), "float32", scope="local")
    t = T.alloc_local((1,), "float32")
    T.ptx["ld.local.f32"](t[0], T.address_of(m[2]))


@T.function
def local_window_misaligned():
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    m = T.alloc_buffer((8,), "float32", scope="local")
    t = T.alloc_local((4,), "float32")
    T.ptx["ld.local.v4.f32"](t[0], t[1], t[2], t[3],
                             T.call_pure_extern("uint64", "__cvta_generic_to_local", m.ptr_to([2])))


def test_a_local_operand_takes_its_window_address_not_a_generic_one():
    # PTX ISA 6.4.1.1: a .local address is an offset in the thread's local window
    for good in (local_by_window, shared_by_window, shared_by_element_address):
        _lowered(good)
    with pytest.raises(TileError, match=r"src \(operand 2\): raw address not in the .local window"):
        _lowered(local_by_generic_address)


def test_a_local_window_address_is_checked_like_any_other():
    with pytest.raises(TileError, match=r"ld.local.v4.f32: src \(operand 5\): vector atom not provably aligned"):
        _lowered(local_window_misaligned)
