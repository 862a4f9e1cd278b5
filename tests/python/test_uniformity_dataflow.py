"""Uniformity as dataflow (issue 44 item 4): a ticket one thread writes to shared memory and a
CTA barrier publishes stays uniform however each thread reads it -- ``slot[0]``, an
``ld.shared`` tile call, a raw ``T.ptx["ld.shared..."]`` call -- and through ``T.cast`` and
register instructions (``mov``, ``cvt``, ``add``).  Each has a twin that must still be
refused: no barrier before the read, a per-thread address, a per-thread source."""

import pytest
from tvm.tirx.layout import Axis, S, TileLayout

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T

FRAG = TileLayout(S[(2, 8, 4) : (2, 4 @ Axis.laneid, 1 @ Axis.laneid)])


@T.macro
def _ldmatrix(sm, r):
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"], r, sm.view(8, 2, 4).permute(1, 0, 2), scope="warp")


def _kernel(read, barrier=True):
    """Thread 0 writes a ticket into ``slot``; (a CTA barrier;) every thread reads it with
    ``read(slot, t, tid)`` into the scalar ``t``; a warp collective runs under ``t < n``."""

    @T.function
    def ticket(Work: T.Tensor((64,), "int32"), n: T.int32):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=64))
        tid = T.cuda.thread_idx("x")
        sm = T.alloc_shared((16, 4), "uint32", align=16)
        r = T.alloc_local((2, 8, 4), "uint32", layout=FRAG)
        slot = T.alloc_shared((4,), "int32", align=16)
        t = T.alloc_local((1,), "int32")
        if tid == 0:
            slot[0] = Work[T.cuda.block_idx("x")]
        if barrier:
            T.cuda.cta_sync()
        read(slot, t, tid)
        if t[0] < n:
            _ldmatrix(sm, r)

    return ticket


@T.macro
def _tile_ld(slot, t, tid):
    T.cuda.tile.apply(T.ptx["ld.shared.b32"], t, slot.sub[0:1])


@T.macro
def _tile_ld_per_thread(slot, t, tid):
    T.cuda.tile.apply(T.ptx["ld.shared.b32"], t, slot.sub[tid % 4 : tid % 4 + 1])


@T.macro
def _raw_ld(slot, t, tid):
    T.ptx["ld.shared.b32"](t[0], slot.ptr_to([0]))


@T.macro
def _raw_ld_per_thread(slot, t, tid):
    T.ptx["ld.shared.b32"](t[0], slot.ptr_to([tid % 4]))


@T.macro
def _cast(slot, t, tid):
    wide = T.alloc_local((1,), "int64")
    wide[0] = T.cast(slot[0], "int64") + T.int64(1)
    t[0] = T.cast(wide[0], "int32")


@T.macro
def _ld_then_mov(slot, t, tid):
    got = T.alloc_local((1,), "int32")
    T.cuda.tile.apply(T.ptx["ld.shared.b32"], got, slot.sub[0:1])
    T.cuda.tile.apply(T.ptx["mov.b32"], t, got)


@T.macro
def _mov_of_thread_id(slot, t, tid):
    got = T.alloc_local((1,), "int32")
    got[0] = tid
    T.cuda.tile.apply(T.ptx["mov.b32"], t, got)


@T.macro
def _ld_then_add(slot, t, tid):
    got = T.alloc_local((1,), "int32")
    T.cuda.tile.apply(T.ptx["ld.shared.b32"], got, slot.sub[0:1])
    T.cuda.tile.apply(T.ptx["add.s32"], t, got, T.int32(1))


@T.macro
def _add_of_thread_id(slot, t, tid):
    got = T.alloc_local((1,), "int32")
    T.cuda.tile.apply(T.ptx["ld.shared.b32"], got, slot.sub[0:1])
    T.cuda.tile.apply(T.ptx["add.s32"], t, got, T.cast(tid, "int32"))


@T.macro
def _mov_of_a_register_view(slot, t, tid):
    regs = T.alloc_local((2,), "int32")
    regs[0] = tid
    regs[1] = 0
    T.cuda.tile.apply(T.ptx["mov.b32"], t, regs.sub[0:1])


ACCEPTED = {
    "ld.shared tile call": _tile_ld,
    "raw ld.shared call": _raw_ld,
    "T.cast of the slot": _cast,
    "ld.shared then mov": _ld_then_mov,
    "ld.shared then add of a constant": _ld_then_add,
}


@pytest.mark.parametrize("read", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_a_published_ticket_stays_uniform_however_it_is_read(read):
    assert testing.count_ptx(testing.lower(_kernel(read)), "ldmatrix.*") == 1


@pytest.mark.parametrize("read", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_the_same_reads_without_the_barrier_are_refused(read):
    with pytest.raises(TileError, match=r"guard not uniform over the warp: .*found if t < n: .*loaded from shared "
                       r"memory (slot that no CTA barrier publishes|that the kernel writes)"):
        testing.lower(_kernel(read, barrier=False))


ADDRESS = r"t is loaded from shared memory slot at an address that tid % 4 differs between the lanes of a warp"
REFUSED = {
    "ld.shared tile call at a per-thread address": (_tile_ld_per_thread, ADDRESS),
    "raw ld.shared at a per-thread address": (_raw_ld_per_thread, ADDRESS),
    "mov of a per-thread value": (_mov_of_thread_id, r"t = mov.b32\(...\): got = tid: tid differs between the lanes"),
    "add of a per-thread value": (_add_of_thread_id, r"t = add.s32\(...\): tid differs between the lanes"),
    "mov of a view of a per-thread register array": (_mov_of_a_register_view,
                                                     r"t is written by a call whose result is per thread"),
}


@pytest.mark.parametrize("read, why", REFUSED.values(), ids=REFUSED.keys())
def test_per_thread_values_are_still_refused(read, why):
    with pytest.raises(TileError, match=r"guard not uniform over the warp: .*found if t < n: " + why):
        testing.lower(_kernel(read))
