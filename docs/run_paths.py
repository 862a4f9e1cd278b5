"""Run the code of a reader's path page (``docs/start/*.rst``): part of the docs build.

A path page shows its code as files: a ``.. code-block:: python`` whose first line is
``# <name>.py``.  This script writes a page's files into a fresh folder and runs each, in
page order, with the working tree's package first on ``PYTHONPATH`` -- what a reader who
copies them does.  ``conf.py`` runs it for every path page, so a page whose code no
longer runs stops the build.  A file that imports torch is not run where torch is not
installed (the docs build without torch; the page says torch is needed).

Usage: ``python docs/run_paths.py docs/start/pytorch.rst`` (exit status 1 on a failure).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import textwrap

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
BLOCK = re.compile(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)")


def page_files(page: pathlib.Path) -> dict:
    """``{file name: source}`` of ``page``'s named code blocks, in page order."""
    files = {}
    for block in BLOCK.findall(page.read_text(encoding="utf-8")):
        source = textwrap.dedent(block)
        match = re.match(r"# (\w+\.py)\b", source)
        if match:
            files[match.group(1)] = source
    return files


def _needs_missing_torch(source: str) -> bool:
    return re.search(r"^\s*(import|from) torch\b", source, re.M) is not None and importlib.util.find_spec("torch") is None


def run(page: pathlib.Path) -> list:
    """Run ``page``'s files; the failures, as ``"<file>: <output tail>"`` strings."""
    files = page_files(page)
    if not files:
        return [f"{page.name}: no named code block (a first line '# <name>.py')"]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    failures = []
    with tempfile.TemporaryDirectory(prefix="tvm_tirx_path_") as folder:
        for name, source in files.items():
            (pathlib.Path(folder) / name).write_text(source, encoding="utf-8")
        for name, source in files.items():
            if _needs_missing_torch(source):
                print(f"{page.name}: {name} not run (needs torch)")
                continue
            proc = subprocess.run([sys.executable, name], cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=600, check=False)
            if proc.returncode != 0:
                failures.append(f"{page.name}: {name} exited with {proc.returncode}:\n{(proc.stdout + proc.stderr)[-3000:]}")
            else:
                print(f"{page.name}: {name} ran")
    return failures


if __name__ == "__main__":
    problems = [failure for arg in sys.argv[1:] for failure in run(pathlib.Path(arg))]
    print("\n\n".join(problems), file=sys.stderr)
    sys.exit(1 if problems else 0)
