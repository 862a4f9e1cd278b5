"""Turn the tutorial scripts (``tutorials/*.py``) into reST pages.

Run by ``conf.py`` at build time (or by hand: ``python docs/gen_tutorials.py OUTDIR``).
The scripts use the sphinx-gallery layout without depending on it:

* the module docstring is the page's reST header (title and introduction);
* a line ``# %%`` starts a cell; the comment lines right after it are reST
  text (``# `` stripped), the lines after those are code.

A tutorial in stages keeps its stage scripts in a directory next to it
(``tutorials/hopper_gemm.py`` and ``tutorials/hopper_gemm/step*.py``): each stage
script becomes a page of its own, ``<directory>_<stem>``; files whose names start
with ``_`` (shared helpers) do not.

Each page ends with a link to download the script and the command that runs it.
"""

from __future__ import annotations

import ast
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
TUTORIALS = HERE.parent / "tutorials"


def cells(source: str):
    """``[(kind, text)]`` with kind ``"rst"`` or ``"code"``, in order."""
    module = ast.parse(source)
    doc = ast.get_docstring(module, clean=True) or ""
    lines = source.splitlines()
    start = 0
    if module.body and isinstance(module.body[0], ast.Expr) and isinstance(
        getattr(module.body[0], "value", None), ast.Constant
    ):
        start = module.body[0].end_lineno
    out = [("rst", doc)]
    block = []

    def flush_code():
        code = "\n".join(block).strip("\n")
        if code.strip():
            out.append(("code", code))
        block.clear()

    i = start
    while i < len(lines):
        line = lines[i]
        if line.strip() == "# %%":
            flush_code()
            i += 1
            text = []
            while i < len(lines) and (lines[i].startswith("# ") or lines[i].strip() == "#"):
                text.append(lines[i][2:] if lines[i].startswith("# ") else "")
                i += 1
            if text:
                out.append(("rst", "\n".join(text)))
            continue
        block.append(line)
        i += 1
    flush_code()
    return out


def page_name(path: pathlib.Path) -> str:
    """The page of ``tutorials/<a>/<b>.py``: ``a_b`` (``tutorials/<b>.py``: ``b``)."""
    return "_".join(path.relative_to(TUTORIALS).with_suffix("").parts)


def scripts() -> list:
    """The tutorial scripts: ``tutorials/*.py`` and the stage scripts one directory
    below, without helpers (``_*.py``)."""
    found = sorted(TUTORIALS.glob("*.py")) + sorted(TUTORIALS.glob("*/*.py"))
    return [p for p in found if not p.name.startswith("_")]


def render(path: pathlib.Path) -> str:
    name = page_name(path)
    rel = path.relative_to(TUTORIALS).as_posix()
    parts = [
        ".. This page is generated from tutorials/%s by docs/gen_tutorials.py; do not edit." % rel,
        "",
        f".. _tutorial-{name.replace('_', '-')}:",
        "",
    ]
    for kind, text in cells(path.read_text(encoding="utf-8")):
        if kind == "rst":
            parts += [text, ""]
        else:
            parts += [".. code-block:: python", ""]
            parts += ["   " + line if line.strip() else "" for line in text.splitlines()]
            parts.append("")
    parts += [
        "Run it",
        "------",
        "",
        f"From the repository root: ``python tutorials/{rel}``. "
        "Each kernel prints an ``assembled ...`` line; on a machine with a GPU the "
        "results are checked as well.",
        "",
        f":download:`Download {path.name} <../../tutorials/{rel}>`",
        "",
    ]
    return "\n".join(parts) + "\n"


def generate(outdir: pathlib.Path) -> list:
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in scripts():
        target = outdir / f"{page_name(path)}.rst"
        text = render(path)
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
        written.append(target)
    return written


if __name__ == "__main__":
    for p in generate(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else HERE / "tutorials")):
        print(f"wrote {p}")
