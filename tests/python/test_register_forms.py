"""Every register-family form the arch rule lets through for sm_90a assembles; newer ones are refused.

The forms come from ``tvm_tirx.tile.ir.forms`` (apache-tvm's table through our
family registry).  ``testing.form_kernels`` writes them into kernels of at most
``testing.forms.MAX_CALLS`` calls, each form issued once, so ptxas runs once per
kernel.
"""

import pytest

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.tile.ir.arch_floors import floor_of
from tvm_tirx.tile.families import register_ops as register
from tvm_tirx.tile.ir.forms import forms_of
from tvm_tirx.tile.rules.static_rules import rule_arch

FORMS = forms_of("register_ops")
SM90A = [f for f in FORMS if rule_arch(f.contract, "sm_90a") is None]
KERNELS = testing.form_kernels(SM90A, testing.register_call, name="register_forms")
NEWER = [f for f in FORMS if rule_arch(f.contract, "sm_90a") is not None]


def test_forms_cover_every_family():
    mnemonics = {f.contract.instruction.mnemonic for f in FORMS}
    assert mnemonics == set(register.MNEMONICS)
    assert len(FORMS) > 1500
    assert {"add.rn.f16x2", "cvt.rn.f16x2.f32", "cvt.rn.bf16x2.f32", "fma.rn.f32", "ex2.approx.f32"} <= {
        f.opcode for f in FORMS
    }


def test_the_kernels_issue_every_sm90a_form_once():
    assert [f.key for k in KERNELS for f in k.forms] == [f.key for f in SM90A]
    assert len(KERNELS) > 1 and all(len(k.forms) <= testing.forms.MAX_CALLS for k in KERNELS)


@pytest.mark.parametrize("index", range(len(KERNELS)))
def test_sm90a_forms_assemble(index, tmp_path):
    generated = KERNELS[index]
    lowered = testing.lower(generated.load(tmp_path))
    assert testing.count_ptx(lowered) == len(generated.forms)
    if not testing.has_nvcc():
        pytest.skip("nvcc not on the PATH")
    (built,) = testing.assemble_forms([generated], tmp_path, arch="sm_90a")
    assert len(built.assembled) > 0


def test_newer_forms_are_rejected_naming_the_arch(tmp_path):
    assert {f.contract.min_arch for f in NEWER} >= {"sm_100", "sm_100a", "sm_100f"}
    picked = {}
    for f in NEWER:
        picked.setdefault(f.contract.min_arch, f)
    for arch, form in picked.items():
        name = f"k_{arch}"
        func = testing.load_kernel(testing.forms_kernel_source([form], name=name), tmp_path, name)
        with pytest.raises(TileError, match=f"needs {arch} or newer .*: expected a target of {arch} or newer.*, found sm_90a"):
            tvm_tirx.compile(func, target="cuda", arch="sm_90a")


def test_measured_newer_floors_hold_at_sm100a(tmp_path):
    """Every form ptxas assembles for a newer target and the arch rule lets through
    for sm_100a assembles for sm_100a (the others carry apache-tvm's certification arch)."""
    forms = [
        f
        for f in NEWER
        if rule_arch(f.contract, "sm_100a") is None and not floor_of(*f.key.split(":", 1)).refused
    ]
    assert len(forms) > 100
    func = testing.load_kernel(testing.forms_kernel_source(forms, name="k100"), tmp_path, "k100")
    if not testing.has_nvcc():
        pytest.skip("nvcc not on the PATH")
    kernel = tvm_tirx.compile(func, target="cuda", arch="sm_100a")
    assert len(testing.assemble(kernel)) > 0
