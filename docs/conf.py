"""Sphinx configuration of the tvm_tirx documentation.

Build: ``sphinx-build -W -b html docs docs/_build`` from the repository root.

Three pages are generated before Sphinx reads the sources, from the code
itself, so that they cannot drift from it:

* ``gen_reference.py`` -> ``reference/family_*.rst`` and ``reference/summary.inc``
  (the instruction forms of every tile family, from the family registry);
* ``gen_errors.py`` -> ``_generated/errors.rst`` (every TileError rule, with
  the message it really produces);
* ``gen_tutorials.py`` -> ``tutorials/<name>.rst`` (from ``tutorials/*.py``).

``run_paths.py`` runs the code of the readers' path pages (``start/*.rst``) alongside,
so that a path whose code no longer runs stops the build.

The first two run in parallel subprocesses (they import TVM and are the slow part).
Both are skipped when their inputs have not changed since the pages were
written: ``gen_reference.py`` keeps its own key (``reference/.family_pages``),
and the error guide's key -- a hash of ``gen_errors.py``, the examples, every
source file of the package and apache-tvm's version -- is
``_generated/errors.key``.  Delete ``docs/_generated`` to force a rebuild.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
ERRORS_PAGES = (HERE / "_generated" / "errors.rst", HERE / "_generated" / "errors_index.rst")
ERRORS_KEY = HERE / "_generated" / "errors.key"


def _errors_key() -> str:
    """What the error guide is made from: the generator, its examples, the package's
    sources (a message can come from any module) and apache-tvm's version."""
    digest = hashlib.sha256()
    try:
        digest.update(importlib.metadata.version("apache-tvm").encode())
    except importlib.metadata.PackageNotFoundError:
        digest.update(b"apache-tvm ?")
    inputs = [HERE / "gen_errors.py", *sorted((HERE / "error_examples").glob("*.py"))]
    inputs += sorted(p for p in (ROOT / "python" / "tvm_tirx").rglob("*") if p.suffix in (".py", ".json"))
    for path in inputs:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _errors_up_to_date(key: str) -> bool:
    return ERRORS_KEY.exists() and ERRORS_KEY.read_text().strip() == key and all(p.exists() for p in ERRORS_PAGES)

# Document the working tree's package, whether or not it is installed.
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(HERE))


def _generate() -> None:
    started = time.time()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    jobs = {"gen_reference.py": [sys.executable, str(HERE / "gen_reference.py"), str(HERE / "reference")]}
    # the readers' path pages: their code runs (run_paths.py), a failure stops the build
    for page in sorted((HERE / "start").glob("*.rst")):
        jobs[f"run_paths.py start/{page.name}"] = [sys.executable, str(HERE / "run_paths.py"), str(page)]
    errors_key = _errors_key()
    if not _errors_up_to_date(errors_key):
        jobs["gen_errors.py"] = [sys.executable, str(HERE / "gen_errors.py"), str(ERRORS_PAGES[0])]
    procs = {
        name: subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, cmd in jobs.items()
    }
    failures = []
    for name, proc in procs.items():
        out, err = proc.communicate()
        if proc.returncode != 0:
            failures.append(f"docs/{name} failed (exit {proc.returncode}):\n{out}{err}")
        print(f"tvm_tirx docs: {name} done after {time.time() - started:.1f} s")
        if name.startswith("run_paths.py") and out.strip():
            print(out.strip())
    if failures:
        raise RuntimeError("\n\n".join(failures))
    if "gen_errors.py" in jobs:
        ERRORS_KEY.write_text(errors_key + "\n")
    else:
        print("tvm_tirx docs: error guide up to date (docs/_generated/errors.key), not regenerated")

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
# torch is optional: without it the torch operators' pages are built from mocked torch names.
if importlib.util.find_spec("torch") is None:
    # tvm_ffi binds the name ``torch`` once, when it is first imported, and then tests every
    # argument of every FFI call with ``isinstance(arg, torch.Tensor)``.  Imported for the
    # first time under autodoc's mock, it would bind the mocked module, whose ``Tensor`` is
    # no type ("isinstance() arg 2 must be a type"): import it here, before any mock exists.
    import tvm  # noqa: F401  pylint: disable=unused-import,wrong-import-position

    autodoc_mock_imports = ["torch"]
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
