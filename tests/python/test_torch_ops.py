"""The torch operators ``tvm_tirx.ops.linear`` / ``matmul`` (``torch.ops.tvm_tirx.*``).

CPU: the ops trace under ``torch.compile(fullgraph=True)`` without a graph break (fake and
meta tensors, several M, one graph for every M); their fake outputs' shapes and dtypes;
``torch.library.opcheck``; the errors for inputs the kernel does not take; the torch
fallback and the dtypes it refuses as torch does; the autograd formula (gradients against
F.linear / torch.matmul, gradcheck, opcheck, and the docs' MLP trained under
torch.compile(fullgraph=True, dynamic=True)); the int32 element bound; the kernel table
(one compiled kernel per n, k, dtypes, arch, for every M), with the compile and the launch replaced by stand-ins.
GPU (marker ``gpu``): the results against an fp32 torch product for M = 1, 127, 1000, 4096
from one compiled kernel, eager and under ``torch.compile``.
"""

import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from tvm_tirx import ops, testing  # noqa: E402
from tvm_tirx.kernels.gemm import choose_tile  # noqa: E402
from tvm_tirx.kernels.gemm import planner  # noqa: E402
from tvm_tirx.ops import gemm_kernels, torch_checks  # noqa: E402
from tvm_tirx.ops.torch_checks import UnsupportedInput  # noqa: E402

BF16, F32 = torch.bfloat16, torch.float32
MS = (1, 127, 1000, 4096)


def _inputs(m, n=24, k=16, lead=(), dtype=BF16, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*lead, m, k, generator=g).to(dtype).to(device)
    w = torch.randn(n, k, generator=g).to(dtype).to(device)
    return x, w


def _ref(x, w):
    return x.float() @ w.float().t()


# -- import ---------------------------------------------------------------------------------

def test_importing_tvm_tirx_ops_needs_no_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import tvm_tirx.ops\n"
            "assert 'tvm_tirx.ops.torch_ops' not in sys.modules\n"
            "try:\n    tvm_tirx.ops.linear\nexcept ImportError:\n    print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_the_ops_are_registered():
    assert ops.linear.__module__ == "tvm_tirx.ops.torch_ops"  # the first use imports it: that registers them
    assert str(torch.ops.tvm_tirx.linear.default._schema) == (
        "tvm_tirx::linear(Tensor x, Tensor weight, ScalarType? out_dtype, str? fallback) -> Tensor")
    assert str(torch.ops.tvm_tirx.matmul.default._schema) == (
        "tvm_tirx::matmul(Tensor a, Tensor b, ScalarType? out_dtype, str? fallback) -> Tensor")


# -- fake / meta ----------------------------------------------------------------------------

@pytest.mark.parametrize("m", MS)
@pytest.mark.parametrize("out_dtype", [None, BF16, F32])
def test_fake_outputs_have_the_product_shape_and_dtype(m, out_dtype):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(m, 4096, dtype=BF16, device="cuda")
        w = torch.empty(1024, 4096, dtype=BF16, device="cuda")
        y = ops.linear(x, w, out_dtype=out_dtype)
        z = ops.matmul(x.view(1, m, 4096), w.t(), out_dtype=out_dtype)
    assert y.shape == (m, 1024) and y.dtype == (out_dtype or BF16) and y.device.type == "cuda"
    assert z.shape == (1, m, 1024) and z.dtype == (out_dtype or BF16)


@pytest.mark.parametrize("lead", [(), (3,), (2, 5)])
def test_meta_tensors_give_the_output_shape(lead):
    x = torch.empty(*lead, 7, 64, dtype=BF16, device="meta")
    w = torch.empty(40, 64, dtype=BF16, device="meta")
    assert ops.linear(x, w, out_dtype=F32).shape == (*lead, 7, 40)
    assert ops.linear(x[..., 0, :], w).shape == (*lead, 40)
    assert ops.matmul(x, w.t()).shape == (*lead, 7, 40)


def test_fake_impl_refuses_shapes_that_do_not_multiply():
    x = torch.empty(7, 64, dtype=BF16, device="meta")
    with pytest.raises(ValueError, match=r"x \(\*, k\) and weight \(n, k\) must have the same k"):
        ops.linear(x, torch.empty(40, 32, dtype=BF16, device="meta"))
    with pytest.raises(ValueError, match="b must be 2-d"):
        ops.matmul(x, torch.empty(64, dtype=BF16, device="meta"))
    with pytest.raises(ValueError, match=r"a \(\*, k\) and b \(k, n\) must have the same k, got a \(7, 64\) "
                                         r"and b \(40, 64\)"):
        ops.matmul(x, torch.empty(40, 64, dtype=BF16, device="meta"))


# -- torch.compile ----------------------------------------------------------------------------

class _Block(torch.nn.Module):
    def __init__(self, k=64, n=48, fallback=None):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(n, k).to(BF16), requires_grad=False)
        self.w2 = torch.nn.Parameter(torch.randn(k, n).to(BF16), requires_grad=False)
        self.fallback = fallback

    def forward(self, x):
        h = torch.nn.functional.silu(ops.linear(x, self.w1, out_dtype=F32, fallback=self.fallback))
        return ops.matmul(h.to(BF16), self.w2.t(), fallback=self.fallback)


def test_explain_finds_one_graph_and_no_break():
    block = _Block(fallback="torch")
    explanation = torch._dynamo.explain(block)(torch.randn(5, 64).to(BF16))
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0, explanation
    code = explanation.graphs[0].code
    assert "tvm_tirx.linear" in code and "tvm_tirx.matmul" in code


def test_explain_on_meta_tensors_without_fallback():
    block = _Block().to("meta")
    explanation = torch._dynamo.explain(block)(torch.empty(300, 64, dtype=BF16, device="meta"))
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0, explanation


def test_fullgraph_dynamic_compile_traces_one_graph_for_every_m():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    block = _Block(fallback="torch")
    compiled = torch.compile(block, fullgraph=True, backend=backend, dynamic=True)
    for m in (127, 1000, 4096, 1):
        x = torch.randn(m, 64).to(BF16)
        y = compiled(x)
        assert y.shape == (m, 64) and y.dtype == BF16
        torch.testing.assert_close(y, block(x))
        # one graph with a symbolic M serves every M > 1; torch specializes a size of 1
        assert len(graphs) == (1 if m > 1 else 2)
    targets = {str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"}
    assert {"tvm_tirx.linear", "tvm_tirx.matmul"} <= targets, targets


def test_fullgraph_compile_of_cuda_fake_tensors_with_aot():
    import torch._dynamo.testing  # pylint: disable=import-outside-toplevel  (not imported by torch itself)
    from torch._subclasses.fake_tensor import FakeTensorMode

    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    fn = torch.compile(lambda x, w: ops.linear(x, w, torch.zeros(w.shape[0], device=w.device), out_dtype=F32),
                       fullgraph=True, backend=counter)
    with FakeTensorMode(allow_non_fake_inputs=True):
        y = fn(torch.empty(33, 4096, dtype=BF16, device="cuda"), torch.empty(512, 4096, dtype=BF16, device="cuda"))
    assert y.shape == (33, 512) and y.dtype == F32 and y.device.type == "cuda"
    assert counter.frame_count == 1


def test_compiled_fallback_on_cpu_matches_eager_with_inductor():
    torch._dynamo.reset()
    block = _Block(fallback="torch")
    x = torch.randn(9, 64).to(BF16)
    y = torch.compile(block, fullgraph=True)(x)
    torch.testing.assert_close(y, block(x))


# -- opcheck -----------------------------------------------------------------------------------

@pytest.mark.parametrize("out_dtype", [None, F32])
@pytest.mark.parametrize("lead", [(), (2,)])
def test_opcheck_with_the_torch_fallback(out_dtype, lead):
    x, w = _inputs(5, lead=lead)
    torch.library.opcheck(torch.ops.tvm_tirx.linear.default, (x, w, out_dtype, "torch"))
    torch.library.opcheck(torch.ops.tvm_tirx.matmul.default, (x, w.t(), out_dtype, "torch"))


def test_opcheck_on_meta_tensors_without_fallback():
    x = torch.empty(2, 5, 64, dtype=BF16, device="meta")
    w = torch.empty(40, 64, dtype=BF16, device="meta")
    torch.library.opcheck(torch.ops.tvm_tirx.linear.default, (x, w, None, None))
    torch.library.opcheck(torch.ops.tvm_tirx.matmul.default, (x, w.t(), F32, None))


# -- the fallback ------------------------------------------------------------------------------

@pytest.mark.parametrize("out_dtype", [None, BF16, F32])
def test_fallback_computes_the_product_on_cpu(out_dtype):
    x, w = _inputs(127, lead=(2,))
    bias = torch.randn(24).to(out_dtype or BF16)
    tol = dict(rtol=1e-2, atol=1e-1) if out_dtype in (None, BF16) else dict(rtol=1e-5, atol=1e-4)
    y = ops.linear(x, w, bias, out_dtype=out_dtype, fallback="torch")
    assert y.dtype == (out_dtype or BF16)
    assert ops.linear(x, w, bias.float(), out_dtype=out_dtype, fallback="torch").dtype == (out_dtype or BF16)
    torch.testing.assert_close(y.float(), _ref(x, w) + bias.float(), **tol)
    z = ops.matmul(x, w.t(), out_dtype=out_dtype, fallback="torch")
    torch.testing.assert_close(z.float(), _ref(x, w), **tol)


def test_fallback_takes_a_row_major_b_and_other_dtypes():
    x, w = _inputs(10, dtype=F32)
    torch.testing.assert_close(ops.matmul(x, w.t().contiguous(), fallback="torch"), x @ w.t())
    torch.testing.assert_close(ops.linear(x.half(), w.half(), fallback="torch"), (x.half() @ w.half().t()))


NOT_FLOAT = [torch.int32, torch.int64, torch.bool, torch.complex64]


@pytest.mark.parametrize("fallback", ["torch", None])
@pytest.mark.parametrize("dtype", NOT_FLOAT)
def test_non_floating_inputs_are_refused_as_torch_refuses_them(dtype, fallback):
    x, w = torch.ones(3, 16, dtype=dtype), torch.ones(8, 16, dtype=dtype)
    with pytest.raises(TypeError, match=rf"tvm_tirx.ops.linear: x must be a floating-point tensor, got {dtype}"):
        ops.linear(x, w, fallback=fallback)
    with pytest.raises(TypeError, match=rf"tvm_tirx.ops.linear: weight must be a floating-point tensor, got {dtype}"):
        ops.linear(torch.ones(3, 16), w, fallback=fallback)
    with pytest.raises(TypeError, match=rf"tvm_tirx.ops.matmul: a must be a floating-point tensor, got {dtype}"):
        ops.matmul(x, w.t(), out_dtype=F32, fallback=fallback)
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor"):  # the fake impl too
        ops.linear(x.to("meta"), w.to("meta"), fallback=fallback)


def test_the_fallback_no_longer_rounds_integers():
    x = torch.tensor([[2**24 + 1]], dtype=torch.int32)
    with pytest.raises(TypeError, match="x must be a floating-point tensor, got torch.int32"):
        ops.linear(x, torch.ones(1, 1, dtype=torch.int32), fallback="torch")


@pytest.mark.parametrize("dtypes", [(F32, torch.float64), (BF16, F32), (torch.float16, BF16)])
def test_mixed_input_dtypes_are_refused_as_f_linear_refuses_them(dtypes):
    x, w = torch.ones(3, 16, dtype=dtypes[0]), torch.ones(8, 16, dtype=dtypes[1])
    with pytest.raises(RuntimeError):
        torch.nn.functional.linear(x, w)
    with pytest.raises(TypeError, match=rf"linear: x and weight must have the same dtype .*got {dtypes[0]} "
                                        rf"and {dtypes[1]}"):
        ops.linear(x, w, out_dtype=F32, fallback="torch")
    with pytest.raises(TypeError, match=r"matmul: a and b.t\(\) must have the same dtype"):
        ops.matmul(x, w.t(), fallback="torch")


@pytest.mark.parametrize("out_dtype", [torch.int8, torch.int32, torch.bool, torch.complex64])
def test_a_non_floating_out_dtype_is_refused(out_dtype):
    x, w = _inputs(3, dtype=F32)
    for fallback in ("torch", None):
        with pytest.raises(TypeError, match=rf"linear: out_dtype must be a floating-point dtype, got {out_dtype}"):
            ops.linear(x, w, out_dtype=out_dtype, fallback=fallback)
        with pytest.raises(TypeError, match=rf"matmul: out_dtype must be a floating-point dtype, got {out_dtype}"):
            ops.matmul(x, w.t(), out_dtype=out_dtype, fallback=fallback)


def test_fallback_out_dtype_other_than_the_inputs():
    x, w = _inputs(5, dtype=torch.float64)
    y = ops.linear(x, w, out_dtype=F32, fallback="torch")
    assert y.dtype == F32
    torch.testing.assert_close(y, (x @ w.t()).float())
    z = ops.linear(x.half(), w.half(), out_dtype=torch.float64, fallback="torch")
    torch.testing.assert_close(z, x.half().double() @ w.half().double().t())


def test_fallback_is_checked():
    x, w = _inputs(3)
    with pytest.raises(ValueError, match="fallback must be None or 'torch', got 'cublas'"):
        ops.linear(x, w, fallback="cublas")


# -- autograd ------------------------------------------------------------------------------

def _grads(fn, *inputs, grad):
    leaves = [t.detach().requires_grad_() for t in inputs]
    fn(*leaves).backward(grad)
    return [t.grad for t in leaves]


@pytest.mark.parametrize("dtype", [F32, torch.float64])
@pytest.mark.parametrize("lead", [(), (2, 3)])
def test_gradients_match_f_linear_and_torch_matmul(dtype, lead):
    x, w = _inputs(5, n=24, k=16, lead=lead, dtype=dtype)
    grad = torch.randn(*lead, 5, 24, dtype=dtype)
    for got, want in zip(_grads(lambda a, b: ops.linear(a, b, fallback="torch"), x, w, grad=grad),
                         _grads(torch.nn.functional.linear, x, w, grad=grad)):
        assert got.dtype == dtype
        torch.testing.assert_close(got, want)
    b = w.t()
    for got, want in zip(_grads(lambda a, b: ops.matmul(a, b, fallback="torch"), x, b, grad=grad),
                         _grads(torch.matmul, x, b, grad=grad)):
        assert got.dtype == dtype
        torch.testing.assert_close(got, want)


def test_gradcheck_in_float64():
    x, w = _inputs(4, n=6, k=8, lead=(2,), dtype=torch.float64)
    x.requires_grad_()
    w.requires_grad_()
    bias = torch.ones(6, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda a, b: ops.linear(a, b, fallback="torch"), (x, w))
    assert torch.autograd.gradcheck(lambda a, b: ops.linear(a, b, bias, fallback="torch"), (x, w))
    b = w.detach().t().requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: ops.matmul(a, b, fallback="torch"), (x, b))


def test_only_the_needed_gradients_are_computed(monkeypatch):
    from tvm_tirx.ops import torch_ops

    calls = []
    for name in ("_grad_x", "_grad_w"):
        real = getattr(torch_ops, name)
        monkeypatch.setattr(torch_ops, name, lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))
    x, w = _inputs(5, dtype=F32)
    ops.linear(x, w.requires_grad_(), fallback="torch").sum().backward()
    assert calls == ["_grad_w"] and x.grad is None and w.grad.shape == w.shape
    calls.clear()
    ops.matmul(x.requires_grad_(), w.detach().t(), fallback="torch").sum().backward()
    assert calls == ["_grad_x"] and x.grad.shape == x.shape


def test_gradients_are_cast_to_each_inputs_dtype():
    x, w = _inputs(5)  # bf16, out_dtype float32: the gradient arrives in float32
    gx, gw = _grads(lambda a, b: ops.linear(a, b, out_dtype=F32, fallback="torch"), x, w,
                    grad=torch.ones(5, 24))
    assert gx.dtype == gw.dtype == BF16
    torch.testing.assert_close(gx.float(), torch.ones(5, 24) @ w.float(), rtol=1e-2, atol=1e-1)
    torch.testing.assert_close(gw.float(), torch.ones(24, 5) @ x.float(), rtol=1e-2, atol=1e-1)


@pytest.mark.parametrize("dtype", [F32, torch.float64])
def test_opcheck_with_requires_grad_inputs(dtype):
    x, w = _inputs(5, lead=(2,), dtype=dtype)
    x.requires_grad_()
    w.requires_grad_()
    torch.library.opcheck(torch.ops.tvm_tirx.linear.default, (x, w, None, "torch"))
    torch.library.opcheck(torch.ops.tvm_tirx.matmul.default, (x, w.t(), None, "torch"))
    torch.library.opcheck(torch.ops.tvm_tirx.linear.default, (x, w.detach(), F32, "torch"))


class _DocsMLP(torch.nn.Module):
    """docs/guides/frameworks.rst's MLP (its nn.Linear weights require grad), smaller and on CPU
    with the torch fallback."""

    def __init__(self, k=64, hidden=224, fallback="torch"):
        super().__init__()
        self.up = torch.nn.Linear(k, hidden, bias=False, dtype=torch.bfloat16)
        self.down = torch.nn.Linear(hidden, k, bias=False, dtype=torch.bfloat16)
        self.fallback = fallback

    def forward(self, x):
        return ops.linear(torch.nn.functional.silu(ops.linear(x, self.up.weight, fallback=self.fallback)),
                          self.down.weight, fallback=self.fallback)


def test_the_docs_mlp_trains_under_fullgraph_dynamic_compile():
    torch._dynamo.reset()
    torch.manual_seed(0)
    mlp = _DocsMLP()
    assert mlp.up.weight.requires_grad and mlp.down.weight.requires_grad
    compiled = torch.compile(mlp, fullgraph=True, dynamic=True)

    def eager(x):
        return torch.nn.functional.linear(torch.nn.functional.silu(torch.nn.functional.linear(x, mlp.up.weight)),
                                          mlp.down.weight)

    for shape in ((4, 16, 64), (2, 33, 64)):
        x = torch.randn(*shape).to(BF16)
        y = compiled(x)
        want = eager(x)
        torch.testing.assert_close(y, want, rtol=2e-2, atol=2e-2)
        mlp.zero_grad()
        y.float().square().sum().backward()
        got = [mlp.up.weight.grad.clone(), mlp.down.weight.grad.clone()]
        mlp.zero_grad()
        want.float().square().sum().backward()
        for g, r in zip(got, [mlp.up.weight.grad, mlp.down.weight.grad]):
            assert g.dtype == BF16
            torch.testing.assert_close(g.float(), r.float(), rtol=5e-2, atol=5e-1)


# -- errors -----------------------------------------------------------------------------------

def test_cpu_tensors_without_fallback_name_the_argument():
    x, w = _inputs(4)
    with pytest.raises(UnsupportedInput, match=r"tvm_tirx.ops.linear: x must be a CUDA tensor, got one on cpu"):
        ops.linear(x, w)
    with pytest.raises(UnsupportedInput, match=r"tvm_tirx.ops.matmul: a must be a CUDA tensor"):
        ops.matmul(x, w.t())
    assert issubclass(UnsupportedInput, ValueError)


@pytest.fixture
def as_if_on_an_h200(monkeypatch):
    """CPU tensors pass the device rules (CUDA, compute capability 9.0): the other rules run on them."""
    monkeypatch.setattr(torch_checks, "_check_device", lambda names, x, w: None)
    monkeypatch.setattr(torch_checks, "device_target", lambda op, device: "sm_90a")


LINEAR = torch_checks.Operands("tvm_tirx.ops.linear", "x", "weight", "contiguous (n, k)")
RULES = [
    (dict(dtype=F32), None, r"x must be torch.bfloat16, got torch.float32"),
    (dict(dtype=torch.float16), None, r"x must be torch.bfloat16, got torch.float16"),
    (dict(), torch.float16, r"out_dtype must be torch.bfloat16 or torch.float32, got torch.float16"),
    (dict(k=12), None, r"k = 12: rows of x and weight take k \* 2 = 24 bytes.*multiple of 16 bytes "
                       r"\(k a multiple of 8\)"),
]


@pytest.mark.parametrize("inputs,out_dtype,message", RULES)
def test_each_rule_names_its_argument(as_if_on_an_h200, inputs, out_dtype, message):
    x, w = _inputs(5, **inputs)
    with pytest.raises(UnsupportedInput, match=message):
        torch_checks.gemm_key(LINEAR, x, w, out_dtype or BF16)


def test_layout_and_alignment_rules(as_if_on_an_h200):
    x, w = _inputs(6, k=64)
    # a column-major x (m, k) is read M-major, (k, m): its rows, m * 2 bytes, must be a multiple of 16
    with pytest.raises(UnsupportedInput, match=r"m = 6: x is the transpose of a contiguous \(k, m\) tensor whose "
                                               r"rows take m \* 2 = 12 bytes.*pass x.contiguous\(\) instead"):
        torch_checks.gemm_key(LINEAR, x.t().contiguous().t(), w, BF16)
    x8 = _inputs(8, k=64)[0]
    assert torch_checks.gemm_key(LINEAR, x8.t().contiguous().t(), w, BF16).a_major == "m"
    with pytest.raises(UnsupportedInput, match=r"x must be contiguous .* or, 2-d, the transpose of a contiguous "
                                               r"\(k, m\) tensor, got shape \(8, 32\) and strides \(128, 4\)"):
        torch_checks.gemm_key(LINEAR, torch.zeros(8, 128, dtype=BF16)[:, ::4], w[:, :32], BF16)
    assert torch_checks.gemm_key(LINEAR, x, w, BF16).b_major == "k"
    assert torch_checks.gemm_key(LINEAR, x, w.t().contiguous().t(), BF16).b_major == "n"  # read (k, n)
    strided = torch.zeros(w.shape[0], 2 * w.shape[1], dtype=BF16)[:, ::2]  # neither layout
    with pytest.raises(UnsupportedInput, match=r"weight must be contiguous \(n, k\)"):
        torch_checks.gemm_key(LINEAR, x, strided, BF16)
    flat = torch.zeros(6 * 64 + 4, dtype=BF16)
    with pytest.raises(UnsupportedInput, match=r"x must start at a 16-byte aligned address.*storage offset 4"):
        torch_checks.gemm_key(LINEAR, flat[4:].view(6, 64), w, BF16)


def test_a_b_in_neither_layout_names_b(as_if_on_an_h200):
    x, w = _inputs(6, k=64)
    strided = torch.zeros(64, 48, dtype=BF16)[:, ::2]  # (k, n) with strides (48, 2)
    with pytest.raises(UnsupportedInput, match=r"matmul: b.t\(\) must be contiguous \(b column-major, as "
                                               r"weight.t\(\) is\), or b itself contiguous \(row-major\), "
                                               r"got b.t\(\) of shape \(24, 64\) and strides \(2, 48\)"):
        ops.matmul(x, strided)
    # a row-major b (k, n) is read N-major: its rows, n * 2 bytes, must be a multiple of 16
    with pytest.raises(UnsupportedInput, match=r"n = 12: b.t\(\) is the transpose of a contiguous \(k, n\) "
                                               r"tensor whose rows take n \* 2 = 24 bytes"
                                               r".*pass b.t\(\).contiguous\(\).t\(\) instead"):
        ops.matmul(x, torch.zeros(64, 12, dtype=BF16))


@pytest.mark.parametrize("count", ["x (m x k)", "weight (n x k)", "the output (m x n)"])
def test_the_int32_element_bound_is_inclusive(count):
    limit = torch_checks.INT32_ELEMENTS
    assert limit == 2**31 - 129
    # (m, n, k) with e elements in the named tensor and no more in the others
    sizes = {"x (m x k)": lambda e: (e, 1, 1), "weight (n x k)": lambda e: (1, e, 1),
             "the output (m x n)": lambda e: (e, 1, 0)}[count]
    torch_checks._check_sizes(LINEAR, *sizes(limit))  # exactly 2**31 - 129 elements: taken
    with pytest.raises(UnsupportedInput, match=rf"{re.escape(count)} has {limit + 1} elements; .* at most {limit}"):
        torch_checks._check_sizes(LINEAR, *sizes(limit + 1))


def test_sizes_over_int32_offsets_are_refused(as_if_on_an_h200):
    x = torch.empty(2**31 // 4096 + 1, 4096, dtype=BF16, device="meta")
    w = torch.empty(8, 4096, dtype=BF16, device="meta")
    with pytest.raises(UnsupportedInput, match=r"x \(m x k\) has 2147487744 elements"):
        torch_checks.gemm_key(LINEAR, x, w, BF16)


def test_a_gpu_other_than_hopper_is_refused(monkeypatch):
    monkeypatch.setattr(torch_checks, "_capability", lambda index: (8, 0))
    with pytest.raises(UnsupportedInput, match=r"needs a Hopper GPU \(compute capability 9.0, sm_90a\); "
                                               r"cuda:0 is sm_80"):
        torch_checks.device_target("tvm_tirx.ops.linear", torch.device("cuda", 0))


# -- the kernel table ---------------------------------------------------------------------------

class _StandIn:
    """A compiled kernel's stand-in: records each call's shapes and computes C with torch."""

    def __init__(self, key):
        self.key, self.calls = key, []

    def launcher(self, *args):
        """The unchecked launch function, as Kernel.launcher returns it: the stand-in itself."""
        return self

    def __call__(self, a, b, *rest):
        *bias, c = rest  # (A, B, C), or (A, B, Bias, C) for a fused bias
        assert a.is_contiguous() and b.is_contiguous() and c.is_contiguous()
        if isinstance(self.key, gemm_kernels.SmallMSpec):  # (X, W, C) or (X, W, Partial, Counters, C)
            assert len(bias) == (0 if self.key.splits == 1 else 2)
            assert not bias or not bias[1].view(torch.int32).any()  # Counters is zero before each launch
            assert not bias or bias[0].shape == (a.shape[0], self.key.splits * self.key.n)  # a slab per split
            self.calls.append((tuple(a.shape), tuple(b.shape), tuple(c.shape), c.dtype,
                               tuple((tuple(t.shape), t.dtype, t.data_ptr()) for t in bias)))
            c.copy_(a.float() @ b.float().t())
            return
        if self.key.splits > 1:  # (A, B, Partial, Counters, C): a plain product with its workspaces
            partial, counters = bias
            assert partial.shape == (c.shape[0], self.key.splits * self.key.n) and partial.dtype == F32
            assert counters.shape == (c.shape[0], -(-self.key.n // self.key.block_n))
            assert not counters.view(torch.int32).any()  # zero before each launch
            bias = []
        assert len(bias) == (self.key.bias is not None)  # the bias kernel, and only it, takes Bias
        self.calls.append((tuple(a.shape), tuple(b.shape), tuple(c.shape), c.dtype))
        w = b if self.key.b_major == "k" else b.t()  # b_major="n": B stored (k, n)
        x = a if self.key.a_major == "k" else a.t()  # a_major="m": A stored (k, m)
        c.copy_(x.float() @ w.float().t() + sum(v.float() for v in bias))


@pytest.fixture
def stand_in_compiler(monkeypatch, as_if_on_an_h200):
    """``gemm_kernels._compile`` replaced by one that counts its calls and makes stand-ins."""
    compiled = []

    def fake_compile(key):
        compiled.append(key)
        return _StandIn(key)

    monkeypatch.setattr(gemm_kernels, "_compile", fake_compile)
    gemm_kernels.clear_kernels()
    yield compiled
    gemm_kernels.clear_kernels()  # no stand-in outlives the test


def test_one_kernel_serves_every_m(stand_in_compiler, monkeypatch):
    monkeypatch.setattr(planner, "SMALL_M_ROUTE", True)
    w = _inputs(1, n=40, k=64)[1]
    for m in MS:
        x = _inputs(m, n=40, k=64, seed=m)[0]
        y = ops.linear(x, w, out_dtype=F32)
        torch.testing.assert_close(y, _ref(x, w))
    # m = 1 takes the small-M kernel (planner.choose_gemm); n = 40 fills 40 of a tile's
    # columns: the 64-column tile (choose_tile), 128 rows at m = 127 (one row tile), 64 rows
    # past it (twice the CTAs: tiles.ROW64_RATE); one kernel serves every m of a tile
    small = gemm_kernels.SmallMSpec(40, 64, "float32", "sm_90a", block_m=8, splits=1, stages=8)
    tiles = gemm_kernels.GemmSpec(40, 64, "bfloat16", "float32", "sm_90a", block_n=64)
    rows64 = tiles.replace(block_m=64)
    assert stand_in_compiler == [small, tiles, rows64]
    assert [call[0] for call in gemm_kernels.cached_kernels()[tiles].calls] == [(127, 64)]
    assert [call[0] for call in gemm_kernels.cached_kernels()[rows64].calls] == [(1000, 64), (4096, 64)]
    monkeypatch.setattr(planner, "SMALL_M_ROUTE", False)  # turned off (TVM_TIRX_SMALL_M=0): m = 1 takes
    gemm_kernels.clear_kernels()  # the tile kernel's 64-row tile (planner.DECODE_TILE)
    ops.linear(_inputs(1, n=40, k=64)[0], w, out_dtype=F32)
    assert stand_in_compiler[-1] == gemm_kernels.GemmSpec(40, 64, "bfloat16", "float32", "sm_90a", block_n=64,
                                                          block_m=64)


def test_the_key_is_n_k_dtypes_and_arch(stand_in_compiler):
    x, w = _inputs(65, n=40, k=64)  # past SMALL_M: the tile kernel
    first = gemm_kernels.gemm_kernel(torch_checks.gemm_key(LINEAR, x, w, BF16))
    # m = 127: the same tile (one 128-row tile of C: tiles.ROW64_RATE is not scored there)
    assert gemm_kernels.gemm_kernel(torch_checks.gemm_key(LINEAR, _inputs(127, n=40, k=64)[0], w, BF16)) is first
    ops.linear(x, w)
    ops.matmul(x.view(1, 65, 64), w.t())  # b = w.t() reads the same (n, k) weight
    ops.linear(x, w, out_dtype=F32)
    ops.linear(_inputs(65, n=40, k=72)[0], _inputs(65, n=40, k=72)[1])
    ops.linear(x, _inputs(3, n=48, k=64)[1])
    assert [(k.n, k.k, k.out_dtype) for k in stand_in_compiler] == [
        (40, 64, "bfloat16"), (40, 64, "float32"), (40, 72, "bfloat16"), (48, 64, "bfloat16")]


def test_a_row_major_b_takes_the_n_major_kernel_without_a_copy(stand_in_compiler):
    x, w = _inputs(65, n=40, k=64)  # past SMALL_M: the tile kernel
    b = w.t().contiguous()  # (k, n) row-major
    torch.testing.assert_close(ops.matmul(x, b, out_dtype=F32), _ref(x, w))
    torch.testing.assert_close(ops.linear(x, b.t(), out_dtype=F32), _ref(x, w))  # a transposed weight too
    torch.testing.assert_close(ops.matmul(x, w.t(), out_dtype=F32), _ref(x, w))  # column-major b: the TN kernel
    assert [key.b_major for key in stand_in_compiler] == ["n", "k"]
    kernel = gemm_kernels.cached_kernels()[stand_in_compiler[0]]
    assert [call[1] for call in kernel.calls] == [(64, 40), (64, 40)]  # B passed as the (k, n) storage


def test_a_column_major_a_takes_the_m_major_kernel_without_a_copy(stand_in_compiler):
    x, w = _inputs(8, n=40, k=64)
    a = x.t().contiguous().t()  # (m, k) column-major, as x.t() of a (k, m) activation is
    torch.testing.assert_close(ops.matmul(a, w.t(), out_dtype=F32), _ref(x, w))
    torch.testing.assert_close(ops.matmul(a, w.t().contiguous(), out_dtype=F32), _ref(x, w))  # both transposed
    assert [(key.a_major, key.b_major) for key in stand_in_compiler] == [("m", "k"), ("m", "n")]
    kernel = gemm_kernels.cached_kernels()[stand_in_compiler[0]]
    assert kernel.calls[0][0] == (64, 8)  # A passed as the (k, m) storage


def test_leading_dims_flatten_into_m_and_empty_sizes_launch_nothing(stand_in_compiler, monkeypatch):
    monkeypatch.setattr(planner, "SMALL_M_ROUTE", False)  # m = 30: the tile kernel, whose calls are (A, B, C)
    x, w = _inputs(5, n=40, k=64, lead=(2, 3))
    torch.testing.assert_close(ops.linear(x, w, out_dtype=F32), _ref(x, w))
    (kernel,) = gemm_kernels.cached_kernels().values()
    assert kernel.calls == [((30, 64), (40, 64), (30, 40), F32)]
    assert ops.linear(x[:, :0], w).shape == (2, 0, 5, 40)
    assert ops.linear(x[..., :0], w[:, :0], out_dtype=F32).abs().sum() == 0  # k = 0: zeros
    assert len(kernel.calls) == 1


def test_clear_kernels_forgets_the_process_table(stand_in_compiler):
    x, w = _inputs(3, n=40, k=64)
    ops.linear(x, w)
    gemm_kernels.clear_kernels()
    assert not gemm_kernels.cached_kernels()
    ops.linear(x, w)
    assert len(stand_in_compiler) == 2


def test_the_real_compile_makes_a_run_time_m_kernel_the_disk_cache_serves_again(tmp_path, monkeypatch):
    from tvm_tirx.build import kernel as kernel_module

    monkeypatch.setenv("TVM_TIRX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TVM_TIRX_CACHE", raising=False)
    gemm_kernels.clear_kernels()
    builds, build = [], kernel_module._build
    monkeypatch.setattr(kernel_module, "_build", lambda *args: builds.append(args[1]) or build(*args))
    key = gemm_kernels.GemmSpec(1024, 4096, "bfloat16", "bfloat16", "sm_90a")
    kernel = gemm_kernels.gemm_kernel(key)
    assert [(p.name, p.shape) for p in kernel._params] == [("A", ("m", 4096)), ("B", (1024, 4096)), ("C", ("m", 1024))]
    assert gemm_kernels.gemm_kernel(key) is kernel and len(builds) == 1
    gemm_kernels.clear_kernels()  # as a new process would: the on-disk cache serves the build
    again = gemm_kernels.gemm_kernel(key)
    assert again is not kernel and len(builds) == 1 and again.cuda_source == kernel.cuda_source


# -- on the GPU --------------------------------------------------------------------------------

TOLERANCE = {BF16: 1e-2, F32: 1e-4}


def _close(y, ref, out_dtype):
    err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
    assert err <= TOLERANCE[out_dtype], f"max relative error {err:.2e}"


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
@pytest.mark.parametrize("out_dtype", [BF16, F32])
def test_linear_on_gpu_for_every_m_from_one_kernel_per_tile_width(torch_cuda, out_dtype, monkeypatch):
    monkeypatch.setattr(planner, "SMALL_M_ROUTE", False)  # the tile kernel's widths (m = 1 too)
    gemm_kernels.clear_kernels()
    w = _inputs(1, n=4096, k=4096, device="cuda")[1]
    for m in MS:
        x = _inputs(m, n=4096, k=4096, device="cuda", seed=m)[0]
        _close(ops.linear(x, w, out_dtype=out_dtype), _ref(x, w), out_dtype)
        _close(ops.matmul(x, w.t(), out_dtype=out_dtype), _ref(x, w), out_dtype)
        _close(ops.matmul(x, w.t().contiguous(), out_dtype=out_dtype), _ref(x, w), out_dtype)  # row-major b
    # m = 1: the 64-row tile (planner.DECODE_TILE); m = 127: 16 tiles of 128 x 256 on 132 SMs, so
    # one kernel of 64-column tiles; m = 1000 and 4096: 128 and 512 tiles of 128 x 256, one kernel of those
    assert sorted((key.block_m, key.block_n, key.b_major) for key in gemm_kernels.cached_kernels()) == [
        (64, 64, "k"), (64, 64, "n"), (128, 64, "k"), (128, 64, "n"), (128, 256, "k"), (128, 256, "n")]


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
def test_linear_pads_k_on_gpu_and_gives_the_unpadded_kernels_bits(torch_cuda, monkeypatch):
    # k = 2056: rows of 4112 bytes (16 mod 32), padded (planner.k_padding);
    # the appended zeros change no bit of the product (they add 0 at the end of each sum)
    x, w = _inputs(2048, n=2048, k=2056, device="cuda")
    x[5, 7] = float("nan")  # a NaN in a real column still reaches its row
    gemm_kernels.clear_kernels()
    padded = ops.linear(x, w)
    assert [key.k for key in ops.check(ops.linear, x, w)] == [2056 + planner.k_padding(2048, 2048, 2056, 2)] != [2056]
    monkeypatch.setattr(planner, "PAD_MIN_ROWS", 1 << 30)
    gemm_kernels.clear_kernels()
    assert [key.k for key in ops.check(ops.linear, x, w)] == [2056]
    plain = ops.linear(x, w)
    assert torch_cuda.equal(padded.isnan(), plain.isnan()) and padded[5].isnan().all()
    assert torch_cuda.equal(padded.nan_to_num(), plain.nan_to_num())
    x[5, 7] = 0
    _close(ops.linear(x, w), _ref(x, w), BF16)


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
def test_a_column_major_a_on_gpu(torch_cuda):
    # the weight gradient's form: a (m, k) column-major, read M-major (m a multiple of 8)
    w = _inputs(1, n=1024, k=512, device="cuda")[1]
    for m in (8, 1000, 4096):
        x = _inputs(m, n=1024, k=512, device="cuda", seed=m)[0]
        a = x.t().contiguous().t()
        _close(ops.matmul(a, w.t()), _ref(x, w), BF16)
        _close(ops.matmul(a, w.t().contiguous(), out_dtype=F32), _ref(x, w), F32)  # both transposed
    assert {(key.a_major, key.b_major) for key in gemm_kernels.cached_kernels()} >= {("m", "k"), ("m", "n")}


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
def test_linear_on_gpu_under_torch_compile(torch_cuda, monkeypatch):
    monkeypatch.setattr(planner, "SMALL_M_ROUTE", False)  # the tile kernel's widths (m = 1 too)
    torch._dynamo.reset()
    gemm_kernels.clear_kernels()
    block = _Block(k=4096, n=1024).cuda()
    compiled = torch.compile(block, fullgraph=True, dynamic=True)
    for m in MS:
        x = _inputs(m, n=1024, k=4096, device="cuda", seed=m)[0]
        h = torch.nn.functional.silu(_ref(x, block.w1)).to(BF16)
        _close(compiled(x), _ref(h, block.w2), BF16)
    # (1024, 4096, fp32 out) and (4096, 1024, bf16 out), each per tile width choose_tile picks
    widths = {(n, choose_tile(m, n)["block_n"]) for m in MS for n in (1024, 4096)}
    assert {(key.n, key.block_n) for key in gemm_kernels.cached_kernels()} == widths


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
def test_linear_with_a_fused_bias_on_gpu(torch_cuda):
    gemm_kernels.clear_kernels()
    for m, n, dtype, out_dtype in [(1000, 4096, BF16, BF16), (129, 1000, F32, F32), (4096, 1024, F32, BF16)]:
        x, w = _inputs(m, n=n, k=4096, device="cuda", seed=m)
        bias = (torch.randn(n, device="cuda") * 8).to(dtype)
        _close(ops.linear(x, w, bias, out_dtype=out_dtype), _ref(x, w) + bias.float(), out_dtype)
    assert all(key.bias is not None for key in gemm_kernels.cached_kernels())


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
def test_unsupported_gpu_inputs_raise_or_fall_back(torch_cuda):
    x, w = _inputs(8, n=64, k=12, device="cuda")
    with pytest.raises(UnsupportedInput, match="k = 12"):
        ops.linear(x, w)
    _close(ops.linear(x, w, out_dtype=F32, fallback="torch"), _ref(x, w), F32)


# -- the fused bias ----------------------------------------------------------------------------


def test_a_vector_bias_goes_into_the_kernel_and_a_broadcast_one_is_added_after(stand_in_compiler):
    x, w = _inputs(65, n=40, k=64)  # past SMALL_M: the tile kernel
    for dtype in (BF16, F32):
        bias = torch.randn(40).to(dtype)
        y = ops.linear(x, w, bias, out_dtype=F32)
        torch.testing.assert_close(y, _ref(x, w) + bias.float())
    bias2d = torch.randn(65, 40).to(BF16)
    torch.testing.assert_close(ops.linear(x, w, bias2d, out_dtype=F32), _ref(x, w) + bias2d.float())
    assert [k.bias for k in stand_in_compiler] == ["bfloat16", "float32", None]
    assert gemm_kernels.gemm_prim_func(40, 64, bias="float32").attrs["global_symbol"] == (
        "tvm_tirx_gemm_n40_k64_bf16_bf16_bias_f32")


@pytest.mark.parametrize("bias,message", [(torch.zeros(40, dtype=torch.float16), "bias must be torch.bfloat16 or "
                                                                                 "torch.float32, got torch.float16"),
                                          (torch.zeros(80)[::2], r"bias must be contiguous, got strides \(2,\)")],
                         ids=["dtype", "strides"])
def test_bias_rules_name_the_bias_and_the_fallback_adds_it(stand_in_compiler, bias, message):
    x, w = _inputs(5, n=40, k=64)
    with pytest.raises(UnsupportedInput, match=message):
        ops.linear(x, w, bias)
    if bias.shape == (40,):  # the fallback: torch adds it in float32, then one rounding
        y = ops.linear(x, w, bias, fallback="torch")
        torch.testing.assert_close(y, (_ref(x, w) + bias.float()).to(BF16))
    assert stand_in_compiler == []


def test_the_bias_op_traces_into_one_graph_and_passes_opcheck():
    x = torch.empty(2, 5, 64, dtype=BF16, device="meta")
    w = torch.empty(40, 64, dtype=BF16, device="meta")
    b = torch.empty(40, dtype=F32, device="meta")
    explanation = torch._dynamo.explain(lambda x: ops.linear(x, w, b))(x)
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0
    assert "torch.ops.tvm_tirx.linear_bias" in explanation.graphs[0].code
    torch.library.opcheck(torch.ops.tvm_tirx.linear_bias.default, (x, w, b, None, None))
    xs, ws = _inputs(5, lead=(2,), dtype=F32)
    bias = torch.randn(24, requires_grad=True)
    torch.library.opcheck(torch.ops.tvm_tirx.linear_bias.default, (xs.requires_grad_(), ws, bias, None, "torch"))


def test_the_bias_gradient_is_the_sum_over_rows():
    x, w = _inputs(5, lead=(3,), dtype=F32)
    bias = torch.randn(24, dtype=F32, requires_grad=True)
    grad = torch.randn(3, 5, 24)
    ops.linear(x, w, bias, fallback="torch").backward(grad)
    torch.testing.assert_close(bias.grad, grad.sum((0, 1)))


def test_bias_edge_cases_follow_torch(stand_in_compiler):
    x, w = _inputs(5, n=40, k=64)
    bias = torch.randn(40, dtype=F32)
    # k = 0: an empty product, so the bias on every row (as F.linear)
    torch.testing.assert_close(ops.linear(x[:, :0], w[:, :0], bias, out_dtype=F32), bias.expand(5, 40))
    # a (1,) bias broadcasts: added by torch after the kernel, eagerly and when traced
    one = torch.randn(1).to(BF16)
    torch.testing.assert_close(ops.linear(x, w, one, out_dtype=F32), _ref(x, w) + one.float())
    meta = [t.to("meta") for t in (x, w, one)]
    explanation = torch._dynamo.explain(lambda a: ops.linear(a, meta[1], meta[2]))(meta[0])
    assert "tvm_tirx.linear_bias" not in explanation.graphs[0].code
    for bad in (torch.arange(40), torch.zeros(40, dtype=torch.complex64)):  # torch refuses these too
        with pytest.raises(TypeError, match="bias must be floating-point"):
            ops.linear(x, w, bad, fallback="torch")
    with pytest.raises(ValueError, match=r"bias of shape \(41,\) does not broadcast to the output's \(\*, 40\)"):
        ops.linear(x, w, torch.zeros(41), fallback="torch")


# -- the small-M route (kernels/gemm/planner.py, ops/small_m_plan.py) ----------------------------


def test_the_small_m_route_gives_each_stream_its_zeroed_workspaces(stand_in_compiler, monkeypatch):
    from tvm_tirx.ops import small_m_plan

    monkeypatch.setattr(planner, "SMALL_M_ROUTE", True)
    x, w = _inputs(3, n=128, k=512)
    stream = [1]
    monkeypatch.setattr(small_m_plan, "_stream_id", lambda device: stream[0])

    def launched():  # the workspaces the last launch of the small-M kernel took
        torch.testing.assert_close(ops.linear(x, w, out_dtype=F32), _ref(x, w))
        (key,) = [k for k in gemm_kernels.cached_kernels() if isinstance(k, gemm_kernels.SmallMSpec)]
        return key, gemm_kernels.cached_kernels()[key].calls[-1][4]

    key, first = launched()
    # one column tile, 8 K tiles: two splits of 4 (cost 1 wave x (4 + 4) against 1 x (8 + 4))
    assert (key.block_m, key.splits) == (8, 2)
    assert [(shape, dtype) for shape, dtype, _ in first] == [((3, 256), F32), ((3, 1), torch.uint32)]
    assert launched()[1] == first  # the same stream: the same memory
    stream[0] = 2  # another stream: its own workspaces
    assert {ptr for *_, ptr in launched()[1]}.isdisjoint(ptr for *_, ptr in first)
    # the buffers outlive the plans (a CUDA graph may hold their addresses): after the
    # kernels and plans are forgotten, the stream's launches take the same memory
    gemm_kernels.clear_kernels()
    stream[0] = 1
    assert launched()[1] == first


def test_the_split_k_route_passes_plain_products_their_workspaces(stand_in_compiler, monkeypatch):
    # 100 x 4096 x 4096: one row of 128 x 64 tiles fills 64 of 132 SMs; split in four, 128 x 128
    # tiles make 128 CTAs (planner.choose_split)
    monkeypatch.setattr(planner, "SPLIT_K_ROUTE", True)
    monkeypatch.setattr(planner, "SMALL_M_ROUTE", False)
    x, w = _inputs(100, n=4096, k=4096)
    torch.testing.assert_close(ops.linear(x, w, out_dtype=F32), _ref(x, w))
    (key,) = stand_in_compiler
    assert (key.block_n, key.splits) == (128, 4) and key.name.endswith("_bn128_split4")
    # a fused bias takes no split (the split-K kernel is a plain product), nor does the
    # Relax offload (its own test: test_the_relax_offload_never_splits_k)
    torch.testing.assert_close(ops.linear(x, w, torch.ones(4096, dtype=BF16), out_dtype=F32), _ref(x, w) + 1)
    assert stand_in_compiler[-1].splits == 1 and stand_in_compiler[-1].bias == "bfloat16"
    monkeypatch.setattr(planner, "SPLIT_K_ROUTE", False)
    gemm_kernels.clear_kernels()
    ops.linear(x, w)
    assert stand_in_compiler[-1].splits == 1  # the route off: the model's tile alone


def test_workspace_buffers_grow_by_powers_of_two_rows(monkeypatch):
    # the tile kernel's split-K takes any m: a buffer per new largest m would add up without bound
    from tvm_tirx.ops import small_m_plan

    monkeypatch.setattr(small_m_plan, "_BUFFERS", {})
    monkeypatch.setattr(small_m_plan, "_VIEWS", {})
    rows = []
    for m in (3, 64, 65, 100, 128, 129, 1000):
        partial, counters = small_m_plan.workspace(torch.device("cpu"), m, 40, 2, 1)
        assert partial.shape == (m, 80) and counters.shape == (m, 1) and not counters.view(torch.int32).any()
        rows.append(partial._base.shape[0])
    assert rows == [64, 64, 128, 128, 128, 256, 1024]
    assert [b[0].shape[0] for b in small_m_plan._BUFFERS[("cpu", 0, 40, 2, 1)]] == [64, 128, 256, 1024]


def test_the_workspaces_are_made_outside_the_callers_thread(monkeypatch):
    # torch routes a thread's allocations into a CUDA graph's pool while
    # torch.compile(mode="reduce-overhead") warms one up: the process's workspaces must
    # come from another thread, and the caller's stream must wait for their zeroing
    import contextlib
    import threading

    from tvm_tirx.ops import small_m_plan

    log = []

    class Event:
        def record(self):
            log.append(("record", threading.get_ident()))

    class Stream:
        def wait_event(self, event):
            log.append(("wait", threading.get_ident()))

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: Stream())
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    made = small_m_plan._outside_graph_pools("cuda:0", lambda: threading.get_ident())
    caller = threading.get_ident()
    assert made != caller and log == [("record", made), ("wait", caller)]

    def fails():
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        small_m_plan._outside_graph_pools("cuda:0", fails)


def test_a_fused_bias_keeps_the_cooperative_tile_spill_free(stand_in_compiler):
    # 1024 x 10240: the planner's 256 x 160 tile; with a bias, no cooperative tile over 128 columns
    x, w = _inputs(1024, n=10240, k=64)
    ops.linear(x, w)
    ops.linear(x, w, torch.randn(10240, dtype=torch.bfloat16))
    plain, fused = stand_in_compiler[-2:]
    assert (plain.block_m, plain.block_n) == (256, 160) and plain.bias is None
    assert fused.bias is not None and (fused.block_m == 128 or fused.block_n <= 128)


def test_deterministic_mode_takes_the_same_split_k_plan(stand_in_compiler, monkeypatch):
    # the small-M kernel adds its split-K slabs in one order: deterministic mode needs no other plan
    monkeypatch.setattr(planner, "SMALL_M_ROUTE", True)
    x, w = _inputs(3, n=128, k=512)
    torch.testing.assert_close(ops.linear(x, w, out_dtype=F32), _ref(x, w))
    torch.use_deterministic_algorithms(True)
    try:
        torch.testing.assert_close(ops.linear(x, w, out_dtype=F32), _ref(x, w))
    finally:
        torch.use_deterministic_algorithms(False)
    assert [key.splits for key in stand_in_compiler] == [2]
