"""The raw-``T.ptx`` Hopper reference kernels (hopper_raw_kernels.py): each compiles
for sm_90a, assembles with ptxas, issues exactly the PTX it spells, and (on the GPU)
computes what torch computes."""

import pytest

import tvm_tirx
from tvm_tirx import testing

import hopper_raw_kernels as H

# The PTX instructions each kernel must issue, in program order (the text ptxas sees,
# operands stripped).
EXPECTED_PTX = {
    "tma_add_one": [
        "elect.sync",
        "mbarrier.init.shared::cta.b64",
        "fence.mbarrier_init.release.cluster",
        "elect.sync",
        "mbarrier.arrive.expect_tx.shared::cta.b64",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
        "mbarrier.try_wait.parity.shared::cta.b64",
        "fence.proxy.async.shared::cta",
        "elect.sync",
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
        "cp.async.bulk.commit_group",
        "cp.async.bulk.wait_group",
    ],
    "bulk_copy_4k": [
        "mbarrier.init.shared::cta.b64",
        "fence.mbarrier_init.release.cluster",
        "mbarrier.arrive.expect_tx.shared::cta.b64",
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
        "mbarrier.try_wait.parity.shared::cta.b64",
        "fence.proxy.async.shared::cta",
        "cp.async.bulk.global.shared::cta.bulk_group",
        "cp.async.bulk.commit_group",
        "cp.async.bulk.wait_group",
    ],
    "tma_swizzle128_bf16": [
        "mbarrier.init.shared::cta.b64",
        "fence.mbarrier_init.release.cluster",
        "mbarrier.arrive.expect_tx.shared::cta.b64",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
        "mbarrier.try_wait.parity.shared::cta.b64",
    ],
}

_WATCHED = ("elect.", "mbarrier.", "fence.", "cp.async.")


def _issued(ptx: str) -> list:
    """The watched instructions of a PTX text, in order (one per asm statement)."""
    out = []
    for line in ptx.splitlines():
        for stmt in line.replace("{", ";").replace("}", ";").split(";"):
            words = stmt.strip().split()
            if words and words[0].startswith("@"):
                words = words[1:]
            if words and words[0].startswith(_WATCHED):
                out.append(words[0])
    return out


def _compile(name):
    return tvm_tirx.compile(H.KERNELS[name], target="cuda", arch="sm_90a")


@pytest.mark.parametrize("name", sorted(H.KERNELS))
def test_compiles_for_sm90a_with_dynamic_shared_memory(name):
    source = _compile(name).cuda_source
    assert "extern __shared__ __align__(1024) uchar dyn_smem_ptr[];" in source


@pytest.mark.parametrize("name", ["tma_add_one", "tma_swizzle128_bf16"])
def test_tensor_maps_reach_the_kernel_as_grid_constants(name):
    source = _compile(name).cuda_source
    assert "const __grid_constant__ CUtensorMap a_map" in source


@testing.requires_nvcc
@pytest.mark.parametrize("name", sorted(H.KERNELS))
def test_assembles_for_sm90a_and_issues_the_spelled_ptx(name):
    kernel = _compile(name)
    assert len(testing.assemble(kernel)) > 0
    assert _issued(testing.assemble(kernel, fmt="ptx").decode()) == EXPECTED_PTX[name]


# -- on the GPU ----------------------------------------------------------------------------


@pytest.mark.gpu
def test_tma_add_one_on_the_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(H.tma_add_one, target="cuda")
    a = torch.randn(H.ROWS, H.COLS, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a + 1)


@pytest.mark.gpu
def test_bulk_copy_4k_on_the_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(H.bulk_copy_4k, target="cuda")
    a = torch.randn(H.BULK_ELEMS, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a * 2)


def swizzle128(a):
    """The 128-byte swizzle of a (rows, 64) 2-byte tensor: 16-byte chunk c of row r
    is stored at chunk c ^ (r % 8) (CUDA C++ Programming Guide, TMA swizzle modes)."""
    rows, cols = a.shape
    out = a.clone()
    for r in range(rows):
        for c in range(cols // 8):
            d = c ^ (r % 8)
            out[r, d * 8 : d * 8 + 8] = a[r, c * 8 : c * 8 + 8]
    return out


@pytest.mark.gpu
def test_tma_swizzle128_bf16_on_the_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(H.tma_swizzle128_bf16, target="cuda")
    a = torch.randn(H.SW, H.SW, device="cuda").to(torch.bfloat16)
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, swizzle128(a))
    assert not torch.equal(b, a)  # the swizzle moved data


def test_swizzle128_reference_is_a_chunk_permutation(torch_cpu):
    torch = torch_cpu
    a = torch.arange(8 * 64, dtype=torch.float32).reshape(8, 64)
    s = swizzle128(a)
    assert torch.equal(s[0], a[0])  # row 0: chunk c -> c
    assert torch.equal(s[1, 0:8], a[1, 8:16])  # row 1: chunk 1 -> 0
    assert torch.equal(s[7, 56:64], a[7, 0:8])  # row 7: chunk 0 -> 7
