"""The torch operators' eager fast path and launch plans (tvm_tirx.ops.eager, gemm_plans).

CPU: when a call may skip torch's dispatcher (``eager.direct``, ``eager.path``); the fast
path skips it and gives the dispatcher path's results and errors (CPU tensors let through,
the compile and the launch replaced by stand-ins); a plan is reused for a signature and only
for it (storage, shape, strides, alignment); a call that needs a gradient runs under a
``torch.autograd.Function`` with the op's own formula and gets the registered op's
gradients, bit for bit.  GPU: the same on the H200, bit for bit, and the ops inside a
CUDA graph capture and ``torch.compile(mode="reduce-overhead")``.
"""

import pytest

torch = pytest.importorskip("torch")

from tvm_tirx import ops, testing  # noqa: E402
from tvm_tirx.ops import (attention_ops, eager, gemm_kernels, gemm_plans, glu_ops, linear_route,  # noqa: E402
                          torch_checks, torch_ops)
from tvm_tirx.ops.torch_checks import UnsupportedInput  # noqa: E402

BF16, F32 = torch.bfloat16, torch.float32


def _bf16(*shape, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(BF16).to(device)


# -- when the dispatcher is skipped ----------------------------------------------------------

def test_cpu_and_meta_tensors_take_the_dispatcher():
    assert not eager.direct(torch.zeros(2))
    assert not eager.direct(torch.zeros(2, device="meta"))


@pytest.fixture
def cpu_is_served(monkeypatch):
    """CPU tensors pass the fast path's device rule (the other rules run on them)."""
    monkeypatch.setattr(eager, "_on_device", lambda t: True)


def test_direct_needs_plain_tensors_without_grad_modes_or_transforms(cpu_is_served):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    x = torch.zeros(2)
    assert eager.direct(x, None)
    assert not eager.direct(x, torch.zeros(2, requires_grad=True))  # autograd records the op
    with torch.no_grad():
        assert eager.direct(torch.zeros(2, requires_grad=True))
    with FakeTensorMode() as mode:
        assert not eager.direct(mode.from_tensor(x))
    with TorchDispatchMode():
        assert not eager.direct(x)
    with TorchFunctionMode():
        assert not eager.direct(x)
    seen = []
    torch.vmap(lambda row: seen.append(eager.direct(row)) or row)(torch.zeros(3, 2))
    assert seen == [False]
    compiled = torch.compile(lambda t: t + 1 if eager.direct(t) else t - 1, backend="eager", fullgraph=True)
    assert torch.equal(compiled(x), x - 1)  # traced: the registered op is what the graph calls


class _StandIn:
    """A compiled GEMM's stand-in: computes C with torch from the tensors of each launch."""

    def __init__(self, key):
        self.key, self.checked, self.launches = key, 0, 0

    def launcher(self, *args):
        self.checked += 1
        return self

    def __call__(self, a, b, *rest):
        *extra, c = rest
        self.launches += 1
        if isinstance(self.key, gemm_kernels.SmallMSpec):  # extra: the workspaces (Partial, Counters), or none
            c.copy_(a.float() @ b.float().t())
            return
        x = a if self.key.a_major == "k" else a.t()
        w = b if self.key.b_major == "k" else b.t()
        c.copy_(x.float() @ w.float().t() + sum(t.float() for t in extra))


@pytest.fixture
def fast(cpu_is_served, monkeypatch):
    """The fast path on CPU tensors: device rules passed, stand-in kernels; yields the list
    of calls that went through torch's dispatcher instead."""
    monkeypatch.setattr(torch_checks, "_check_device", lambda names, x, w: None)
    monkeypatch.setattr(torch_checks, "device_target", lambda op, device: "sm_90a")
    monkeypatch.setattr(gemm_kernels, "_compile", _StandIn)
    dispatched = []  # the registered operators' implementation records its calls
    monkeypatch.setattr(torch_ops, "run_gemm", lambda names, *args: dispatched.append(names.op) or
                        gemm_plans.run_gemm(names, *args))
    gemm_kernels.clear_kernels()
    yield dispatched
    gemm_kernels.clear_kernels()


def _calls():
    x, w, r = _bf16(5, 32), _bf16(24, 32, seed=1), _bf16(5, 24, seed=2)
    bias = _bf16(24, seed=3).float()
    return [
        ("linear", lambda: ops.linear(x, w), lambda: torch.ops.tvm_tirx.linear(x, w, None, None)),
        ("bias", lambda: ops.linear(x, w, bias), lambda: torch.ops.tvm_tirx.linear_bias(x, w, bias, None, None)),
        ("residual", lambda: ops.linear(x, w, residual=r, out_dtype=BF16),
         lambda: torch.ops.tvm_tirx.linear_residual(x, w, None, r, BF16, None)),
        ("matmul", lambda: ops.matmul(x, w.t(), out_dtype=F32), lambda: torch.ops.tvm_tirx.matmul(x, w.t(), F32, None)),
    ]


@pytest.mark.parametrize("name", ["linear", "bias", "residual", "matmul"])
def test_the_fast_path_skips_the_dispatcher_and_gives_its_result(fast, name):
    _, ours, dispatched = next(c for c in _calls() if c[0] == name)
    y = ours()
    assert fast == []  # no call went through torch's dispatcher
    assert torch.equal(y, dispatched())
    assert len(fast) == 1  # the registered operator's implementation ran for the second


def test_broadcast_bias_and_residual_take_the_fast_path_with_torchs_add(fast):
    x, w = _bf16(5, 32), _bf16(24, 32, seed=1)
    bias, residual = _bf16(1, seed=2), _bf16(1, 24, seed=3)
    y = ops.linear(x, w, bias, residual=residual)
    assert fast == []
    x.requires_grad_(True)  # the dispatcher's path, for the reference
    assert torch.equal(y, ops.linear(x, w, bias, residual=residual).detach())
    assert fast == [torch_ops.LINEAR.op]
    with pytest.raises(ValueError, match=r"bias of shape \(3,\) does not broadcast"):
        ops.linear(x.detach(), w, _bf16(3))


_BAD = [
    (lambda x, w: (x.float(), w), {}),  # x float32: UnsupportedInput
    (lambda x, w: (x, w[:, :16]), {}),  # k differs: ValueError
    (lambda x, w: (x.int(), w), {}),  # not floating: TypeError
    (lambda x, w: (x, w), {"fallback": "cuda"}),  # ValueError
    (lambda x, w: (x, w), {"out_dtype": torch.float16}),  # UnsupportedInput
    (lambda x, w: (x, w), {"out_dtype": "bfloat16"}),  # the schema's error (dispatcher on both paths)
    (lambda x, w: (torch.zeros(5 * 32 + 1, dtype=BF16)[1:].view(5, 32), w), {}),  # 2 bytes past 16
]


@pytest.mark.parametrize("bad", range(len(_BAD)))
def test_the_fast_path_raises_the_dispatchers_errors(fast, bad):
    make, kwargs = _BAD[bad]
    x, w = make(_bf16(5, 32), _bf16(24, 32, seed=1))
    errors = []
    for call in (lambda: ops.linear(x, w, **kwargs),
                 lambda: torch.ops.tvm_tirx.linear(x, w, kwargs.get("out_dtype"), kwargs.get("fallback"))):
        with pytest.raises(Exception) as info:
            call()
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


def test_a_plan_serves_its_signature_and_only_it(fast):
    w = _bf16(24, 32, seed=1)
    ops.linear(_bf16(5, 32), w, out_dtype=F32)
    (kernel,) = gemm_kernels.cached_kernels().values()
    assert (len(gemm_plans.PLANS), kernel.checked, kernel.launches) == (1, 1, 1)
    for seed in (3, 4):  # new storage, same signature: the plan (no new checks), the new data read
        x = _bf16(5, 32, seed=seed)
        torch.testing.assert_close(ops.linear(x, w, out_dtype=F32), x.float() @ w.float().t())
    assert (len(gemm_plans.PLANS), kernel.checked, kernel.launches) == (1, 1, 3)
    # another shape, strides or base-pointer alignment: another signature, checked again
    ops.linear(_bf16(6, 32), w, out_dtype=F32)
    assert (len(gemm_plans.PLANS), kernel.checked) == (2, 2)
    x = _bf16(32, 8).t()  # (8, 32), column-major: read M-major
    torch.testing.assert_close(ops.linear(x, w, out_dtype=F32), x.float() @ w.float().t())
    assert len(gemm_plans.PLANS) == 3 and any(getattr(key, "a_major", "k") == "m" for key in gemm_kernels.cached_kernels())
    shifted = torch.zeros(5 * 32 + 1, dtype=BF16)[1:].view(5, 32)  # the first plan's shape and strides
    with pytest.raises(UnsupportedInput, match="16-byte aligned"):
        ops.linear(shifted, w, out_dtype=F32)
    gemm_kernels.clear_kernels()
    assert len(gemm_plans.PLANS) == 0  # forgotten with the kernels


def test_a_plan_keeps_no_tensor(fast):
    w = _bf16(24, 32, seed=1)
    x = _bf16(5, 32)
    ops.linear(x, w)
    del x  # its memory may be handed to the next tensor of the same size
    y = _bf16(5, 32, seed=9)
    torch.testing.assert_close(ops.linear(y, w, out_dtype=F32), y.float() @ w.float().t())


# -- GPU -------------------------------------------------------------------------------------

def _gpu_calls(torch):
    x, w, w_up = (_bf16(*s, seed=i, device="cuda") for i, s in enumerate([(100, 512), (1024, 512), (1024, 512)]))
    bias, r = _bf16(1024, seed=4, device="cuda"), _bf16(100, 1024, seed=5, device="cuda")
    q, k, v = (_bf16(2, 300, 8, 128, seed=6 + i, device="cuda") for i in range(3))
    return [
        lambda: ops.linear(x, w), lambda: ops.linear(x, w, bias), lambda: ops.linear(x, w, residual=r),
        lambda: ops.matmul(x, w.t(), out_dtype=F32), lambda: ops.glu_linear(x, w, w_up),
        lambda: ops.attention(q, k, v, causal=True),
        lambda: ops.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), layout="bhsd"),
    ], (x, w, w_up, bias, r, q, k, v)


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
def test_the_fast_path_matches_the_dispatcher_on_gpu(torch_cuda):
    calls, tensors = _gpu_calls(torch)
    fast = [f() for f in calls]
    for t in tensors:
        t.requires_grad_(True)  # now every call goes through torch's dispatcher and autograd
    for i, (f, want) in enumerate(zip(calls, fast)):
        got = f()
        assert got.requires_grad and torch.equal(got.detach(), want), i


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
def test_the_ops_replay_in_a_cuda_graph(torch_cuda):
    calls, tensors = _gpu_calls(torch)
    want = [f() for f in calls]  # plans and kernels made outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = [f() for f in calls]
    x, _, _, bias, r, q, k, v = tensors
    for t in (x, bias, r, q, k, v):  # new activations (weights kept: glu's interleaved copy is captured)
        t.mul_(0.5)
    graph.replay()
    torch.cuda.synchronize()
    for i, (got, ref) in enumerate(zip(outs, [f() for f in calls])):
        assert torch.equal(got, ref) and not torch.equal(got, want[i]), i


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
def test_reduce_overhead_compile_runs_the_ops(torch_cuda):
    torch._dynamo.reset()
    w1, w2 = _bf16(1024, 512, device="cuda"), _bf16(512, 1024, seed=1, device="cuda")
    block = lambda x: ops.linear(torch.nn.functional.silu(ops.linear(x, w1)), w2)  # noqa: E731
    compiled = torch.compile(block, mode="reduce-overhead", fullgraph=True)
    for seed in range(4):
        x = _bf16(64, 512, seed=seed, device="cuda")
        # close, not equal: a split-K kernel (the small-M route) adds its fp32 partial sums
        # in the order the CTAs finish, so two runs may differ in the last bf16 bit
        torch.testing.assert_close(compiled(x), block(x), rtol=1e-2, atol=1e-2, msg=f"seed {seed}")


def test_a_residual_that_does_not_broadcast_names_the_op(fast):
    x, w = _bf16(5, 32), _bf16(24, 32, seed=1)
    with pytest.raises(ValueError, match=r"tvm_tirx.ops.linear: residual must have the output's shape \(5, 24\) "
                                         r".* or broadcast with it .*, got \(5, 23\)"):
        ops.linear(x, w, residual=_bf16(5, 23))
    torch.testing.assert_close(ops.linear(x, w, residual=_bf16(1, 24, seed=2), out_dtype=F32),  # broadcasts
                               x.float() @ w.float().t() + _bf16(1, 24, seed=2).float(), atol=0.1, rtol=0.02)


# -- calls that need a gradient: a torch.autograd.Function with the op's formula -------------

def test_a_call_that_needs_a_gradient_takes_the_autograd_path(cpu_is_served):
    x = torch.zeros(2, requires_grad=True)
    assert eager.path(x, None) == eager.AUTOGRAD and not eager.direct(x)
    assert eager.path(torch.zeros(2), None) == eager.IMPL
    with torch.no_grad():
        assert eager.path(x) == eager.IMPL
    seen = []
    torch.vmap(lambda row: seen.append(eager.path(row)) or row)(torch.zeros(3, 2, requires_grad=True))
    assert seen == [eager.DISPATCHER]  # a functorch transform: the registered op, whatever the grad


def _recorded(monkeypatch, call):
    """The calls of ``call``'s registered op (``FastOp.op``), recorded and forwarded."""
    seen, real = [], call.op
    monkeypatch.setattr(call, "op", lambda *a: seen.append(1) or real(*a))
    return seen


_GRAD_OPS = {  # name: (FastOp, the public call on three (1, 6, 2, 8) leaves, the registered op's call)
    "linear": (lambda: linear_route.REGISTERED.linear_residual,
               lambda x, w, u: (ops.linear(x[0, :, 0], w[0, :, 0], u[0, :, 0, 0], residual=u[0, :, 1, :6],
                                           fallback="torch"),),
               lambda x, w, u: (torch.ops.tvm_tirx.linear_residual(x[0, :, 0], w[0, :, 0], u[0, :, 0, 0],
                                                                   u[0, :, 1, :6], None, "torch"),)),
    "matmul": (lambda: linear_route.REGISTERED.matmul,
               lambda x, w, u: (ops.matmul(x[0, :, 0], w[0, :, 0].t(), fallback="torch"),),
               lambda x, w, u: (torch.ops.tvm_tirx.matmul(x[0, :, 0], w[0, :, 0].t(), None, "torch"),)),
    "attention": (lambda: attention_ops._ATTENTION_CALL,
                  lambda q, k, v: ops.attention(q, k, v, causal=True, return_lse=True, fallback="torch"),
                  lambda q, k, v: torch.ops.tvm_tirx.attention(q, k, v, True, None, "bshd", "torch")),
    "glu_linear": (lambda: glu_ops._GLU_CALL,
                   lambda x, w, u: (ops.glu_linear(x[0, :, 0], w[0, :, 0], u[0, :, 0], fallback="torch"),),
                   lambda x, w, u: (torch.ops.tvm_tirx.glu_linear(x[0, :, 0], w[0, :, 0], u[0, :, 0], "silu", None,
                                                                  "torch"),)),
}


@pytest.mark.parametrize("name", list(_GRAD_OPS))
def test_the_autograd_path_gives_the_registered_ops_gradients_without_it(cpu_is_served, monkeypatch, name):
    call, ours, registered = _GRAD_OPS[name]
    seen = _recorded(monkeypatch, call())
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(1, 6, 2, 8, generator=g) for _ in range(3)]
    grads = []
    for fn in (ours, registered):
        leaves = [t.clone().requires_grad_(True) for t in inputs]
        outputs = fn(*leaves)
        loss = sum((out.float() * torch.linspace(-1, 1, out.numel()).view(out.shape)).sum() for out in outputs)
        grads.append(torch.autograd.grad(loss, leaves, allow_unused=True))  # matmul leaves u out
        if fn is ours:
            assert seen == [] and type(outputs[0].grad_fn).__name__.endswith("_functionBackward")
    assert grads[0][0] is not None
    for mine, theirs in zip(*grads):
        assert (mine is None and theirs is None) or torch.equal(mine, theirs)


def test_the_autograd_path_keeps_the_ops_rules_for_unused_outputs_and_double_backward(cpu_is_served, monkeypatch):
    seen = _recorded(monkeypatch, attention_ops._ATTENTION_CALL)
    leaves = [torch.randn(1, 5, 2, 8).requires_grad_(True) for _ in range(3)]
    o, lse = ops.attention(*leaves, return_lse=True, fallback="torch")
    dq, dk, dv = torch.autograd.grad(lse.sum(), leaves, allow_unused=True)  # O unused: no grad materialized
    assert dv is None or torch.count_nonzero(dv) == 0
    assert dq is not None and torch.count_nonzero(dq) > 0
    o = ops.attention(*leaves, fallback="torch")
    (dq,) = torch.autograd.grad(o.square().sum(), leaves[0], create_graph=True)
    with pytest.raises(RuntimeError, match=r"tvm_tirx.ops.attention: the gradients of its gradients are not computed"):
        torch.autograd.grad(dq.sum(), leaves[:2])
    assert seen == []  # every forward took the autograd path
