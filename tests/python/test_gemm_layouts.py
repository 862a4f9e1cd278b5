"""``make_gemm(a_major=, b_major=)``: A stored ``(k, m)``, B stored ``(k, n)`` (MN-major).

CPU: every pair of majors compiles and assembles for sm_90a (static and run-time m,
cluster=2, gated); an MN-major stage is loaded one 64-column TMA box per chunk and read
through wgmma's MN-major descriptor (LBO 8192 bytes, SBO 1024, 128-byte swizzle); the
K-major kernel is unchanged by the option; rows the TMA cannot address, fp8 with an
MN-major operand and unknown majors are ValueErrors.
GPU (marker ``gpu``): each pair of majors against the fp32 product with NaN-filled outputs
at odd shapes, one run-time-m kernel with an N-major B at m = 1 .. 16385, an M-major A at
run-time m (and the launch-time refusal of rows the TMA cannot address), cluster=2 and a
gated GEMM with N-major B.
"""

import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.gemm import make_gemm
from tvm_tirx.script import tirx as T

from test_kernels_gemm import _kernel as _built

MAJORS = [("k", "k"), ("k", "n"), ("m", "k"), ("m", "n")]
IDS = [f"A{a}-B{b}" for a, b in MAJORS]
LOAD = "ptx_cp_async_bulk_tensor_g2s"


def _kernel(m, n, k, **options):
    """The kernel compiled for sm_90a and assembled, once per test session (test_kernels_gemm's cache)."""
    return _built(f"layouts {m} {n} {k} {sorted(options.items())}", m, n, k, **options)


def _params(func):
    return re.search(r"def \w+\((.*?)\):", func.script()).group(1)


def _loads(kernel):
    """TMA loads in the kernel's body (the producer issues each once per stage)."""
    return len(re.findall(LOAD, kernel.cuda_source[kernel.cuda_source.index("__global__") :]))


def _descriptors(func):
    """``(LBO, SBO, swizzle)`` of each wgmma descriptor the lowered kernel encodes, in order."""
    script = testing.lower(func).script()
    return re.findall(r"encode_matrix_descriptor\(.*?, (\d+), (\d+), (\d+)\)", script)


# -- CPU ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("a_major,b_major", MAJORS, ids=IDS)
def test_every_pair_of_majors_compiles_and_assembles(a_major, b_major):
    _kernel(4104, 4104, 4104, a_major=a_major, b_major=b_major)
    _kernel(T.dynamic("m"), 1000, 1000, a_major=a_major, b_major=b_major, block_n=128, out_dtype="float32",
            stages=4)


def test_the_operands_take_the_shapes_of_their_majors():
    params = _params(make_gemm(T.dynamic("m"), 1000, 512, a_major="m", b_major="n"))
    assert re.search(r'A: T\.Buffer\(\(512, "?m"?\), "bfloat16"', params), params
    assert re.search(r'B: T\.Buffer\(\(512, 1000\), "bfloat16"', params), params
    assert re.search(r'C: T\.Buffer\(\("?m"?, 1000\), "bfloat16"', params), params


@pytest.mark.parametrize("block_n", [64, 256])
def test_an_n_major_b_is_loaded_by_chunks_and_read_through_the_mn_major_descriptor(block_n):
    k_major = make_gemm(4096, 4096, 4096, block_n=block_n, stages=3)
    n_major = make_gemm(4096, 4096, 4096, block_n=block_n, stages=3, b_major="n")
    # A: K-major, 128-byte rows (LBO unused, 1; SBO 1024 bytes = 64); B K-major: the same
    assert _descriptors(k_major) == [("1", "64", "3"), ("1", "64", "3")]
    # B N-major: the next 64-column chunk at 8192 bytes (LBO 512), the next 8 K-rows at 1024
    assert _descriptors(n_major) == [("1", "64", "3"), ("512" if block_n > 64 else "0", "64", "3")]
    # loads per stage: A's box, then B's one box or block_n / 64 chunks
    loads = [_loads(_kernel(4096, 4096, 4096, block_n=block_n, stages=3, b_major=b)) for b in ("k", "n")]
    assert loads == [2, 1 + block_n // 64]


def test_an_m_major_a_is_two_chunks_each_consumer_reading_its_own():
    func = make_gemm(4096, 4096, 4096, a_major="m")
    # A M-major: one consumer's 64 rows are one chunk (LBO unused), its 8 K-rows at 1024 bytes
    assert _descriptors(func) == [("0", "64", "3"), ("1", "64", "3")]
    assert _loads(_kernel(4096, 4096, 4096, a_major="m")) == 3  # two chunks of A, one box of B


def test_mn_major_operands_assemble_with_cluster_2_and_gated():
    _kernel(4096, 4096, 4096, b_major="n", cluster=2)
    _kernel(4096, 4096, 4096, a_major="m", b_major="n", cluster=2, block_n=128, stages=5)
    _kernel(T.dynamic("m"), 1000, 512, b_major="n", gated=True, activation="silu", block_n=128, persistent=False)


@pytest.mark.parametrize(
    "shape,options,match",
    [
        ((1024, 1001, 64), dict(b_major="n"), r"TMA row stride not a multiple of 16 bytes: n: B \(k, n\) rows of 1001 "
                                              r"bfloat16 take 2002 bytes"),
        ((1001, 256, 64), dict(a_major="m"), r"TMA row stride .*: m: A \(k, m\) rows of 1001 bfloat16"),
        ((1024, 256, 100), dict(b_major="n"), r"TMA row stride .*: k: A \(m, k\) rows of 100 bfloat16"),
        ((1024, 256, 64), dict(b_major="n", in_dtype="float8_e4m3fn"),
         r"b_major='n' needs in_dtype='bfloat16': wgmma reads MN-major tiles through its transpose immediates"),
        ((1024, 256, 64), dict(a_major="n"), r"a_major must be one of \['k', 'm'\] \(the innermost axis of A\), "
                                             r"found 'n'"),
        ((1024, 256, 64), dict(b_major="K"), r"b_major must be one of \['k', 'n'\]"),
        ((1024, 256, 64), dict(b_major="n", cluster=2, block_n=64),
         r"cluster=2 with b_major='n' loads whole 64-column chunks of B in each CTA: it needs block_n 128 or 256"),
    ],
    ids=["n-stride", "m-stride", "k-stride-of-k-major-a", "fp8", "a-major", "b-major", "cluster-chunks"],
)
def test_layouts_it_cannot_take_are_value_errors(shape, options, match):
    with pytest.raises(ValueError, match=match):
        make_gemm(*shape, **options)


def test_both_operands_mn_major_take_any_k():
    # K is the outer axis of both: no row stride depends on it
    _kernel(1000, 1000, 1001, a_major="m", b_major="n")


def test_the_k_major_kernel_is_the_one_without_the_options():
    assert make_gemm(4000, 4096, 4104).script() == make_gemm(4000, 4096, 4104, a_major="k", b_major="k").script()


# -- on the GPU --------------------------------------------------------------------------------

PAD_ROWS = 3


def _run(torch, kernel, m, n, k, a_major, b_major, seed=0, out_dtype="bfloat16"):
    """Run ``kernel`` on random bf16 operands stored in its majors into a NaN-filled C (the
    first m rows of a taller buffer) and compare with the fp32 product."""
    torch.manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    buffer = torch.full((m + PAD_ROWS, n), float("nan"), device="cuda", dtype=getattr(torch, out_dtype))
    c = buffer[:m]
    kernel(a if a_major == "k" else a.t().contiguous(), b if b_major == "k" else b.t().contiguous(), c)
    torch.cuda.synchronize()
    ref = a.float() @ b.float().t()
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()  # NaN (unwritten) fails too
    assert err <= 1e-2, f"{(m, n, k)} A {a_major}-major B {b_major}-major: max relative error {err:.2e}"
    assert torch.isnan(buffer[m:].float()).all(), f"{(m, n, k)}: rows past m were written"


@pytest.mark.gpu
@pytest.mark.parametrize("a_major,b_major", MAJORS, ids=IDS)
@pytest.mark.parametrize("shape", [(4104, 4104, 4104), (136, 264, 72), (1000, 1000, 1000)],
                         ids=lambda s: "x".join(map(str, s)))
def test_every_pair_of_majors_on_gpu(torch_cuda, a_major, b_major, shape):
    kernel = tvm_tirx.compile(make_gemm(*shape, a_major=a_major, b_major=b_major), target="cuda")
    _run(torch_cuda, kernel, *shape, a_major, b_major)


@pytest.mark.gpu
@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "one-tile"])
def test_run_time_m_with_n_major_b_on_gpu_from_one_kernel(torch_cuda, persistent):
    kernel = tvm_tirx.compile(make_gemm(T.dynamic("m"), 4096, 4096, b_major="n", persistent=persistent),
                              target="cuda")
    for m in (1, 127, 128, 1000, 4096, 16385):
        _run(torch_cuda, kernel, m, 4096, 4096, "k", "n", seed=m)


@pytest.mark.gpu
def test_run_time_m_with_m_major_a_on_gpu(torch_cuda):
    kernel = tvm_tirx.compile(make_gemm(T.dynamic("m"), 1000, T.dynamic("k"), a_major="m", b_major="n",
                                        out_dtype="float32", stages=4), target="cuda")
    for m, k in [(8, 8), (128, 1001), (1000, 64), (4104, 4100)]:
        _run(torch_cuda, kernel, m, 1000, k, "m", "n", seed=m + k, out_dtype="float32")
    a = torch_cuda.zeros(64, 127, device="cuda", dtype=torch_cuda.bfloat16)  # A (k, m): 254-byte rows
    b = torch_cuda.zeros(64, 1000, device="cuda", dtype=torch_cuda.bfloat16)
    c = torch_cuda.zeros(127, 1000, device="cuda")
    with pytest.raises(ValueError, match="global stride not a multiple of 16 bytes"):
        kernel(a, b, c)


@pytest.mark.gpu
def test_n_major_b_with_cluster_2_on_gpu(torch_cuda):
    kernel = tvm_tirx.compile(make_gemm(4000, 4104, 4104, b_major="n", cluster=2), target="cuda")
    _run(torch_cuda, kernel, 4000, 4104, 4104, "k", "n")


@pytest.mark.gpu
def test_gated_gemm_with_n_major_b_on_gpu(torch_cuda):
    torch = torch_cuda
    m, n, k = 1000, 1000, 512
    kernel = tvm_tirx.compile(make_gemm(T.dynamic("m"), n, k, b_major="n", gated=True, activation="silu",
                                        block_n=128), target="cuda")
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(2 * n, k, device="cuda", dtype=torch.bfloat16) / 8  # rows interleaved by 8: gate, up
    gate_rows = (torch.arange(2 * n, device="cuda") // 8) % 2 == 0
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernel(a, b.t().contiguous(), c)
    torch.cuda.synchronize()
    ref = torch.nn.functional.silu(a.float() @ b[gate_rows].float().t()) * (a.float() @ b[~gate_rows].float().t())
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
    assert err <= 1e-2, f"gated, N-major B: max relative error {err:.2e}"
