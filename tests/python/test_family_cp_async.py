"""cp.async family: lowering Before/Expected and its own rules."""

import pytest

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.ir.forms import forms_of


def test_thread_scope_pred_becomes_src_size():
    @T.function
    def before(A: T.Tensor((32, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((32, 4), "float32", align=16)
        T.cuda.tile.apply(T.ptx["cp.async.ca.shared.global"], s.sub[tid, :], A.sub[tid, :], pred=tid < 16)

    @T.function
    def expected(A: T.Tensor((32, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((32, 4), "float32", align=16)
        d = s.sub[tid, :]
        a = A.sub[tid, :]
        T.ptx["cp.async.ca.shared.global"](
            d.ptr_to([0]), a.ptr_to([0]), 16, T.Select(tid < 16, T.uint32(16), T.uint32(0))
        )

    testing.assert_lowers_to(before, expected)


def test_destination_keeps_the_bounds_rule_under_pred():
    # a false predicate still zero-fills the destination: pred does not exempt it
    @T.function
    def k(A: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((32, 4), "float32", align=16)
        T.cuda.tile.apply(T.ptx["cp.async.ca.shared.global"], s.sub[tid, :], A.sub[tid, :], pred=tid < 32)

    with pytest.raises(TileError, match="dst .*out of the tensor's bounds"):
        testing.lower(k)


# -- every form assembles ------------------------------------------------------------------

#: Row i of G and S belongs to the kernel's i-th call: 16 bytes, what .ca and .cg both copy.
FORMS_HEAD = testing.KernelHead(
    params='G: T.Tensor(({n}, 16), "uint8", align=16)',
    prologue=('S = T.alloc_shared(({n}, 16), "uint8", align=16)',),
)


def _form_call(form, i):
    policy = ", cache_policy=T.uint64(0)" if "cache_policy" in form.contract.params else ""
    return [f'T.cuda.tile.apply(T.ptx["{form.opcode}"], S.sub[{i}, :], G.sub[{i}, :]{policy})']


@testing.requires_nvcc
def test_every_form_assembles_for_sm90a(tmp_path):
    forms = forms_of("cp_async")
    assert {"cp.async.ca.shared.global", "cp.async.cg.shared.global.L2::cache_hint.L2::256B"} <= {
        f.opcode for f in forms
    }
    for built in testing.assemble_forms(testing.form_kernels(forms, _form_call, FORMS_HEAD), tmp_path):
        assert built.assembled
        assert sum(built.issued.values()) == len(built.kernel.forms)
