"""Kernels that issue many instruction forms, written as TVMScript source and loaded
from a file (as a user's kernel file is): :func:`forms_kernel_source`, :func:`load_kernel`."""

from __future__ import annotations

import pathlib

from ..build import stages

__all__ = ["forms_kernel_source", "load_kernel"]


def forms_kernel_source(forms, name: str = "forms_kernel") -> str:
    """TVMScript source of a one-thread kernel issuing each form once.

    Parameters
    ----------
    forms : list[tvm_tirx.tile.forms.Form]
        Register-family forms: every operand gets its own ``(lanes,)`` register
        tensor of the role's first dtype.
    name : str
        The kernel's name.
    """
    lines = [
        "from tvm_tirx.script import tirx as T",
        "",
        "@T.function",
        f"def {name}():",
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))",
    ]
    for i, form in enumerate(forms):
        names = []
        for j, role in enumerate(form.contract.roles):
            lines.append(f'    r{i}_{j} = T.alloc_local(({role.atom[0]},), "{role.dtypes[0]}")')
            names.append(f"r{i}_{j}")
        lines.append(f'    T.cuda.tile.apply(T.ptx["{form.opcode}"], {", ".join(names)})')
    return "\n".join(lines) + "\n"


def load_kernel(source: str, directory, name: str = "forms_kernel"):
    """Write ``source`` to ``directory`` as ``<name>.py``, run it, return its kernel ``name``
    (:func:`tvm_tirx.build.stages.load_kernel`)."""
    path = pathlib.Path(directory) / f"{name}.py"
    path.write_text(source)
    return stages.load_kernel(str(path), name)
