"""The documentation's file examples run as the files they say they are.

A ``.. code-block:: python`` whose first line is ``# <name>.py`` is a file of its
page's example: the tests write the page's files into one folder and run them there,
as a reader would.
"""

import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from tvm_tirx import testing

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def page_files(page) -> dict:
    """``{file name: source}`` of the named code blocks of ``page`` (a path under docs/)."""
    text = (DOCS / page).read_text()
    files = {}
    for block in re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", text):
        source = textwrap.dedent(block)
        match = re.match(r"# (\w+\.py)\b", source)
        if match:
            files[match.group(1)] = source
    return files


def _write(tmp_path, files):
    for name, source in files.items():
        (tmp_path / name).write_text(source)


def _python(tmp_path, *args, **env_extra):
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), env.get("PYTHONPATH", "")])
    env.update(env_extra)
    return subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)


def test_ecosystem_page_names_its_files():
    assert set(page_files("guides/ecosystem.rst")) >= {
        "relax_model.py", "kernels.py", "build.py", "run.py", "test_kernels.py"
    }


def test_relax_example_runs_as_it_is(tmp_path):
    _write(tmp_path, page_files("guides/ecosystem.rst"))
    proc = _python(tmp_path, "relax_model.py")
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
@testing.requires_nvcc
def test_deployment_example_builds_a_library_that_shadows_no_module(tmp_path):
    _write(tmp_path, page_files("guides/ecosystem.rst"))
    proc = _python(tmp_path, "build.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    libraries = sorted(p.name for p in tmp_path.glob("*.so"))
    assert libraries, "build.py wrote no library"
    modules = {p.stem for p in tmp_path.glob("*.py")}
    # Python would import a <module>.so in place of <module>.py from the same folder
    assert not {name[: -len(".so")] for name in libraries} & modules, libraries
    proc = _python(tmp_path, "-c", "import kernels, test_kernels; test_kernels.test_one_ld_per_thread(); "
                   "test_kernels.test_assembles()")
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
def test_deployment_example_runs_in_a_runtime_only_process(tmp_path, torch_cuda):
    _write(tmp_path, page_files("guides/ecosystem.rst"))
    assert _python(tmp_path, "build.py").returncode == 0
    proc = _python(tmp_path, "run.py", TVM_USE_RUNTIME_LIB="1")
    assert proc.returncode == 0, proc.stderr[-3000:]


@testing.requires_nvcc
def test_symbolic_extent_example_compiles(tmp_path):
    files = page_files("tile_contract.rst")
    _write(tmp_path, files)
    proc = _python(
        tmp_path,
        "-c",
        "import tvm_tirx, symbolic_rows as m; from tvm_tirx import testing; "
        "k = tvm_tirx.compile(m.copy_rows, target='cuda', arch='sm_90a'); testing.assemble(k); "
        "assert 'int N' in k.cuda_source, k.cuda_source; "
        "import pytest; from types import SimpleNamespace as NS; "
        "t = lambda n: NS(shape=(n, 4), dtype='float32', device=NS(type='cuda')); "
        "pytest.raises(ValueError, k, t(0), t(0))",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_pages_answer_the_reported_questions():
    contract = (DOCS / "tile_contract.rst").read_text()
    assert "``X.permute(" in contract and "``X.local(" in contract  # the views table
    assert 'N = T.dynamic("N")' in contract and 'tvm.tirx.Var(name, dtype)' in contract  # a symbolic extent
    assert "grid=T.ceildiv(N, 64)" in contract and "``X[a:b, c:d]``" in contract  # run-time grid, regions
    ecosystem = (DOCS / "guides" / "ecosystem.rst").read_text()
    for package in ("cuda-nvdisasm-13-0", "nvidia-cuda-nvdisasm"):
        assert package in ecosystem, package  # what gives --emit sass its tool
    assert "so ``cuobjdump`` alone is not enough" in ecosystem
    assert 'target_name="tvm_runtime_cuda"' in page_files("guides/ecosystem.rst")["run.py"]
    assert "count_ptx_calls" not in contract + ecosystem
