"""The wheel carries the data files the package reads and the stubs type checkers read."""

import ast
import pathlib
import shutil
import subprocess
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_wheel_contents(tmp_path):
    # build from a copy, so that setuptools' build/ folder does not land in the checkout
    src = tmp_path / "src"
    shutil.copytree(ROOT / "python", src / "python", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = out.glob("tvm_tirx-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "tvm_tirx/tile/families/arch_floors.json",
        "tvm_tirx/py.typed",
        "tvm_tirx/script/tirx.pyi",
        "tvm_tirx/script/__init__.pyi",
        "tvm_tirx/__init__.pyi",
    ):
        assert needed in names, needed
    assert any(n.endswith("entry_points.txt") for n in names)


def _test_extra() -> list:
    """The ``test`` extra of setup.py (read from its source: the installed metadata may be another checkout's)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "extras_require":
            return ast.literal_eval(node.value)["test"]
    raise AssertionError("setup.py has no extras_require")


def test_test_extra_builds_wheels_in_a_fresh_venv():
    # test_wheel_contents builds with the environment's own setuptools
    # (--no-build-isolation). A fresh venv has setuptools 65.5 (Python 3.11's
    # ensurepip) or none (3.12+); setuptools builds wheels without the `wheel`
    # package from 70.1 on. The test extra must bring one or the other.
    from packaging.requirements import Requirement

    reqs = {r.name: r for r in map(Requirement, _test_extra())}
    if "wheel" in reqs and "setuptools" in reqs:
        return
    assert "setuptools" in reqs, "the test extra brings neither setuptools>=70.1 nor setuptools and wheel"
    spec = reqs["setuptools"].specifier
    assert not spec.contains("65.5.0") and not spec.contains("70.0.0"), spec
    assert spec.contains("70.1.0"), spec
