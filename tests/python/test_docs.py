"""The documentation builds without a warning (``sphinx-build -W``), when Sphinx is installed.

The build also regenerates the pages that come from the code: the instruction
reference (from the family registry), the error guide (by triggering every
TileError rule) and the tutorial pages.
"""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PATHS = ("start/pytorch", "start/relax", "start/kernel_author")


def _run_paths():
    """docs/run_paths.py, the docs build's runner of the path pages' code."""
    spec = importlib.util.spec_from_file_location("run_paths", DOCS / "run_paths.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: a sitecustomize module that makes every Python process started with it on its path
#: behave as if torch were not installed (``import torch`` fails, ``find_spec`` is None)
HIDE_TORCH = """
import importlib.machinery

_find_spec = importlib.machinery.PathFinder.find_spec


def _hide_torch(name, path=None, target=None):
    if name == "torch" or name.startswith("torch."):
        return None
    return _find_spec(name, path, target)


importlib.machinery.PathFinder.find_spec = _hide_torch
"""


def _sphinx(tmp_path, env=None):
    """``sphinx-build -W`` of docs/ into ``tmp_path / "html"``; one build at a time (the
    builds share the generated pages under docs/, and ``-n 2`` may start two)."""
    import fcntl  # pylint: disable=import-outside-toplevel

    (DOCS / "_generated").mkdir(exist_ok=True)
    with open(DOCS / "_generated" / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return subprocess.run(
            [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", str(DOCS), str(tmp_path / "html")],
            cwd=ROOT, capture_output=True, text=True, timeout=900, check=False, env=env,
        )


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path):
    pytest.importorskip("sphinx", reason="install the docs extra: pip install -e '.[docs]'")
    proc = _sphinx(tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    html = tmp_path / "html"
    for page in (*PATHS, "migration", "index", "getting_started", "tile_contract", "errors", "api", "reference/index",
                 "reference/family_ld_st", "reference/family_register_ops", "tutorials/data_movement"):
        assert (html / f"{page}.html").exists(), page
    # the error guide holds real messages without machine-specific paths
    errors = (DOCS / "_generated" / "errors.rst").read_text()
    assert "example.py:" in errors and "wrong atom shape" in errors
    assert "/tmp/" not in errors and str(ROOT) not in errors
    # the reference is generated from the registry
    assert "ld.global" in (html / "reference" / "family_ld_st.html").read_text()
    assert "cvt.rn.f16x2.f32" in (html / "reference" / "family_register_ops.html").read_text()


def test_the_front_page_routes_three_readers_to_short_paths():
    index = (DOCS / "index.rst").read_text()
    for page in PATHS:
        assert f":doc:`{page}`" in index, page  # linked from the front page's text
        assert len(_run_paths().page_files(DOCS / f"{page}.rst")) == 1, page  # one file of code to run
    depths = re.findall(r":maxdepth: (\d+)", index)
    # the front page lists page titles only (it expanded ~150 headings at depth 2)
    assert depths and set(depths) == {"1"}, depths
    assert index.index("start/pytorch") < index.index("guides/memory")


@pytest.mark.parametrize("page", PATHS)
def test_the_reader_paths_run(page):
    source = "".join(_run_paths().page_files(DOCS / f"{page}.rst").values())
    if "import torch" in source:
        pytest.importorskip("torch")
    failures = _run_paths().run(DOCS / f"{page}.rst")
    assert not failures, "\n".join(failures)


def test_the_build_runs_the_path_pages():
    conf = (DOCS / "conf.py").read_text()
    assert 'glob("*.rst")' in conf and "run_paths.py" in conf


def _test_command(text):
    return re.findall(r"pip install -e \"\.\[test\]\" && python -m pytest[^\n`]*", text)


def test_readme_and_installation_give_one_test_command_and_one_line_of_timing():
    readme, install = (ROOT / "README.md").read_text(), (DOCS / "installation.rst").read_text()
    assert _test_command(readme) and _test_command(readme) == _test_command(install), (
        _test_command(readme), _test_command(install))
    assert "took 33 min" not in readme and "27 min 41 s" not in readme  # the old paragraph of timings
    timing = [line for line in readme.splitlines() if "min" in line and "2-core" in line]
    assert len(timing) == 1, timing


@pytest.mark.slow
def test_docs_build_without_torch(tmp_path):
    # autodoc's mocked torch reached tvm_ffi: "isinstance() arg 2 must be a type"
    pytest.importorskip("sphinx", reason="install the docs extra: pip install -e '.[docs]'")
    hide = tmp_path / "hide_torch"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(HIDE_TORCH)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = os.pathsep.join([str(hide), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    check = subprocess.run([sys.executable, "-c", "import importlib.util as u; assert u.find_spec('torch') is None; "
                            "import tvm_ffi"], env=env, capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr[-2000:]  # torch is hidden from every process of the build
    proc = _sphinx(tmp_path, env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    assert "pytorch_path.py not run (needs torch)" in proc.stdout
    api = (tmp_path / "html" / "api.html").read_text()
    assert "glu_linear" in api and "UnsupportedInput" in api  # the torch operators' pages, from mocked torch
