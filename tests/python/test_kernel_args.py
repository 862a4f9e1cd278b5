"""Kernel arguments are checked before launch, with errors naming the parameter."""

import pytest

import tvm_tirx

from kernels import read_next_row


@pytest.fixture(scope="module")
def kernel():
    return tvm_tirx.compile(read_next_row, target="cuda", arch="sm_90a")


def test_argument_count(kernel):
    with pytest.raises(TypeError, match=r"expected 2 argument\(s\) \(A, B\), got 1"):
        kernel(object())


def test_not_a_tensor(kernel, torch_cpu):
    b = torch_cpu.zeros(64, 4)
    with pytest.raises(TypeError, match="argument 'A': expected a CUDA tensor"):
        kernel([1, 2, 3], b)


def test_wrong_dtype(kernel, torch_cpu):
    torch = torch_cpu
    with pytest.raises(ValueError, match="argument 'A': expected dtype float32, got float16"):
        kernel(torch.zeros(64, 4, dtype=torch.float16), torch.zeros(64, 4))


def test_wrong_shape(kernel, torch_cpu):
    torch = torch_cpu
    with pytest.raises(ValueError, match=r"argument 'A': expected shape \(64, 4\), got \(4, 64\)"):
        kernel(torch.zeros(4, 64), torch.zeros(64, 4))


def test_non_contiguous(kernel, torch_cpu):
    torch = torch_cpu
    with pytest.raises(ValueError, match=r"argument 'A': expected a contiguous row-major tensor"):
        kernel(torch.zeros(4, 64).t(), torch.zeros(64, 4))


def test_misaligned_pointer(kernel, torch_cpu):
    torch = torch_cpu
    base = torch.zeros(64 * 4 + 1)
    a = base[1:].view(64, 4)  # 4 bytes past a 16-byte boundary
    with pytest.raises(ValueError, match=r"argument 'A': .*align=16 bytes.*4 bytes past"):
        kernel(a, torch.zeros(64, 4))


def test_cpu_tensor(kernel, torch_cpu):
    torch = torch_cpu
    with pytest.raises(ValueError, match="argument 'A': expected a CUDA tensor, got one on cpu"):
        kernel(torch.zeros(64, 4), torch.zeros(64, 4))


def test_sources_and_script(kernel):
    assert "read_next_row_kernel" in kernel.cuda_source
    assert "T.cuda.tile.apply" in kernel.script()
    assert "read_next_row" in repr(kernel)
