"""Raw ``T.ptx[...]`` calls a family claims (``RawSpelling``): decoded into the tile form's
CallView and checked by its rules, never rewritten; the families that declare them; a raw
call whose operands cannot be read, refused naming the tile form; raw calls of the other
families left alone."""

import pytest
import tvm_ffi
from tvm import tirx

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile import RawSpelling, register_family
from tvm_tirx.tile.rules.raw_calls import decode_raw, tile_form_text
from tvm_tirx.tile.ir.registry import candidates, families

FULL = 0xFFFFFFFF


def test_the_families_that_check_raw_calls():
    raw = {f.name: sorted(f.raw.entries) for f in families() if f.raw is not None}
    assert set(raw) == {"named_barrier", "shuffle", "warp_vote", "redux", "elect", "fence", "setmaxnreg"}
    assert "bar_sync_count" in raw["named_barrier"] and "shfl_sync_p" in raw["shuffle"]


def test_a_family_declares_only_raw_entries_it_claims():
    def contract(instr):  # pragma: no cover - never registered
        return "unused"

    with pytest.raises(ValueError, match="declares raw entries it does not claim by name: shfl_sync"):
        register_family(entries=("bar_sync",), raw=RawSpelling(("bar_sync", "shfl_sync")))(contract)


def test_a_raw_call_decodes_to_the_tile_forms_view():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((2,), "float32")
        T.ptx["shfl_sync.down.b32"](x[0], x[1], T.uint32(2), T.uint32(0x1F), T.uint32(FULL))

    found = []
    tvm_ffi.structural_walk(k.body, (tirx.Evaluate, lambda stmt: found.append(stmt.value)))
    view = decode_raw(found[-1])  # the shuffle
    assert view.raw and view.scope == "thread" and view.opcode == "shfl.sync.down.b32"
    assert [int(view.params[k]) for k in ("b", "c", "membermask")] == [2, 0x1F, FULL]
    assert [op.kind for op in view.operands] == ["element", "element"]
    assert view.operands[1].value.indices[0].value == 1


def _shuffle_into(dst_scope: str):
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        s = T.alloc_shared((32,), "float32")
        x = T.alloc_local((1,), "float32")
        if dst_scope == "shared":
            T.ptx["shfl_sync.bfly.b32"](s[0], x[0], T.uint32(1), T.uint32(31), T.uint32(FULL))
        else:
            T.ptx["shfl_sync.bfly.b32"](x[0], s[0], T.uint32(1), T.uint32(31), T.uint32(FULL))

    return k


def test_a_raw_call_whose_operands_cannot_be_read_is_refused_naming_the_tile_form():
    with pytest.raises(TileError, match=r"shfl.sync.bfly.b32: dst \(operand 1\): raw call whose operands the checker "
                       r"cannot read: expected the tile form, which the checker reads: "
                       r"T.cuda.tile.apply\(T.ptx\[\"shfl_sync.bfly.b32\"\], dst, src, b=..., c=..., membermask=...\), "
                       r"found s\[0\] \(not an element of a T.alloc_local tensor\)") as info:
        testing.lower(_shuffle_into("shared"))
    assert str(info.value).startswith(f"{__file__}:")
    testing.lower(_shuffle_into("local"))  # a shared element read as a scalar source is a value


def test_the_tile_form_text_names_roles_and_keywords():
    contract = next(c for c in candidates("bar.sync") if c.instruction.entry_name == "bar_sync_count")
    assert tile_form_text(contract) == 'T.cuda.tile.apply(T.ptx["bar.sync"], id=..., count=...)'


def test_raw_vote_redux_and_elect_keep_the_member_mask_rule():
    def kernel_with(mask):
        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            d = T.alloc_local((2,), "uint32")
            p = T.alloc_local((1,), "uint32")
            if T.cuda.lane_id() < 16:
                T.ptx["vote_sync.ballot.b32"](d[0], d[1] > T.uint32(0), T.uint32(mask))
                T.ptx["redux_sync.add.u32"](d[0], d[1], T.uint32(mask))
                T.ptx["elect_sync"](d[0], p[0], T.uint32(mask))

        return k

    with pytest.raises(TileError) as info:
        testing.lower(kernel_with(FULL))
    assert str(info.value).count("member mask differs from the lanes that reach the call") == 3
    testing.lower(kernel_with(0xFFFF))


def test_raw_calls_of_other_families_are_left_as_written():
    @T.function
    def k(A: T.Tensor((64,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((1,), "float32")
        if T.cuda.lane_id() < 16:  # checked as its tile form (test_raw_tile.py), never rewritten
            T.ptx["ld.global.b32"](x[0], A.ptr_to([T.cuda.lane_id() * 2 + 1]))

    testing.assert_lowers_to(k, k)
