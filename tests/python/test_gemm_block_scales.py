"""FP8 with block scales (``make_gemm(block_scales=True)``, ``kernels/gemm/block_scales.py``):
1 x 128 scales of A and 128 x 128 scales of B, the DeepGEMM format.

CPU: the options it refuses; its name and signature (``ScalesA``, ``ScalesB`` after C);
the kernel compiles and assembles without spills for both tile widths; per K tile it
loads three scales, multiplies the stage into the second accumulator set with the first
wgmma overwriting it, waits for it and promotes every accumulator once (one ``fma`` per
register, the row's scale), and no per-tensor ``Scale`` stage runs after.
GPU (marker ``gpu``): against the dequantized fp32 product into NaN-filled outputs, for
ragged m, n and k (a last K block and a last B block of fewer than 128).
"""

import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.gemm import GemmSpec, make_gemm

FP8 = "float8_e4m3fn"


def _body(source: str) -> str:
    return source[source.index("__global__"):]


@pytest.mark.parametrize("options,match", [
    (dict(in_dtype="bfloat16"), "needs in_dtype='float8_e4m3fn'"),
    (dict(block_n=256), r"block_n in \(64, 128\)"),
    (dict(bias="float32"), r"fused \['bias'\]"),
    (dict(block_m=256), "block_m=128"),
    (dict(block_scales=1), "block_scales must be a bool"),
])
def test_what_block_scales_refuse(options, match):
    with pytest.raises(ValueError, match=match):
        make_gemm(256, 256, 512, **{"in_dtype": FP8, "block_n": 128, "block_scales": True, "persistent": False,
                                    **options})


def test_the_name_and_signature():
    spec = GemmSpec(1000, 4000, in_dtype=FP8, block_n=64, block_scales=True)
    assert spec.name == "tvm_tirx_gemm_n1000_k4000_float8_e4m3fn_bf16_bn64_block_scaled"
    params = spec.build(777).params
    assert [p.name for p in params] == ["A", "B", "C", "ScalesA", "ScalesB"]
    # ceil(4000 / 128) = 32 blocks of K; ceil(1000 / 128) = 8 blocks of B's rows
    assert [[int(x) for x in p.ty.shape] for p in params[3:]] == [[777, 32], [8, 32]]
    assert {str(p.ty.dtype) for p in params[3:]} == {"float32"}


@pytest.mark.parametrize("block_n", [64, 128])
def test_the_kernel_promotes_each_block_once_without_spills(block_n):
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    kernel = tvm_tirx.compile(GemmSpec(1000, 4000, in_dtype=FP8, block_n=block_n, block_scales=True).build(777),
                              target="cuda", arch="sm_90a")
    assert len(testing.assemble(kernel)) > 0
    report = testing.ptxas_report(kernel)
    assert "0 bytes spill stores" in report, report
    body = _body(kernel.cuda_source)
    loop = body[body.index("for (int kt_1"):]  # the consumers' main loop (the producer's is kt)
    loop = loop[: loop.index("\n      }\n")]
    calls = {name: len(re.findall(rf"\b\w*{name}\w*\(", loop))
             for name in ("ld_global_f32", "mul_rn_f32", "fma_rn_f32", "wait_group_sync_aligned_0", "m64n")}
    # per 128-element K block: the two rows' scales of A and B's (of the next block), one
    # product of 4 k32 wgmma, its wait, the two rows' factors and one fma per accumulator register
    assert calls == {"ld_global_f32": 3, "mul_rn_f32": 2, "fma_rn_f32": block_n // 2, "wait_group_sync_aligned_0": 1,
                     "m64n": 4}, calls
    # the first block's scales before the loop; in it, block kt + 1's (but after the last block)
    # into the second three registers, loaded before this block's wait; copied at its end
    before = body[: body.index(loop)]
    assert len(re.findall(r"ld_global_f32\(scale_regs_ptr\[[012]\]", before[before.rindex("mov_b32"):])) == 3
    prefetch = re.findall(r"if \(kt_1 < 31\) \{\s*(?:(?:tvm_builtin_ptx_ld_global_f32\(scale_regs_ptr\[[345]\][^;]*"
                          r"kt_1\) \+ 1\)\]\)\)\);\s*){3})\}", loop)
    assert len(prefetch) == 1 and loop.index("if (kt_1 < 31)") < loop.index("mbarrier_wait")
    assert re.search(r"if \(kt_1 < 31\) \{\s*scale_regs_ptr\[0\] = scale_regs_ptr\[3\];\s*"
                     r"scale_regs_ptr\[1\] = scale_regs_ptr\[4\];\s*scale_regs_ptr\[2\] = scale_regs_ptr\[5\];", loop)
    assert len(re.findall(r"m64n\d+k32\w*\([^;]*\(bool\)0\)", loop)) == 1  # the first overwrites the block's sum
    assert "mul_rn_f32" not in body[body.index(loop) + len(loop):]  # no per-tensor Scale after the loop


# -- GPU -----------------------------------------------------------------------------------------

GPU_CASES = [(256, 256, 512, 128), (1000, 1000, 4000, 64), (777, 4104, 1040, 128), (4096, 4096, 4096, 128)]


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,block_n", GPU_CASES)
def test_block_scales_on_gpu(torch_cuda, m, n, k, block_n):
    torch = torch_cuda
    a8, b8, sa, sb = testing.random_block_scaled(m, n, k)
    kernel = tvm_tirx.compile(make_gemm(m, n, k, in_dtype=FP8, block_n=block_n, block_scales=True, persistent=False),
                              target="cuda")
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernel(a8, b8, c, sa, sb)
    torch.cuda.synchronize()
    ref = testing.block_scaled_product(a8, b8, sa, sb)
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()  # NaN (unwritten) fails too
    assert err < 1e-2, err
