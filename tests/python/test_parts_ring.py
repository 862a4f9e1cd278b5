"""The pipeline ring part (``kernels/parts/ring.py``): its macros are the tile calls of the
ring protocol (Before / Expected, structurally equal), with the cluster and spin forms."""

import pytest
import tvm

from tvm_tirx.kernels.parts import Ring
from tvm_tirx.kernels.parts.ring import REMOTE_ARRIVE
from tvm_tirx.script import tirx as T

RING = Ring(stages=3, arrivals=2)


@T.function
def before(A: T.Tensor((8,), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
    full = T.alloc_shared((3, 1), "uint64", align=8)
    empty = T.alloc_shared((3, 1), "uint64", align=8)
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        RING.init(full, empty)
    T.cuda.cta_sync()
    for g in T.serial(7):
        s = RING.slot(g)
        if tid == 0:
            RING.acquire(empty, s, g, None)
            RING.arm(full, s, 1024)
        if tid >= 128:
            RING.wait(full, s, g, None)
            RING.release(empty, s, tid)


@T.function
def expected(A: T.Tensor((8,), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
    full = T.alloc_shared((3, 1), "uint64", align=8)
    empty = T.alloc_shared((3, 1), "uint64", align=8)
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], full, count=T.uint32(1))
        T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], empty, count=T.uint32(2))
    T.cuda.cta_sync()
    for g in T.serial(7):
        s = g % 3
        if tid == 0:
            T.cuda.mbarrier_wait_phase(empty.sub[s, :], (g // 3 + 1) % 2)  # the previous lap's release
            T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], full.sub[s, :], tx=T.uint32(1024))
        if tid >= 128:
            T.cuda.mbarrier_wait_phase(full.sub[s, :], (g // 3) % 2)
            if tid % 128 == 0:
                T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], empty.sub[s, :])


def _same(lhs, rhs):
    """Structurally equal but for the functions' names."""
    tvm.ir.assert_structural_equal(lhs.with_attr("global_symbol", "k"), rhs.with_attr("global_symbol", "k"))


def test_the_ring_macros_are_the_protocol_s_tile_calls():
    _same(before, expected)


PAIR = Ring(stages=2, arrivals=4, cluster=2, spin=True)


@T.function
def before_pair(A: T.Tensor((8,), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=256, cluster=2))
    full = T.alloc_shared((2, 1), "uint64", align=8)
    empty = T.alloc_shared((2, 1), "uint64", align=8)
    flag = T.alloc_local((1,), "uint32")
    tid = T.cuda.thread_idx("x")
    for g in T.serial(4):
        PAIR.wait(full, PAIR.slot(g), g, flag)
        PAIR.release(empty, PAIR.slot(g), tid)


@T.function
def expected_pair(A: T.Tensor((8,), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=256, cluster=2))
    full = T.alloc_shared((2, 1), "uint64", align=8)
    empty = T.alloc_shared((2, 1), "uint64", align=8)
    flag = T.alloc_local((1,), "uint32")
    tid = T.cuda.thread_idx("x")
    for g in T.serial(4):
        bar = full.sub[g % 2, :]
        flag[0] = T.uint32(0)  # spin: plain try_wait until the phase completes
        while flag[0] == T.uint32(0):
            T.cuda.tile.apply(T.ptx["mbarrier.try_wait.parity.shared::cta.b64"], flag, bar,
                              phase=T.Cast("uint32", g // 2 % 2))
        if tid % 128 == 0:  # released in both CTAs of the pair
            for r in T.unroll(2):
                T.cuda.tile.apply(T.ptx[REMOTE_ARRIVE], empty.sub[g % 2, :], remote_cta_id=r)


def test_a_cluster_ring_releases_both_ctas_and_spins():
    _same(before_pair, expected_pair)


@pytest.mark.parametrize("g,stage,full_parity,empty_parity", [(0, 0, 0, 1), (2, 2, 0, 1), (3, 0, 1, 0),
                                                              (7, 1, 0, 1)])
def test_iteration_g_uses_stage_g_mod_stages_in_phase_g_div_stages(g, stage, full_parity, empty_parity):
    assert RING.slot(g) == stage
    assert (g // RING.stages) % 2 == full_parity and (g // RING.stages + 1) % 2 == empty_parity

