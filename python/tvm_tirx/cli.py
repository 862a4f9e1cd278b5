"""``python -m tvm_tirx``: print one stage of a kernel's compilation.

::

    python -m tvm_tirx compile kernels.py:read_next_row --arch sm_90a --emit ptx

loads ``kernels.py``, takes the ``@T.function`` kernel ``read_next_row`` and
prints the chosen stage:

========== ================================================================
``script``  the TVMScript as parsed (``func.script()``)
``lowered`` after ``LowerTileApply`` (``tvm_tirx.testing.lower(func)``)
``cuda``    the CUDA C++ apache-tvm generates (``Kernel.cuda_source``)
``ptx``     the PTX ``nvcc`` makes of it (``Kernel.ptx``)
``sass``    the cubin's disassembly, by ``cuobjdump -sass`` or ``nvdisasm``
========== ================================================================

Exit status: 0 on success; 1 when the file, the function or the kernel is
wrong (one ``error: ...`` line on stderr, no traceback); 2 on a usage error
or when ``--emit sass`` finds no disassembler.
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["main", "build_parser", "CliError", "STAGES", "DISASSEMBLERS"]

#: What ``--emit`` accepts, in pipeline order.
STAGES = ("script", "lowered", "cuda", "ptx", "sass")

#: The tools ``--emit sass`` tries, in order, with the arguments placed before the cubin's path.
DISASSEMBLERS = (("cuobjdump", ("-sass",)), ("nvdisasm", ()))


class CliError(Exception):
    """A failure reported as one ``error: ...`` line and exit status :attr:`status`."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m tvm_tirx`` argument parser.

    Returns
    -------
    argparse.ArgumentParser
        With one sub-command, ``compile``.
    """
    parser = argparse.ArgumentParser(
        prog="python -m tvm_tirx",
        description="tvm_tirx command line: inspect what a tile kernel compiles to.",
        epilog=(
            "example:\n"
            "  python -m tvm_tirx compile kernels.py:read_next_row --arch sm_90a --emit ptx\n\n"
            "stages (--emit): script = TVMScript as parsed; lowered = after LowerTileApply;\n"
            "cuda = apache-tvm's CUDA C++; ptx = nvcc's PTX; sass = the cubin disassembled\n"
            "by cuobjdump -sass or nvdisasm (exit status 2 when neither is on the PATH)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="command")
    commands.required = True
    compile_cmd = commands.add_parser(
        "compile",
        help="print one compilation stage of a @T.function kernel",
        description=(
            "Load FILE.py, take the kernel FUNC defined there with @T.function, and print "
            "the stage chosen with --emit."
        ),
        epilog="example:\n  python -m tvm_tirx compile kernels.py:read_next_row --arch sm_90a --emit sass",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compile_cmd.add_argument(
        "kernel",
        metavar="FILE.py:FUNC",
        help="the Python file and the name of the kernel in it (':FUNC' may be left out "
        "when the file defines exactly one kernel)",
    )
    compile_cmd.add_argument(
        "--arch",
        default=None,
        help="CUDA architecture, e.g. sm_90a; defaults to the GPU's own and must be given "
        "without a GPU (script and lowered do not need it)",
    )
    compile_cmd.add_argument(
        "--emit",
        choices=STAGES,
        default="cuda",
        help="the stage to print (default: cuda)",
    )
    return parser


def split_kernel_spec(spec: str) -> tuple[str, str | None]:
    """Split ``"FILE.py:FUNC"`` into ``(path, name)``.

    Parameters
    ----------
    spec : str
        ``path/to/file.py:func`` or ``path/to/file.py``.

    Returns
    -------
    tuple[str, str | None]
        The path and the function name (None when not given).

    Raises
    ------
    CliError
        The name part is empty or not an identifier.
    """
    path, sep, name = spec.rpartition(":")
    if not sep or not path or os.path.exists(spec):
        return spec, None
    if not name.isidentifier():
        raise CliError(f"{spec!r}: expected FILE.py:FUNC with FUNC a Python name, got {name!r}")
    return path, name


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
    CliError
        The file does not exist or fails to run (a ``TileError`` or TVMScript
        error while parsing a kernel included), or has no kernel ``name``.
    """
    import importlib.util  # pylint: disable=import-outside-toplevel

    from tvm import tirx  # pylint: disable=import-outside-toplevel

    if not os.path.isfile(path):
        raise CliError(f"{path}: no such file")
    directory = os.path.dirname(os.path.abspath(path))
    module_name = "_tvm_tirx_cli_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(path))
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, directory)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        raise CliError(f"{err.filename or path}:{err.lineno}: SyntaxError: {err.msg}") from err
    except Exception as err:  # pylint: disable=broad-except
        line = describe_exception(err)
        located = getattr(err, "location", None) or os.path.basename(path) in line.split(": ")[0]
        raise CliError(line if located else f"{path}: {line}") from err
    finally:
        if sys.path and sys.path[0] == directory:
            del sys.path[0]
    kernels = sorted(k for k, v in vars(module).items() if isinstance(v, tirx.PrimFunc))
    listing = ", ".join(kernels) if kernels else "none"
    if name is None:
        if len(kernels) != 1:
            raise CliError(f"{path}: name the kernel as {path}:FUNC (kernels defined there: {listing})")
        name = kernels[0]
    if not hasattr(module, name):
        raise CliError(f"{path}: no function {name!r} (kernels defined there: {listing})")
    func = getattr(module, name)
    if not isinstance(func, tirx.PrimFunc):
        raise CliError(
            f"{path}:{name} is a {type(func).__name__}, not a kernel defined with @T.function "
            f"(kernels defined there: {listing})"
        )
    return func


def describe_exception(err: BaseException) -> str:
    """One line for ``err``: its type and the line of its message that says what is wrong.

    * a ``TileError`` is already one line (``file:line: opcode: operand: rule: ...``);
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
    from .errors import TileError  # pylint: disable=import-outside-toplevel

    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    if isinstance(err, TileError):
        return f"TileError: {lines[-1] if lines else err.rule}"
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


def resolve_arch(arch: str | None, required: bool):
    """The CUDA target for ``arch`` (``tvm_tirx.kernel.resolve_target``).

    Parameters
    ----------
    arch : str | None
        ``--arch``; None means the GPU's own.
    required : bool
        Whether the stage needs a target.

    Returns
    -------
    tvm.target.Target | None
        None when no arch is known and none is required.

    Raises
    ------
    CliError
        ``required`` and no GPU is present to supply the arch, or ``arch`` is
        not a CUDA architecture apache-tvm accepts.
    """
    from .kernel import resolve_target  # pylint: disable=import-outside-toplevel

    try:
        return resolve_target("cuda", arch)
    except ValueError as err:
        if arch is None and not required:
            return None
        if arch is None:
            raise CliError("no CUDA GPU is present to take the architecture from; pass --arch, e.g. --arch sm_90a") from err
        raise CliError(f"--arch {arch}: {describe_exception(err)}") from err
    except Exception as err:  # pylint: disable=broad-except
        raise CliError(f"--arch {arch}: {describe_exception(err)}") from err


def find_disassembler() -> tuple[str, tuple[str, ...]]:
    """The first of :data:`DISASSEMBLERS` on the PATH, as ``(executable, args)``.

    Raises
    ------
    CliError
        Neither tool is on the PATH (status 2).
    """
    import shutil  # pylint: disable=import-outside-toplevel

    for tool, args in DISASSEMBLERS:
        found = shutil.which(tool)
        if found:
            return found, args
    names = " or ".join(tool for tool, _ in DISASSEMBLERS)
    raise CliError(f"--emit sass needs {names} on the PATH; looked for both and found neither", status=2)


def disassemble(cubin: bytes) -> str:
    """SASS of ``cubin`` from ``cuobjdump -sass`` or ``nvdisasm``.

    Parameters
    ----------
    cubin : bytes
        An assembled kernel (``tvm_tirx.testing.assemble(kernel)``).

    Returns
    -------
    str
        The tool's output.

    Raises
    ------
    CliError
        No disassembler on the PATH (status 2), or the tool failed.
    """
    import subprocess  # pylint: disable=import-outside-toplevel
    import tempfile  # pylint: disable=import-outside-toplevel

    tool, args = find_disassembler()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        proc = subprocess.run([tool, *args, path], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip() or f"exit status {proc.returncode}").splitlines()
        raise CliError(f"{os.path.basename(tool)} failed: {detail[0]}")
    return proc.stdout


def emit(func, stage: str, target=None) -> str:
    """The text of ``stage`` for the kernel ``func``.

    Parameters
    ----------
    func : tvm.tirx.PrimFunc
        The kernel as parsed.
    stage : str
        One of :data:`STAGES`.
    target : tvm.target.Target | None
        The CUDA target; needed for ``cuda``, ``ptx`` and ``sass``.

    Returns
    -------
    str
        What to print.

    Raises
    ------
    TileError
        ``LowerTileApply`` rejects a tile call.
    RuntimeError
        ``nvcc`` is missing or rejects the kernel.
    CliError
        No disassembler for ``sass``.
    """
    from . import testing  # pylint: disable=import-outside-toplevel

    if stage == "script":
        return func.script()
    if stage == "lowered":
        if target is None:
            return testing.lower(func).script()
        with target:
            return testing.lower(func).script()
    from .kernel import compile as build  # pylint: disable=import-outside-toplevel

    kernel = build(func, target=target)
    if stage == "cuda":
        return kernel.cuda_source
    if stage == "ptx":
        return kernel.ptx
    if stage == "sass":
        find_disassembler()  # before spending time in nvcc
        return disassemble(testing.assemble(kernel))
    raise CliError(f"unknown stage {stage!r}; expected one of {', '.join(STAGES)}", status=2)


def main(argv=None) -> int:
    """Run the command line.

    Parameters
    ----------
    argv : list[str] | None
        The arguments (``sys.argv[1:]`` when None).

    Returns
    -------
    int
        The exit status: 0 success, 1 error, 2 usage error or missing disassembler.
        Errors are reported as one ``error: ...`` line on stderr.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help (0) and usage errors (2)
        return int(exit_.code or 0)
    try:
        path, name = split_kernel_spec(args.kernel)
        func = load_kernel(path, name)
        needs_target = args.emit in ("cuda", "ptx", "sass")
        target = resolve_arch(args.arch, required=needs_target)
        text = emit(func, args.emit, target)
    except CliError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.status
    except Exception as err:  # pylint: disable=broad-except  # TileError, nvcc, apache-tvm
        print(f"error: {describe_exception(err)}", file=sys.stderr)
        return 1
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
