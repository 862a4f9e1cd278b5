"""One compilation stage at a time, for the command line and :mod:`tvm_tirx.testing`.

* :func:`load_kernel` -- a ``@T.function`` kernel from a Python file (the
  errors of running it as one line: :func:`describe_exception`);
* :func:`lower` -- ``LowerTileApply`` alone;
* :func:`assemble` -- a kernel's CUDA through the machine's ``nvcc``.

``python -m tvm_tirx compile`` (:mod:`tvm_tirx.cli`) prints these stages, and
the test helpers build on them; both import them from here.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys

from tvm import tirx

from ..errors import TileError, reported_here
from ..tile.lower.lower import lower_tile_apply
from .nvcc import nvcc

__all__ = ["KernelFileError", "load_kernel", "describe_exception", "lower", "assemble"]


class KernelFileError(Exception):
    """A Python file does not give the kernel asked for: it is missing, fails to
    run (the one-line :func:`describe_exception` of what it raised is the
    message), or defines no such ``@T.function``."""


def load_kernel(path: str, name: str | None):
    """Run the Python file ``path`` and return its kernel ``name``.

    The file's directory is put first on ``sys.path`` while it runs, so it may
    import its neighbours.

    Parameters
    ----------
    path : str
        A Python file defining kernels with ``@T.function``.
    name : str | None
        The kernel's name; None picks the file's only kernel.

    Returns
    -------
    tvm.tirx.PrimFunc
        The kernel as parsed.

    Raises
    ------
    KernelFileError
        The file does not exist or fails to run (a ``TileError`` or TVMScript
        error while parsing a kernel included), or has no kernel ``name``.
    """
    module = _run_file(path)
    kernels = sorted(k for k, v in vars(module).items() if isinstance(v, tirx.PrimFunc))
    listing = ", ".join(kernels) if kernels else "none"
    if name is None:
        if len(kernels) != 1:
            raise KernelFileError(f"{path}: name the kernel as {path}:FUNC (kernels defined there: {listing})")
        name = kernels[0]
    if not hasattr(module, name):
        raise KernelFileError(f"{path}: no function {name!r} (kernels defined there: {listing})")
    func = getattr(module, name)
    if not isinstance(func, tirx.PrimFunc):
        raise KernelFileError(
            f"{path}:{name} is a {type(func).__name__}, not a kernel defined with @T.function "
            f"(kernels defined there: {listing})"
        )
    return func


def _run_file(path: str):
    """The module object of Python file ``path``, after running it."""
    if not os.path.isfile(path):
        raise KernelFileError(f"{path}: no such file")
    directory = os.path.dirname(os.path.abspath(path))
    module_name = "_tvm_tirx_cli_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(path))
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise KernelFileError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, directory)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        raise KernelFileError(f"{err.filename or path}:{err.lineno}: SyntaxError: {err.msg}") from err
    except Exception as err:  # pylint: disable=broad-except
        line = describe_exception(err)
        located = getattr(err, "location", None) or os.path.basename(path) in line.split(": ")[0]
        raise KernelFileError(line if located else f"{path}: {line}") from err
    finally:
        if sys.path and sys.path[0] == directory:
            del sys.path[0]
    return module


def _describe_tile_error(err, lines) -> str:
    """``TileError: <the first violation>``, with ``(1 of N contract violations)``
    for several (their source excerpts left out)."""
    violations = [line for line in lines if not _EXCERPT.match(line)]
    if len(violations) > 1 and violations[0].endswith("contract violations:"):
        return f"TileError: {violations[1]} (1 of {len(violations) - 1} contract violations)"
    return f"TileError: {violations[-1] if violations else err.rule}"


#: A line of a source excerpt, stripped (``|`` or ``12 | ...``: :mod:`tvm_tirx.excerpts`).
_EXCERPT = re.compile(r"^\d*\s?\|")


def describe_exception(err: BaseException) -> str:
    """One line for ``err``: its type and the line of its message that says what is wrong.

    * a ``TileError`` is already one line (``file:line: opcode: operand: rule: ...``);
      of several reported together, the first, and how many there are;
    * a TVMScript diagnostic (``error: ...``, `` --> file:line:col``, a source
      excerpt) becomes ``file:line:col: message``;
    * tvm_tirx's own multi-line errors (nvcc's report) keep their first line and
      the first line after it that reports an error (or else the second line);
    * any other message keeps its last non-empty line, as TVMScript's parser does.

    Parameters
    ----------
    err : BaseException
        The exception.

    Returns
    -------
    str
        A single line.
    """
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    if isinstance(err, TileError):
        return _describe_tile_error(err, lines)
    if not lines:
        return type(err).__name__
    location = next((line[len("-->") :].strip() for line in lines if line.startswith("-->")), None)
    message = next((line for line in lines if line.startswith("error:")), None)
    if message is not None:
        message = message[len("error:") :].strip()
        return f"{location}: {message}" if location else message
    if lines[0].startswith("tvm_tirx"):
        detail = next((line for line in lines[1:] if "error" in line.lower() or "fatal" in line.lower()), None)
        detail = detail or (lines[1] if len(lines) > 1 else None)
        return f"{lines[0]} {detail}" if detail else lines[0]
    return f"{type(err).__name__}: {lines[-1]}"


@reported_here
def lower(func):
    """``func`` (a PrimFunc) after ``LowerTileApply`` alone.

    Raises
    ------
    TileError
        As the pass does.
    """
    return lower_tile_apply(func)


def assemble(kernel, fmt: str = "cubin") -> bytes:
    """Assemble ``kernel``'s CUDA source with ``nvcc`` for its arch (``fmt``: cubin or ptx),
    with the kernel's compile options' flags.

    Raises
    ------
    RuntimeError
        ``nvcc``/``ptxas`` rejects the code.
    """
    options = getattr(kernel, "options", None)
    return nvcc(kernel.cuda_source, kernel.target, fmt, flags=options.compiler_args() if options else ())
