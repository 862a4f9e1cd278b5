"""The residual epilogue (``make_gemm(residual=True)``), ``ops.linear(..., residual=)`` and its Relax fold.

CPU: the kernel takes ``(A, B, [Bias,] Residual, C)`` and reads one clamped residual
pair per two output registers before its last products retire (one element per register
for an odd ``n``); options it refuses; the torch op's fallback, gradients,
opcheck and rules; the Relax offload folds ``R.add(x, matmul)`` of the product's shape into
the GEMM (and leaves a broadcast add alone), computing the same on the CPU with a
reference kernel.
GPU (marker ``gpu``): the kernel on its three store paths against the fp32 reference,
NaN-filled outputs, one run-time-m kernel at several m; ``ops.linear`` with a residual.
"""

import re

import pytest
import tvm
from tvm import relax, te
from tvm.script import ir as I
from tvm.script import relax as R

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.gemm import make_gemm
from tvm_tirx.ops.relax_offload import partition_for_tvm_tirx
from tvm_tirx.script import tirx as T


def _params(func):
    return re.findall(r"(\w+): T.Buffer", re.search(r"def \w+\((.*?)\):", func.script()).group(1))


@testing.requires_nvcc
@pytest.mark.parametrize("block_n", [128, 256])
def test_the_kernel_reads_one_clamped_residual_pair_per_two_registers_under_the_last_products(block_n):
    func = make_gemm(T.dynamic("m"), 1000, 256, residual=True, bias="bfloat16", block_n=block_n, persistent=False)
    assert _params(func) == ["A", "B", "Bias", "Residual", "C"]
    kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
    assert len(testing.assemble(kernel)) > 0
    body = kernel.cuda_source[kernel.cuda_source.index("__global__"):]
    loads = re.findall(r"ld_global_b32\([^;]*Residual_ptr[^;]*", body)
    assert len(loads) == block_n // 4, len(loads)  # one b32 word per pair of accumulator registers
    assert "Residual_ptr)[" not in body.replace("((uint*)Residual_ptr)[", "")  # no element loads
    # each row clamped to m - 1 and each word column to n / 2 - 1 before its load
    assert len(re.findall(r"row_ptr(_\d+)?\[0\] = min\(.*, \(m - 1\)\);", body)) == block_n // 4
    assert len(re.findall(r"col_ptr(_\d+)?\[0\] = min\(.*, 499\);", body)) == block_n // 4
    # issued before the consumer's last wgmma.wait_group 0: their latency hides under the last products
    assert body.index("ld_global_b32") < body.rindex("wgmma_wait_group_wait_group_sync_aligned_0")


@testing.requires_nvcc
def test_an_odd_n_reads_one_clamped_residual_element_per_output_register():
    func = make_gemm(T.dynamic("m"), 999, 256, residual=True, block_n=128, persistent=False)
    kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
    assert len(testing.assemble(kernel)) > 0
    body = kernel.cuda_source[kernel.cuda_source.index("__global__"):]
    assert len(re.findall(r"Residual_ptr\[[^;]*", body)) == 64  # block_n / 2 registers
    assert "ld_global_b32" not in body


@pytest.mark.parametrize("options,match", [(dict(residual=1), "residual must be a bool, found 1"),
                                           (dict(residual=True, in_dtype="float8_e4m3fn"),
                                            "residual needs in_dtype='bfloat16'")])
def test_residual_options_it_does_not_take_are_value_errors(options, match):
    with pytest.raises(ValueError, match=match):
        make_gemm(256, 256, 256, **options)


def test_the_torch_fallback_gradients_and_opcheck(torch_cpu):
    torch = torch_cpu
    from tvm_tirx import ops

    torch.manual_seed(0)
    x, w = torch.randn(2, 3, 16, requires_grad=True), torch.randn(24, 16, requires_grad=True)
    b, r = torch.randn(24, requires_grad=True), torch.randn(2, 3, 24, requires_grad=True)
    for bias in (None, b):
        y = ops.linear(x, w, bias, residual=r, fallback="torch")
        ref = torch.nn.functional.linear(x, w, bias) + r
        torch.testing.assert_close(y, ref)
        wanted = [t for t in (x, w, bias, r) if t is not None]
        for got, want in zip(torch.autograd.grad(y.square().sum(), wanted), torch.autograd.grad(ref.square().sum(), wanted)):
            torch.testing.assert_close(got, want)
    torch.testing.assert_close(ops.linear(x, w, residual=r[:1], fallback="torch"), x @ w.t() + r[:1])  # broadcast
    torch.library.opcheck(torch.ops.tvm_tirx.linear_residual.default,
                          (x.detach(), w.detach(), None, r.detach(), None, "torch"))


def test_a_non_floating_residual_is_a_type_error_naming_it(torch_cpu):
    torch = torch_cpu
    from tvm_tirx import ops

    x, w = torch.randn(2, 16), torch.randn(24, 16)
    for residual in (torch.ones(2, 24, dtype=torch.int64), torch.ones(24, dtype=torch.int64)):  # fused, broadcast
        with pytest.raises(TypeError, match="residual must be floating-point, got torch.int64"):
            ops.linear(x, w, residual=residual, fallback="torch")


def test_residual_in_gemm_options_is_refused_by_the_offload():
    with pytest.raises(ValueError, match="residual"):
        partition_for_tvm_tirx(Skip, gemm_options={"residual": True})


def test_the_residual_rules_name_the_argument(torch_cpu, monkeypatch):
    torch = torch_cpu
    from tvm_tirx.ops import torch_checks, torch_ops

    monkeypatch.setattr(torch_checks, "_check_device", lambda names, x, w: None)
    monkeypatch.setattr(torch_checks, "device_target", lambda op, device: "sm_90a")
    x, w = torch.randn(4, 16).bfloat16(), torch.randn(24, 16).bfloat16()
    for residual, message in ((torch.randn(4, 24), "residual must have the output's dtype torch.bfloat16"),
                              (torch.randn(24, 4).bfloat16().t(), "residual must be contiguous"),
                              (torch.randn(97).bfloat16()[1:].view(4, 24),
                               "residual must start at a 4-byte aligned address")):
        with pytest.raises(torch_checks.UnsupportedInput, match=message):
            torch_ops.run_gemm(torch_ops.LINEAR, x, w, None, None, residual=residual)


@I.ir_module
class Skip:
    @R.function
    def main(x: R.Tensor(("b", "s", 64), "bfloat16"), w: R.Tensor((64, 64), "bfloat16"),
             row: R.Tensor((1, 1, 64), "bfloat16")):
        with R.dataflow():
            y = R.add(x, R.matmul(x, R.permute_dims(w)))
            z = R.add(R.matmul(y, R.permute_dims(w)), row)  # broadcast: stays a Relax add
            R.output(z)
        return z


def _reference(name):
    """A TE kernel with the contract of the GEMM ``name`` (plain or with a residual)."""
    n, k, residual = re.fullmatch(r"tvm_tirx_gemm_n(\d+)_k(\d+)_bf16_bf16(_residual)?", name).groups()
    a = te.placeholder((tvm.tirx.Var("m", "int64"), int(k)), "bfloat16", "A")
    b = te.placeholder((int(n), int(k)), "bfloat16", "B")
    res = te.placeholder((a.shape[0], int(n)), "bfloat16", "Residual") if residual else None
    r = te.reduce_axis((0, int(k)), "r")
    acc = te.compute((a.shape[0], int(n)), lambda i, j: te.sum(a[i, r].astype("float32") * b[j, r].astype("float32"),
                                                             axis=r))
    c = te.compute(acc.shape, lambda i, j: (acc[i, j] + (res[i, j].astype("float32") if res is not None else 0.0))
                   .astype("bfloat16"))
    return te.create_prim_func([a, b, *([res] if res is not None else []), c]).with_attr("global_symbol", name)


def test_a_residual_add_folds_into_the_gemm_and_computes_the_same_on_the_cpu(torch_cpu):
    torch = torch_cpu
    after = partition_for_tvm_tirx(Skip)
    main = after["main"].script()
    assert "tvm_tirx_gemm_n64_k64_bf16_bf16_residual, (" in main and main.count("R.add(") == 1, main
    for gv, _ in list(after.functions_items()):
        if gv.name_hint.startswith("tvm_tirx_gemm_"):
            after.update_func(gv, _reference(gv.name_hint))
    vm = relax.VirtualMachine(tvm.compile(after, target="llvm"), tvm.cpu())
    torch.manual_seed(0)
    x, w, row = (torch.randn(2, 5, 64) / 4).bfloat16(), (torch.randn(64, 64) / 8).bfloat16(), torch.randn(1, 1, 64).bfloat16()
    z = torch.from_dlpack(vm["main"](*[tvm.runtime.from_dlpack(t) for t in (x, w, row)]))
    y = (x.float() + x.float() @ w.float().t()).bfloat16()  # fused: one rounding
    ref = ((y.float() @ w.float().t()).bfloat16() + row).float()
    assert ((z.float() - ref).abs().max() / ref.abs().max()).item() < 1e-2


GPU_CASES = [((1000, 1000, 256), "bfloat16", 256), ((129, 999, 72), "bfloat16", 128), ((300, 520, 200), "float32", 128)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,out_dtype,block_n", GPU_CASES, ids=["tma-store", "guarded-b16", "fp32"])
def test_the_residual_kernel_on_gpu(torch_cuda, shape, out_dtype, block_n):
    torch = torch_cuda
    m_max, n, k = shape
    kernel = tvm_tirx.compile(make_gemm(T.dynamic("m"), n, k, out_dtype=out_dtype, block_n=block_n, residual=True,
                                        bias="float32", persistent=False), target="cuda")
    dtype = getattr(torch, out_dtype)
    for m in (1, 127, m_max):
        torch.manual_seed(m)
        a, b = (torch.randn(rows, k, device="cuda", dtype=torch.bfloat16) for rows in (m, n))
        bias, res = torch.randn(n, device="cuda"), torch.randn(m, n, device="cuda", dtype=dtype) * 8
        c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        kernel(a, b, bias, res, c)
        torch.cuda.synchronize()
        ref = a.float() @ b.float().t() + bias + res.float()
        err = ((c.float() - ref).abs().max() / ref.abs().max()).item()  # NaN (unwritten) fails too
        assert err <= (1e-2 if out_dtype == "bfloat16" else 1e-4), f"m={m}: max relative error {err:.2e}"


@pytest.mark.gpu
def test_linear_with_a_residual_on_gpu(torch_cuda):
    torch = torch_cuda
    from tvm_tirx import ops

    w = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    for m in (1, 1000):
        x = torch.randn(2, m, 256, device="cuda", dtype=torch.bfloat16)
        r = torch.randn(2, m, 512, device="cuda", dtype=torch.bfloat16) * 8
        y = ops.linear(x, w, residual=r)
        ref = x.float() @ w.float().t() + r.float()
        assert ((y.float() - ref).abs().max() / ref.abs().max()).item() <= 1e-2
