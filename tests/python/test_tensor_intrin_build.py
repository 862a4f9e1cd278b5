"""The tensor intrinsics' PrimFuncs are built without the TVMScript parser, and equal the parsed ones.

``import tvm_tirx.schedule.tensor_intrin`` used to parse 186 ``desc`` / ``impl``
functions (10 s and more); it now builds them with the IRBuilder.  The parsed
definitions live on in ``intrin_reference.py``: every kind of intrinsic, in
each of its variations (dtype, space, vector length, transpose, load or
store, n), is compared with them structurally.
"""

import subprocess
import sys

import pytest
import tvm
from tvm.s_tir import TensorIntrin

import intrin_reference as ref
from tvm_tirx.schedule import tensor_intrin

MEMORY = [  # (name, opcode, n, dtype, dst scope, src scope)
    ("ld_global_v4_f32", "ld.global.v4.b32", 4, "float32", "local", "global"),
    ("st_shared_v2_bf16", "st.shared.v2.b16", 2, "bfloat16", "shared", "local"),
    ("cp_async_cg_16B_f16", "cp.async.cg.shared.global", 8, "float16", "shared", "global"),
]
MOVES = [  # (name, opcode, rows, cols, dtype, loads, trans)
    ("ldmatrix_x4_f16", "ldmatrix.sync.aligned.m8n8.x4.shared.b16", 16, 16, "float16", True, False),
    ("ldmatrix_x2_trans_bf16", "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16", 8, 16, "bfloat16", True, True),
    ("stmatrix_x1_f16", "stmatrix.sync.aligned.m8n8.x1.shared.b16", 8, 8, "float16", False, False),
    ("stmatrix_x4_trans_bf16", "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16", 16, 16, "bfloat16", False, True),
]


def _equal(built, parsed):
    tvm.ir.assert_structural_equal(built, parsed, map_free_vars=True)


@pytest.mark.parametrize("case", MEMORY, ids=[c[0] for c in MEMORY])
def test_memory_intrinsics_equal_the_parsed_ones(case):
    name, opcode, n, dtype, dst, src = case
    intrin = TensorIntrin.get(tensor_intrin.PREFIX + name)
    _equal(intrin.desc, ref.copy_desc(n, dtype, dst, src))
    _equal(intrin.impl, ref.tile_impl(tensor_intrin.PREFIX + name, opcode, n, dtype, dst, src))


@pytest.mark.parametrize("case", MOVES, ids=[c[0] for c in MOVES])
def test_matrix_moves_equal_the_parsed_ones(case):
    name, opcode, rows, cols, dtype, loads, trans = case
    intrin = TensorIntrin.get(tensor_intrin.PREFIX + name)
    _equal(intrin.desc, ref.move_desc(rows, cols, dtype, "shared", loads, trans))
    _equal(intrin.impl, ref.move_impl(tensor_intrin.PREFIX + name, opcode, rows, cols, dtype, "shared", trans, "warp"))


@pytest.mark.parametrize("n", [8, 16])
def test_mma_and_accumulators_equal_the_parsed_ones(n):
    name = f"{tensor_intrin.PREFIX}mma_m16n{n}k16_f32_bf16"
    intrin = TensorIntrin.get(name)
    _equal(intrin.desc, ref.mma_desc(n, "bfloat16"))
    _equal(intrin.impl, ref.mma_impl(name, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", n, "bfloat16"))
    fill = f"{tensor_intrin.PREFIX}mma_fill_16x{n}_f32"
    _equal(TensorIntrin.get(fill).desc, ref.fill_desc(n))
    _equal(TensorIntrin.get(fill).impl, ref.fill_impl(fill, n))
    store = f"{tensor_intrin.PREFIX}mma_store_16x{n}_f32_global"
    _equal(TensorIntrin.get(store).desc, ref.move_desc(16, n, "float32", "global", False, False))
    _equal(TensorIntrin.get(store).impl,
           ref.move_impl(store, "st.global.v2.f32", 16, n, "float32", "global", False, "warp"))


def test_a_changed_function_is_told_apart():
    # the comparison above is not vacuous: a different n or transpose is a difference
    intrin = TensorIntrin.get(tensor_intrin.PREFIX + "ldmatrix_x4_f16")
    with pytest.raises(ValueError):
        _equal(intrin.desc, ref.move_desc(16, 16, "float16", "shared", True, True))


_NO_PARSER = """
import tvm_tirx.schedule  # apache-tvm and the plugin: not what is measured
from tvm.script.parser.core import parser
calls = []
original = parser.Parser.parse
parser.Parser.parse = lambda self, *a, **k: calls.append(1) or original(self, *a, **k)
import tvm_tirx.schedule.tensor_intrin as ti
assert len(ti.list_intrinsics()) == 79, len(ti.list_intrinsics())
print(len(calls))
"""


def test_import_parses_nothing():
    done = subprocess.run([sys.executable, "-c", _NO_PARSER], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "0"
