"""Relax offload of R.matmul to the Hopper GEMM (tvm_tirx.ops.relax_offload).

CPU: Before/Expected structural tests of the rewrite (static m, symbolic m, batch axes,
the linear form, matmuls left alone), and builds of offloaded modules for sm_90a.
GPU (marker ``gpu``): the Relax VM against torch with a symbolic m at two values.
"""

import re

import pytest
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from tvm_tirx import testing
from tvm_tirx.ops.relax_offload import MAX_M, SkippedMatmul, gemm_kernel, match_gemm, partition_for_tvm_tirx

TARGET = {"kind": "cuda", "arch": "sm_90a"}


def _check(before, expected, **kernels):
    """Offload ``before``; compare with ``expected`` whose stub PrimFunc ``name`` stands for
    ``gemm_kernel(*kernels[name])``; return the skipped matmuls."""
    skipped = []
    after = partition_for_tvm_tirx(before, skipped=skipped)
    for name, args in kernels.items():
        expected.update_func(expected.get_global_var(name), gemm_kernel(*args))
    tvm.ir.assert_structural_equal(after, expected)
    return skipped


# -- the rewrite ---------------------------------------------------------------------------


def test_static_m_with_a_k_by_n_weight_gets_a_transpose():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((128, 64), "bfloat16"), w: R.Tensor((64, 256), "bfloat16")):
            with R.dataflow():
                y = R.matmul(x, w)
                R.output(y)
            return y

    @I.ir_module
    class Expected:
        @T.prim_func
        def tvm_tirx_gemm_n256_k64_bf16_bf16(a: T.handle, b: T.handle, c: T.handle):  # stub: the GEMM replaces it
            T.evaluate(0)

        @R.function
        def main(x: R.Tensor((128, 64), "bfloat16"), w: R.Tensor((64, 256), "bfloat16")):
            cls = Expected
            with R.dataflow():
                wt = R.permute_dims(w, axes=[1, 0])
                y = R.call_tir(cls.tvm_tirx_gemm_n256_k64_bf16_bf16, (x, wt), out_ty=R.Tensor((128, 256), "bfloat16"))
                R.output(y)
            return y

    assert _check(Before, Expected, tvm_tirx_gemm_n256_k64_bf16_bf16=(256, 64)) == []


def test_linear_form_with_symbolic_m_passes_the_weight_as_it_is():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor(("m", 64), "bfloat16"), w: R.Tensor((256, 64), "bfloat16")):
            with R.dataflow():
                wt = R.permute_dims(w)
                y = R.matmul(x, wt)
                R.output(y)
            return y

    @I.ir_module
    class Expected:
        @T.prim_func
        def tvm_tirx_gemm_n256_k64_bf16_bf16(a: T.handle, b: T.handle, c: T.handle):
            T.evaluate(0)

        @R.function
        def main(x: R.Tensor(("m", 64), "bfloat16"), w: R.Tensor((256, 64), "bfloat16")):
            m = T.int64()
            cls = Expected
            with R.dataflow():
                y = R.call_tir(cls.tvm_tirx_gemm_n256_k64_bf16_bf16, (x, w), out_ty=R.Tensor((m, 256), "bfloat16"))
                R.output(y)
            return y

    assert _check(Before, Expected, tvm_tirx_gemm_n256_k64_bf16_bf16=(256, 64)) == []
