"""setmaxnreg family: Before/Expected, the register-cap rule (ptxas C7508), whole warpgroups
under guards, nreg's range, sm_90a only, and ptxas applying it."""

import os
import re
import subprocess

import pytest

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T

DEC = "setmaxnreg.dec.sync.aligned.u32"
INC = "setmaxnreg.inc.sync.aligned.u32"


def _roles(min_blocks_per_sm=1, max_registers=None, producer_warps=4, consumer_nreg=232):
    """One producer warpgroup (fewer registers), two consumers (more): a branch on the
    warpgroup index, or (producer_warps != 4) on a warp range that splits one."""

    @T.function
    def kernel():
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=1, block=384, min_blocks_per_sm=min_blocks_per_sm, max_registers=max_registers)
        )
        w = T.cuda.warp_id()
        if w < producer_warps:
            T.cuda.tile.apply(T.ptx[DEC], scope="warpgroup", nreg=40)
        else:
            T.cuda.tile.apply(T.ptx[INC], scope="warpgroup", nreg=consumer_nreg)

    return kernel


def test_one_instruction_per_thread_of_each_warpgroup():
    before = _roles()

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384, min_blocks_per_sm=1))
        w = T.cuda.warp_id()
        if w < 4:
            T.ptx[DEC](40)
        else:
            T.ptx[INC](232)

    testing.assert_lowers_to(before, expected)


def test_a_register_cap_at_entry_is_required():
    with pytest.raises(TileError, match="setmaxnreg without a register cap at the kernel's entry.*min_blocks_per_sm=1"):
        testing.lower(_roles(min_blocks_per_sm=None))


def test_max_registers_is_a_register_cap_too():
    assert testing.count_ptx(testing.lower(_roles(min_blocks_per_sm=None, max_registers=168)), DEC) == 1


def test_a_guard_that_splits_a_warpgroup_is_rejected():
    with pytest.raises(TileError, match="warpgroup-collective instruction needs all 128 threads"):
        testing.lower(_roles(producer_warps=2))


@pytest.mark.parametrize("nreg", [16, 42, 264])
def test_nreg_outside_the_isa_range_is_rejected(nreg):
    with pytest.raises(TileError, match=f"invalid parameter 'nreg'.*found {nreg}"):

        @T.function
        def kernel():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, min_blocks_per_sm=1))
            T.cuda.tile.apply(T.ptx[DEC], scope="warpgroup", nreg=nreg)


def test_thread_scope_is_rejected():
    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, min_blocks_per_sm=1))
        T.cuda.tile.apply(T.ptx[DEC], nreg=40)

    with pytest.raises(TileError, match="warpgroup-collective instruction at thread scope"):
        testing.lower(kernel)


@pytest.mark.parametrize("arch", ["sm_90", "sm_100a"])
def test_targets_other_than_sm90a_are_rejected(arch):
    with pytest.raises(TileError, match=f"instruction is specific to another architecture.*found {arch}"):
        tvm_tirx.compile(_roles(), target="cuda", arch=arch)


def _ptxas_info(source: str, tmp_path):
    """``nvcc -Xptxas -v`` output for the CUDA ``source`` (sm_90a)."""
    src = tmp_path / "k.cu"
    src.write_text(source)
    out = subprocess.run(
        ["nvcc", "-arch=sm_90a", "-cubin", "-Xptxas", "-v", "-o", os.fspath(tmp_path / "k.cubin"), os.fspath(src)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stderr


@testing.requires_nvcc
def test_ptxas_ignores_it_without_the_cap_and_applies_it_with_it(tmp_path):
    capped = tvm_tirx.compile(_roles(), target="cuda", arch="sm_90a").cuda_source
    # the same kernel with the cap taken out of its launch bounds: what the rule prevents
    uncapped, n = re.subn(r"__launch_bounds__\((\d+), *\d+\)", r"__launch_bounds__(\1)", capped)
    assert n >= 1
    info = _ptxas_info(uncapped, tmp_path)
    assert "C7508" in info and "'setmaxnreg' ignored" in info
    assert "C7508" not in _ptxas_info(capped, tmp_path)


def test_a_raw_setmaxnreg_is_checked_as_its_tile_form():
    """Written raw, setmaxnreg meets the tile form's rules: the cap, then the count."""

    @T.function
    def raw_uncapped():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384))
        if T.cuda.warp_id() < 4:
            T.ptx[DEC](40)
        else:
            T.ptx[INC](232)

    @T.function
    def raw_capped():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384, min_blocks_per_sm=1))
        if T.cuda.warp_id() < 4:
            T.ptx[DEC](40)
        else:
            T.ptx[INC](232)

    with pytest.raises(TileError, match=r"test_family_setmaxnreg.py:\d+: setmaxnreg.dec.sync.aligned.u32: "
                       r"setmaxnreg without a register cap at the kernel's entry"):
        testing.lower(raw_uncapped)
    assert testing.count_ptx(testing.lower(raw_capped), "setmaxnreg.*") == 2


@testing.requires_arch("sm_90a")
def test_gpu_roles_run_after_changing_their_registers():
    import torch

    @T.function
    def kernel(A: T.Tensor((384,), "float32", align=16), B: T.Tensor((384,), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384, min_blocks_per_sm=1))
        tid = T.cuda.thread_idx("x")
        if T.cuda.warp_id() < 4:
            T.cuda.tile.apply(T.ptx[DEC], scope="warpgroup", nreg=40)
            B[tid] = A[tid] + T.float32(1)
        else:
            T.cuda.tile.apply(T.ptx[INC], scope="warpgroup", nreg=232)
            B[tid] = A[tid] * T.float32(2)

    compiled = tvm_tirx.compile(kernel, target="cuda")
    a = torch.randn(384, device="cuda")
    b = torch.empty_like(a)
    compiled(a, b)
    torch.cuda.synchronize()
    want = torch.cat([a[:128] + 1, a[128:] * 2])
    assert torch.equal(b, want)


def test_the_warpgroups_counts_fit_the_register_file():
    # 128 x (40 + 232 + 232) = 64512 registers: the GEMM's split fits; with 240 the two
    # consumers' inc would wait forever for 1024 registers nobody frees (issue 25)
    testing.lower(_roles())
    with pytest.raises(
        TileError,
        match=r"setmaxnreg asks for more registers than the register file holds: expected at most 65536 .*"
        r"found 128 x \(40 \+ 240 \+ 240\) = 66560: warpgroup 0: 40 \(.*test_family_setmaxnreg.py:\d+\), "
        r"warpgroup 1: 240",
    ):
        testing.lower(_roles(consumer_nreg=240))
