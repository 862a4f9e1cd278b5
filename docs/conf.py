"""Sphinx configuration of the tvm_tirx documentation.

Build: ``sphinx-build -W -b html docs docs/_build`` from the repository root.

Three pages are generated before Sphinx reads the sources, from the code
itself, so that they cannot drift from it:

* ``gen_reference.py`` -> ``reference/family_*.rst`` and ``reference/summary.inc``
  (the instruction forms of every tile family, from the family registry);
* ``gen_errors.py`` -> ``_generated/errors.rst`` (every TileError rule, with
  the message it really produces);
* ``gen_tutorials.py`` -> ``tutorials/<name>.rst`` (from ``tutorials/*.py``).

The first two run in parallel subprocesses (they import TVM and are the slow part).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent

# Document the working tree's package, whether or not it is installed.
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(HERE))


def _generate() -> None:
    started = time.time()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    jobs = {
        "gen_reference.py": [sys.executable, str(HERE / "gen_reference.py"), str(HERE / "reference")],
        "gen_errors.py": [sys.executable, str(HERE / "gen_errors.py"), str(HERE / "_generated" / "errors.rst")],
    }
    procs = {
        name: subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, cmd in jobs.items()
    }
    failures = []
    for name, proc in procs.items():
        out, err = proc.communicate()
        if proc.returncode != 0:
            failures.append(f"docs/{name} failed (exit {proc.returncode}):\n{out}{err}")
    if failures:
        raise RuntimeError("\n\n".join(failures))

    import gen_tutorials  # pylint: disable=import-outside-toplevel

    gen_tutorials.generate(HERE / "tutorials")
    print(f"tvm_tirx docs: generated pages in {time.time() - started:.1f} s")


_generate()

# -- project -----------------------------------------------------------------

project = "tvm_tirx"
author = "the tvm_tirx authors"
copyright = "the tvm_tirx authors"  # pylint: disable=redefined-builtin
release = "0.1.0"
version = release

# -- general -----------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]
exclude_patterns = ["_build", "_generated", "Thumbs.db", ".DS_Store"]
templates_path = []
nitpicky = False
highlight_language = "python"

# Our docstrings are NumPy style.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

autodoc_member_order = "bysource"
autodoc_typehints = "description"

# -- HTML --------------------------------------------------------------------

html_theme = "alabaster"
html_title = "tvm_tirx"
html_static_path = []
html_theme_options = {
    "description": "Explicit PTX tile operations for Apache TVM",
    "page_width": "1200px",
    "sidebar_width": "240px",
}
