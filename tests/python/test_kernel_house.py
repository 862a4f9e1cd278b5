"""The house rules of the shipped kernels (issue 40): no macro takes more than
:data:`MAX_MACRO_PARAMS` arguments -- related ones travel together as named tuples
(``kernels/attention/state.py``, ``kernels/gemm/shared.py``, ``kernels/parts``)."""

import ast
import pathlib

KERNELS = pathlib.Path(__file__).resolve().parents[2] / "python" / "tvm_tirx" / "kernels"
#: The most arguments a ``@T.macro`` of the shipped kernels takes.
MAX_MACRO_PARAMS = 8


def _macros():
    for path in sorted(KERNELS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and any(
                    isinstance(d, ast.Attribute) and d.attr == "macro" for d in node.decorator_list):
                yield path.relative_to(KERNELS).as_posix(), node


def test_the_kernels_have_macros():
    assert sum(1 for _ in _macros()) > 20


def test_no_macro_takes_more_than_eight_arguments():
    wide = {f"{path}:{node.lineno} {node.name}": len(node.args.args)
            for path, node in _macros() if len(node.args.args) > MAX_MACRO_PARAMS}
    assert not wide, f"macros over {MAX_MACRO_PARAMS} arguments: {wide}"
