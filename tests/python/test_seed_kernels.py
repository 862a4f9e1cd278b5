"""The seed documents' kernels: lowered IR, assembly for sm_90a, and GPU results."""

import re

import pytest
import tvm

import tvm_tirx
from tvm_tirx import testing

from kernels import read_next_row, register_move, save_and_zero

ARCH = "sm_90a"


def _ptx_ops(func):
    """(op name, tokens) of every PTX call in the lowered body, in order."""
    out = []

    def visit(node):
        op = getattr(getattr(node, "op", None), "name", "")
        if op.startswith("tirx.ptx.") and op != "tirx.ptx.addr":
            out.append(op)

    import tvm_ffi

    tvm_ffi.structural_walk(func.body, (tvm.ir.Call, visit))
    return out


def test_read_next_row_lowered_ir_has_one_ptx_call_per_atom():
    lowered = testing.lower(read_next_row)
    assert "cuda.tile.apply" not in lowered.script()
    # no repeat axes: exactly one native instruction per tile call
    assert testing.count_ptx(lowered) == 4
    assert testing.count_ptx(lowered, "ld.*") == 2
    assert testing.count_ptx(lowered, "st.*") == 2
    assert _ptx_ops(lowered) == ["tirx.ptx.ld_vec", "tirx.ptx.st_vec", "tirx.ptx.ld_vec", "tirx.ptx.st_vec"]


@testing.requires_nvcc
def test_read_next_row_assembles_for_sm90a():
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    src = kernel.cuda_source
    assert src.count('"ld.global.v4.b32') == 1 and src.count('"st.shared.v4.b32') == 1
    ptx = kernel.ptx
    assert ".target sm_90a" in ptx
    for text in ("ld.global.v4.b32", "st.shared.v4.b32", "ld.shared.v4.b32", "st.global.v4.b32"):
        assert len(re.findall(re.escape(text) + r"\s", ptx)) == 1, text
    assert len(testing.assemble(kernel)) > 0


def test_save_and_zero_lowered_counts():
    lowered = testing.lower(save_and_zero)
    # 1 ld.v4, 4 movs (copy), 4 st, 4 movs (zero fill), 4 st
    assert testing.count_ptx(lowered, "ld.*") == 1
    assert testing.count_ptx(lowered, "mov.*") == 8
    assert testing.count_ptx(lowered, "st.*") == 8


def test_register_move_moves_to_gapped_slots():
    lowered = testing.lower(register_move)
    assert testing.count_ptx(lowered, "mov.*") == 8
    assert testing.count_ptx(lowered, "st.*") == 4
    kernel = tvm_tirx.compile(register_move, target="cuda", arch=ARCH)
    src = kernel.cuda_source
    body = src[src.index("register_move_kernel(") :]
    movs = re.findall(r"tvm_builtin_ptx_mov_b32\w*\((\w+)\[(\d+)\], (.*)\);", body)
    assert len(movs) == 8
    fills, copies = movs[:4], movs[4:]
    # four moves of the constant, to a[0..3]
    assert [int(i) for _, i, _ in fills] == [0, 1, 2, 3]
    assert all("17" in v for _, _, v in fills)
    # four moves into b at slots 0, 2, 4, 6 (the gapped layout), from a[0..3]
    assert [int(i) for _, i, _ in copies] == [0, 2, 4, 6]
    assert len({name for name, _, _ in copies}) == 1 and copies[0][0] != fills[0][0]
    # storage of b is the layout's span (7), not prod(shape) (4)
    assert re.search(r"uint \w+\[7\];", body), body


@testing.requires_nvcc
def test_seed_kernels_assemble():
    for func in (save_and_zero, register_move):
        kernel = tvm_tirx.compile(func, target="cuda", arch=ARCH)
        assert len(testing.assemble(kernel)) > 0


@pytest.mark.gpu
def test_read_next_row_on_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(read_next_row, target="cuda")
    for seed in range(3):
        g = torch.Generator(device="cuda").manual_seed(seed)
        a = torch.randn(64, 4, device="cuda", generator=g)
        b = torch.full_like(a, float("nan"))
        kernel(a, b)
        torch.cuda.synchronize()
        assert torch.equal(b, torch.roll(a, shifts=-1, dims=0))
    # the guide's own input
    a = torch.arange(256, dtype=torch.float32, device="cuda").reshape(64, 4)
    b = torch.empty_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, torch.roll(a, shifts=-1, dims=0))


@pytest.mark.gpu
def test_save_and_zero_on_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(save_and_zero, target="cuda")
    a = torch.randn(64, 4, device="cuda")
    saved = torch.full_like(a, float("nan"))
    zeros = torch.full_like(a, float("nan"))
    kernel(a, saved, zeros)
    torch.cuda.synchronize()
    assert torch.equal(saved, a)
    assert torch.equal(zeros, torch.zeros_like(a))


@pytest.mark.gpu
def test_register_move_on_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(register_move, target="cuda")
    out = torch.zeros(4, 1, dtype=torch.uint32, device="cuda")
    kernel(out)
    torch.cuda.synchronize()
    assert out.cpu().flatten().tolist() == [17, 17, 17, 17]
