"""ldmatrix / stmatrix family: lowering Before/Expected (warp-collective) and its rules."""

import pytest
import tvm
from tvm.tirx.layout import Axis, S, TileLayout

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.ir.forms import forms_of

frag = TileLayout(S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)])
X1 = "ldmatrix.sync.aligned.m8n8.x1.shared.b16"


def test_warp_scope_each_lane_passes_its_row_address():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((8, 4), "uint32", align=16)
        r = T.alloc_local((1, 8, 4), "uint32", layout=frag)
        T.cuda.tile.apply(T.ptx[X1], r, s.view(1, 8, 4), scope="warp")

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((8, 4), "uint32", align=16)
        r = T.alloc_local((1, 8, 4), "uint32", layout=frag)
        sv = s.view(1, 8, 4)
        rl = r.local()
        T.ptx[X1](rl[0], sv.ptr_to([tid % 32 // 8 % 1, tid % 32 % 8, 0]))

    testing.assert_lowers_to(before, expected)


def test_partial_warp_guard_is_rejected():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        s = T.alloc_shared((8, 4), "uint32", align=16)
        r = T.alloc_local((1, 8, 4), "uint32", layout=frag)
        if T.cuda.lane_id() < 16:
            T.cuda.tile.apply(T.ptx[X1], r, s.view(1, 8, 4), scope="warp")

    with pytest.raises(TileError, match="warp-collective instruction needs all 32 lanes"):
        testing.lower(k)


# -- every form assembles ------------------------------------------------------------------

FORMS_HEAD = testing.KernelHead(
    launch="T.cuda.LaunchConfig(grid=1, block=32)", imports=("from tvm.tirx.layout import Axis, S, TileLayout",)
)


def _form_call(form, i):
    """The form at warp scope: its own shared tile of 16-byte rows, its registers in the
    ISA's fragment (word (m, r, w) of lane 4 * r + w in slot m)."""
    count = form.contract.roles[0].atom[0]
    layout = f"TileLayout(S[({count}, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)])"
    operands = f"r{i}, s{i}" if form.opcode.startswith("ldmatrix") else f"s{i}, r{i}"
    return [
        f's{i} = T.alloc_shared(({count}, 8, 4), "uint32", align=16)',
        f'r{i} = T.alloc_local(({count}, 8, 4), "uint32", layout={layout})',
        f'T.cuda.tile.apply(T.ptx["{form.opcode}"], {operands}, scope="warp")',
    ]


@testing.requires_nvcc
def test_every_form_assembles_for_sm90a(tmp_path):
    forms = forms_of("ldmatrix")
    assert len(forms) == 24  # ldmatrix / stmatrix x .x1 .x2 .x4 x .trans or not x .shared(::cta)
    for built in testing.assemble_forms(testing.form_kernels(forms, _form_call, FORMS_HEAD), tmp_path):
        assert built.assembled
        assert sum(built.issued.values()) == len(built.kernel.forms)
