"""Compile and assemble kernels in tests and tutorials: :func:`compile_and_show`,
:func:`ptxas_errors`, :func:`relax_cuda_source` (and :func:`~tvm_tirx.build.stages.assemble`)."""

from __future__ import annotations

import re
import subprocess
import tempfile

from ..build.kernel import compile as compile_kernel
from ..build.stages import assemble

__all__ = ["assemble", "compile_and_show", "ptxas_errors", "ptxas_report", "relax_cuda_source"]


def relax_cuda_source(executable) -> str:
    """The CUDA source of a Relax executable (``tvm.compile`` of an IRModule for a CUDA
    target): the first module of kind ``"cuda"`` among the executable's imports.

    Raises
    ------
    AssertionError
        The executable holds no CUDA module.
    """
    modules = [executable.mod]
    while modules:
        module = modules.pop()
        if module.kind == "cuda":
            return module.inspect_source()
        modules.extend(module.imports)
    raise AssertionError("no CUDA module in the executable")


def compile_and_show(func, *needles: str, arch: str | None = None, out=print):
    """Compile PrimFunc ``func`` for CUDA, show the PTX lines that contain any of
    ``needles``, assemble it, and return the :class:`~tvm_tirx.Kernel`.

    What the tutorials do with each kernel they build.  ``out`` (default
    ``print``) receives, one call per line: ``"--- NAME (ARCH): PTX excerpt"``,
    each PTX line containing a needle (stripped, indented by four spaces; the
    PTX text is the kernel's ``ptx``), then ``"assembled NAME for ARCH: N-byte
    cubin"`` (``N``: bytes of the cubin :func:`assemble` produced).

    Parameters
    ----------
    func : tvm.tirx.PrimFunc
        A kernel (``@T.function``).
    *needles : str
        Substrings of the PTX lines to show (plain text, not patterns).
    arch : str | None
        ``"sm_90a"`` ...; None: the GPU's own architecture (as :func:`tvm_tirx.compile`).

    Raises
    ------
    TileError
        ``func`` breaks a tile contract (from :func:`tvm_tirx.compile`).
    RuntimeError
        ``nvcc``/``ptxas`` rejects the code, or is missing (from :func:`assemble`).
    """
    kernel = compile_kernel(func, target="cuda", arch=arch)
    target_arch = kernel.target.attrs["arch"]
    out(f"--- {kernel.name} ({target_arch}): PTX excerpt")
    for line in kernel.ptx.splitlines():
        if any(n in line for n in needles):
            out(f"    {line.strip()}")
    out(f"assembled {kernel.name} for {target_arch}: {len(assemble(kernel))}-byte cubin")
    return kernel


def _ptxas(ptx: str, arch: str, *flags: str) -> subprocess.CompletedProcess:
    """``ptxas -arch=<arch> <flags>`` of ``ptx`` (written to a temporary file), its output captured."""
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/k.ptx"
        with open(path, "w", encoding="utf-8") as f:
            f.write(ptx)
        return subprocess.run(["ptxas", f"-arch={arch}", *flags, path, "-o", f"{tmp}/k.cubin"],
                              capture_output=True, text=True, check=False)


def ptxas_report(kernel, arch: str = "sm_90a") -> str:
    """What ``ptxas -arch=<arch> -v`` prints (stderr) for a compiled kernel's PTX: per
    function its registers, stack frame and spill stores / loads in bytes.

    Raises
    ------
    subprocess.CalledProcessError
        ptxas refused the PTX (its message in the exception's ``stderr``).
    FileNotFoundError
        No ``ptxas`` on the PATH.
    """
    out = _ptxas(kernel.ptx, arch, "-v")
    out.check_returncode()
    return out.stderr


def ptxas_errors(ptx: str, arch: str) -> list:
    """``[(line, message, instruction text)]`` that ``ptxas -arch=<arch>`` reports for ``ptx``."""
    out = _ptxas(ptx, arch)
    lines = ptx.splitlines()
    errors = []
    for m in re.finditer(r"line (\d+); error\s*:\s*(.*)", out.stderr):
        n = int(m.group(1))
        errors.append((n, m.group(2).strip(), lines[n - 1].strip() if n <= len(lines) else ""))
    if out.returncode != 0 and not errors:
        errors.append((0, out.stderr.strip(), ""))
    return errors
