"""The benchmark kernels (bench/copy.py, bench/transpose.py) at small sizes: IR, assembly, values."""

import os
import sys

import pytest

import tvm_tirx
from tvm_tirx import testing

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bench.copy import VARIANTS, make_copy, make_copy_oneshot  # noqa: E402
from bench.transpose import make_transpose  # noqa: E402


def test_copy_has_unroll_loads_in_flight_per_iteration():
    func = make_copy(4 * 256 * 4 * 2 * 3, unroll=4, ctas=2, ld="ld.global.v4.b32", st="st.global.v4.b32")
    lowered = testing.lower(func)
    # 3 iterations of the serial loop, each 4 loads then 4 stores
    assert testing.count_ptx(lowered, "ld.*") == 12
    assert testing.count_ptx(lowered, "st.*") == 12


def test_oneshot_copy_is_one_vector_per_thread():
    func = make_copy_oneshot(4 * 256 * 6)
    assert testing.count_ptx(func, "ld.global.v4.b32") == 1
    assert testing.count_ptx(func, "st.global.v4.b32") == 1
    if testing.has_nvcc():
        kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
        assert len(testing.assemble(kernel)) > 0
    with pytest.raises(ValueError, match="not a multiple of 1024"):
        make_copy_oneshot(1000)


@pytest.mark.gpu
def test_oneshot_copy_on_gpu(torch_cuda):
    torch = torch_cuda
    n = 4 * 256 * 37
    kernel = tvm_tirx.compile(make_copy_oneshot(n), target="cuda")
    a = torch.randn(n, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


def test_copy_rejects_sizes_that_do_not_tile():
    with pytest.raises(ValueError, match="not a multiple"):
        make_copy(1000, unroll=4, ctas=2, ld="ld.global.v4.b32", st="st.global.v4.b32")


def test_transpose_counts_and_assembly():
    func = make_transpose(64)
    lowered = testing.lower(func)
    assert testing.count_ptx(lowered, "ld.*") == 8  # 4 global + 4 shared per thread
    assert testing.count_ptx(lowered, "st.*") == 8
    if testing.has_nvcc():
        kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
        assert len(testing.assemble(kernel)) > 0
        # the padded tile: shared row stride 33 floats
        assert "* 33)" in kernel.cuda_source


@pytest.mark.gpu
@pytest.mark.parametrize("name,ld,st", VARIANTS)
def test_copy_on_gpu(torch_cuda, name, ld, st):
    torch = torch_cuda
    n = 4 * 256 * 4 * 8 * 5
    kernel = tvm_tirx.compile(make_copy(n, unroll=4, ctas=8, ld=ld, st=st), target="cuda")
    a = torch.randn(n, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


@pytest.mark.gpu
def test_transpose_on_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(make_transpose(256), target="cuda")
    a = torch.randn(256, 256, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a.t())


# -- TMA benchmarks (bench/tma_copy.py, bench/transpose.py's TMA variant) ---------------------------

from bench.tma_copy import COLS, make_tma_copy  # noqa: E402
from bench.transpose import make_tma_transpose  # noqa: E402


def test_tma_copy_issues_one_load_and_one_store_per_tile():
    # 10 tiles over 4 CTAs: 3 rounds, one TMA load (producer) and one store (consumer) each
    lowered = testing.lower(make_tma_copy(COLS * 32 * 10, box_rows=32, stages=3, ctas=4))
    assert testing.count_ptx(lowered, "cp.async.bulk.tensor.2d.shared::cluster.*") == 3
    assert testing.count_ptx(lowered, "cp.async.bulk.tensor.2d.global.*") == 3
    with pytest.raises(ValueError, match="not a multiple of"):
        make_tma_copy(COLS * 31)


@pytest.mark.gpu
def test_tma_copy_on_gpu(torch_cuda):
    torch = torch_cuda
    rows = 32 * 41  # 41 tiles over 4 CTAs: uneven rounds, every stage reused
    kernel = tvm_tirx.compile(make_tma_copy(rows * COLS, box_rows=32, stages=3, ctas=4), target="cuda")
    a = torch.randn(rows, COLS, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


@pytest.mark.gpu
def test_tma_transpose_on_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(make_tma_transpose(96), target="cuda")
    a = torch.randn(96, 96, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a.t())
