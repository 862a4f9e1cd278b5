"""``make_dsum``: the attention backward's ``Dsum = rowsum(dO * O)`` in one pass.

CPU: every head_dim and dtype compiles with the tile checker accepting it and assembles
for sm_90a; a thread issues two 16-byte loads, ``log2(head_dim / 8)`` butterfly shuffles
and one store; the sizes it refuses are ValueErrors; the operator's ``kernel_grads``
hands the kernel bshd dO and O, a ``(batch, heads, seq)`` float32 Dsum and dQ's float32
accumulator to zero (``zero_dq``: two 16-byte stores a lane).
GPU (marker ``gpu``): against float64 sums for several lengths from one kernel, every
entry of a NaN-filled Dsum written, every entry of a NaN-filled dQacc zeroed; the
operator's gradients with the kernel's Dsum.
"""

import math
import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.attention_backward.dsum import make_dsum
from tvm_tirx.script import tirx as T


def _compiled(head_dim, dtype="bfloat16", arch="sm_90a", zero_dq=False):
    options = {"arch": arch} if arch else {}
    return tvm_tirx.compile(make_dsum(T.dynamic("B"), T.dynamic("L"), 8, head_dim, dtype, zero_dq=zero_dq),
                            target="cuda", **options)


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_each_row_is_two_vector_loads_a_lane_and_a_butterfly(head_dim, dtype):
    if not testing.has_nvcc():
        pytest.skip("assembles for sm_90a: needs nvcc on the PATH")
    kernel = _compiled(head_dim, dtype)
    assert len(testing.assemble(kernel)) > 0
    body = kernel.cuda_source[kernel.cuda_source.index("extern \"C\" __global__"):]
    assert len(re.findall(r"\btvm_builtin_ptx_ld_vec_global_v4_b32\(", body)) == 2
    assert len(re.findall(r"\btvm_builtin_ptx_st_global_b32\w*\(", body)) == 1
    shuffles = re.findall(r"\btvm_builtin_ptx_shfl_sync_bfly\w*\(", body)
    assert len(shuffles) == int(math.log2(head_dim // 8)), "one butterfly step per halving of the row's lanes"


@pytest.mark.parametrize("head_dim", [64, 256])
def test_zero_dq_adds_two_vector_stores_a_lane_over_its_columns(head_dim):
    if not testing.has_nvcc():
        pytest.skip("assembles for sm_90a: needs nvcc on the PATH")
    plain, zeroing = _compiled(head_dim), _compiled(head_dim, zero_dq=True)
    assert len(testing.assemble(zeroing)) > 0
    func = make_dsum(T.dynamic("B"), T.dynamic("L"), 8, head_dim, zero_dq=True)
    assert [str(p.name) for p in func.params] == ["dO", "O", "Dsum", "dQacc"]
    assert str(func.params[3].dtype) == "float32" and [str(x) for x in func.params[3].shape] == ["B", "L", "8",
                                                                                               str(head_dim)]
    body = zeroing.cuda_source[zeroing.cuda_source.index("extern \"C\" __global__"):]
    stores = re.findall(r"\btvm_builtin_ptx_st_vec_global_v4_b32\(\(&\(\(\(uint\*\)dQacc_ptr\)\[(.*?)\]\)\)", body)
    # lane `part` of a row zeroes its 8 float32 columns (8 part .. 8 part + 7): words 8 part and 8 part + 4
    assert len(stores) == 2
    assert stores[0].endswith("(part_ptr[0] * 8))") and stores[1].endswith("(part_ptr[0] * 8)) + 4)")
    assert f"* {head_dim})" in stores[0]  # the row's stride in words: head_dim float32 per head
    assert "dQacc" not in plain.cuda_source


@pytest.mark.parametrize("args, match", [
    ((2, 100, 8, 96, "bfloat16"), r"head_dim: expected one of \[64, 128, 256\], found 96"),
    ((2, 100, 8, 64, "float32"), r"dtype: expected one of"),
    ((2, 100, 0, 64, "bfloat16"), r"heads: expected a positive int, found 0"),
    ((0, 100, 8, 64, "bfloat16"), r"batch: expected a positive int"),
    ((2**16, 2**16, 8, 64, "bfloat16"), r"at most 2147483647 elements"),
    ((2, 100, 8, 64, "bfloat16", 1), r"zero_dq: expected a bool, found 1"),
])
def test_sizes_it_does_not_take_are_value_errors(args, match):
    with pytest.raises(ValueError, match=match):
        make_dsum(*args)


def test_kernel_grads_hands_the_kernel_bshd_rows_and_takes_its_dsum():
    torch = pytest.importorskip("torch")
    from tvm_tirx.ops.attention_backward_ops import kernel_grads

    seen = {}

    def dsum_kernel(do, o, dsum, dq_acc):  # the kernel's contract, computed in float64
        seen["args"] = (tuple(do.shape), tuple(o.shape), tuple(dsum.shape), dsum.dtype, o.is_contiguous())
        seen["dq_acc"] = (tuple(dq_acc.shape), dq_acc.dtype, dq_acc.is_contiguous(), dq_acc.data_ptr())
        dsum.copy_((do.double() * o.double()).sum(-1).transpose(1, 2))
        dq_acc.zero_()

    def backward(*args):
        seen["dsum"] = args[5].clone()
        seen["backward_dq_acc"] = args[6].data_ptr()

    q = torch.randn(2, 70, 4, 64)
    k, v = torch.randn(2, 70, 2, 64), torch.randn(2, 70, 2, 64)
    o, do, lse = torch.randn(2, 4, 70, 64).transpose(1, 2), torch.randn(2, 70, 4, 64), torch.randn(2, 4, 70)
    grad_lse = torch.randn(2, 4, 70)
    kernel_grads(backward, do, grad_lse, q, k, v, o, lse, "bshd", dsum_kernel=dsum_kernel)
    assert seen["args"] == ((2, 70, 4, 64), (2, 70, 4, 64), (2, 4, 70), torch.float32, True)
    # the dsum kernel zeroes the accumulator the backward kernel then adds into (no memset of its own)
    assert seen["dq_acc"][:3] == ((2, 70, 4, 64), torch.float32, True)
    assert seen["dq_acc"][3] == seen["backward_dq_acc"]
    want = (do.double() * o.double()).sum(-1).transpose(1, 2) - grad_lse
    torch.testing.assert_close(seen["dsum"].double(), want, rtol=1e-5, atol=1e-5)


def test_kernel_grads_without_the_dsum_kernel_zeroes_dq_acc_itself():
    torch = pytest.importorskip("torch")
    from tvm_tirx.ops.attention_backward_ops import kernel_grads

    seen = {}

    def backward(*args):  # what the main kernel would add into
        seen["dq_acc"] = args[6].clone()

    q, do = torch.randn(2, 70, 4, 64), torch.randn(2, 70, 4, 64)
    k, v, o, lse = torch.randn(2, 70, 2, 64), torch.randn(2, 70, 2, 64), torch.randn(2, 70, 4, 64), torch.randn(2, 4, 70)
    enabled = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)  # torch.empty then fills float tensors with NaN
    try:
        assert torch.empty(4).isnan().all()  # else this test could not fail
        kernel_grads(backward, do, None, q, k, v, o, lse, "bshd")
    finally:
        torch.use_deterministic_algorithms(enabled)
    assert not seen["dq_acc"].isnan().any() and not seen["dq_acc"].any()


# -- on the GPU --------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_every_row_against_float64_sums_on_gpu(torch_cuda, head_dim, dtype):
    torch = torch_cuda
    kernel = _compiled(head_dim, dtype, arch=None)
    tdtype = getattr(torch, dtype)
    for batch, seq_len in ((1, 1), (2, 77), (3, 1000)):
        torch.manual_seed(seq_len)
        do, o = (torch.randn(batch, seq_len, 8, head_dim, device="cuda", dtype=tdtype) for _ in range(2))
        dsum = torch.full((batch, 8, seq_len), float("nan"), device="cuda")
        kernel(do, o, dsum)
        torch.cuda.synchronize()
        want = (do.double() * o.double()).sum(-1).transpose(1, 2)
        assert not dsum.isnan().any(), f"{batch, seq_len}: entries not written"
        torch.testing.assert_close(dsum.double(), want, rtol=1e-5, atol=1e-4 * math.sqrt(head_dim))


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 256])
def test_zero_dq_zeroes_every_entry_on_gpu(torch_cuda, head_dim):
    torch = torch_cuda
    kernel = _compiled(head_dim, arch=None, zero_dq=True)
    for batch, seq_len in ((1, 1), (3, 1000)):
        do, o = (torch.randn(batch, seq_len, 8, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        dsum = torch.full((batch, 8, seq_len), float("nan"), device="cuda")
        dq_acc = torch.full((batch, seq_len, 8, head_dim), float("nan"), device="cuda")
        kernel(do, o, dsum, dq_acc)
        torch.cuda.synchronize()
        assert not dq_acc.isnan().any() and not dq_acc.any(), f"{batch, seq_len}: dQacc not zeroed everywhere"
        want = (do.double() * o.double()).sum(-1).transpose(1, 2)
        torch.testing.assert_close(dsum.double(), want, rtol=1e-5, atol=1e-4 * math.sqrt(head_dim))


@pytest.mark.gpu
def test_the_operator_with_the_kernels_dsum_on_gpu(torch_cuda, monkeypatch):
    torch = torch_cuda
    from tvm_tirx import ops
    from tvm_tirx.ops import attention_backward_kernels as kernels

    torch.manual_seed(5)
    q = torch.randn(2, 900, 8, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(2, 900, 2, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    grad = torch.randn(2, 900, 8, 128, device="cuda", dtype=torch.bfloat16)
    grads = {}
    for route in (False, True):
        monkeypatch.setattr(kernels, "DSUM_ROUTE", route)
        grads[route] = torch.autograd.grad(ops.attention(q, k, v, causal=True), (q, k, v), grad)
    for name, a, b in zip(("dQ", "dK", "dV"), grads[False], grads[True]):
        scale = a.float().abs().max().item()
        assert (a.float() - b.float()).abs().max().item() <= 1e-2 * scale, name
