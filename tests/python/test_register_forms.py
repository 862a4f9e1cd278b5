"""Every register-family form the PTX table accepts for sm_90a assembles; newer ones are refused.

The forms come from ``tvm_tirx.tile.forms`` (apache-tvm's table through our
family registry).  ``testing.form_kernels`` writes them into kernels of at most
``testing.forms.MAX_CALLS`` calls, each form issued once, so ptxas runs once per
kernel.
"""

import pytest

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.tile.families import register_ops as register
from tvm_tirx.tile.forms import forms_of

FORMS = forms_of("register_ops")
SM90A = [f for f in FORMS if f.contract.min_arch is None]
KERNELS = testing.form_kernels(SM90A, testing.register_call, name="register_forms")
NEWER = [f for f in FORMS if f.contract.min_arch is not None]


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
    assert {f.contract.min_arch for f in NEWER} >= {"sm_100a"}
    picked = {}
    for f in NEWER:
        picked.setdefault(f.contract.min_arch, f)
    for arch, form in picked.items():
        func = testing.load_kernel(testing.forms_kernel_source([form], name=f"k_{arch}"), tmp_path, f"k_{arch}")
        with pytest.raises(TileError, match=f"needs a newer architecture: expected {arch} or newer, found sm_90a"):
            tvm_tirx.compile(func, target="cuda", arch="sm_90a")


def test_sm100a_floors_hold(tmp_path):
    forms = [f for f in NEWER if f.contract.min_arch == "sm_100a"]
    func = testing.load_kernel(testing.forms_kernel_source(forms, name="k100"), tmp_path, "k100")
    if not testing.has_nvcc():
        pytest.skip("nvcc not on the PATH")
    kernel = tvm_tirx.compile(func, target="cuda", arch="sm_100a")
    ptx_errors = testing.ptxas_errors(_ptx(kernel), "sm_100a")
    # forms that no tried target assembles carry the table's certification arch
    rejected = {text for _, _, text in ptx_errors}
    assert len(rejected) < len(forms)


def _ptx(kernel):
    from tvm_tirx.build.nvcc import nvcc

    return nvcc(kernel.cuda_source, kernel.target, "ptx", check=False).decode()
