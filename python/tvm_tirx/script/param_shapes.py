"""Parameter shapes a kernel cannot be called with: a run-time size that no argument gives.

A kernel learns a symbolic size (``n = T.dynamic("n")``) from the arguments: from a
scalar parameter ``n: T.int32``, or from a tensor whose shape has ``n`` as an extent of
its own (``T.Tensor((n, 4), ...)``: the call's ``A.shape[0]``).  An extent that is an
expression (``T.Tensor((n * 4,), ...)``) is checked against the argument's shape but does
not define ``n``; when nothing else does, apache-tvm's ``MakePackedAPI`` stops the build
with "variables (n,) are used, but are not passed in as API arguments" and a long
traceback.  :func:`check_parameter_shapes` finds that case when the kernel is parsed and
names the parameter, its line and the two fixes.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

from tvm import tirx

__all__ = ["check_parameter_shapes"]


def _defined_sizes(func) -> set:
    """The size variables the arguments give: scalar parameters, bare shape extents."""
    defined = {p for p in func.params if not tirx.is_buffer_var(p)}
    for buf in func.params:
        if tirx.is_buffer_var(buf):
            defined |= {dim for dim in buf.shape if isinstance(dim, tirx.Var)}
    return defined


def _parameter_line(pyfunc, name: str) -> str | None:
    """``file:line`` of parameter ``name`` in ``pyfunc``'s source, or None."""
    try:
        lines, first = inspect.getsourcelines(pyfunc)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in node.args.args + node.args.kwonlyargs:
                if arg.arg == name:
                    return f"{inspect.getsourcefile(pyfunc)}:{first + arg.lineno - 1}"
    return None


def check_parameter_shapes(func, pyfunc=None) -> None:
    """Refuse a parameter whose shape uses a size variable that no argument defines.

    Parameters
    ----------
    func : tvm.tirx.PrimFunc
        The parsed kernel.
    pyfunc : callable | None
        The Python function it was parsed from (for the parameter's ``file:line``).

    Raises
    ------
    ValueError
        A tensor parameter's shape has an extent such as ``n * 4`` whose ``n`` is neither
        a scalar parameter nor a bare extent of some tensor parameter; the message names
        the parameter, its line, the variable and the fixes.
    """
    defined = _defined_sizes(func)
    for buf in func.params:
        if not tirx.is_buffer_var(buf):
            continue
        for axis, dim in enumerate(buf.shape):
            missing = [v for v in tirx.analysis.undefined_vars(dim, list(defined)) if v not in defined]
            if not missing:
                continue
            name, var = buf.name, missing[0].name
            where = _parameter_line(pyfunc, name) if pyfunc is not None else None
            shape = ", ".join(str(d) for d in buf.shape) + ("," if len(buf.shape) == 1 else "")
            raise ValueError(
                f"{where + ': ' if where else ''}T.Tensor parameter {name}: extent {axis} of shape ({shape}) uses "
                f"the run-time size {var} inside an expression ({dim}), and no argument gives {var}: a size is "
                f"read only from a scalar parameter or from an extent that is the variable alone. Declare the "
                f"shape with {var} as an extent of its own (T.Tensor(({var}, 4), ...) with rows {name}.sub[i, :] "
                f"in place of ({var} * 4,)), or add a scalar parameter {var}: T.int32 that the caller passes"
            )
