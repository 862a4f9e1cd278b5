"""Attention by blocks of query rows (``tvm_tirx.ops.attention_blocks``): the attention
operator's torch fallback and its backward.

Against float64 SDPA and its autograd, with blocks forced small so every call walks
several (rows not a multiple of the block, GQA, causal, both layouts, the gradient of
the LSE), ``gradcheck`` through the operator, the memory (a backward at 8192 positions
stays far below the dense score matrix's size), and the backward as an op of its own
(``tvm_tirx::attention_backward``: opcheck, one node in a compiled backward graph, no
double backward).
"""

import math
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from tvm_tirx import ops  # noqa: E402
from tvm_tirx.ops import attention_blocks  # noqa: E402


def _qkv(b=2, n=23, h=4, hk=2, d=16, layout="bshd", seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(b, n, heads, d, generator=g, dtype=torch.float64) for heads in (h, hk, hk))
    return tuple(t.transpose(1, 2) for t in (q, k, v)) if layout == "bhsd" else (q, k, v)


def _dense(q, k, v, causal, layout, scale):
    """(O in ``layout``, LSE) by the whole score matrix, KV heads repeated: the reference."""
    qh, kh, vh = (t if layout == "bhsd" else t.transpose(1, 2) for t in (q, k, v))
    group = qh.shape[1] // kh.shape[1]
    kh, vh = kh.repeat_interleave(group, 1), vh.repeat_interleave(group, 1)
    s = (qh @ kh.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(torch.ones_like(s[0, 0], dtype=torch.bool).triu(1), float("-inf"))
    o = torch.softmax(s, -1) @ vh
    return (o if layout == "bhsd" else o.transpose(1, 2)), torch.logsumexp(s, -1)


@pytest.fixture
def rows_of_three(monkeypatch):
    """Blocks of three query rows for the shapes of these tests (b 2, h 4, 23 keys, float64)."""
    monkeypatch.setattr(attention_blocks, "SCORE_BYTES", 4 * 2 * 4 * 23 * 8 * 3)
    assert attention_blocks.query_block(2, 4, 23, 23, 8) == 3


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("causal", [False, True])
def test_blocks_match_the_whole_matrix_forward_and_backward(rows_of_three, layout, causal):
    q, k, v = (t.detach().requires_grad_(True) for t in _qkv(layout=layout))
    o, lse = ops.attention(q, k, v, causal=causal, layout=layout, return_lse=True, fallback="torch")
    go, glse = torch.randn_like(o), torch.randn_like(lse, dtype=torch.float64)
    grads = torch.autograd.grad((o, lse), (q, k, v), (go, glse.float()))
    qr, kr, vr = (t.detach().requires_grad_(True) for t in (q, k, v))
    ref_o, ref_lse = _dense(qr, kr, vr, causal, layout, 0.25)
    ref = torch.autograd.grad((ref_o, ref_lse), (qr, kr, vr), (go, glse.float().double()))
    torch.testing.assert_close(o, ref_o.detach())
    torch.testing.assert_close(lse.double(), ref_lse.detach(), atol=1e-6, rtol=1e-6)  # LSE is float32
    for name, got, want, t in zip("qkv", grads, ref, (q, k, v)):
        assert got.shape == t.shape and got.dtype == t.dtype, name
        torch.testing.assert_close(got, want, msg=lambda m, name=name: f"d{name}: {m}")


def test_only_the_lse_used_gives_its_gradient(rows_of_three):
    q, k, v = (t.detach().requires_grad_(True) for t in _qkv())
    _, lse = ops.attention(q, k, v, causal=True, return_lse=True, fallback="torch")
    grads = torch.autograd.grad(lse.sum(), (q, k, v), allow_unused=True)
    qr, kr, vr = (t.detach().requires_grad_(True) for t in (q, k, v))
    ref = torch.autograd.grad(_dense(qr, kr, vr, True, "bshd", 0.25)[1].sum(), (qr, kr))
    for got, want in zip(grads, ref):
        torch.testing.assert_close(got, want)
    assert grads[2].abs().max() == 0  # V does not reach the LSE


def test_float32_inputs_compute_in_float32_and_return_their_dtype(rows_of_three):
    q, k, v = (t.float().requires_grad_(True) for t in _qkv())
    o = ops.attention(q, k, v, causal=True, fallback="torch")
    grads = torch.autograd.grad(o.square().sum(), (q, k, v))
    qr, kr, vr = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    ref = torch.autograd.grad(_dense(qr, kr, vr, True, "bshd", 0.25)[0].square().sum(), (qr, kr, vr))
    for got, want in zip(grads, ref):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), want, atol=1e-4, rtol=1e-4)


def test_gradcheck_through_the_operator(monkeypatch):
    monkeypatch.setattr(attention_blocks, "SCORE_BYTES", 4 * 1 * 2 * 7 * 8 * 2)  # blocks of 2 rows
    q, k, v = (t.requires_grad_(True) for t in _qkv(b=1, n=7, h=2, hk=1, d=4, seed=3))
    for causal in (False, True):  # O only: the LSE output is float32, too coarse for gradcheck's steps
        assert torch.autograd.gradcheck(
            lambda q, k, v, causal=causal: ops.attention(q, k, v, causal=causal, scale=0.7, fallback="torch"),
            (q, k, v))


def test_query_block_bounds_the_scores_and_takes_every_row_when_they_fit():
    per_row = 4 * 8 * 32 * 4096 * 4
    rows = attention_blocks.query_block(8, 32, 4096, 4096, 4)
    assert rows * per_row <= attention_blocks.SCORE_BYTES < (rows + 1) * per_row
    assert attention_blocks.query_block(1, 1, 50, 50, 4) == 50  # one block
    assert attention_blocks.query_block(64, 64, 65536, 65536, 8) == 1  # never fewer than one row
    assert attention_blocks.query_block(2, 2, 0, 0, 4) == 1


def test_the_backward_memory_grows_with_the_rows_not_their_square():
    """A backward at 8192 positions (dense scores: 8192**2 x 4 B = 256 MiB per tensor, and
    autograd of the whole matrix keeps several) with 16 MiB of scores per block: the
    process's peak resident memory grows by well under one dense score tensor."""
    script = textwrap.dedent("""
        import resource, torch
        from tvm_tirx import ops
        from tvm_tirx.ops import attention_blocks
        attention_blocks.SCORE_BYTES = 16 << 20
        n, d = 8192, 16
        q, k, v = (torch.randn(1, n, 1, d, requires_grad=True) for _ in range(3))
        small = [t.detach()[:, :64].requires_grad_(True) for t in (q, k, v)]
        ops.attention(*small, causal=True, fallback="torch").sum().backward()  # warm up
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        ops.attention(q, k, v, causal=True, fallback="torch").sum().backward()
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
    """)
    grown = int(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True)
                .stdout.split()[-1])
    assert grown < (8192 ** 2 * 4) // 2, f"peak memory grew by {grown / 2**20:.0f} MiB"


def test_the_default_scale_is_one_over_root_head_dim(rows_of_three):
    q, k, v = _qkv()
    o = ops.attention(q, k, v, fallback="torch")
    torch.testing.assert_close(o, _dense(q, k, v, False, "bshd", 1 / math.sqrt(16))[0])


def test_the_backward_is_an_op_of_its_own_that_compiled_graphs_call_once(rows_of_three):
    """AOTAutograd's backward graph calls ``tvm_tirx::attention_backward`` once instead of
    tracing the loop over query blocks (8 blocks here: one traced copy each before)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs = []

    def keep(gm, _inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    q, k, v = (t.float().requires_grad_(True) for t in _qkv())
    compiled = torch.compile(lambda q, k, v: ops.attention(q, k, v, causal=True, fallback="torch").square().sum(),
                             backend=aot_autograd(fw_compiler=keep, bw_compiler=keep), fullgraph=True)
    compiled(q, k, v).backward()
    backward_graph = graphs[-1].graph
    calls = [n for n in backward_graph.nodes if n.op == "call_function"]
    assert [str(n.target) for n in calls].count("tvm_tirx.attention_backward.default") == 1
    assert len(calls) < 12, backward_graph  # the op and a few element-wise nodes, no per-block products
    qr, kr, vr = (t.detach().requires_grad_(True) for t in (q, k, v))
    ops.attention(qr, kr, vr, causal=True, fallback="torch").square().sum().backward()
    for got, want in ((q.grad, qr.grad), (k.grad, kr.grad), (v.grad, vr.grad)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_opcheck_of_the_backward_op(layout):
    q, k, v = (t.float() for t in _qkv(n=9, layout=layout))
    o, lse = ops.attention(q, k, v, causal=True, layout=layout, return_lse=True, fallback="torch")
    grad_o, grad_lse = torch.randn_like(q), torch.randn(2, 4, 9)
    for args in ((grad_o, grad_lse), (grad_o, None), (None, grad_lse)):
        torch.library.opcheck(torch.ops.tvm_tirx.attention_backward.default,
                              (*args, q, k, v, o, lse, True, 0.25, layout))


# double backward: test_attention_backward_route.py::test_double_backward_is_refused_by_name


@pytest.mark.parametrize("shape", [(0, 6, 4, 8), (2, 6, 0, 8), (2, 6, 4, 0), (2, 0, 4, 8)],
                         ids=["no-batch", "no-heads", "head-dim-0", "no-rows"])
def test_empty_shapes_give_empty_outputs_and_gradients(shape):
    # as SDPA does (these divided by zero when sizing the blocks)
    q = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    k = torch.randn(shape[0], shape[1], 2, shape[3], dtype=torch.float64, requires_grad=True)
    o, lse = ops.attention(q, k, k, causal=True, return_lse=True, fallback="torch")
    assert o.shape == q.shape and lse.shape == (shape[0], shape[2], shape[1])
    dq, dk = torch.autograd.grad(o.sum() + lse.sum(), (q, k), allow_unused=True)
    assert dq.shape == q.shape and dk.shape == k.shape


def test_the_lse_of_float64_inputs_is_float64_and_passes_gradcheck():
    q, k, v = (t.requires_grad_(True) for t in _qkv(b=1, n=6, h=2, hk=1, d=4, seed=5))
    _, lse = ops.attention(q, k, v, return_lse=True, fallback="torch")
    assert lse.dtype == torch.float64
    assert torch.autograd.gradcheck(
        lambda q, k, v: ops.attention(q, k, v, causal=True, return_lse=True, fallback="torch")[1], (q, k, v))


def test_a_tensor_on_another_device_is_refused_not_computed_by_the_fake():
    # one meta tensor among CPU ones used to reach the fake implementation, which returned
    # memory nothing wrote
    q, k, v = _qkv(n=5)
    with pytest.raises(ValueError, match=r"tvm_tirx.ops.attention: k must be on q's device cpu, got meta"):
        ops.attention(q, k.to("meta"), v.to("meta"), fallback="torch")
