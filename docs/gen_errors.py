"""Generate the error-message guide's examples by triggering every error for real.

Run by ``conf.py`` at build time (or by hand: ``python docs/gen_errors.py OUT.rst``).
Each example (``docs/error_examples/``: one module per instruction family, one per
topic of the shared contract) is a small kernel file that breaks one rule.  The script
writes it to a temporary ``example.py``, parses / lowers / compiles it, and
records the message tvm_tirx actually raises, so the guide cannot drift from
the code.  Absolute paths and object addresses are stripped from the
messages so that the output is stable.

The script also reads every ``TileError(...)`` raised in ``python/tvm_tirx``
(with :mod:`ast`) and fails when a rule has no example here, or when an
example no longer raises the rule it documents.
"""

from __future__ import annotations

import ast
import importlib.util
import pathlib
import re
import sys
import tempfile

import error_examples
from error_examples import FIRST_LINE, HEADER, SECTIONS, Case

import tvm_tirx
from tvm_tirx import TileError
from tvm_tirx.tile.ir.ptx_table import resolve
from tvm_tirx.tile.ir.registry import families, family_of

#: The message kinds of the tile contract: one violation, or several reported together.
TILE_ERRORS = ("TileError", "TileErrors")

#: Every example, collected from the modules of ``docs/error_examples``.
CASES = error_examples.collect()


#: Rules that have no example yet, with the reason.  Each is listed on the page
#: without an example.  Replace an entry by a Case as soon as one is written;
#: an entry that no rule in the code matches is ignored.
PENDING = {
    "register slots differ between lanes": "needs a register layout whose slot for a "
    "fragment word depends on the lane, which strided layouts cannot express; no example yet",
}


# --------------------------------------------------------------------------
# Running the cases
# --------------------------------------------------------------------------


def _load(path: pathlib.Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _clean(message: str, tmp: str) -> str:
    text = re.sub(re.escape(tmp) + r"/case\d+/", "", message)
    # any remaining absolute path: keep the file name only
    text = re.sub(r"(?:/[\w.\-+]+)+/([\w.\-+]+\.py)", r"\1", text)
    text = re.sub(r" at 0x[0-9a-fA-F]+", " at 0x...", text)
    return text.strip()


def trigger(case: Case, index: int, root: pathlib.Path):
    """Run ``case``; return the exception it raised (or None)."""
    folder = root / f"case{index:02d}"
    folder.mkdir()
    path = folder / "example.py"
    path.write_text(HEADER + case.source)
    try:
        if case.action == "compile-noarch":
            kernel_module = __import__("tvm_tirx.build.target", fromlist=["_gpu_arch"])
            saved = kernel_module._gpu_arch  # pylint: disable=protected-access
            kernel_module._gpu_arch = lambda: None  # pylint: disable=protected-access
            try:
                module = _load(path, f"_tvm_tirx_doc_error_{index}")
                tvm_tirx.compile(module.kernel, target="cuda")
            finally:
                kernel_module._gpu_arch = saved  # pylint: disable=protected-access
            return None
        module = _load(path, f"_tvm_tirx_doc_error_{index}")
        if case.action == "lower":
            tvm_tirx.testing.lower(module.kernel)
        elif case.action == "compile":
            tvm_tirx.compile(module.kernel, target="cuda", arch="sm_90a")
        elif case.action == "compile-sm100a":
            tvm_tirx.compile(module.kernel, target="cuda", arch="sm_100a")
    except Exception as err:  # pylint: disable=broad-except
        return err
    return None


def _last_line(err) -> str:
    text = str(err)
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else text


def run_cases(cases=CASES):
    """``[(case, message)]``, raising if a case does not raise what it documents."""
    out, problems = [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp).resolve()
        for i, case in enumerate(cases):
            err = trigger(case, i, root)
            want = {"TileError": TileError, "ValueError": ValueError, "TypeError": TypeError}[case.error]
            if err is None:
                problems.append(f"{case.title!r}: raised nothing")
                continue
            if not isinstance(err, want) or not re.search(case.rule, str(err)):
                problems.append(
                    f"{case.title!r}: expected {case.error} matching {case.rule!r}, "
                    f"got {type(err).__name__}: {err}"
                )
                continue
            # A TileError is shown whole (the spec asks for one line; a
            # multi-line one shows up as such in the guide).  Other errors may
            # carry a TVMScript diagnostic excerpt: its last line is the message.
            text = str(err) if isinstance(err, TileError) else _last_line(err)
            out.append((case, type(err).__name__, _clean(text, str(root))))
    if problems:
        raise RuntimeError("gen_errors: examples out of date:\n  " + "\n  ".join(problems))
    return out


# --------------------------------------------------------------------------
# Every rule in the source must have an example
# --------------------------------------------------------------------------


def _expr_regexes(node, func) -> list | None:
    """Regular expressions for every text the rule expression ``node`` can produce."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [re.escape(node.value)]
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            parts.append(re.escape(value.value) if isinstance(value, ast.Constant) else ".+?")
        return ["".join(parts)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _expr_regexes(node.left, func), _expr_regexes(node.right, func)
        if left is None or right is None:
            return None
        return [a + b for a in left for b in right]
    if isinstance(node, ast.IfExp):
        body, other = _expr_regexes(node.body, func), _expr_regexes(node.orelse, func)
        if body is None or other is None:
            return None
        return body + other
    if isinstance(node, ast.Name) and func is not None:
        # a local variable: every value it is assigned
        options = []
        for sub in ast.walk(func):
            if isinstance(sub, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == node.id for t in sub.targets
            ):
                found = _expr_regexes(sub.value, func)
                if found is None:
                    return None
                options += found
        return options or None
    return None


def source_rules(package_dir: pathlib.Path) -> dict:
    """``{regex: "file:line"}`` of the rule argument of every ``TileError(...)`` call."""
    rules = {}
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            if name != "TileError" or len(node.args) < 2:
                continue
            arg = node.args[1]
            if isinstance(arg, ast.Attribute):  # TileError.at(): re-raises self.rule
                continue
            func = node
            while func is not None and not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                func = parents.get(func)
            regexes = _expr_regexes(arg, func)
            where = f"{path.relative_to(package_dir.parent)}:{node.lineno}"
            if regexes is None:
                raise RuntimeError(f"gen_errors: cannot read the rule of TileError at {where}")
            for regex in regexes:
                # the rule is one ': '-separated field of the message
                rules.setdefault(f"(?:^|: ){regex}(?:: |$)", where)
    return rules


#: A line of a source excerpt (``     |`` or `` 12 | ...``, see tvm_tirx.excerpts).
_EXCERPT_LINE = re.compile(r"^\s*\d*\s\|")


def violation_lines(kind: str, message: str) -> list:
    """The one-line messages of the violations in ``message``: itself for a
    ``TileError``; for ``TileErrors`` each line after the count that is not
    part of a source excerpt."""
    if kind != "TileErrors":
        return [message]
    return [line for line in message.splitlines()[1:] if not _EXCERPT_LINE.match(line)]


def check_coverage(results, package_dir: pathlib.Path) -> list:
    """Fail unless every rule in the source has an example (or a PENDING entry).

    Returns ``[(rule text, "file:line", reason)]`` of the pending rules found.
    """
    messages = [line for case, kind, msg in results if kind in TILE_ERRORS for line in violation_lines(kind, msg)]
    missing, pending = [], []
    for regex, where in source_rules(package_dir).items():
        if any(re.search(regex, m) for m in messages):
            continue
        waiting = [text for text in PENDING if re.search(regex, text)]
        if waiting:
            pending.append((waiting[0], where, PENDING[waiting[0]]))
        else:
            missing.append(f"{where}: rule /{regex}/")
    if missing:
        raise RuntimeError(
            "gen_errors: TileError rules without an example in docs/error_examples/ "
            "(add a Case that triggers each, or, while no kernel can reach it, a PENDING entry):\n  "
            + "\n  ".join(missing)
        )
    return pending


def family_examples(cases=CASES) -> dict:
    """``{family name: [case title, ...]}``: the examples whose kernel names an
    opcode of each registered family (from the registry, so a new family
    without an example shows up empty)."""
    out = {f.name: [] for f in families()}
    for case in cases:
        # T.ptx["..."], or the PTX text as a string: T.cuda.tile.apply("...", ...)
        found = re.findall(r'T\.ptx\["([^"{}]+)"\]', case.source) + re.findall(
            r'T\.cuda\.tile\.apply\(\s*"([^"{}]+)"', case.source
        )
        for opcode in set(found):
            try:
                family = family_of(resolve(opcode)[0].entry)
            except TileError:
                continue
            if family is not None and case.title not in out[family.name]:
                out[family.name].append(case.title)
    return out


def check_family_examples(cases=CASES) -> None:
    """Fail unless every registered family has an example on the page."""
    missing = [name for name, titles in family_examples(cases).items() if not titles]
    if missing:
        raise RuntimeError(
            "gen_errors: families without an example in docs/error_examples/ (add a Case "
            "whose kernel calls one of their instructions): " + ", ".join(missing)
        )


def render_pending(pending) -> str:
    if not pending:
        return ""
    lines = [
        _heading("Rules without an example yet", "-"),
        "These rules exist in the code but have no example on this page yet.",
        "",
    ]
    lines += [f"* ``{text}`` (``{where}``): {reason}" for text, where, reason in pending]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# reST output
# --------------------------------------------------------------------------

_STAGE = {
    "parse": "when the kernel is parsed (``@T.function``)",
    "lower": "when ``LowerTileApply`` runs (``tvm_tirx.compile`` or ``tvm_tirx.testing.lower``)",
    "compile": "when the kernel is compiled for a target (``tvm_tirx.compile``)",
    "compile-noarch": "in ``tvm_tirx.compile``",
    "compile-sm100a": "when the kernel is compiled for a target (``tvm_tirx.compile``, here sm_100a)",
    "exec": "when the code runs",
}


def _heading(text: str, char: str) -> str:
    return f"{text}\n{char * len(text)}\n"


def render(results) -> str:
    lines = [
        ".. This file is generated by docs/gen_errors.py at build time; do not edit.",
        "",
    ]
    sections = [section for section in SECTIONS if any(case.section == section for case, _, _ in results)]
    labels = set()
    for section in sections:
        lines += [_heading(section, "-"), ""]
        for case, kind, message in results:
            if case.section != section:
                continue
            label = _label(case)
            if label in labels:
                raise RuntimeError(f"gen_errors: two examples are titled {case.title!r}")
            labels.add(label)
            lines += [f".. _{label}:", "", _heading(case.title, "~")]
            lines += [
                f"Raised {_STAGE[case.action]}.",
                "",
                ".. code-block:: python",
                "   :caption: example.py",
                f"   :lineno-start: {FIRST_LINE}",
                "",
            ]
            lines += ["   " + line if line else "" for line in case.source.rstrip("\n").split("\n")]
            lines += [
                "",
                f"Message (``{kind}``):",
                "",
                ".. code-block:: text",
                "",
                *["   " + line for line in message.splitlines()],
                "",
                f"**What it means.** {case.meaning}",
                "",
                f"**Fix.** {case.fix}",
                "",
            ]
    return "\n".join(lines) + "\n"


def _label(case) -> str:
    return "error-" + re.sub(r"[^a-z0-9]+", "-", case.title.lower()).strip("-")


def render_index(results) -> str:
    """A table: rule (as the message words it) -> its examples, for the top of the page."""
    rules = {}
    for case, kind, message in results:
        if kind in TILE_ERRORS:
            for line in violation_lines(kind, message):
                labels = rules.setdefault(_rule_words(line), [])
                if _label(case) not in labels:
                    labels.append(_label(case))
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 45 55",
        "",
        "   * - Rule (as the message words it)",
        "     - Example",
    ]
    for rule, labels in rules.items():
        lines += [f"   * - ``{rule}``", "     - " + ", ".join(f":ref:`{label}`" for label in labels)]
    return "\n".join(lines) + "\n"


def _rule_words(message: str) -> str:
    """The rule part of a TileError message: after location/opcode/operand, before ': expected'."""
    text = re.split(r": expected |: found ", message)[0]
    return text.split(": ")[-1]


def generate(out_path: pathlib.Path) -> None:
    package_dir = pathlib.Path(__file__).resolve().parent.parent / "python" / "tvm_tirx"
    check_family_examples()
    results = run_cases()
    pending = check_coverage(results, package_dir)
    text = render(results) + render_pending(pending)
    index = render_index(results)
    for path, content in ((out_path, text), (out_path.with_name(out_path.stem + "_index.rst"), index)):
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != content:
            path.write_text(content)


if __name__ == "__main__":
    target = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/_generated/errors.rst")
    generate(target)
    print(f"wrote {target}")
