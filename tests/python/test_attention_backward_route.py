"""The route from the attention operator's backward to the backward kernel
(``ops/attention_backward_ops.py``, ``ops/attention_backward_kernels.py``).

CPU: a call the kernel takes gets its key and the kernel's arguments (``Dsum =
rowsum(dO * O) - dLSE``, a zeroed float32 dQ buffer), here computed by a stand-in that
implements the kernel's contract from its own inputs, so the gradients match the torch
backward only if the wrapper passes the right things; calls the kernel does not take go
to SDPA's backward (CUDA, 16-bit, no LSE gradient) or to the torch backward by blocks.  GPU (marker ``gpu``): the op's
gradients on the backward kernel against float32 autograd.
"""

import pytest

torch = pytest.importorskip("torch")

from tvm_tirx import ops, testing  # noqa: E402
from tvm_tirx.ops import attention_backward_kernels as kernels  # noqa: E402
from tvm_tirx.ops import attention_backward_ops, attention_blocks, attention_checks, attention_kernels  # noqa: E402
from tvm_tirx.kernels.attention_backward import wave_section  # noqa: E402
from tvm_tirx.ops.attention_backward_kernels import AttentionBackwardKey  # noqa: E402


@pytest.fixture
def route_on_an_h200(monkeypatch):
    """CPU tensors pass the device rules, the route is on, and compiling a kernel gives a
    :class:`_StandIn` (recorded in the returned list)."""
    monkeypatch.setattr(attention_checks, "_check_device", lambda tensors: None)
    monkeypatch.setattr(attention_checks, "device_target", lambda op, device: "sm_90a")
    monkeypatch.setattr(kernels, "ROUTE", True)
    made = []
    monkeypatch.setattr(kernels, "_compile", lambda key: made.append(key) or _StandIn(key))
    monkeypatch.setattr(kernels, "_compile_dsum", lambda key: _DsumStandIn())
    monkeypatch.setattr(attention_kernels, "_compile", lambda key: _Forward(key))
    kernels.clear_kernels()
    attention_kernels.clear_kernels()
    yield made
    kernels.clear_kernels()
    attention_kernels.clear_kernels()


class _Forward:
    """The forward kernel's stand-in: O and LSE by the torch blocks (float32)."""

    def __init__(self, key):
        self.key = key

    def launcher(self, *args):
        return self

    def __call__(self, q, k, v, o, lse):
        lse.copy_(attention_blocks.forward(q, k, v, o, self.key.causal, self.key.scale, "bshd"))


class _DsumStandIn:
    """make_dsum's contract (``zero_dq=True``): ``dsum (b, h, n) = rowsum(dO * O)`` in float32, from
    contiguous bshd dO and O, and dQ's float32 accumulator zeroed (it arrives uninitialised);
    checked and unchecked calls alike (a plan launches it unchecked after its first call)."""

    def launcher(self, *args):
        return self

    def __call__(self, do, o, dsum, dq_acc):
        assert do.is_contiguous() and o.is_contiguous() and dsum.dtype == torch.float32
        assert dq_acc.dtype == torch.float32 and dq_acc.shape == do.shape and dq_acc.is_contiguous()
        dsum.copy_((do.float() * o.float()).sum(-1).transpose(1, 2))
        dq_acc.zero_()


class _StandIn:
    """The kernel's contract computed in float32 from its own arguments (bshd tensors):
    ``P = exp(scale q.k - LSE)``, ``dS = P (dO.v - Dsum)``, ``dq_acc += scale dS K``,
    ``dK = scale dS^T Q``, ``dV = P^T dO`` summed over each K/V head's query heads."""

    def __init__(self, key):
        self.key, self.calls = key, 0

    def launcher(self, *args):  # the plan's unchecked launch (checks: the operator's own)
        return self

    def __call__(self, q, k, v, do, lse, dsum, dq_acc, dk, dv, *order):
        self.calls += 1
        assert all(t.is_contiguous() for t in (q, k, v, do, lse, dsum, dq_acc, dk, dv, *order))
        assert dq_acc.dtype == torch.float32 and not dq_acc.any()  # zeroed by the caller
        if self.key.deterministic:  # the counts of turns per query block, zeroed by the caller
            assert len(order) == 1 and order[0].dtype == torch.int32 and not order[0].any()
            assert tuple(order[0].shape) == (q.shape[0], q.shape[2], -(-q.shape[1] // 64))
        else:
            assert not order
        group = q.shape[2] // k.shape[2]
        qf, dof = (t.float().transpose(1, 2) for t in (q, do))  # (b, h, n, d)
        kf, vf = (t.float().transpose(1, 2).repeat_interleave(group, 1) for t in (k, v))
        s = qf @ kf.transpose(-1, -2) * self.key.scale
        if self.key.causal:
            s = s.masked_fill(torch.ones_like(s[0, 0], dtype=torch.bool).triu(1), float("-inf"))
        p = torch.exp(s - lse[..., None])
        ds = p * (dof @ vf.transpose(-1, -2) - dsum[..., None])
        dq_acc += (ds @ kf * self.key.scale).transpose(1, 2)
        unrepeat = lambda t: t.unflatten(1, (k.shape[2], group)).sum(2).transpose(1, 2)  # noqa: E731
        dk.copy_(unrepeat(ds.transpose(-1, -2) @ qf * self.key.scale))
        dv.copy_(unrepeat(p.transpose(-1, -2) @ dof))


def _qkv(b=2, n=40, h=4, hk=2, d=64, layout="bshd"):
    """bf16 q, k, v on the CPU (the GPU test moves them)."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(b, n, heads, d, generator=g).to(torch.bfloat16) for heads in (h, hk, hk))
    return tuple(t.transpose(1, 2) for t in (q, k, v)) if layout == "bhsd" else (q, k, v)


def _grads(q, k, v, causal, layout, with_lse):
    """The gradients of the op for a fixed loss."""
    leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
    o, lse = ops.attention(*leaves, causal=causal, layout=layout, return_lse=True, fallback="torch")
    loss = o.float().square().sum() + (lse.square().sum() if with_lse else 0)
    return torch.autograd.grad(loss, leaves)


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("causal, with_lse", [(False, False), (True, False), (True, True)])
def test_the_kernel_gets_what_its_contract_needs(route_on_an_h200, monkeypatch, layout, causal, with_lse):
    q, k, v = _qkv(layout=layout)
    got = _grads(q, k, v, causal, layout, with_lse)
    section = 2 if causal and kernels.SECTIONS else None  # longest first in sections of wave_section(2, 40) = 2
    assert route_on_an_h200 == [AttentionBackwardKey(4, 2, 64, causal, "bfloat16", 0.125, "sm_90a", False, section)]
    assert next(iter(kernels.cached_kernels().values())).calls == 1
    monkeypatch.setattr(kernels, "ROUTE", False)
    want = _grads(q, k, v, causal, layout, with_lse)
    for name, g, w, t in zip("qkv", got, want, (q, k, v)):
        assert g.shape == t.shape and g.dtype == t.dtype and g.stride() == t.stride(), name
        torch.testing.assert_close(g.float(), w.float(), atol=2e-2, rtol=2e-2, msg=lambda m, n=name: f"d{n}: {m}")


def test_calls_the_kernel_does_not_take_go_to_the_torch_backward(route_on_an_h200):
    _grads(*_qkv(d=256), True, "bshd", False)  # head_dim 256: not one of HEAD_DIMS
    _grads(*(t.float() for t in _qkv()), True, "bshd", False)  # float32: the forward's rules refuse it
    assert route_on_an_h200 == [] and kernels.cached_kernels() == {}
    assert attention_backward_ops.backward_key(*_qkv(d=256), True, 0.0625, "bshd") is None


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_a_causal_key_asks_for_the_longest_walks_first_in_sections_a_wave_wide(route_on_an_h200, monkeypatch,
                                                                               layout):
    monkeypatch.setattr(kernels, "SECTIONS", False)
    q, k, v = _qkv(layout=layout)
    assert attention_backward_ops.backward_key(q, k, v, True, 0.125, layout).section is None  # switched off
    monkeypatch.setattr(kernels, "SECTIONS", True)
    assert kernels.SECTION_HEAD_DIMS == (64, 128)
    for hk, n, section in ((2, 40, 2), (8, 2048, 8), (8, 4096, 4), (8, 16384, 1), (6, 2200, 6)):
        q, k, v = _qkv(b=1, n=n, h=hk * 2, hk=hk, d=128, layout=layout)
        key = attention_backward_ops.backward_key(q, k, v, True, 0.125, layout)
        assert key.section == section == wave_section(hk, n), (hk, n)
        assert kernels._name(key).endswith(f"_lpt{section}")
        full = attention_backward_ops.backward_key(q, k, v, False, 0.125, layout)
        assert full.section is None and "_lpt" not in kernels._name(full)
        torch.use_deterministic_algorithms(True)  # the deterministic kernel too, unless DETERMINISTIC_SECTIONS is off
        try:
            assert kernels.DETERMINISTIC_SECTIONS
            det = attention_backward_ops.backward_key(q, k, v, True, 0.125, layout)
            assert det.deterministic and det.section == section
            assert kernels._name(det).endswith(f"_lpt{section}_deterministic")
            monkeypatch.setattr(kernels, "DETERMINISTIC_SECTIONS", False)
            assert attention_backward_ops.backward_key(q, k, v, True, 0.125, layout).section is None
            monkeypatch.setattr(kernels, "DETERMINISTIC_SECTIONS", True)
        finally:
            torch.use_deterministic_algorithms(False)
    q, k, v = _qkv(b=1, n=2048, h=16, hk=8, d=64, layout=layout)
    assert attention_backward_ops.backward_key(q, k, v, True, 0.125, layout).section == 8
    monkeypatch.setattr(kernels, "SECTION_HEAD_DIMS", (128,))  # a head_dim not in it: the default order
    assert attention_backward_ops.backward_key(q, k, v, True, 0.125, layout).section is None
    # batch x sections past the grid's z axis (65535): the default order, whose z is the batch alone
    q, k, v = (torch.empty(472, 64, heads, 128, dtype=torch.bfloat16) for heads in (139, 139, 139))
    assert wave_section(139, 64) == 1 and attention_backward_ops.backward_key(q, k, v, True, 0.125, "bshd").section \
        is None
    q, k, v = (t[:471] for t in (q, k, v))
    assert attention_backward_ops.backward_key(q, k, v, True, 0.125, "bshd").section == 1
    # more than 65535 key blocks on the grid's y axis: the default order, whose key blocks are on x
    for n, section in ((65535 * 128, 1), (65535 * 128 + 1, None)):
        q, k, v = (torch.empty(1, n, 1, 128, dtype=torch.bfloat16, device="meta") for _ in range(3))
        assert attention_backward_ops.backward_key(q, k, v, True, 0.125, "bshd").section == section, n
    func = kernels.backward_prim_func(kernels.AttentionBackwardKey(8, 2, 64, True, "bfloat16", 0.125, "sm_90a",
                                                                   False, 1))
    assert func.attrs["global_symbol"].endswith("_lpt1")
    assert "T.cta_id([1, (L + 128 - 1) // 128, B * 2])" in func.script()  # one head per section, two per entry


def test_deterministic_algorithms_take_the_deterministic_kernel(route_on_an_h200):
    q, k, v = _qkv()
    assert not attention_backward_ops.backward_key(q, k, v, True, 0.125, "bshd").deterministic
    torch.use_deterministic_algorithms(True)
    try:
        assert attention_backward_ops.backward_key(q, k, v, True, 0.125, "bshd").deterministic
        first, again = _grads(q, k, v, True, "bshd", False), _grads(q, k, v, True, "bshd", False)
    finally:
        torch.use_deterministic_algorithms(False)
    assert route_on_an_h200 == [AttentionBackwardKey(4, 2, 64, True, "bfloat16", 0.125, "sm_90a", True, 2)]  # sections
    assert all(torch.equal(a, b) for a, b in zip(first, again))


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_what_the_kernel_refuses_sdpa_differentiates(route_on_an_h200, monkeypatch, layout, causal):
    # head_dim 256 (the kernel's refusal) with GQA: SDPA's backward, taken here on the CPU
    monkeypatch.setattr(attention_backward_ops, "SDPA_DEVICES", ("cpu",))
    taken = []
    real = attention_backward_ops._sdpa_grads
    monkeypatch.setattr(attention_backward_ops, "_sdpa_grads", lambda *a: taken.append(a[-1]) or real(*a))
    q, k, v = _qkv(n=33, d=256, layout=layout)
    assert attention_backward_ops.backward_path(q, k, v, causal, 0.0625, layout) == "sdpa"
    assert attention_backward_ops.backward_path(q, k, v, causal, 0.0625, layout, lse_grad=True) == "blocks"
    got = _grads(q, k, v, causal, layout, False)
    assert taken == [layout] and route_on_an_h200 == []
    _grads(q, k, v, causal, layout, True)  # the LSE's gradient: SDPA has none, the blocks do it
    assert taken == [layout]
    monkeypatch.setattr(attention_backward_ops, "SDPA_DEVICES", ())
    want = _grads(q, k, v, causal, layout, False)
    for name, g, w, t in zip("qkv", got, want, (q, k, v)):
        assert g.shape == t.shape and g.dtype == t.dtype and g.stride() == t.stride(), name
        torch.testing.assert_close(g.float(), w.float(), atol=3e-2, rtol=3e-2, msg=lambda m, n=name: f"d{n}: {m}")


def test_under_a_dispatch_mode_the_blocks_stand_in_for_sdpa(route_on_an_h200, monkeypatch):
    # torch.func.vjp inside an op fails under a TorchDispatchMode ("Cannot access storage of
    # TensorWrapper": FlopCounterMode, compiled autograd's tracing; found by a breaker helper)
    from torch.utils.flop_counter import FlopCounterMode

    monkeypatch.setattr(attention_backward_ops, "SDPA_DEVICES", ("cpu",))
    q, k, v = _qkv(n=9, d=256)
    with FlopCounterMode(display=False):
        assert attention_backward_ops.backward_path(q, k, v, True, 0.0625, "bshd") == "blocks"
        got = _grads(q, k, v, True, "bshd", False)
    monkeypatch.setattr(attention_backward_ops, "SDPA_DEVICES", ())
    for g, w in zip(got, _grads(q, k, v, True, "bshd", False)):
        assert torch.equal(g, w)


@pytest.mark.parametrize("varlen", [False, True], ids=["attention", "attention_varlen"])
def test_double_backward_is_refused_by_name(varlen):
    q, k, v = (t.float().requires_grad_(True) for t in _qkv(b=1, n=5, h=2, hk=2, d=8))
    if varlen:
        cu = torch.tensor([0, 2, 5], dtype=torch.int32)
        o = ops.attention_varlen(q[0], k[0], v[0], cu, cu, fallback="torch")
    else:
        o = ops.attention(q, k, v, fallback="torch")
    (dq,) = torch.autograd.grad(o.square().sum(), q, create_graph=True)
    name = "attention_varlen" if varlen else "attention"
    with pytest.raises(RuntimeError, match=rf"tvm_tirx.ops.{name}: the gradients of its gradients are not computed"):
        torch.autograd.grad(dq.sum(), (q, k))


def test_sdpa_takes_no_float32_float64_or_odd_head_dim(route_on_an_h200, monkeypatch):
    monkeypatch.setattr(attention_backward_ops, "SDPA_DEVICES", ("cpu",))
    q, k, v = _qkv(d=256)
    for dtype in (torch.float32, torch.float64):
        assert attention_backward_ops.backward_path(q.to(dtype), k.to(dtype), v.to(dtype), True, 0.1, "bshd") == "blocks"
    q, k, v = _qkv(d=260)
    assert attention_backward_ops.backward_path(q, k, v, True, 0.1, "bshd") == "blocks"
    torch.use_deterministic_algorithms(True)
    try:
        assert attention_backward_ops.backward_path(*_qkv(d=256), True, 0.1, "bshd") == "blocks"
    finally:
        torch.use_deterministic_algorithms(False)


def test_the_kernel_name_says_what_it_computes():
    key = AttentionBackwardKey(32, 8, 128, True, "bfloat16", 128 ** -0.5, "sm_90a")
    assert kernels._name(key) == "tvm_tirx_attention_backward_h32_kv8_d128_causal_bf16"
    assert kernels._name(AttentionBackwardKey(4, 4, 64, False, "float16", 0.5, "sm_90a")) == \
        "tvm_tirx_attention_backward_h4_kv4_d64_full_f16_s3f000000"


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_op_on_the_backward_kernel_on_gpu(torch_cuda, monkeypatch, layout, causal):
    """``ops.attention``'s gradients with the route on (the forward and the backward
    kernel, both with a run-time length), against float32 autograd of the whole score
    matrix, the LSE's gradient included; then the same with the route off."""
    torch = torch_cuda
    monkeypatch.setattr(kernels, "ROUTE", True)
    for n, d in ((1000, 128), (77, 64)):
        q, k, v = (t.to("cuda") for t in _qkv(b=2, n=n, h=8, hk=2, d=d, layout=layout))
        leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
        o, lse = ops.attention(*leaves, causal=causal, layout=layout, return_lse=True)
        go, glse = torch.randn_like(o), torch.randn_like(lse)
        got = torch.autograd.grad((o, lse), leaves, (go, glse))
        ref_leaves = [t.detach().float().requires_grad_(True) for t in (q, k, v)]
        qh, kh, vh = (t if layout == "bhsd" else t.transpose(1, 2) for t in ref_leaves)
        kh, vh = kh.repeat_interleave(4, 1), vh.repeat_interleave(4, 1)
        s = qh @ kh.transpose(-1, -2) * d ** -0.5
        if causal:
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
        ref_o = torch.softmax(s, -1) @ vh
        ref_o = ref_o if layout == "bhsd" else ref_o.transpose(1, 2)
        want = torch.autograd.grad((ref_o, torch.logsumexp(s, -1)), ref_leaves, (go.float(), glse))
        assert len(kernels.cached_kernels()) >= 1
        for name, g, w in zip("qkv", got, want):
            err = ((g.float() - w).abs().max() / w.abs().max()).item()
            assert err <= 3e-2, (n, d, name, err)


@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_operators_kernel_takes_the_measured_plan(head_dim):
    import tvm_ffi
    from tvm.script import tirx as T

    from tvm_tirx.kernels.attention_backward import DETERMINISTIC_PLANS, PLANS, make_attention_backward

    key = AttentionBackwardKey(8, 2, head_dim, True, "bfloat16", head_dim ** -0.5, "sm_90a")
    planned = make_attention_backward(T.dynamic("B"), T.dynamic("L"), 8, head_dim, kv_heads=2, causal=True,
                                      scale=key.scale, **PLANS[head_dim])
    default = make_attention_backward(T.dynamic("B"), T.dynamic("L"), 8, head_dim, kv_heads=2, causal=True,
                                      scale=key.scale)
    made = kernels.backward_prim_func(key)
    assert PLANS[head_dim]["dq_split"] == {64: "rows", 128: "columns"}[head_dim]
    assert tvm_ffi.structural_equal(made.body, planned.body, map_free_vars=True)
    assert not tvm_ffi.structural_equal(made.body, default.body, map_free_vars=True)
    # the deterministic kernel: "rows" has no deterministic form, so head_dim 64 takes DETERMINISTIC_PLANS
    deterministic = AttentionBackwardKey(8, 2, head_dim, True, "bfloat16", head_dim ** -0.5, "sm_90a", True)
    want = DETERMINISTIC_PLANS.get(head_dim, PLANS[head_dim])
    assert kernels.plan(deterministic) == want and want["dq_split"] == "columns"
    made = kernels.backward_prim_func(deterministic)
    planned = make_attention_backward(T.dynamic("B"), T.dynamic("L"), 8, head_dim, kv_heads=2, causal=True,
                                      scale=key.scale, deterministic=True, **want)
    assert tvm_ffi.structural_equal(made.body, planned.body, map_free_vars=True)


def test_a_backward_signature_is_planned_once_and_called_without_the_dispatcher(route_on_an_h200, monkeypatch):
    from tvm_tirx.ops import eager

    monkeypatch.setattr(eager, "_on_device", lambda t: True)  # the fast path serves these CPU tensors
    routes, dispatched = [], []
    real_route, real_op = attention_backward_ops._route, attention_backward_ops._BACKWARD_CALL.op
    monkeypatch.setattr(attention_backward_ops, "_route", lambda *a: routes.append(a[-1]) or real_route(*a))
    monkeypatch.setattr(attention_backward_ops._BACKWARD_CALL, "op", lambda *a: dispatched.append(1) or real_op(*a))
    q, k, v = _qkv()
    first, again = _grads(q, k, v, True, "bshd", False), _grads(q, k, v, True, "bshd", False)
    (kernel,) = kernels.cached_kernels().values()
    assert len(routes) == 1 and kernel.calls == 2 and dispatched == []  # one plan, two launches, direct
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    _grads(*_qkv(n=41), True, "bshd", False)  # another length: another signature, another plan
    assert len(routes) == 2 and len(attention_backward_ops.PLANS) == 2
    leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
    o = ops.attention(*leaves, causal=True, fallback="torch")
    (dq,) = torch.autograd.grad(o.float().square().sum(), leaves[0], create_graph=True)  # grad mode on
    assert dispatched == [1]  # the registered op, whose autograd refuses a double backward
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(dq.float().sum(), leaves[0])
    kernels.clear_kernels()
    assert len(attention_backward_ops.PLANS) == 0


def test_a_plan_is_remade_when_a_switch_of_the_route_changes(route_on_an_h200, monkeypatch):
    # the plan key holds every switch _route reads besides the tensors: turning one flips the path
    q, k, v = _qkv(n=33, d=256)
    taken = []
    real = attention_backward_ops._sdpa_grads
    monkeypatch.setattr(attention_backward_ops, "_sdpa_grads", lambda *a: taken.append(1) or real(*a))
    for devices, calls in ((("cpu",), [1]), ((), [1]), (("cpu",), [1, 1])):
        monkeypatch.setattr(attention_backward_ops, "SDPA_DEVICES", devices)
        _grads(q, k, v, True, "bshd", False)
        assert taken == calls, devices
    monkeypatch.setattr(kernels, "ROUTE", False)
    _grads(*_qkv(d=128), True, "bshd", False)
    monkeypatch.setattr(kernels, "ROUTE", True)
    _grads(*_qkv(d=128), True, "bshd", False)
    assert [(key.head_dim, key.section) for key in route_on_an_h200] == [(128, 2 if kernels.SECTIONS else None)]
    monkeypatch.setattr(kernels, "SECTIONS", not kernels.SECTIONS)  # the sections' switch: the other kernel
    _grads(*_qkv(d=128), True, "bshd", False)
    assert [key.section for key in route_on_an_h200] == ([2, None] if not kernels.SECTIONS else [None, 2])
