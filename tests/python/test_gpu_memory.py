"""ld/st/mov kernels on the GPU: state spaces, widths, vectors, qualifiers, predication."""

import pytest

import tvm_tirx
from tvm_tirx.script import tirx as T

from test_lowering import twelve_floats
from test_roundtrip import predicated

pytestmark = pytest.mark.gpu

# (torch dtype name, PTX bit type, vector length)
WIDTHS = [
    ("uint8", "b8", 4),
    ("int16", "b16", 2),
    ("float16", "b16", 4),
    ("float32", "b32", 4),
    ("int32", "b32", 2),
    ("float64", "b64", 2),
    ("int64", "b64", 1),
]


def _width_kernel(dtype, bits, n, space):
    vec = f".v{n}" if n > 1 else ""
    ld_global = f"ld.global.nc{vec}.{bits}"
    st_mem = f"st.{space}{vec}.{bits}"
    ld_mem = f"ld.{space}{vec}.{bits}"
    st_global = f"st.global{vec}.{bits}"

    @T.function
    def k(A: T.Tensor((64, n), dtype, align=16), B: T.Tensor((64, n), dtype, align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((n,), dtype)
        s = T.alloc_shared((64, n), dtype, align=16)
        m = T.alloc_local((n,), dtype, align=16)
        T.cuda.tile.apply(T.ptx[ld_global], r, A.sub[tid, :])
        if space == "local":
            T.cuda.tile.apply(T.ptx[st_mem], m, r)
            T.cuda.tile.apply(T.ptx[ld_mem], r, m)
        else:
            T.cuda.tile.apply(T.ptx[st_mem], s.sub[tid, :], r)
            T.cuda.cta_sync()
            T.cuda.tile.apply(T.ptx[ld_mem], r, s.sub[63 - tid, :])
        T.cuda.tile.apply(T.ptx[st_global], B.sub[tid, :], r)

    return k


def _random(torch, shape, dtype):
    t = getattr(torch, dtype)
    if t.is_floating_point:
        return torch.randn(*shape, device="cuda").to(t)
    info = torch.iinfo(t)
    return torch.randint(info.min, info.max, shape, device="cuda", dtype=torch.int64).to(t)


@pytest.mark.parametrize("space", ["shared", "shared::cta", "local"])
@pytest.mark.parametrize("dtype,bits,n", WIDTHS)
def test_width_roundtrip_through_space(torch_cuda, dtype, bits, n, space):
    torch = torch_cuda
    kernel = tvm_tirx.compile(_width_kernel(dtype, bits, n, space), target="cuda")
    a = _random(torch, (64, n), dtype)
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    expected = a if space == "local" else torch.flip(a, dims=[0])
    assert torch.equal(b, expected)


def test_twelve_floats_three_repeats(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(twelve_floats, target="cuda")
    a = torch.randn(64, 12, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


def test_pred_preserve_dst_and_cache_policy(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(predicated, target="cuda")
    a = torch.randn(64, 4, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b[:32], a[:32])
    # predicated off: the registers kept the -1 they held before the load
    assert torch.equal(b[32:], torch.full_like(b[32:], -1.0))


def test_tvm_tensors_are_accepted(torch_cuda):
    import numpy as np
    import tvm

    from kernels import read_next_row

    kernel = tvm_tirx.compile(read_next_row, target="cuda")
    a_np = np.random.default_rng(0).standard_normal((64, 4)).astype("float32")
    dev = tvm.cuda(0)
    a = tvm.runtime.tensor(a_np, dev)
    b = tvm.runtime.tensor(np.zeros((64, 4), "float32"), dev)
    kernel(a, b)
    np.testing.assert_array_equal(b.numpy(), np.roll(a_np, -1, axis=0))
