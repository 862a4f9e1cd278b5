"""The documentation builds without a warning (``sphinx-build -W``), when Sphinx is installed.

The build also regenerates the pages that come from the code: the instruction
reference (from the family registry), the error guide (by triggering every
TileError rule) and the tutorial pages.
"""

import importlib.util
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


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path):
    pytest.importorskip("sphinx", reason="install the docs extra: pip install -e '.[docs]'")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", str(DOCS), str(tmp_path / "html")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
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
