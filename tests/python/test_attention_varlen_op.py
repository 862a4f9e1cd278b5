"""The torch operator ``tvm_tirx.ops.attention_varlen`` (packed sequences of different lengths).

CPU (``fallback="torch"``): one packed call equals one ``ops.attention`` call per
sequence (O, the LSE in FlashAttention's ``(heads, total)`` layout, the gradients),
causal and not, GQA, empty sequences, keys of other lengths than the queries; every
``cu_seqlens`` rule with its message; opcheck; ``torch.compile(fullgraph=True)``.
GPU (marker ``gpu``): the lengths of issue 42's acceptance in one call against
per-sequence calls and float32.
"""

import math

import pytest

torch = pytest.importorskip("torch")

from tvm_tirx import ops, testing  # noqa: E402
from tvm_tirx.ops import attention_blocks, attention_checks, attention_kernels, attention_varlen_ops  # noqa: E402,F401
from tvm_tirx.ops import attention_varlen_kernels as varlen_kernels  # noqa: E402

LENGTHS = [5, 1, 0, 17, 9]


def _packed(lengths, h=4, hk=2, d=16, dtype=torch.float64, device="cpu", seed=0, k_lengths=None):
    g = torch.Generator().manual_seed(seed)
    k_lengths = lengths if k_lengths is None else k_lengths
    q = torch.randn(sum(lengths), h, d, generator=g).to(dtype).to(device)
    k, v = (torch.randn(sum(k_lengths), hk, d, generator=g).to(dtype).to(device) for _ in range(2))
    cu = lambda ls: torch.tensor([0, *torch.tensor(ls).cumsum(0).tolist()], dtype=torch.int32, device=device)  # noqa: E731
    return q, k, v, cu(lengths), cu(k_lengths)


def _per_sequence(q, k, v, cu_q, cu_k, causal, **kw):
    """O and LSE by one ``ops.attention`` call per sequence, packed like the varlen op's."""
    lse_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    out, lse = torch.zeros_like(q), torch.zeros(q.shape[1], q.shape[0], dtype=lse_dtype, device=q.device)
    qs, ks = cu_q.tolist(), cu_k.tolist()
    for a, b, c, e in zip(qs, qs[1:], ks, ks[1:]):
        if b > a:
            o_i, lse_i = ops.attention(q[None, a:b], k[None, c:e], v[None, c:e], causal=causal, return_lse=True, **kw)
            out[a:b], lse[:, a:b] = o_i[0], lse_i[0]
    return out, lse


@pytest.mark.parametrize("causal", [False, True])
def test_one_packed_call_equals_a_call_per_sequence(causal):
    q, k, v, cu, _ = _packed(LENGTHS)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    o, lse = ops.attention_varlen(*leaves, cu, cu, 17, 17, causal=causal, return_lse=True, fallback="torch")
    assert o.shape == q.shape and lse.shape == (4, sum(LENGTHS)) and lse.dtype == torch.float64  # as q
    ref_leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    ref_o, ref_lse = _per_sequence(*ref_leaves, cu, cu, causal, fallback="torch")
    torch.testing.assert_close(o, ref_o)
    torch.testing.assert_close(lse, ref_lse)
    go, glse = torch.randn_like(o), torch.randn_like(lse)
    grads = torch.autograd.grad((o, lse), leaves, (go, glse))
    ref_grads = torch.autograd.grad((ref_o, ref_lse), ref_leaves, (go, glse))
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want)


def test_keys_of_other_lengths_than_the_queries_without_a_mask():
    q, k, v, cu_q, cu_k = _packed([3, 0, 6], k_lengths=[7, 2, 1])
    o = ops.attention_varlen(q, k, v, cu_q, cu_k, fallback="torch")
    torch.testing.assert_close(o, _per_sequence(q, k, v, cu_q, cu_k, False, fallback="torch")[0])
    sequence_1 = torch.softmax(q[:3].transpose(0, 1) @ k[:7].repeat_interleave(2, 1).permute(1, 2, 0) / 4, -1)
    torch.testing.assert_close(o[:3], (sequence_1 @ v[:7].repeat_interleave(2, 1).transpose(0, 1)).transpose(0, 1))


def test_gradcheck_through_the_packed_op():
    q, k, v, cu, _ = _packed([2, 3], h=2, hk=1, d=4, seed=1)
    assert torch.autograd.gradcheck(
        lambda q, k, v: ops.attention_varlen(q, k, v, cu, cu, causal=True, fallback="torch"),
        tuple(t.requires_grad_(True) for t in (q, k, v)))


@pytest.mark.parametrize("cu_q, error, match", [
    (torch.tensor([0, 5, 6]), TypeError, r"cu_seqlens_q must be a 1-d torch.int32 tensor .* got torch.int64"),
    ([0, 5, 32], TypeError, r"cu_seqlens_q must be a 1-d torch.int32 tensor .* got list"),
    (torch.tensor([1, 5, 32], dtype=torch.int32), ValueError, r"must start at 0, never decrease and end at the "
                                                              r"tensor's 32 rows, got \[1, 5, 32\]"),
    (torch.tensor([0, 9, 5, 32], dtype=torch.int32), ValueError, r"never decrease"),
    (torch.tensor([0, 5, 31], dtype=torch.int32), ValueError, r"end at the tensor's 32 rows"),
    (torch.tensor([0, 32], dtype=torch.int32), ValueError, r"must describe one batch, got 1 and 5 sequences"),
])
def test_each_cu_seqlens_rule_names_the_argument(cu_q, error, match):
    q, k, v, _, cu = _packed(LENGTHS)
    with pytest.raises(error, match=match):
        ops.attention_varlen(q, k, v, cu_q, cu, fallback="torch")


def test_a_tensor_on_another_device_is_refused_and_numpy_bounds_are_ints():
    import numpy as np

    q, k, v, cu, _ = _packed(LENGTHS)
    with pytest.raises(ValueError, match=r"cu_seqlens_q must be on q's device cpu, got meta"):
        ops.attention_varlen(q, k, v, cu.to("meta"), cu, fallback="torch")
    with pytest.raises(ValueError, match=r"k must be on q's device cpu, got meta"):
        ops.attention_varlen(q, k.to("meta"), v.to("meta"), cu, cu, fallback="torch")
    o = ops.attention_varlen(q, k, v, cu, cu, np.int64(17), np.int32(17), fallback="torch")
    torch.testing.assert_close(o, ops.attention_varlen(q, k, v, cu, cu, fallback="torch"))


def test_the_other_rules_name_their_argument():
    q, k, v, cu, _ = _packed(LENGTHS)
    with pytest.raises(ValueError, match=r"max_seqlen_q is 16, shorter than the longest sequence \(17 rows\)"):
        ops.attention_varlen(q, k, v, cu, cu, 16, fallback="torch")
    q2, k2, v2, cu_q, cu_k = _packed([3, 4], k_lengths=[4, 3])
    with pytest.raises(ValueError, match=r"causal attention needs each sequence's query and key lengths equal, "
                                         r"got 3 and 4 for sequence 0"):
        ops.attention_varlen(q2, k2, v2, cu_q, cu_k, causal=True, fallback="torch")
    with pytest.raises(ValueError, match=r"q must be 3-d \(total, heads, head_dim\)"):
        ops.attention_varlen(q[None], k, v, cu, cu, fallback="torch")
    with pytest.raises(ValueError, match=r"q's heads a multiple of k's"):
        ops.attention_varlen(q[:, :3], k, v, cu, cu, fallback="torch")


def test_opcheck_and_one_compiled_graph():
    q, k, v, cu, _ = _packed(LENGTHS, dtype=torch.float32)
    torch.library.opcheck(torch.ops.tvm_tirx.attention_varlen.default, (q, k, v, cu, cu, None, None, True, None,
                                                                        "torch"))
    fn = lambda q, k, v, cu: ops.attention_varlen(q, k, v, cu, cu, causal=True, fallback="torch") * 2  # noqa: E731
    explanation = torch._dynamo.explain(fn)(q, k, v, cu)
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0, explanation
    torch.testing.assert_close(torch.compile(fn, fullgraph=True)(q, k, v, cu), fn(q, k, v, cu))


class _VarlenStandIn:
    """The varlen kernel's stand-in: its contract computed per sequence by the torch blocks
    from its own arguments (packed q, k, v, o, LSE (heads, total), cu_seqlens, max_seqlen)."""

    def __init__(self, key):
        self.key, self.calls = key, []

    def __call__(self, q, k, v, o, lse, cu, max_seqlen):
        self.calls.append(max_seqlen)
        assert cu.dtype == torch.int32 and lse.shape == (q.shape[1], q.shape[0])
        bounds = cu.tolist()
        for a, b in zip(bounds, bounds[1:]):
            if b > a:
                lse[:, a:b] = attention_blocks.forward(q[None, a:b], k[None, a:b], v[None, a:b], o[None, a:b],
                                                       self.key.causal, self.key.scale, "bshd")[0]


@pytest.fixture
def varlen_route_on_an_h200(monkeypatch):
    """CPU tensors pass the device rules, the varlen route is on and its kernel is a
    :class:`_VarlenStandIn` (the batched kernel, if reached, fails the test)."""
    monkeypatch.setattr(attention_checks, "_check_device", lambda tensors: None)
    monkeypatch.setattr(attention_checks, "device_target", lambda op, device: "sm_90a")
    monkeypatch.setattr(varlen_kernels, "ROUTE", True)
    made = []
    monkeypatch.setattr(varlen_kernels, "_TABLE", varlen_kernels.KernelTable(
        lambda key: made.append(key) or _VarlenStandIn(key)))
    monkeypatch.setattr(attention_kernels, "_compile", lambda key: pytest.fail(f"a per-sequence launch: {key}"))
    attention_kernels.clear_kernels()
    yield made
    attention_kernels.clear_kernels()


@pytest.mark.parametrize("causal", [False, True])
def test_the_varlen_route_launches_one_kernel_with_the_packed_arguments(varlen_route_on_an_h200, causal):
    q, k, v, cu, _ = _packed(LENGTHS, d=64, dtype=torch.bfloat16)
    o, lse = ops.attention_varlen(q, k, v, cu, cu, causal=causal, return_lse=True)
    (key,) = varlen_route_on_an_h200
    assert (key.heads, key.kv_heads, key.head_dim, key.causal, key.plan.persistent) == (4, 2, 64, causal, False)
    assert varlen_kernels.cached_kernels()[key].calls == [17]  # max_seqlen: the longest sequence
    ref_o, ref_lse = _per_sequence(q.float(), k.float(), v.float(), cu, cu, causal, fallback="torch")
    torch.testing.assert_close(o.float(), ref_o, atol=2e-2, rtol=0)
    torch.testing.assert_close(lse, ref_lse, atol=1e-3, rtol=0)


def test_keys_packed_otherwise_take_a_launch_per_sequence(varlen_route_on_an_h200, monkeypatch):
    from tvm_tirx.ops import attention_ops

    q, k, v, cu_q, cu_k = _packed([3, 4], d=64, dtype=torch.bfloat16, k_lengths=[4, 3])
    launches = []

    def per_sequence(q, k, v, causal, scale, layout, fallback):
        launches.append((q.shape[1], k.shape[1]))
        return attention_ops._torch_attention(q, k, v, causal, scale, layout)

    monkeypatch.setattr(attention_varlen_ops, "_attention", per_sequence)
    ops.attention_varlen(q, k, v, cu_q, cu_k)
    assert launches == [(3, 4), (4, 3)] and varlen_route_on_an_h200 == []
    ops.attention_varlen(q, k, v, cu_q, cu_q[[0, 1, 2]])  # the same packing: one varlen launch
    assert len(launches) == 2 and len(varlen_route_on_an_h200) == 1


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
@pytest.mark.parametrize("route", [False, True], ids=["per-sequence", "varlen-kernel"])
@pytest.mark.parametrize("causal", [False, True])
def test_the_acceptance_lengths_in_one_call_on_gpu(torch_cuda, monkeypatch, causal, route):
    """Issue 42: a batch of lengths {1, 17, 128, 1000, 4097} in one call equals the
    per-sequence calls, and each sequence is within the forward's tolerance of float32;
    by a launch per sequence and by the varlen kernel."""
    monkeypatch.setattr(varlen_kernels, "ROUTE", route)
    varlen_kernels.clear_kernels()  # another test of this worker may have built one (2026-12-05 on the H200)
    lengths = [1, 17, 128, 1000, 4097]
    q, k, v, cu, _ = _packed(lengths, h=8, hk=2, d=128, dtype=torch.bfloat16, device="cuda", seed=3)
    o, lse = ops.attention_varlen(q, k, v, cu, cu, max(lengths), max(lengths), causal=causal, return_lse=True)
    assert len(varlen_kernels.cached_kernels()) == int(route)
    monkeypatch.setattr(varlen_kernels, "ROUTE", False)
    ref_o, ref_lse = _per_sequence(q, k, v, cu, cu, causal)
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_lse)
    qs = cu.tolist()
    for a, b in zip(qs, qs[1:]):
        qf, kf, vf = (t[a:b].float().transpose(0, 1) for t in (q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1)))
        s = qf @ kf.transpose(-1, -2) / math.sqrt(128)
        if causal:
            s = s.masked_fill(torch.ones_like(s[0], dtype=torch.bool).triu(1), float("-inf"))
        assert (o[a:b].float().transpose(0, 1) - torch.softmax(s, -1) @ vf).abs().max().item() <= 2e-2
        assert (lse[:, a:b] - torch.logsumexp(s, -1)).abs().max().item() <= 1e-3
