"""The wheel carries the data files the package reads and the stubs type checkers read."""

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
