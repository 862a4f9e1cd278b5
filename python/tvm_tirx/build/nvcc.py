"""The machine's CUDA compiler, ``nvcc``: PTX, cubins and fatbins of generated CUDA source.

apache-tvm compiles the kernel it runs itself (NVRTC or nvcc, :mod:`.options`);
this is the compiler :attr:`Kernel.ptx <tvm_tirx.Kernel.ptx>`,
:meth:`Kernel.export <tvm_tirx.Kernel.export>` and
:func:`tvm_tirx.testing.assemble` run, with the compile options' flags.
"""

from __future__ import annotations

import os
import subprocess
import tempfile

__all__ = ["nvcc"]


def nvcc(source: str, target, fmt: str, check: bool = True, flags=()) -> bytes:
    """Run the machine's ``nvcc`` on CUDA ``source`` for ``target``'s arch.

    Parameters
    ----------
    source : str
        CUDA C++ source (a kernel's ``cuda_source``).
    target : tvm.target.Target
        A CUDA target with an ``sm_`` arch.
    fmt : str
        ``"ptx"`` (PTX of the arch's virtual architecture), ``"cubin"`` or
        ``"fatbin"`` (the assembled binary).
    check : bool
        nvcc 13 runs ptxas on ``--ptx`` output too; with ``check=False`` the
        PTX is returned even when ptxas rejects it.
    flags : sequence of str
        Compiler arguments (the compile options' ``compiler_args()``), after ours.

    Returns
    -------
    bytes
        The file nvcc wrote.

    Raises
    ------
    RuntimeError
        ``target`` has no ``sm_`` arch, ``nvcc`` is not on the PATH, or it
        rejects the source.
    """
    sm = str(target.attrs.get("arch", ""))
    if not sm.startswith("sm_"):
        raise RuntimeError(f"tvm_tirx: target has no sm_ arch: {target}")
    if fmt == "ptx":
        fmt_flags = ["--ptx", f"-arch=compute_{sm[3:]}"]
    else:
        fmt_flags = [f"--{fmt}", f"-arch={sm}"]
    with tempfile.TemporaryDirectory() as tmp:
        src, out = f"{tmp}/kernel.cu", f"{tmp}/kernel.{fmt}"
        with open(src, "w", encoding="utf-8") as f:
            f.write(source)
        try:
            proc = subprocess.run(
                ["nvcc", *fmt_flags, "-O3", "-std=c++17", "-w", *flags, "-o", out, src],
                capture_output=True,
                text=True,
                check=False,
            )
        except FileNotFoundError as err:
            raise RuntimeError("tvm_tirx: nvcc is not on the PATH") from err
        if proc.returncode != 0 and not (not check and fmt == "ptx" and os.path.exists(out)):
            raise RuntimeError(f"tvm_tirx: nvcc could not build the kernel ({fmt}):\n{proc.stderr}")
        with open(out, "rb") as f:
            return f.read()
