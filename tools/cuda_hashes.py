"""Print a hash of the generated CUDA of the shipped GEMM and attention kernels (sm_90a, no GPU needed).

Run it before and after a change to the checker or the lowering and diff the two outputs:
a change that must leave the generated code alone shows no difference.

    python tools/cuda_hashes.py > before.txt   # (on the old checkout)
    python tools/cuda_hashes.py > after.txt && diff before.txt after.txt
"""
import hashlib
import os

os.environ["TVM_TIRX_CACHE"] = "0"
import tvm_tirx  # noqa: E402
from tvm_tirx.kernels.gemm import make_gemm  # noqa: E402
from tvm_tirx.kernels.attention import choose_attention  # noqa: E402
from tvm_tirx.ops import attention_kernels, gemm_kernels  # noqa: E402

#: name -> the PrimFunc to compile (the forms the ops and the benchmarks use)
CASES = {
    "gemm_bf16": lambda: make_gemm(1024, 1024, 1024),
    "gemm_f32": lambda: make_gemm(1000, 1000, 1024, out_dtype="float32"),
    "gemm_rt_m": lambda: gemm_kernels.gemm_prim_func(4096, 4096),
    "gemm_bias_res": lambda: gemm_kernels.gemm_prim_func(1024, 512, bias="float32", residual=True, block_n=128, stages=6),
    "gemm_glu": lambda: gemm_kernels.gemm_prim_func(1024, 512, gated=True, activation="silu", block_n=128, stages=4),
    "gemm_am_bn": lambda: gemm_kernels.gemm_prim_func(1024, 512, a_major="m", b_major="n"),
    "gemm_fp8": lambda: make_gemm(2048, 2048, 2048, in_dtype="float8_e4m3fn"),
    "gemm_cluster2": lambda: make_gemm(4096, 4096, 4096, cluster=2),
    "gemm_spin_wait0": lambda: make_gemm(4096, 4096, 4096, spin=True, wait_depth=0, persistent=False),
    "gemm_coop_256": lambda: gemm_kernels.gemm_prim_func(4096, 4096, block_m=256, block_n=128, stages=4, residual=True),
    "small_m_split": lambda: gemm_kernels.SmallMSpec(4096, 4096, "bfloat16", "sm_90a", 8, 4, 8).prim_func(),
    "small_m_f32": lambda: gemm_kernels.SmallMSpec(1000, 200, "float32", "sm_90a", 64, 1, 8).prim_func(),
    "attn_128c": lambda: attention_kernels.attention_prim_func(32, 8, 128, True, "bfloat16", 0.088),
    "attn_64": lambda: attention_kernels.attention_prim_func(16, 16, 64, False, "float16", 0.125),
    "attn_64c": lambda: attention_kernels.attention_prim_func(16, 16, 64, True, "bfloat16", 0.125),
    "attn_64c_long": lambda: attention_kernels.attention_prim_func(16, 16, 64, True, "bfloat16", 0.125,
                                                                   choose_attention(64, True, 8192)),
    "attn_256c": lambda: attention_kernels.attention_prim_func(8, 8, 256, True, "bfloat16", 0.0625),
    "attn_128p": lambda: attention_kernels.attention_prim_func(32, 32, 128, False, "bfloat16", 0.088,
                                                               choose_attention(128, False, 8192)),
}


def main() -> None:
    """Print ``name hash length`` per case (or the error that refused it)."""
    for name, make in CASES.items():
        try:
            source = tvm_tirx.compile(make(), target="cuda", arch="sm_90a").cuda_source
            print(name, hashlib.sha256(source.encode()).hexdigest()[:16], len(source))
        except Exception as err:  # pylint: disable=broad-except  (a refused kernel is a result too)
            print(name, "ERROR", type(err).__name__, str(err).splitlines()[-1][:200])


if __name__ == "__main__":
    main()
