"""``python -m tvm_tirx``: print one stage of a kernel's compilation.

::

    python -m tvm_tirx compile kernels.py:read_next_row --arch sm_90a --emit ptx

loads ``kernels.py``, takes the ``@T.function`` kernel ``read_next_row`` and
prints the chosen stage:

========== ================================================================
``script``  the TVMScript as parsed (``func.script()``)
``lowered`` after ``LowerTileApply`` (``tvm_tirx.build.stages.lower(func)``)
``cuda``    the CUDA C++ apache-tvm generates (``Kernel.cuda_source``)
``ptx``     the PTX ``nvcc`` makes of it (``Kernel.ptx``)
``sass``    the cubin's disassembly, by ``nvdisasm`` (or ``cuobjdump -sass``)
========== ================================================================

Exit status: 0 on success; 1 when the file, the function or the kernel is
wrong (one ``error: ...`` line on stderr, no traceback); 2 on a usage error
or when ``--emit sass`` finds no disassembler (checked before the kernel is
compiled).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

from .build.kernel import compile as build_kernel
from .build.stages import KernelFileError, assemble, describe_exception, load_kernel, lower
from .build.target import resolve_target

__all__ = ["main", "build_parser", "CliError", "STAGES", "DISASSEMBLERS"]

#: What ``--emit`` accepts, in pipeline order.
STAGES = ("script", "lowered", "cuda", "ptx", "sass")

#: The tools ``--emit sass`` tries, in order, with the arguments placed before the cubin's path:
#: ``nvdisasm`` disassembles a cubin on its own; ``cuobjdump -sass`` hands the work to
#: ``nvdisasm`` in CUDA 13, so where only ``cuobjdump`` is found it may fail for lack of it.
DISASSEMBLERS = (("nvdisasm", ()), ("cuobjdump", ("-sass",)))


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
            "by nvdisasm (or cuobjdump -sass, which runs nvdisasm; exit status 2 when neither\n"
            "is on the PATH, before anything is compiled)."
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


def resolve_arch(arch: str | None, required: bool):
    """The CUDA target for ``arch`` (:func:`tvm_tirx.build.target.resolve_target`).

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


def _wheel_tool(tool: str) -> str | None:
    """``tool`` from NVIDIA's pip wheel (``nvidia-cuda-nvdisasm`` puts ``nvdisasm`` in
    ``site-packages/nvidia/cu13/bin``; the test extra installs it), or None."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for cuda in ("cu13", "cu12"):
            path = os.path.join(root, cuda, "bin", tool)
            if os.access(path, os.X_OK):
                return path
    return None


def find_disassembler() -> tuple[str, tuple[str, ...]]:
    """The first of :data:`DISASSEMBLERS` on the PATH, or else in NVIDIA's pip wheel, as
    ``(executable, args)``.

    Raises
    ------
    CliError
        Neither tool is found (status 2).
    """
    for tool, args in DISASSEMBLERS:
        found = shutil.which(tool)
        if found:
            return found, args
    for tool, args in DISASSEMBLERS:
        found = _wheel_tool(tool)
        if found:
            return found, args
    raise CliError(
        "--emit sass needs nvdisasm on the PATH (or cuobjdump, whose -sass runs nvdisasm; or the "
        "nvidia-cuda-nvdisasm wheel); looked for them and found none", status=2,
    )


def disassemble(cubin: bytes) -> str:
    """SASS of ``cubin`` from ``nvdisasm`` (or ``cuobjdump -sass``).

    Parameters
    ----------
    cubin : bytes
        An assembled kernel (:func:`tvm_tirx.build.stages.assemble`).

    Returns
    -------
    str
        The tool's output.

    Raises
    ------
    CliError
        No disassembler on the PATH (status 2), or the tool failed.
    """
    tool, args = find_disassembler()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        proc = subprocess.run([tool, *args, path], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip() or f"exit status {proc.returncode}").splitlines()
        hint = " (cuobjdump -sass runs nvdisasm: put nvdisasm on the PATH)" if "cuobjdump" in tool else ""
        raise CliError(f"{os.path.basename(tool)} failed: {detail[0]}{hint}")
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
    if stage == "script":
        return func.script()
    if stage == "lowered":
        if target is None:
            return lower(func).script()
        with target:
            return lower(func).script()
    if stage == "sass":
        find_disassembler()  # before spending time in the compile
    kernel = build_kernel(func, target=target)
    if stage == "cuda":
        return kernel.cuda_source
    if stage == "ptx":
        return kernel.ptx
    if stage == "sass":
        return disassemble(assemble(kernel))
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
        try:
            func = load_kernel(path, name)
        except KernelFileError as err:
            raise CliError(str(err)) from err
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
