"""Code written for apache-tvm before 0.27 meets our errors and the migration page.

``tvm_tirx.compile`` answers an option-string target (``"cuda -arch=sm_90a"``, which
0.27 no longer parses) with the ``arch=`` and dict forms of the same target; every rename
``docs/migration.rst`` states holds in the installed apache-tvm.
"""

import importlib
import pathlib

import pytest
import tvm

import tvm_tirx

from kernels import read_next_row

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("target", ["cuda -arch=sm_90a", "cuda -arch sm_90a"])
def test_an_option_string_target_names_arch(target):
    with pytest.raises(ValueError, match=r"option string.*pass target='cuda', arch='sm_90a' \(or the dict target "
                                         r"\{'kind': 'cuda', 'arch': 'sm_90a'\}\)"):
        tvm_tirx.compile(read_next_row, target=target)


def test_an_option_string_with_more_options_gets_a_dict_target():
    with pytest.raises(ValueError, match=r"pass target=\{'kind': 'cuda', 'arch': 'sm_80', 'max_num_threads': 512\}"):
        tvm_tirx.compile(read_next_row, target="cuda -arch=sm_80 -max_num_threads=512")
    with pytest.raises(ValueError, match=r"target must be 'cuda' .*got 'llvm'"):
        tvm_tirx.compile(read_next_row, target="llvm")


def test_the_dict_target_of_the_message_compiles():
    kernel = tvm_tirx.compile(read_next_row, target={"kind": "cuda", "arch": "sm_90a"})
    assert "ld.global.v4.b32" in kernel.cuda_source


def test_the_renames_the_migration_page_states_hold():
    page = (DOCS / "migration.rst").read_text()
    for name in ("tvm.tirx", "relax.TensorType", "from tvm.script import tirx as T", '"arch": "sm_90a"'):
        assert name in page, name
    for module in ("tvm.tir", "tvm.script.tir"):
        with pytest.raises(ImportError):
            importlib.import_module(module)
    importlib.import_module("tvm.tirx")
    assert hasattr(tvm.tirx, "PrimFunc") and hasattr(tvm.tirx, "transform")
    with pytest.raises(ImportError):
        importlib.import_module("tvm.dlight")
    assert hasattr(tvm.s_tir, "Schedule") and importlib.import_module("tvm.s_tir.dlight")
    from tvm import relax

    for kind in ("Tensor", "Shape", "Tuple", "Func", "Object"):
        assert not hasattr(relax, f"{kind}StructInfo") and hasattr(relax, f"{kind}Type"), kind
    assert hasattr(relax.Var("x", relax.TensorType((2, 3), "float32")), "ty")
    with pytest.raises(ValueError, match="no longer supported"):
        tvm.target.Target("cuda -arch=sm_90a")
    assert tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}).arch == "sm_90a"
    assert "migration" in (DOCS / "index.rst").read_text()
