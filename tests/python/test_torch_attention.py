"""The torch operator ``tvm_tirx.ops.attention`` (``torch.ops.tvm_tirx.attention``).

CPU: the fallback's values against torch SDPA (both layouts, causal, GQA) and its LSE;
the rules for inputs the kernel does not take, each naming its argument; shape and dtype
errors; ``torch.compile(fullgraph=True)`` without a graph break; the backward against
SDPA's; the kernel table (one kernel per key for every batch and length, with the compile
replaced by a stand-in).  GPU (marker ``gpu``): the kernel's results for several lengths
from one compiled kernel, both layouts, eager and under ``torch.compile``.
"""

import math

import pytest

torch = pytest.importorskip("torch")

from tvm_tirx import ops, testing  # noqa: E402
from tvm_tirx.ops import attention_checks, attention_kernels, attention_ops  # noqa: E402,F401  (registers the op)
from tvm_tirx.ops.torch_checks import UnsupportedInput  # noqa: E402

BF16 = torch.bfloat16


def _qkv(b=2, n=50, h=4, hk=2, d=64, dtype=torch.float32, layout="bshd", device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, n, heads, d, generator=g).to(dtype).to(device) for heads in (h, hk, hk))
    return tuple(t.transpose(1, 2) for t in (q, k, v)) if layout == "bhsd" else (q, k, v)


def _sdpa(q, k, v, causal, layout):
    """torch SDPA in float64 on (B, H, L, D) views, KV heads repeated; output in ``layout``."""
    qh, kh, vh = (t.double() if layout == "bhsd" else t.double().transpose(1, 2) for t in (q, k, v))
    group = qh.shape[1] // kh.shape[1]
    kh, vh = kh.repeat_interleave(group, 1), vh.repeat_interleave(group, 1)
    o = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, is_causal=causal)
    s = (qh @ kh.transpose(-1, -2)) / math.sqrt(qh.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones_like(s[0, 0], dtype=torch.bool).triu(1), float("-inf"))
    return (o if layout == "bhsd" else o.transpose(1, 2)), torch.logsumexp(s, -1)


def test_the_op_is_registered():
    assert ops.attention.__module__ == "tvm_tirx.ops.attention_ops"  # the first use imports it: that registers it
    assert str(torch.ops.tvm_tirx.attention.default._schema) == (
        "tvm_tirx::attention(Tensor q, Tensor k, Tensor v, bool causal, float? scale, str layout, str? fallback) "
        "-> (Tensor, Tensor)")


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("causal", [False, True])
def test_the_fallback_matches_sdpa(layout, causal):
    q, k, v = _qkv(layout=layout)
    o, lse = ops.attention(q, k, v, causal=causal, layout=layout, return_lse=True, fallback="torch")
    ref_o, ref_lse = _sdpa(q, k, v, causal, layout)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (2, 4, 50)
    torch.testing.assert_close(o.double(), ref_o, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_opcheck_passes_on_the_fallback(layout):
    # the fake implementation's shapes, dtypes and strides against the real ones, schema, autograd registration
    q, k, v = _qkv(n=20, layout=layout)
    torch.library.opcheck(torch.ops.tvm_tirx.attention.default, (q, k, v, True, None, layout, "torch"))


def test_without_fallback_a_cpu_tensor_is_refused():
    with pytest.raises(UnsupportedInput, match=r"tvm_tirx.ops.attention: q must be a CUDA tensor, got one on cpu"):
        ops.attention(*_qkv(dtype=BF16))


@pytest.fixture
def as_if_on_an_h200(monkeypatch):
    """CPU tensors pass the device rules: the other rules run on them."""
    monkeypatch.setattr(attention_checks, "_check_device", lambda tensors: None)
    monkeypatch.setattr(attention_checks, "device_target", lambda op, device: "sm_90a")


RULES = [
    (dict(dtype=torch.float32), "bshd", r"q must be torch.bfloat16 or torch.float16, got torch.float32"),
    (dict(d=96), "bshd", r"head_dim must be one of \[64, 128, 256\], got 96"),
    (dict(), "bhsd-copy", r"q \(bhsd\) must be the transposed view of a contiguous \(batch, seq, heads, head_dim\)"),
]


@pytest.mark.parametrize("inputs,layout,message", RULES, ids=["dtype", "head-dim", "bhsd-contiguous"])
def test_each_rule_names_its_argument(as_if_on_an_h200, inputs, layout, message):
    q, k, v = _qkv(dtype=inputs.pop("dtype", BF16), **inputs)
    if layout == "bhsd-copy":  # (B, H, L, D) contiguous: not a view of a bshd tensor
        q, k, v, layout = *(t.transpose(1, 2).contiguous() for t in (q, k, v)), "bhsd"
    with pytest.raises(UnsupportedInput, match=message):
        attention_checks.attention_key(q, k, v, False, 0.125, layout)


def test_different_lengths_are_unsupported_by_the_kernel(as_if_on_an_h200):
    q, _, _ = _qkv(dtype=BF16)
    _, k, v = _qkv(n=60, dtype=BF16)
    with pytest.raises(UnsupportedInput, match=r"q and k must have one sequence length .*got 50 and 60"):
        attention_checks.attention_key(q, k, v, False, 0.125, "bshd")


@pytest.mark.parametrize(
    "change,error,message",
    [(lambda q, k, v: (q[0], k, v), ValueError, r"q must be 4-d"),
     (lambda q, k, v: (q, k, v[:, :, :1]), ValueError, r"k and v must have the same shape"),
     (lambda q, k, v: (q[:, :, :3], k, v), ValueError, r"q's 3 heads must be a multiple of k's 2"),
     (lambda q, k, v: (q, k.int(), v.int()), TypeError, r"k must be a floating-point tensor"),
     (lambda q, k, v: (q, k.double(), v.double()), TypeError, r"q, k and v must have one dtype")],
    ids=["q-3d", "kv-shapes", "gqa", "int", "dtypes"],
)
def test_shapes_and_dtypes_are_refused_even_with_the_fallback(change, error, message):
    with pytest.raises(error, match=message):
        ops.attention(*change(*_qkv()), fallback="torch")


def test_argument_types_are_checked_before_the_op():
    with pytest.raises(TypeError, match=r"causal must be a bool, got 'yes'"):
        ops.attention(*_qkv(), causal="yes", fallback="torch")
    with pytest.raises(TypeError, match=r"scale must be a number or None, got True"):
        ops.attention(*_qkv(), scale=True, fallback="torch")
    with pytest.raises(ValueError, match=r"layout must be one of \('bshd', 'bhsd'\), got None"):
        ops.attention(*_qkv(), layout=None, fallback="torch")
    with pytest.raises(TypeError, match=r"q must be a floating-point tensor of 16 bits or more"):
        ops.attention(*(t.to(torch.float8_e4m3fn) for t in _qkv()), fallback="torch")


def test_the_fallback_lays_out_its_output_as_the_kernel_does():
    # the fake implementation (the kernel's layout) must describe the fallback's output too:
    # a bhsd view of bshd storage
    q, k, v = _qkv(layout="bhsd", d=96)  # head_dim 96: the kernel would refuse it
    o = ops.attention(q, k, v, layout="bhsd", fallback="torch")
    assert o.shape == q.shape and o.stride() == q.stride()


def test_options_are_checked():
    with pytest.raises(ValueError, match=r"layout must be one of \('bshd', 'bhsd'\), got 'sbhd'"):
        ops.attention(*_qkv(), layout="sbhd", fallback="torch")
    with pytest.raises(ValueError, match=r"scale must be a positive number or None, got -1.0"):
        ops.attention(*_qkv(), scale=-1.0, fallback="torch")
    with pytest.raises(ValueError, match=r"fallback must be None or 'torch', got 'sdpa'"):
        ops.attention(*_qkv(), fallback="sdpa")


class _Attn(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.nn.functional.silu(ops.attention(q, k, v, causal=True, fallback="torch"))


def test_torch_compile_traces_one_graph_without_a_break():
    explanation = torch._dynamo.explain(_Attn())(*_qkv())
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0, explanation
    assert "torch.ops.tvm_tirx.attention" in explanation.graphs[0].code
    compiled = torch.compile(_Attn(), fullgraph=True)
    q, k, v = _qkv()
    torch.testing.assert_close(compiled(q, k, v), _Attn()(q, k, v))


def test_the_backward_matches_sdpa():
    q, k, v = (t.double().requires_grad_(True) for t in _qkv(n=20))
    o = ops.attention(q, k, v, causal=True, fallback="torch")
    grads = torch.autograd.grad(o.square().sum(), (q, k, v))
    qs, ks, vs = (t.detach().requires_grad_(True) for t in (q, k, v))
    ref = _sdpa(qs, ks, vs, True, "bshd")[0]
    ref_grads = torch.autograd.grad(ref.square().sum(), (qs, ks, vs))
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)


class _StandIn:
    """A compiled kernel's stand-in: records the shapes and computes O and LSE with torch."""

    def __init__(self, key):
        self.key, self.calls = key, []

    def launcher(self, *args):
        """The unchecked launch function, as Kernel.launcher returns it: the stand-in itself."""
        return self

    def __call__(self, q, k, v, o, lse):
        assert all(t.is_contiguous() for t in (q, k, v, o, lse))
        self.calls.append(tuple(q.shape))
        ref_o, ref_lse = _sdpa(q, k, v, self.key.causal, "bshd")
        o.copy_(ref_o)
        lse.copy_(ref_lse)


def test_one_kernel_serves_every_batch_and_length(as_if_on_an_h200, monkeypatch):
    compiled = []
    monkeypatch.setattr(attention_kernels, "_compile", lambda key: compiled.append(key) or _StandIn(key))
    attention_kernels.clear_kernels()
    try:
        for b, n in ((1, 1), (2, 100), (3, 77)):
            for layout in ("bshd", "bhsd"):
                q, k, v = _qkv(b=b, n=n, dtype=BF16, layout=layout, seed=n)
                o = ops.attention(q, k, v, causal=True, layout=layout)
                assert o.shape == q.shape
                torch.testing.assert_close(o.double(), _sdpa(q, k, v, True, layout)[0], atol=2e-2, rtol=0)
        assert compiled == [attention_kernels.AttentionKey(4, 2, 64, True, "bfloat16", 0.125, "sm_90a",
                                                           attention_kernels.kernel_plan(64, True))]
        (kernel,) = attention_kernels.cached_kernels().values()
        assert [shape[:2] for shape in kernel.calls] == [(1, 1), (1, 1), (2, 100), (2, 100), (3, 77), (3, 77)]
    finally:
        attention_kernels.clear_kernels()


def test_head_dim_128_takes_the_persistent_grid_for_short_rows(as_if_on_an_h200, monkeypatch):
    from tvm_tirx.kernels.attention.schedules import PERSISTENT_ROWS

    compiled = []
    monkeypatch.setattr(attention_kernels, "_compile", lambda key: compiled.append(key) or _StandIn(key))
    attention_kernels.clear_kernels()
    try:
        for n in (100, PERSISTENT_ROWS + 1, 7):
            q, k, v = _qkv(b=1, n=n, h=1, hk=1, d=128, dtype=BF16, seed=n)
            torch.testing.assert_close(ops.attention(q, k, v).double(), _sdpa(q, k, v, False, "bshd")[0], atol=2e-2,
                                       rtol=0)
        # one kernel per grid: the persistent one for rows of at most PERSISTENT_ROWS keys, served again at 7
        assert [key.plan.persistent for key in compiled] == [True, False]
        assert [key.plan.persistent for key, kernel in attention_kernels.cached_kernels().items() for _ in kernel.calls] \
            == [True, True, False]
    finally:
        attention_kernels.clear_kernels()


# -- on the GPU --------------------------------------------------------------------------------


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_the_kernel_for_every_length_on_gpu(torch_cuda, layout):
    for n in (1, 100, 1000):
        q, k, v = _qkv(b=2, n=n, h=8, hk=2, d=128, dtype=BF16, layout=layout, device="cuda", seed=n)
        o, lse = ops.attention(q, k, v, causal=True, layout=layout, return_lse=True)
        ref_o, ref_lse = _sdpa(q, k, v, True, layout)
        assert (o.double() - ref_o).abs().max().item() <= 2e-2 and (lse.double() - ref_lse).abs().max().item() <= 1e-3
    assert len(attention_kernels.cached_kernels()) >= 1


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
def test_the_kernel_under_torch_compile_on_gpu(torch_cuda):
    torch._dynamo.reset()
    compiled = torch.compile(_Attn(), fullgraph=True, dynamic=True)
    for n in (64, 300):
        q, k, v = _qkv(b=1, n=n, h=4, hk=2, d=64, dtype=BF16, device="cuda", seed=n)
        ref = torch.nn.functional.silu(_sdpa(q, k, v, True, "bshd")[0])
        assert (compiled(q, k, v).double() - ref).abs().max().item() <= 2e-2
