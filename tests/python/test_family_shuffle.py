"""shfl.sync family: Before/Expected (thread and warp scope, the p result), the member mask
rules (constant mask = the lanes that reach the call, run-time mask uniform, default mask,
pred), the source-lane rule, parameters, spellings of the opcode, the broadcast's uniform
result, every form assembled, and the GPU."""

import numpy as np
import pytest
import tvm
from tvm.tirx.layout import Axis, S, TileLayout

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.shuffle import source_lane
from tvm_tirx.tile.ir.forms import forms_of

import form_kernels

BFLY = "shfl.sync.bfly.b32"
lane_words = TileLayout(S[(32, 2, 1) : (1 @ Axis.laneid, 1, 1)])


def test_thread_scope_one_shuffle_per_register_with_the_whole_warp_by_default():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        x = T.alloc_local((2, 1), "float32")
        y = T.alloc_local((2, 1), "float32")
        T.cuda.tile.apply("shfl.sync.bfly.b32", y, x, b=1)

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        x = T.alloc_local((2, 1), "float32")
        y = T.alloc_local((2, 1), "float32")
        for r0 in T.unroll(2):
            T.ptx["shfl_sync.bfly.b32"](y[r0, 0], x[r0, 0], T.uint32(1), T.uint32(31), T.uint32(0xFFFFFFFF))

    testing.assert_lowers_to(before, expected)


def test_default_mask_is_the_lanes_the_guard_keeps_and_up_clamps_at_zero():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        x = T.alloc_local((1,), "int32")
        if T.cuda.lane_id() < 16:
            T.cuda.tile.apply("shfl.sync.up.b32", x, x, b=2)

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        x = T.alloc_local((1,), "int32")
        if T.cuda.lane_id() < 16:
            T.ptx["shfl_sync.up.b32"](x[0], x[0], T.uint32(2), T.uint32(0), T.uint32(0xFFFF))

    testing.assert_lowers_to(before, expected)


def test_in_range_result_and_explicit_parameters():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((1,), "uint32")
        ok = T.alloc_local((1,), "uint32")
        # segments of 8 lanes (segmask 0x18): each lane reads lane 3 of its segment
        T.cuda.tile.apply("shfl.sync.idx.b32", x, ok, x, b=3, c=0x181F, membermask=0xFFFFFFFF)

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((1,), "uint32")
        ok = T.alloc_local((1,), "uint32")
        T.ptx["shfl_sync.idx.b32"](x[0], ok[0], x[0], T.uint32(3), T.uint32(0x181F), T.uint32(0xFFFFFFFF))

    testing.assert_lowers_to(before, expected)


def test_warp_scope_lane_distributed_registers():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((32, 2, 1), "float32", layout=lane_words)
        T.cuda.tile.apply("shfl.sync.down.b32", x, x, b=1, scope="warp")

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((32, 2, 1), "float32", layout=lane_words)
        xl = x.local()
        for r0 in T.unroll(2):
            T.ptx["shfl_sync.down.b32"](xl[r0], xl[r0], T.uint32(1), T.uint32(31), T.uint32(0xFFFFFFFF))

    testing.assert_lowers_to(before, expected)


# -- the opcode's spellings ----------------------------------------------------------------


def _spelled(instr):
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((1,), "float32")
        T.cuda.tile.apply(instr, x, x, b=1)

    return k


def test_the_ptx_text_and_apache_tvms_spelling_name_one_instruction():
    by_text = testing.lower(_spelled("shfl.sync.bfly.b32"))
    by_namespace = testing.lower(_spelled(T.ptx["shfl_sync.bfly.b32"]))
    by_attribute = testing.lower(_spelled(T.ptx.shfl_sync.bfly.b32))
    tvm.ir.assert_structural_equal(by_text, by_namespace)
    tvm.ir.assert_structural_equal(by_text, by_attribute)
    assert testing.count_ptx(by_text, BFLY) == 1
    # the call prints back with the PTX text, and errors name it so
    assert '"shfl.sync.bfly.b32"' in _spelled(T.ptx["shfl_sync.bfly.b32"]).script()


def test_t_ptx_with_the_isa_spelling_says_how_to_write_it():
    with pytest.raises(TileError, match=r'shfl.sync.bfly.b32: unknown or illegal opcode spelling: expected '
                       r'T.ptx\["shfl_sync.bfly.b32"\].*T.cuda.tile.apply\("shfl.sync.bfly.b32", ...\)'):
        _parse_isa_spelling()


def _parse_isa_spelling():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((1,), "float32")
        T.cuda.tile.apply(T.ptx["shfl.sync.bfly.b32"], x, x, b=1)


def test_an_illegal_modifier_is_reported_in_ptx_spelling():
    with pytest.raises(TileError, match=r"shfl.sync.bfly.b16: unknown or illegal opcode spelling: "
                       r"found 'b16' is not a valid modifier for 'shfl.sync'"):
        _spelled("shfl.sync.bfly.b16")


def test_a_python_int_mask_prints_as_uint32_and_reparses():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((1,), "float32")
        T.cuda.tile.apply("shfl.sync.idx.b32", x, x, b=0, membermask=0xFFFFFFFF)

    text = k.script()
    assert "T.uint32(4294967295)" in text
    tvm.ir.assert_structural_equal(k, tvm.script.from_source(text))


# -- the member mask -------------------------------------------------------------------------


def _under_lane_guard(mask, b=1, bound=16):
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        x = T.alloc_local((1,), "float32")
        if T.cuda.lane_id() < bound:
            T.cuda.tile.apply(BFLY, x, x, b=b, membermask=mask)

    return k


def test_a_constant_mask_naming_lanes_that_do_not_reach_the_call_is_refused():
    with pytest.raises(TileError, match=r"shfl.sync.bfly.b32: parameter membermask: member mask differs from the "
                       r"lanes that reach the call: expected 0x0000ffff \(lanes 0-15 of warp 0 reach it.*"
                       r"found 0xffffffff \(lanes 0-31\)"):
        testing.lower(_under_lane_guard(0xFFFFFFFF))


def test_the_mask_of_the_lanes_that_reach_the_call_is_accepted():
    assert testing.count_ptx(testing.lower(_under_lane_guard(0xFFFF)), BFLY) == 1


def test_a_mask_may_name_lanes_a_partial_last_warp_does_not_have():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=48))
        x = T.alloc_local((1,), "float32")
        T.cuda.tile.apply(BFLY, x, x, b=1, membermask=0xFFFFFFFF)

    assert testing.count_ptx(testing.lower(k), BFLY) == 1


@T.function
def runtime_mask_per_lane(A: T.Tensor((64,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    x = T.alloc_local((1,), "float32")
    m = A[tid]
    T.cuda.tile.apply(BFLY, x, x, b=1, membermask=m)


@T.function
def runtime_mask_from_a_ballot(A: T.Tensor((64,), "float32")):
    # the classic pattern: the lanes with data vote, then shuffle among themselves
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    x = T.alloc_local((1,), "float32")
    m = T.alloc_local((1,), "uint32")
    x[0] = A[tid]
    T.cuda.tile.apply("vote.sync.ballot.b32", m, x[0] > T.float32(0))
    if x[0] > T.float32(0):
        T.cuda.tile.apply("shfl.sync.idx.b32", x, x, b=0, membermask=m[0])


def test_a_run_time_mask_must_be_uniform_over_the_warp():
    with pytest.raises(TileError, match=r"parameter membermask: member mask not uniform over the warp: .*"
                       r"found membermask=m: m = A\[tid\]"):
        testing.lower(runtime_mask_per_lane)


def test_a_ballot_is_a_uniform_run_time_mask():
    assert testing.count_ptx(testing.lower(runtime_mask_from_a_ballot), "shfl.sync.idx.b32") == 1


def test_the_default_mask_needs_the_same_lanes_in_every_warp():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        x = T.alloc_local((1,), "float32")
        if T.cuda.thread_idx("x") < 48:
            T.cuda.tile.apply(BFLY, x, x, b=1)

    with pytest.raises(TileError, match=r"lanes that reach the call differ between warps: .*"
                       r"found warp 0: lanes 0-31; warp 1: lanes 0-15"):
        testing.lower(k)


def test_the_default_mask_needs_guards_it_can_read():
    @T.function
    def k(A: T.Tensor((64,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        x = T.alloc_local((1,), "float32")
        x[0] = A[tid]
        if x[0] > T.float32(0):
            T.cuda.tile.apply(BFLY, x, x, b=1)

    with pytest.raises(TileError, match="guard not uniform over the warp"):
        testing.lower(k)


@pytest.mark.parametrize("pred, ok", [(T.cuda.lane_id, False), (T.cuda.warp_id, True)], ids=["lane", "warp"])
def test_pred_must_be_uniform_over_the_warp(pred, ok):
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        x = T.alloc_local((1,), "float32")
        T.cuda.tile.apply(BFLY, x, x, b=1, pred=pred() < 1)

    if ok:
        assert testing.count_ptx(testing.lower(k), BFLY) == 1
    else:
        with pytest.raises(TileError, match=r"pred: pred not uniform over the warp"):
            testing.lower(k)


def test_a_lane_reading_outside_the_mask_is_refused():
    with pytest.raises(TileError, match=r"parameter b: source lane outside the member mask: .*"
                       r"found lane 0 reads lane 16 \(b=16, c=0x1f\)"):
        testing.lower(_under_lane_guard(0xFFFF, b=16))
    assert testing.count_ptx(testing.lower(_under_lane_guard(0xFFFF, b=8)), BFLY) == 1


@pytest.mark.parametrize(
    "mode, lane, b, c, j",
    [
        ("up", 5, 2, 0x0, 3), ("up", 1, 2, 0x0, 1),  # past the clamp: the lane's own value
        ("down", 30, 4, 0x1F, 30), ("down", 3, 4, 0x1F, 7),
        ("bfly", 6, 1, 0x1F, 7), ("idx", 13, 3, 0x181F, 11),  # 8-lane segments: lane 3 of 8..15
        ("down", 6, 1, 0x1807, 7), ("down", 7, 1, 0x1807, 7),  # clamp at the segment's lane 7
    ],
)  # fmt: skip
def test_source_lane_follows_the_isa(mode, lane, b, c, j):
    assert source_lane(mode, lane, b, c) == j


# -- parameters and operands ---------------------------------------------------------------


@pytest.mark.parametrize(
    "params, match",
    [
        ({}, r"missing parameter 'b'"),
        ({"b": 32}, r"invalid parameter 'b': expected the lane mask.*found 0x20"),
        ({"b": 1, "c": 0x20}, r"invalid parameter 'c'.*found 0x20"),
        ({"b": 1, "membermask": T.float32(1)}, r"invalid parameter 'membermask'.*float32"),
    ],
    ids=["missing b", "b past 31", "c bits", "float mask"],
)
def test_parameters_are_checked_when_parsed(params, match):
    with pytest.raises(TileError, match=match):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            x = T.alloc_local((1,), "float32")
            T.cuda.tile.apply(BFLY, x, x, **params)


def test_registers_of_another_width_are_refused():
    with pytest.raises(TileError, match=r"dst \(operand 1\): element bit width differs from the PTX type's"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            x = T.alloc_local((1,), "float64")
            T.cuda.tile.apply(BFLY, x, x, b=1)


# -- the broadcast's uniform result --------------------------------------------------------

FRAG = TileLayout(S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)])


def _broadcast_guards_ldmatrix(mode, mask=0xFFFFFFFF):
    @T.function
    def k(A: T.Tensor((64,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((8, 4), "uint32", align=16)
        r = T.alloc_local((1, 8, 4), "uint32", layout=FRAG)
        mine = T.alloc_local((1,), "int32")
        work = T.alloc_local((1,), "int32")
        mine[0] = A[tid]
        T.cuda.tile.apply(mode, work, mine, b=0, membermask=mask)
        if work[0] > 0:
            T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x1.shared.b16"], r, s.view(1, 8, 4), scope="warp")

    return k


def test_a_value_broadcast_with_shfl_idx_may_guard_a_warp_collective():
    assert testing.count_ptx(testing.lower(_broadcast_guards_ldmatrix("shfl.sync.idx.b32")), "ldmatrix.*") == 1


def test_a_butterfly_result_may_not():
    with pytest.raises(TileError, match=r"ldmatrix.*guard not uniform over the warp: .*found if work > 0: "
                       r"work is written by a call whose result is per thread"):
        testing.lower(_broadcast_guards_ldmatrix("shfl.sync.bfly.b32"))


# -- raw T.ptx calls: checked as the tile form, left as written ------------------------------


def _raw_under_lane_guard(mask, b=1, bound=16):
    """A raw ``T.ptx["shfl_sync.bfly.b32"](x, x, b, 31, mask)`` under ``lane_id() < bound``."""

    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        x = T.alloc_local((1,), "float32")
        if T.cuda.lane_id() < bound:
            T.ptx["shfl_sync.bfly.b32"](x[0], x[0], T.uint32(b), T.uint32(31), T.uint32(mask))

    return k


def test_a_raw_shuffle_with_a_full_mask_under_a_lane_guard_is_refused():
    with pytest.raises(TileError, match=r"shfl.sync.bfly.b32: parameter membermask: member mask differs from the "
                       r"lanes that reach the call: expected 0x0000ffff .*found 0xffffffff") as info:
        testing.lower(_raw_under_lane_guard(0xFFFFFFFF))
    assert str(info.value).startswith(f"{__file__}:")


def test_a_raw_shuffle_with_the_mask_of_the_lanes_that_reach_it_is_accepted_as_written():
    k = _raw_under_lane_guard(0xFFFF)
    testing.assert_lowers_to(k, k)  # checked, not rewritten


def test_a_raw_shuffle_reading_a_lane_outside_its_mask_is_refused():
    with pytest.raises(TileError, match=r"parameter b: source lane outside the member mask: .*"
                       r"found lane 0 reads lane 16 \(b=16, c=0x1f\)"):
        testing.lower(_raw_under_lane_guard(0xFFFF, b=16))
    testing.lower(_raw_under_lane_guard(0xFFFF, b=8))


def _raw_mask_from(ballot: bool):
    """A raw shuffle among the lanes with data, its mask a raw ballot (or the lane's own datum)."""

    @T.function
    def k(A: T.Tensor((64,), "float32"), M: T.Tensor((64,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        x = T.alloc_local((1,), "float32")
        m = T.alloc_local((1,), "uint32")
        x[0] = A[tid]
        if ballot:
            T.ptx["vote_sync.ballot.b32"](m[0], x[0] > T.float32(0), T.uint32(0xFFFFFFFF))
        else:
            m[0] = M[tid]
        if x[0] > T.float32(0):
            T.ptx["shfl_sync.idx.b32"](x[0], x[0], T.uint32(0), T.uint32(31), m[0])

    return k


def test_a_raw_shuffle_with_a_per_lane_run_time_mask_is_refused():
    with pytest.raises(TileError, match=r"parameter membermask: member mask not uniform over the warp: .*"
                       r"found membermask=m: m = M\[tid\]"):
        testing.lower(_raw_mask_from(ballot=False))
    testing.lower(_raw_mask_from(ballot=True))  # a raw ballot: one value over the warp


def test_a_raw_shuffle_with_its_p_result_is_decoded():
    def k_with(mask):
        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            x = T.alloc_local((1,), "float32")
            ok = T.alloc_local((1,), "uint32")
            if T.cuda.lane_id() < 8:
                T.ptx["shfl_sync.idx.b32"](x[0], ok[0], x[0], T.uint32(3), T.uint32(0x1F), T.uint32(mask))

        return k

    with pytest.raises(TileError, match=r"member mask differs from the lanes that reach the call"):
        testing.lower(k_with(0xFFFFFFFF))
    testing.lower(k_with(0xFF))


# -- every form assembles ------------------------------------------------------------------


@testing.requires_nvcc
def test_every_form_assembles_for_sm90a(tmp_path):
    forms = forms_of("shuffle")
    assert len(forms) == 8  # up/down/bfly/idx, with and without the p result
    kernels = testing.form_kernels(forms, form_kernels.warp_call, form_kernels.WARP_HEAD)  # b=1
    for built in testing.assemble_forms(kernels, tmp_path):
        assert built.assembled


# -- GPU -------------------------------------------------------------------------------------


@T.function
def rotate_and_broadcast(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    x = T.alloc_local((1,), "float32")
    y = T.alloc_local((1,), "float32")
    x[0] = A[tid]
    T.cuda.tile.apply("shfl.sync.idx.b32", y, x, b=5)
    B[tid] = y[0]
    T.cuda.tile.apply("shfl.sync.down.b32", y, x, b=3)
    C[tid] = y[0]


@pytest.mark.gpu
def test_gpu_broadcast_and_down(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(rotate_and_broadcast, target="cuda")
    a = torch.randn(64, device="cuda")
    b, c = torch.empty_like(a), torch.empty_like(a)
    kernel(a, b, c)
    torch.cuda.synchronize()
    warps = a.view(2, 32)
    assert torch.equal(b.view(2, 32), warps[:, 5:6].expand(2, 32))
    lane = np.arange(32)
    src = np.where(lane + 3 <= 31, lane + 3, lane)
    assert torch.equal(c.view(2, 32), warps[:, torch.from_numpy(src).cuda()])
