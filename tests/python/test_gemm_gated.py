"""The gated GEMM (``make_gemm(gated=True)``) and its torch op ``tvm_tirx.ops.glu_linear``.

CPU: the kernel's B is the interleaved ``(2 ceil(n / 8) 8, k)`` weight and its output
``(m, n)``; it issues the wide wgmma and one activation per output register (half the
accumulators); widths it cannot store and a non-bool ``gated`` are ValueErrors; the
half-width epilogue leaves room for a deeper ring; ``gate_up_weight`` interleaves by
eight, and the op makes that weight itself from ``w_gate`` and ``w_up`` (cached per pair;
one merged weight is refused); the op's fallback, fake, autograd and ``torch.compile(fullgraph=True)``; its key
(output n, gated width, activation) with a stand-in kernel.
GPU (marker ``gpu``): the kernel against ``act(A Bg^T + bg) * (A Bu^T + bu)`` in fp32 on
the three store paths, NaN-filled outputs, one run-time-m kernel at several m; the op,
eager and compiled.
"""

import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.gemm import choose_tile, gemm_smem_bytes, make_gemm
from tvm_tirx.kernels.gemm.tiles import deepest_ring
from tvm_tirx.script import tirx as T

ACTS = ("silu", "gelu_tanh", "relu")


def _params(func):
    return re.search(r"def \w+\((.*?)\):", func.script()).group(1)


# -- CPU: the kernel ------------------------------------------------------------------------------

@pytest.mark.parametrize("block_n", [128, 256])
def test_the_gated_kernel_reads_interleaved_b_and_activates_half_the_accumulators(block_n):
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    func = make_gemm(T.dynamic("m"), 1000, 256, gated=True, activation="silu", bias="float32", block_n=block_n,
                     persistent=False)
    params = _params(func)
    # B: 2 * ceil(1000 / 8) * 8 = 2000 rows; Bias indexed like B; C (m, 1000)
    assert 'B: T.Buffer((2000, 256)' in params and 'Bias: T.Buffer((2000,)' in params, params
    assert re.search(r"C: T.Buffer\(\(m, 1000\)", params), params
    kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
    assert len(testing.assemble(kernel)) > 0
    body = kernel.cuda_source[kernel.cuda_source.index("__global__"):]
    assert f"m64n{block_n}k16" in body
    # one ex2 and one rcp per output register: block_n / 4 per thread (half the accumulators)
    assert len(re.findall(r"\b\w*ex2_approx_ftz_f32\w*\(", body)) == block_n // 4
    assert len(re.findall(r"\b\w*rcp_approx_ftz_f32\w*\(", body)) == block_n // 4
    # the bias is added to every accumulator (block_n / 2 per thread), clamped to B's last row
    assert len(re.findall(r"Bias_ptr\[min\(col_ptr(_\d+)?\[0\], 1999\)\]", body)) == block_n // 2


def test_the_half_width_epilogue_leaves_room_for_a_deeper_ring():
    assert gemm_smem_bytes(4, "bfloat16", 256, gated=True) < gemm_smem_bytes(4, "bfloat16", 256)
    assert deepest_ring(256, "bfloat16") == 3 and deepest_ring(256, "bfloat16", gated=True) == 4
    assert choose_tile(128, 14336, gated=True)["block_n"] in (128, 256)
    assert choose_tile(1, 8, gated=True)["block_n"] == 128  # never 64: its output tile would be 32 wide


@pytest.mark.parametrize("options,match", [
    (dict(block_n=64), r"a gated GEMM needs block_n in \(128, 256\).*found 64"),
    (dict(gated=1), r"gated must be a bool, found 1"),
])
def test_gated_options_it_does_not_take_are_value_errors(options, match):
    options = dict(dict(gated=True, activation="silu"), **options)
    with pytest.raises(ValueError, match=match):
        make_gemm(256, 256, 256, **options)


# -- CPU: the torch op --------------------------------------------------------------------------

def test_gate_up_weight_interleaves_by_eight_rows(torch_cpu):
    from tvm_tirx import ops

    g, u = torch_cpu.randn(24, 5), torch_cpu.randn(24, 5)
    w = ops.gate_up_weight(g, u)
    assert w.shape == (48, 5) and w.is_contiguous()
    for q in range(3):
        assert torch_cpu.equal(w[16 * q : 16 * q + 8], g[8 * q : 8 * q + 8])
        assert torch_cpu.equal(w[16 * q + 8 : 16 * q + 16], u[8 * q : 8 * q + 8])
    with pytest.raises(ValueError, match="multiple of 8, got 20"):
        ops.gate_up_weight(g[:20], u[:20])
    with pytest.raises(ValueError, match="one shape, dtype and device"):
        ops.gate_up_weight(g, u[:16])


_ACT = {"silu": lambda torch, t: torch.nn.functional.silu(t),
        "gelu_tanh": lambda torch, t: torch.nn.functional.gelu(t, approximate="tanh"),
        "relu": lambda torch, t: torch.nn.functional.relu(t)}


def _reference(torch, x, g, u, activation):
    return _ACT[activation](torch, x.float() @ g.float().t()) * (x.float() @ u.float().t())


@pytest.mark.parametrize("activation", ACTS)
def test_the_fallback_and_its_gradients_match_the_unfused_form(torch_cpu, activation):
    torch = torch_cpu
    from tvm_tirx import ops

    torch.manual_seed(0)
    g, u = torch.randn(16, 8, requires_grad=True), torch.randn(16, 8, requires_grad=True)
    x = torch.randn(2, 3, 8, requires_grad=True)
    y = ops.glu_linear(x, g, u, activation, fallback="torch")
    ref = _reference(torch, x, g, u, activation)
    torch.testing.assert_close(y, ref)
    grads = torch.autograd.grad(y.square().sum(), (x, g, u))
    expected = torch.autograd.grad(ref.square().sum(), (x, g, u))
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)


def test_the_op_traces_in_one_graph_and_checks_its_arguments(torch_cpu):
    torch = torch_cpu
    from tvm_tirx import ops

    g, u = torch.randn(16, 16), torch.randn(16, 16)
    explanation = torch._dynamo.explain(lambda x: ops.glu_linear(x, g, u, fallback="torch"))(torch.randn(5, 16))
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0, explanation
    meta = ops.glu_linear(torch.empty(7, 16, device="meta", dtype=torch.bfloat16),
                          *(torch.empty(16, 16, device="meta", dtype=torch.bfloat16) for _ in range(2)),
                          out_dtype=torch.float32)
    assert meta.shape == (7, 16) and meta.dtype == torch.float32
    torch.library.opcheck(torch.ops.tvm_tirx.glu_linear.default, (torch.randn(3, 16), g, u, "silu", None, "torch"))
    with pytest.raises(ValueError, match=r"activation must be one of \['silu', 'gelu_tanh', 'relu'\], got 'tanh'"):
        ops.glu_linear(torch.randn(3, 16), g, u, "tanh", fallback="torch")
    for activation in (None, 1):  # a ValueError, not the op schema's RuntimeError
        with pytest.raises(ValueError, match="activation must be one of"):
            ops.glu_linear(torch.randn(3, 16), g, u, activation, fallback="torch")
    with pytest.raises(ValueError, match=r"w_gate and w_up must have one shape \(n, k\).*got \(16, 16\) on cpu "
                                         r"and \(8, 16\)"):
        ops.glu_linear(torch.randn(3, 16), g, u[:8], fallback="torch")
    with pytest.raises(ops.UnsupportedInput, match="x must be a CUDA tensor"):
        ops.glu_linear(torch.randn(3, 16).bfloat16(), g.bfloat16(), u.bfloat16())
    with pytest.raises(ops.UnsupportedInput, match="n = 12 .* must be a multiple of 8"):
        ops.glu_linear(torch.randn(3, 16).bfloat16(), g[:12].bfloat16(), u[:12].bfloat16())
    # n not a multiple of 8 is a kernel rule: the fallback computes it
    x = torch.randn(3, 16)
    torch.testing.assert_close(ops.glu_linear(x, g[:12], u[:12], fallback="torch"),
                               _reference(torch, x, g[:12], u[:12], "silu"))


@pytest.mark.parametrize("merged", ["cat", "interleaved", "positional activation"])
def test_one_merged_weight_is_refused_naming_the_two_weight_call(torch_cpu, merged):
    # torch.cat([w_gate, w_up]) has the shape of the interleaved weight: it ran and was wrong
    torch = torch_cpu
    from tvm_tirx import ops

    g, u, x = torch.randn(16, 8), torch.randn(16, 8), torch.randn(3, 8)
    w = torch.cat([g, u]) if merged == "cat" else ops.gate_up_weight(g, u)
    args = (x, w, "silu") if merged == "positional activation" else (x, w)
    with pytest.raises(TypeError, match=r"two \(n, k\) tensors, glu_linear\(x, w_gate, w_up, activation\); got "
                                        r"one weight \(32, 8\).*torch.cat.*w.chunk\(2\)"):
        ops.glu_linear(*args, fallback="torch")


def test_the_interleaved_weight_is_made_once_per_pair_until_a_weight_changes(torch_cpu):
    torch = torch_cpu
    from tvm_tirx.ops import glu_weights

    g, u = torch.randn(16, 8), torch.randn(16, 8)
    first = glu_weights.interleaved(g, u)
    assert torch.equal(first, glu_weights.gate_up_weight(g, u))
    assert glu_weights.interleaved(g, u) is first  # cached
    merged = torch.cat([g, u])  # halves of one base: new view objects each call, one entry
    halves = glu_weights.interleaved(*merged.chunk(2))
    assert glu_weights.interleaved(*merged.chunk(2)) is halves
    with torch.no_grad():
        u.mul_(2)  # in place: the version counter moves, the copy is remade
    again = glu_weights.interleaved(g, u)
    assert again is not first and torch.equal(again, glu_weights.gate_up_weight(g, u))
    entries = len(glu_weights._CACHE)
    del g, u, first, again
    assert len(glu_weights._CACHE) == entries - 1  # freed with its weights
    glu_weights.clear_interleaved()
    assert not glu_weights._CACHE


def test_a_recent_pair_is_served_without_the_cache_key_until_it_changes(torch_cpu):
    torch = torch_cpu
    from tvm_tirx.ops import glu_weights

    glu_weights.clear_interleaved()
    g, u = torch.randn(16, 8), torch.randn(16, 8)
    first = glu_weights.interleaved(g, u)
    glu_weights._CACHE.clear()  # the memo alone serves the same two objects
    assert glu_weights.interleaved(g, u) is first
    g.data = torch.randn(16, 8)  # new storage, same object and version: remade
    second = glu_weights.interleaved(g, u)
    assert second is not first and torch.equal(second, glu_weights.gate_up_weight(g, u))
    with torch.no_grad():
        g.add_(1)  # in place: remade
    assert torch.equal(glu_weights.interleaved(g, u), glu_weights.gate_up_weight(g, u))
    del g, first, second
    assert not glu_weights._LAST  # forgotten with its weights


@pytest.mark.parametrize("k", [64, 512])
def test_the_key_is_the_output_width_the_gated_tile_and_the_activation(torch_cpu, monkeypatch, k):
    torch = torch_cpu
    from tvm_tirx import ops
    from tvm_tirx.kernels.gemm import planner
    from tvm_tirx.ops import gemm_kernels, torch_checks

    if k == 512:  # a split plan for the plain GEMM of 2 n rows does not reach the gated kernel
        monkeypatch.setattr(planner, "_OVERRIDES", {(80, 512, None): {"block_n": 128, "stages": 6, "splits": 2}})

    monkeypatch.setattr(torch_checks, "_check_device", lambda names, x, w: None)
    monkeypatch.setattr(torch_checks, "device_target", lambda op, device: "sm_90a")
    keys = []

    def stand_in(key):  # computes what the gated kernel computes, from the interleaved B
        keys.append(key)

        def run(a, b, c):
            pairs = b.float().reshape(-1, 2, 8, b.shape[1])
            g, u = pairs[:, 0].reshape(-1, b.shape[1]), pairs[:, 1].reshape(-1, b.shape[1])
            c.copy_(_reference(torch, a, g, u, key.activation))

        run.launcher = lambda *args: run  # as Kernel.launcher: the unchecked launch function
        return run

    monkeypatch.setattr(gemm_kernels, "_compile", stand_in)
    gemm_kernels.clear_kernels()
    try:
        g, u = torch.randn(40, k).bfloat16(), torch.randn(40, k).bfloat16()
        x = torch.randn(2, 9, k).bfloat16()
        y = ops.glu_linear(x, g, u, "gelu_tanh", out_dtype=torch.float32)
        torch.testing.assert_close(y, _reference(torch, x, g, u, "gelu_tanh"))
        (key,) = keys
        assert (key.n, key.k, key.gated, key.activation, key.block_n, key.splits) == (40, k, True, "gelu_tanh", 128, 1)
    finally:
        gemm_kernels.clear_kernels()


# -- GPU -----------------------------------------------------------------------------------------

GPU_CASES = [((1000, 1000, 256), "bfloat16", 256, dict(activation="silu")),
             ((129, 999, 72), "bfloat16", 128, dict(activation="gelu_tanh", bias="bfloat16")),
             ((300, 520, 200), "float32", 128, dict(activation="relu", bias="float32")),
             ((129, 999, 72), "bfloat16", 128, dict(activation="silu", block_m=64))]  # one consumer warpgroup


@pytest.mark.gpu
@pytest.mark.parametrize("shape,out_dtype,block_n,options", GPU_CASES,
                         ids=["tma-store", "guarded-b16", "fp32", "64-row"])
def test_the_gated_kernel_on_gpu(torch_cuda, shape, out_dtype, block_n, options):
    torch = torch_cuda
    m_max, n, k = shape
    kernel = tvm_tirx.compile(make_gemm(T.dynamic("m"), n, k, out_dtype=out_dtype, block_n=block_n, gated=True,
                                        persistent=False, **options), target="cuda")
    rows = 2 * -(-n // 8) * 8
    for m in (1, 127, m_max):
        torch.manual_seed(m)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)  # gate/up rows interleaved by eight
        bias = torch.randn(rows, device="cuda", dtype=getattr(torch, options.get("bias", "float32"))) * 4
        c = torch.full((m, n), float("nan"), device="cuda", dtype=getattr(torch, out_dtype))
        acc = a.float() @ b.float().t() + (bias.float() if "bias" in options else 0)
        pairs = acc.reshape(m, rows // 16, 2, 8)
        gate, up = pairs[:, :, 0].reshape(m, -1)[:, :n], pairs[:, :, 1].reshape(m, -1)[:, :n]
        ref = _ACT[options["activation"]](torch, gate) * up
        kernel(a, b, *([bias] if "bias" in options else []), c)
        torch.cuda.synchronize()
        err = ((c.float() - ref).abs().max() / ref.abs().max()).item()  # NaN (unwritten) fails too
        assert err <= (1e-2 if out_dtype == "bfloat16" else 2e-3), f"{options} m={m}: max relative error {err:.2e}"


@pytest.mark.gpu
def test_glu_linear_on_gpu_eager_and_compiled(torch_cuda):
    torch = torch_cuda
    from tvm_tirx import ops

    torch.manual_seed(0)
    g = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16) / 16
    u = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16) / 16
    compiled = torch.compile(lambda x: ops.glu_linear(x, g, u), fullgraph=True, dynamic=True)
    for m in (1, 300, 4096):
        x = torch.randn(m, 512, device="cuda", dtype=torch.bfloat16)
        ref = _reference(torch, x, g, u, "silu")
        for y in (ops.glu_linear(x, g, u), compiled(x)):
            err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
            assert y.shape == (m, 1024) and err <= 1e-2, f"m={m}: max relative error {err:.2e}"
