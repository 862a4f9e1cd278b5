"""tvm_tirx.testing helpers for users' tests: count_ptx, requires_arch and compile_and_show."""

import re

import pytest

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T

from kernels import read_next_row, register_move, save_and_zero

ARCH = "sm_90a"


@T.function
def twelve_floats(A: T.Tensor((64, 12), "float32", align=16), B: T.Tensor((64, 12), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((3, 4), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :].view(3, 4))
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :].view(3, 4), r)


@T.function
def two_by_three(A: T.Tensor((64, 24), "float32", align=16), B: T.Tensor((64, 24), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((2, 3, 4), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :].view(2, 3, 4))
    T.cuda.tile.apply(T.ptx["st.global.v2.b32"], B.sub[tid, :].view(2, 3, 2, 2), r.view(2, 3, 2, 2))


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


# -- count_ptx -------------------------------------------------------------------------------


def test_count_ptx_seed_kernel_issues_each_instruction_once():
    assert testing.count_ptx(read_next_row, "ld.global.v4.b32") == 1
    assert testing.count_ptx(read_next_row, "st.shared.v4.b32") == 1
    assert testing.count_ptx(read_next_row, "ld.shared.v4.b32") == 1
    assert testing.count_ptx(read_next_row, "st.global.v4.b32") == 1


def test_count_ptx_matches_the_exact_opcode_only():
    # neither a prefix nor a different width/space counts
    assert testing.count_ptx(read_next_row, "ld.global.v4") == 0
    assert testing.count_ptx(read_next_row, "ld.global.b32") == 0
    assert testing.count_ptx(read_next_row, "ld.global.v2.b32") == 0
    assert testing.count_ptx(read_next_row, "ld") == 0


def test_count_ptx_patterns():
    # one counting helper: a shell-style pattern over the opcode text, every instruction by default
    assert testing.count_ptx(read_next_row) == 4
    assert testing.count_ptx(read_next_row, "*") == 4
    assert testing.count_ptx(read_next_row, "ld.*") == 2
    assert testing.count_ptx(read_next_row, "*.shared.*") == 2
    assert testing.count_ptx(predicated, "ld.global.*") == 1
    assert testing.count_ptx(predicated, "l*") == 1  # not createpolicy
    assert not hasattr(testing, "count_ptx_calls")


def test_count_ptx_counts_every_repeat():
    assert testing.count_ptx(twelve_floats, "ld.global.v4.b32") == 3
    assert testing.count_ptx(twelve_floats, "st.global.v4.b32") == 3
    # repeat shape (2, 3): six v4 loads; the v2 store view repeats (2, 3, 2): twelve stores
    assert testing.count_ptx(two_by_three, "ld.global.v4.b32") == 6
    assert testing.count_ptx(two_by_three, "st.global.v2.b32") == 12
    # the guide's snippets: 4 register copies + 4 zero fills, 4 + 4 scalar stores
    assert testing.count_ptx(save_and_zero, "mov.b32") == 8
    assert testing.count_ptx(save_and_zero, "st.global.b32") == 8
    assert testing.count_ptx(save_and_zero, "ld.global.v4.b32") == 1
    assert testing.count_ptx(register_move, "mov.b32") == 8


def test_count_ptx_multiplies_by_enclosing_loops():
    @T.function
    def looped(A: T.Tensor((64, 12), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((3, 4), "float32")
        for _ in T.unroll(5):
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :].view(3, 4))

    assert testing.count_ptx(looped, "ld.global.v4.b32") == 15


def test_count_ptx_reads_qualifiers_predicated_and_hand_written_calls():
    assert testing.count_ptx(predicated, "ld.global.L2::cache_hint.v4.b32") == 1
    assert testing.count_ptx(predicated, "ld.global.v4.b32") == 0
    assert testing.count_ptx(predicated, "mov.b32") == 4
    assert testing.count_ptx(predicated, "createpolicy.fractional.L2::evict_last.b64") == 1


def test_count_ptx_takes_a_lowered_function_and_a_kernel():
    lowered = testing.lower(twelve_floats)
    assert testing.count_ptx(lowered, "ld.global.v4.b32") == 3
    kernel = tvm_tirx.compile(twelve_floats, target="cuda", arch=ARCH)
    assert testing.count_ptx(kernel, "ld.global.v4.b32") == 3


@testing.requires_nvcc
def test_count_ptx_agrees_with_the_ptx_nvcc_emits():
    for func in (read_next_row, twelve_floats, two_by_three, predicated):
        kernel = tvm_tirx.compile(func, target="cuda", arch=ARCH)
        ptx = kernel.ptx
        for opcode in ("ld.global.v4.b32", "st.global.v4.b32", "st.global.v2.b32", "ld.global.L2::cache_hint.v4.b32"):
            # predicated forms sit inside "{ .reg .pred p; setp...; @p <opcode> ...; }"
            in_ptx = len(re.findall(r"(?<![\w.:])" + re.escape(opcode) + r"\s", ptx))
            assert testing.count_ptx(kernel, opcode) == in_ptx, (func, opcode)


@testing.requires_nvcc
def test_compile_and_show_prints_the_matching_ptx_lines_and_the_cubin_size():
    lines = []
    kernel = testing.compile_and_show(twelve_floats, "ld.global.v4", "st.global", arch=ARCH, out=lines.append)
    assert kernel.name == "twelve_floats" and kernel.target.attrs["arch"] == ARCH
    assert lines[0] == f"--- twelve_floats ({ARCH}): PTX excerpt"
    shown = [line.strip() for line in kernel.ptx.splitlines() if "ld.global.v4" in line or "st.global" in line]
    assert len(shown) == 6  # three loads, three stores
    assert lines[1:-1] == [f"    {line}" for line in shown]
    assert lines[-1] == f"assembled twelve_floats for {ARCH}: {len(testing.assemble(kernel))}-byte cubin"


def test_compile_and_show_reports_contract_violations(capsys):
    @T.function
    def misaligned(A: T.Tensor((64, 5), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, 0:4])

    with pytest.raises(TileError, match="ld.global.v4.b32"):
        testing.compile_and_show(misaligned, "ld.global", arch=ARCH)
    assert capsys.readouterr().out == ""


def test_count_ptx_rejects_other_inputs_and_reports_contract_violations():
    with pytest.raises(TypeError, match="Kernel or a PrimFunc"):
        testing.count_ptx("read_next_row", "ld.global.v4.b32")

    @T.function
    def misaligned(A: T.Tensor((64, 4), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])

    with pytest.raises(TileError):
        testing.count_ptx(misaligned, "ld.global.v4.b32")


def test_ptx_opcode_of_names_ptx_calls_and_ignores_the_rest():
    import tvm
    import tvm_ffi

    calls = []
    tvm_ffi.structural_walk(testing.lower(read_next_row).body, (tvm.ir.Call, calls.append))
    opcodes = [testing.ptx_opcode_of(c) for c in calls]
    assert [o for o in opcodes if o] == [
        "ld.global.v4.b32", "st.shared.v4.b32", "ld.shared.v4.b32", "st.global.v4.b32",
    ]
    others = [c for c, o in zip(calls, opcodes) if o is None]
    assert others and all(not c.op.name.startswith("tirx.ptx.") for c in others)  # address_of, ...


# -- requires_arch -------------------------------------------------------------------------


def _marks(func):
    return {mark.name: mark for mark in getattr(func, "pytestmark", [])}


@pytest.mark.parametrize(
    "arch, capability, runs",
    [
        ("sm_90a", (9, 0), True),
        ("sm_90a", (10, 0), False),  # arch-specific code is not forward compatible
        ("sm_90a", (8, 9), False),
        ("sm_90", (10, 0), True),
        ("sm_80", (9, 0), True),
        (80, (8, 6), True),
        ("90", (8, 9), False),
        ("sm_100f", (10, 3), True),
        ("sm_100f", (12, 0), False),
        ("sm_80", None, False),  # no GPU
    ],
)
def test_arch_supported(arch, capability, runs):
    assert testing.arch_supported(arch, capability) is runs


@pytest.mark.parametrize("capability, skipped", [((9, 0), False), ((8, 0), True), (None, True)])
def test_requires_arch_marks_gpu_and_skips_by_capability(monkeypatch, capability, skipped):
    monkeypatch.setattr(testing.markers, "_device_capability", lambda: capability)

    @testing.requires_arch("sm_90a")
    def test_something():
        pass

    marks = _marks(test_something)
    assert "gpu" in marks
    assert marks["skipif"].args[0] is skipped
    assert "sm_90a" in marks["skipif"].kwargs["reason"]


def test_requires_arch_rejects_what_is_not_an_sm_arch():
    for bad in ("gfx90a", "sm_", "compute_90", True):
        with pytest.raises(ValueError, match="SM architecture"):
            testing.requires_arch(bad)


@testing.requires_arch(ARCH)
def test_requires_arch_runs_only_on_that_gpu():
    # selected by `pytest -m gpu`; runs only on a Hopper (9.0) GPU
    import torch

    assert torch.cuda.get_device_capability() == (9, 0)


# -- assert_lowers_to ------------------------------------------------------------------------


def _lowered_copy(op):
    @T.function
    def expected(A: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.ptx[op](r[0], r[1], r[2], r[3], A.sub[tid, :].ptr_to([0]))

    return expected


@T.function
def one_load(A: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])


def test_assert_lowers_to_accepts_the_expansion_under_another_name():
    testing.assert_lowers_to(one_load, _lowered_copy("ld.global.v4.b32"))


def test_assert_lowers_to_shows_both_scripts_when_they_differ():
    with pytest.raises(AssertionError) as info:
        testing.assert_lowers_to(one_load, _lowered_copy("ld.global.nc.v4.b32"))
    message = str(info.value)
    assert "LowerTileApply's output differs" in message
    assert "--- expected" in message and "+++ lowered" in message
    # the differing lines, each from its own script: the expected load has the .nc slot filled
    removed = [line for line in message.splitlines() if line.startswith("-") and "T.ptx.ld(" in line]
    added = [line for line in message.splitlines() if line.startswith("+") and "T.ptx.ld(" in line]
    assert len(removed) == len(added) == 1, message
    assert '"nc"' in removed[0] and '"nc"' not in added[0], message


def test_assert_lowers_to_raises_the_tile_error_of_a_broken_call():
    @T.function
    def misaligned(A: T.Tensor((64, 5), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, 0:4])

    with pytest.raises(TileError, match="align"):
        testing.assert_lowers_to(misaligned, _lowered_copy("ld.global.v4.b32"))
