"""K padding in one pass (:mod:`tvm_tirx.kernels.pad`, :func:`tvm_tirx.ops.pad_kernels.pad_k`).

CPU: the kernel's refusals, what it issues (compiled for sm_90a and assembled), the torch
fallback.  GPU (marker ``gpu``): every element of the output against
``torch.nn.functional.pad``, into outputs that start as garbage.
"""

import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.pad import make_pad_rows


@pytest.mark.parametrize("words,pad", [(2500, 0), (2502, 12), (2500, 6), (True, 4), (4.0, 4)])
def test_what_the_kernel_refuses(words, pad):
    with pytest.raises(ValueError, match=r"make_pad_rows: (words|pad) must be a positive multiple of 4 \(whole "
                                         r"16-byte vectors\), found"):
        make_pad_rows(words, pad)


def test_each_thread_copies_one_vector_or_writes_zeros():
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    kernel = tvm_tirx.compile(make_pad_rows(2500, 12), target="cuda", arch="sm_90a")
    body = kernel.cuda_source[kernel.cuda_source.index("__global__") :]
    # 628 vectors per output row, 625 of them from the input row: a load below 625, zeros above
    assert re.search(r"if \(v_ptr\[0\] < 628\) \{\s*if \(v_ptr\[0\] < 625\) \{\s*tvm_builtin_ptx_ld_vec_global_v4_b32"
                     r"\(.*In_ptr\[\(\(\(\(int\)blockIdx\.x\) \* 2500\) \+ \(v_ptr\[0\] \* 4\)\)\]", body), body
    assert len(re.findall(r"r_ptr\[\d\] = \(uint\)0;", body)) == 4
    assert re.search(r"st_vec_global_v4_b32\(\(&\(Out_ptr\[\(\(\(\(int\)blockIdx\.x\) \* 2512\) \+ \(v_ptr\[0\] \* 4\)"
                     r"\)\]\)\)", body), body
    assert "0 bytes spill stores" in testing.ptxas_report(kernel)


def test_the_operators_pad_on_the_cpu_with_torch(torch_cpu):
    torch = torch_cpu
    from tvm_tirx.ops.pad_kernels import pad_k

    t = torch.randn(3, 5, 1000, dtype=torch.bfloat16)
    out = pad_k(t, 24)
    assert out.shape == (3, 5, 1024) and torch.equal(out[..., :1000], t) and not out[..., 1000:].any()


@pytest.mark.gpu
@pytest.mark.parametrize("shape,pad,dtype", [
    ((5000, 5000), 24, "bfloat16"),  # the 5000^3 operators' operands
    ((2, 7, 1000), 24, "bfloat16"),  # leading dimensions
    ((33, 1040), 48, "float8_e4m3fn"),  # 1-byte elements: 16 per vector
    ((0, 1000), 24, "bfloat16"),  # no rows: nothing launched
    ((1, 8), 1016, "float16"),  # more padding than columns: several CTAs of zeros per row
    ((4, 1001), 24, "bfloat16"),  # rows of 2002 bytes: torch's pad (not whole vectors)
])
def test_pad_k_equals_torch_pad_on_gpu(torch_cuda, shape, pad, dtype):
    torch = torch_cuda
    from tvm_tirx.ops.pad_kernels import pad_k

    t = torch.randn(shape, device="cuda").to(getattr(torch, dtype))
    if shape == (4, 1001):  # and a view 16 bytes in: contiguous but not 16-byte aligned, torch's pad too
        t = torch.randn(4 * 1001 + 8, device="cuda").to(torch.bfloat16)[8:].view(shape)
    nbytes = t.numel() // max(shape[-1], 1) * (shape[-1] + pad) * t.element_size()
    garbage = torch.full((nbytes,), 0xFF, dtype=torch.uint8, device="cuda")  # freed: the output's block, NaN bytes
    del garbage
    out = pad_k(t, pad)
    torch.cuda.synchronize()
    want = torch.nn.functional.pad(t.view(torch.uint8), (0, pad * t.element_size())).view(t.dtype)
    assert out.shape == want.shape and out.dtype == t.dtype and out.is_contiguous()
    assert torch.equal(out.view(torch.uint8), want.view(torch.uint8))  # bit for bit, the zeros too


def test_rows_wider_than_the_grid_s_y_are_refused():
    from tvm_tirx.kernels.pad import MAX_GRID_Y

    make_pad_rows(MAX_GRID_Y * 1024 - 4, 4)  # 65535 CTAs of 1024 words per row
    with pytest.raises(ValueError, match=r"words \+ pad must be at most 67107840 .* found 67107844"):
        make_pad_rows(MAX_GRID_Y * 1024, 4)
