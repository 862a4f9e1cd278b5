"""elect.sync family: Before/Expected, the member mask rule, the leader's uniform result (not
the per-lane predicate's), the register dtypes, the form assembled, and the GPU."""

import pytest
from tvm.tirx.layout import Axis, S, TileLayout

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.ir.forms import forms_of

import form_kernels

FRAG = TileLayout(S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)])


def test_one_election_per_thread_of_the_warps_that_reach_it():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        leader = T.alloc_local((1,), "uint32")
        elected = T.alloc_local((1,), "uint32")
        if T.cuda.warp_id() == 1:
            T.cuda.tile.apply("elect.sync", leader, elected)

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        leader = T.alloc_local((1,), "uint32")
        elected = T.alloc_local((1,), "uint32")
        if T.cuda.warp_id() == 1:
            T.ptx["elect_sync"](leader[0], elected[0], T.uint32(0xFFFFFFFF))

    testing.assert_lowers_to(before, expected)


def _among_eight(mask):
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        leader = T.alloc_local((1,), "uint32")
        elected = T.alloc_local((1,), "uint32")
        if T.cuda.lane_id() < 8:
            T.cuda.tile.apply("elect.sync", leader, elected, membermask=mask)

    return k


def test_a_mask_naming_lanes_that_do_not_reach_it_is_refused():
    with pytest.raises(TileError, match=r"elect.sync: parameter membermask: member mask differs from the lanes "
                       r"that reach the call: expected 0x000000ff \(lanes 0-7 of warp 0.*found 0xffffffff"):
        testing.lower(_among_eight(0xFFFFFFFF))
    assert testing.count_ptx(testing.lower(_among_eight(0xFF)), "elect.sync") == 1


@T.macro
def _ldmatrix():
    s = T.alloc_shared((8, 4), "uint32", align=16)
    r = T.alloc_local((1, 8, 4), "uint32", layout=FRAG)
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x1.shared.b16"], r, s.view(1, 8, 4), scope="warp")


@T.function
def guarded_by_leader():
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    leader = T.alloc_local((1,), "uint32")
    elected = T.alloc_local((1,), "uint32")
    T.cuda.tile.apply("elect.sync", leader, elected)
    if leader[0] < T.uint32(32):
        _ldmatrix()


@T.function
def guarded_by_elected():
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    leader = T.alloc_local((1,), "uint32")
    elected = T.alloc_local((1,), "uint32")
    T.cuda.tile.apply("elect.sync", leader, elected)
    if elected[0] == T.uint32(1):
        _ldmatrix()


def test_the_leader_is_uniform_over_the_warp_the_predicate_is_not():
    assert testing.count_ptx(testing.lower(guarded_by_leader), "ldmatrix.*") == 1
    with pytest.raises(TileError, match=r"guard not uniform over the warp: .*found if elected == T.uint32\(1\): "
                       r"elected is written by a call whose result is per thread"):
        testing.lower(guarded_by_elected)


def test_the_leader_register_is_an_integer():
    with pytest.raises(TileError, match=r"leader \(operand 1\): dtype not accepted by the PTX type"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            leader = T.alloc_local((1,), "float32")
            elected = T.alloc_local((1,), "uint32")
            T.cuda.tile.apply("elect.sync", leader, elected)


@testing.requires_nvcc
def test_the_form_assembles_for_sm90a(tmp_path):
    (form,) = forms_of("elect")
    kernels = testing.form_kernels([form], form_kernels.warp_call, form_kernels.WARP_HEAD)
    for built in testing.assemble_forms(kernels, tmp_path):
        assert built.assembled


@T.function
def elect_per_warp(L: T.Tensor((128,), "uint32"), E: T.Tensor((128,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.thread_idx("x")
    leader = T.alloc_local((1,), "uint32")
    elected = T.alloc_local((1,), "uint32")
    T.cuda.tile.apply("elect.sync", leader, elected)
    L[tid] = leader[0]
    E[tid] = elected[0]


@testing.requires_arch("sm_90a")
def test_gpu_one_lane_of_each_warp_is_elected(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(elect_per_warp, target="cuda")
    lead = torch.zeros(128, dtype=torch.uint32, device="cuda")
    chosen = torch.zeros(128, dtype=torch.uint32, device="cuda")
    kernel(lead, chosen)
    torch.cuda.synchronize()
    lead, chosen = lead.view(4, 32).cpu().long(), chosen.view(4, 32).cpu().long()
    assert (chosen.sum(dim=1) == 1).all()
    assert (lead == lead[:, :1]).all()  # one value per warp
    assert (chosen.argmax(dim=1) == lead[:, 0]).all()  # the elected lane is the leader
