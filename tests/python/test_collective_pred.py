"""``pred=`` on a collective form must have one value over each collective (issue 17 item 3).

A ``.aligned`` instruction is executed by every thread of its collective together
(PTX ISA 9.7.14.5: warps, 9.7.15: warpgroups); a predicate that differs inside one
is the same mistake as an ``if`` that splits it, which was already rejected.
"""

import pytest
from tvm.tirx import EQ
from tvm.tirx.layout import Axis, S, TileLayout

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.ir.contract import WARP, WARPGROUP
from tvm_tirx.tile.kernel.kernel_facts import KernelFacts

L = Axis.laneid
FRAG = TileLayout(S[(1, 8, 4) : (1, 4 @ L, 1 @ L)])
LDMATRIX = "ldmatrix.sync.aligned.m8n8.x1.shared.b16"
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"


def _ldmatrix(pred_of, block=64):
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=block))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((8, 4), "uint32", align=16)
        r = T.alloc_local((1, 8, 4), "uint32", layout=FRAG)
        for i in range(2):
            T.cuda.tile.apply(T.ptx[LDMATRIX], r, s.view(1, 8, 4), scope="warp", pred=pred_of(tid, i))

    return k


@pytest.mark.parametrize(
    "pred_of, point",
    [
        (lambda tid, i: tid % 32 < 16, "tid=16"),
        (lambda tid, i: EQ(tid % 2, 0), "tid=1"),
        (lambda tid, i: tid + i < 40, "tid=39, i=1"),
    ],
    ids=["lane < 16", "even lanes", "a loop counter and a lane"],
)
def test_a_pred_that_splits_a_warp_is_rejected(pred_of, point):
    with pytest.raises(TileError, match=rf"ldmatrix.*pred: pred not uniform over the warp: .*all 32 lanes.*"
                       rf"at ({point}) it differs from the warp's first lane"):
        testing.lower(_ldmatrix(pred_of))


@pytest.mark.parametrize(
    "pred_of",
    [
        lambda tid, i: tid < 32,  # warp 0 only
        lambda tid, i: EQ(tid // 32, 1),
        lambda tid, i: EQ(i, 0),
        lambda tid, i: EQ((tid // 32 + i) % 2, 0),
    ],
    ids=["first warp", "second warp", "loop counter", "warp and loop counter"],
)
def test_a_pred_uniform_over_each_warp_is_accepted(pred_of):
    assert testing.count_ptx(testing.lower(_ldmatrix(pred_of)), LDMATRIX) == 2


def test_mma_with_a_pred_over_half_the_lanes_is_rejected():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        a = T.alloc_local((1, 1, 16, 8), "uint32", layout=TileLayout(S[(2, 8, 2, 4) : (1, 4 @ L, 2, 1 @ L)]))
        b = T.alloc_local((1, 1, 8, 8), "uint32", layout=TileLayout(S[(8, 2, 4) : (4 @ L, 1, 1 @ L)]))
        c = T.alloc_local((1, 1, 16, 8), "float32", layout=TileLayout(S[(2, 8, 4, 2) : (2, 4 @ L, 1 @ L, 1)]))
        T.cuda.tile.apply(T.ptx[MMA], c, a, b, c, scope="warp", pred=T.cuda.lane_id() < 16)

    with pytest.raises(TileError, match=r"pred not uniform over the warp: .*found pred=threadIdx\.x % 32 < 16: "
                       r"at threadIdx\.x=16 it differs"):
        testing.lower(k)


def test_a_pred_read_from_memory_is_not_provably_uniform():
    @T.function
    def k(F: T.Tensor((64,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((8, 4), "uint32", align=16)
        r = T.alloc_local((1, 8, 4), "uint32", layout=FRAG)
        T.cuda.tile.apply(T.ptx[LDMATRIX], r, s.view(1, 8, 4), scope="warp", pred=F[tid] > 0)

    with pytest.raises(TileError, match=r"pred not uniform over the warp: .*found pred=F\[tid\] > 0: "
                       r"F\[tid\]: the address tid differs between the lanes of a warp"):
        testing.lower(k)


def test_the_rule_reads_the_collective_width_from_the_contract():
    # `tid < 64` keeps whole warps but splits the first warpgroup of 128 threads
    from tvm_tirx.tile.analysis.groups import check_uniform_pred  # pylint: disable=import-outside-toplevel

    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        T.evaluate(0)

    facts = KernelFacts(k)
    tid = facts.launch.thread_vars[0]
    check_uniform_pred(facts, tid < 64, WARP, (), "op")
    check_uniform_pred(facts, tid < 128, WARPGROUP, (), "op")
    with pytest.raises(TileError, match=r"pred not uniform over the warpgroup: .*all 128 threads.*at threadIdx\.x=64"):
        check_uniform_pred(facts, tid < 64, WARPGROUP, (), "op")
