"""The row-wise kernels: RMSNorm (tvm_tirx.kernels.norm) and the rotary embedding
(tvm_tirx.kernels.rotary), and the 16-bit pair unpacking they share (kernels.pairs).

CPU: each configuration compiles and assembles for sm_90a with the instructions its
design names (16-byte vector loads and stores, one unpack per word, one exact widening
per value, one packing conversion per output pair); refused arguments are ValueErrors
naming the argument.  GPU (marker ``gpu``): one run-time-size kernel against float32
torch at several sizes, outputs NaN-filled first.
"""

import pytest
from tvm.script import tirx as T

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.norm import make_rms_norm
from tvm_tirx.kernels.rotary import make_rotary


@pytest.mark.parametrize("hidden, dtype", [(256, "bfloat16"), (4096, "bfloat16"), (1024, "float16")])
def test_rms_norm_assembles_with_one_vector_load_per_lane_and_chunk(hidden, dtype):
    func = make_rms_norm(T.dynamic("M"), hidden, dtype)
    chunks = hidden // 256
    widen = "cvt.f32.bf16" if dtype == "bfloat16" else "cvt.f32.f16"
    assert testing.count_ptx(func, "ld.global.v4.b32") == 2 * chunks  # the row, then the weight
    assert testing.count_ptx(func, "st.global.v4.b32") == chunks
    assert testing.count_ptx(func, widen) == 3 * 8 * chunks  # x twice (sum, scale), w once
    assert testing.count_ptx(func, "shfl.sync.bfly.b32") == 5  # the sum over 32 lanes
    testing.assemble(tvm_tirx.compile(func, target="cuda", arch="sm_90a"))


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_rotary_assembles_with_two_vectors_of_x_and_four_of_the_tables(head_dim):
    func = make_rotary(T.dynamic("B"), T.dynamic("L"), 8, head_dim)
    assert testing.count_ptx(func, "ld.global.v4.b32") == 6
    assert testing.count_ptx(func, "st.global.v4.b32") == 2
    assert testing.count_ptx(func, "cvt.rn.bf16x2.f32") == 8
    testing.assemble(tvm_tirx.compile(func, target="cuda", arch="sm_90a"))


@pytest.mark.parametrize("kwargs, match", [
    (dict(hidden=4097), r"hidden: expected a static multiple of 256"),
    (dict(hidden=8192), r"hidden: .*up to 4096"),
    (dict(dtype="float32"), r"dtype: expected one of \['bfloat16', 'float16'\]"),
    (dict(eps=-1.0), r"eps: expected a number in \[0, 3.402823e\+38\]"),
    (dict(eps=1e40), r"eps: expected a number in \[0, "),
    (dict(dtype=["bfloat16"]), r"dtype: expected one of"),
    (dict(eps=True), r"eps: "),
    (dict(rows=0), r"rows: expected a positive int"),
    (dict(rows=T.dynamic("M", "int64")), r"rows: expected .*int32 run-time extent"),
    (dict(rows=1 << 20), r"rows x hidden = 4294967296: .*at most 2147483647"),
])
def test_rms_norm_refusals_name_the_argument(kwargs, match):
    args = dict(rows=8, hidden=4096, dtype="bfloat16", eps=1e-5) | kwargs
    with pytest.raises(ValueError, match=match):
        make_rms_norm(**args)


@pytest.mark.parametrize("kwargs, match", [
    (dict(head_dim=96), r"head_dim: expected one of \[64, 128, 256\]"),
    (dict(head_dim=128.0), r"head_dim: expected one of \[64, 128, 256\] \(an int\), found 128.0"),
    (dict(heads=0), r"heads: expected a positive int"),
    (dict(dtype="float32"), r"dtype: "),
    (dict(batch=-1), r"batch: expected a positive int"),
    (dict(seq_len=1 << 20, heads=64), r"batch x seq_len x heads x head_dim = .*at most 2147483647"),
])
def test_rotary_refusals_name_the_argument(kwargs, match):
    args = dict(batch=1, seq_len=16, heads=8, head_dim=128, dtype="bfloat16") | kwargs
    with pytest.raises(ValueError, match=match):
        make_rotary(**args)


def test_numpy_scalars_are_taken_as_the_numbers_they_are():
    import numpy as np

    func = make_rms_norm(np.int64(8), np.int64(256), eps=np.float32(1e-5))
    assert "T.Buffer((8, 256)" in func.script()
    assert "T.Buffer((1, 16, 8, 128)" in make_rotary(np.int32(1), 16, np.int64(8), np.int64(128)).script()


def _rms_reference(torch, x, w, eps):
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()


def _rotary_reference(torch, x, cos, sin):
    xf, c, s = x.float(), cos.float()[None, :, None, :], sin.float()[None, :, None, :]
    half = x.shape[-1] // 2
    rotated = torch.cat([-xf[..., half:], xf[..., :half]], dim=-1)
    return xf * c + rotated * s


@pytest.mark.gpu
@testing.requires_cuda
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_rms_norm_on_the_gpu_at_several_row_counts(torch_cuda, dtype):
    torch = torch_cuda
    kernel = tvm_tirx.compile(make_rms_norm(T.dynamic("M"), 4096, dtype, 1e-6), target="cuda")
    tdtype = getattr(torch, dtype)
    w = (torch.rand(4096, device="cuda") + 0.5).to(tdtype)
    for rows in (1, 5, 4099):
        x = (torch.randn(rows, 4096, device="cuda") * 3).to(tdtype)
        y = torch.full_like(x, float("nan"))
        kernel(x, w, y)
        ref = _rms_reference(torch, x, w, 1e-6)
        err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
        assert err < 1e-2, (rows, err)


@pytest.mark.gpu
@testing.requires_cuda
@pytest.mark.parametrize("head_dim", [64, 128])
def test_rotary_on_the_gpu_at_several_lengths(torch_cuda, head_dim):
    torch = torch_cuda
    kernel = tvm_tirx.compile(make_rotary(T.dynamic("B"), T.dynamic("L"), 8, head_dim), target="cuda",
                              options={"check_assumptions": True})  # the stated bound is checked too
    for batch, seq in ((1, 1), (2, 100), (1, 4097)):
        x = torch.randn(batch, seq, 8, head_dim, device="cuda").bfloat16()
        angles = torch.rand(seq, head_dim, device="cuda") * 6.28
        cos, sin = angles.cos().bfloat16(), angles.sin().bfloat16()
        y = torch.full_like(x, float("nan"))
        kernel(x, cos, sin, y)
        ref = _rotary_reference(torch, x, cos, sin)
        err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
        assert err < 1e-2, (batch, seq, err)
