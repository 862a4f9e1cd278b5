"""vote.sync / match.sync / activemask family: Before/Expected (a predicate from a bool
expression or a register, match.all's p result, activemask), the member mask rule, the
uniform results (vote and match.all, not match.any nor activemask), the predicate's dtypes,
every form assembled, and the GPU."""

import numpy as np
import pytest
from tvm.tirx.layout import Axis, S, TileLayout

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.ir.forms import forms_of

import form_kernels

FRAG = TileLayout(S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)])
FULL = 0xFFFFFFFF


def test_votes_on_a_bool_expression_and_on_a_register():
    @T.function
    def before(A: T.Tensor((32,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        ballot = T.alloc_local((1,), "uint32")
        flags = T.alloc_local((2, 1), "uint32")
        T.cuda.tile.apply("vote.sync.ballot.b32", ballot, A[tid] > T.float32(0))
        T.cuda.tile.apply("vote.sync.any.pred", flags, flags)

    @T.function
    def expected(A: T.Tensor((32,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        ballot = T.alloc_local((1,), "uint32")
        flags = T.alloc_local((2, 1), "uint32")
        T.ptx["vote_sync.ballot.b32"](ballot[0], A[tid] > T.float32(0), T.uint32(FULL))
        for r0 in T.unroll(2):
            T.ptx["vote_sync.any.pred"](flags[r0, 0], T.ptx.pred(flags[r0, 0]), T.uint32(FULL))

    testing.assert_lowers_to(before, expected)


def test_match_all_with_its_predicate_and_activemask():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        key = T.alloc_local((1,), "uint64")
        peers = T.alloc_local((1,), "uint32")
        same = T.alloc_local((1,), "uint32")
        T.cuda.tile.apply("match.all.sync.b64", peers, same, key)
        T.cuda.tile.apply("activemask.b32", peers)

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        key = T.alloc_local((1,), "uint64")
        peers = T.alloc_local((1,), "uint32")
        same = T.alloc_local((1,), "uint32")
        T.ptx["match.all.sync.b64"](peers[0], same[0], key[0], T.uint32(FULL))
        T.ptx["activemask.b32"](peers[0])

    testing.assert_lowers_to(before, expected)


def _vote_under_lane_guard(mask):
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        d = T.alloc_local((1,), "uint32")
        if T.cuda.lane_id() >= 4:
            T.cuda.tile.apply("vote.sync.all.pred", d, d, membermask=mask)

    return k


def test_a_mask_naming_lanes_that_do_not_reach_it_is_refused():
    with pytest.raises(TileError, match=r"vote.sync.all.pred: parameter membermask: member mask differs from the "
                       r"lanes that reach the call: expected 0xfffffff0 \(lanes 4-31 of warp 0"):
        testing.lower(_vote_under_lane_guard(0xFFFFFFFF))
    assert testing.count_ptx(testing.lower(_vote_under_lane_guard(0xFFFFFFF0)), "vote.sync.all.pred") == 1


@T.macro
def _ldmatrix():
    s = T.alloc_shared((8, 4), "uint32", align=16)
    r = T.alloc_local((1, 8, 4), "uint32", layout=FRAG)
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x1.shared.b16"], r, s.view(1, 8, 4), scope="warp")


def _guarded_by(opcode):
    @T.function
    def k(A: T.Tensor((32,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        mine = T.alloc_local((1,), "uint32")
        answer = T.alloc_local((1,), "uint32")
        mine[0] = A[tid]
        T.cuda.tile.apply(opcode, answer, mine)
        if answer[0] != T.uint32(0):
            _ldmatrix()

    return k


@pytest.mark.parametrize("opcode", ["vote.sync.ballot.b32", "vote.sync.uni.pred", "match.all.sync.b32"])
def test_a_vote_or_match_all_result_may_guard_a_warp_collective(opcode):
    assert testing.count_ptx(testing.lower(_guarded_by(opcode)), "ldmatrix.*") == 1


def test_a_match_any_result_may_not():
    with pytest.raises(TileError, match=r"guard not uniform over the warp: .*answer is written by a call whose result"):
        testing.lower(_guarded_by("match.any.sync.b32"))


def test_the_predicate_is_an_integer_register_or_a_bool():
    with pytest.raises(TileError, match=r"src \(operand 2\): element bit width differs.*expected uint32 \(32-bit\) / "
                       r"int32 \(32-bit\) / bool"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            d = T.alloc_local((1,), "uint32")
            x = T.alloc_local((1,), "float64")
            T.cuda.tile.apply("vote.sync.any.pred", d, x)


def test_activemask_takes_no_member_mask():
    with pytest.raises(TileError, match=r"activemask.b32: unknown parameter 'membermask'"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            d = T.alloc_local((1,), "uint32")
            T.cuda.tile.apply("activemask.b32", d, membermask=FULL)


@testing.requires_nvcc
def test_every_form_assembles_for_sm90a(tmp_path):
    forms = forms_of("warp_vote")
    assert len(forms) == 11  # vote x4, match.any x2, match.all x2 x (with p or not), activemask
    kernels = testing.form_kernels(forms, form_kernels.warp_call, form_kernels.WARP_HEAD)
    for built in testing.assemble_forms(kernels, tmp_path):
        assert built.assembled


@T.function
def votes(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "uint32"), C: T.Tensor((64,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    ballot = T.alloc_local((1,), "uint32")
    peers = T.alloc_local((1,), "uint32")
    key = T.alloc_local((1,), "int32")
    key[0] = A[tid]
    T.cuda.tile.apply("vote.sync.ballot.b32", ballot, key[0] > 0)
    T.cuda.tile.apply("match.any.sync.b32", peers, key)
    B[tid] = ballot[0]
    C[tid] = peers[0]


@pytest.mark.gpu
def test_gpu_ballot_and_match_any(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(votes, target="cuda")
    a = torch.randint(-3, 4, (64,), dtype=torch.int32, device="cuda")
    b = torch.zeros(64, dtype=torch.uint32, device="cuda")
    c = torch.zeros(64, dtype=torch.uint32, device="cuda")
    kernel(a, b, c)
    torch.cuda.synchronize()
    keys = a.view(2, 32).cpu().numpy()
    bit = np.uint64(1) << np.arange(32, dtype=np.uint64)
    ballot = np.array([(bit * (w > 0)).sum() for w in keys], dtype=np.uint64)
    np.testing.assert_array_equal(b.view(2, 32).cpu().numpy().astype(np.uint64), ballot[:, None].repeat(32, 1))
    peers = np.array([[(bit * (w == x)).sum() for x in w] for w in keys], dtype=np.uint64)
    np.testing.assert_array_equal(c.view(2, 32).cpu().numpy().astype(np.uint64), peers)
