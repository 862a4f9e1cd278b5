"""Kernels that issue every form of an instruction family, for assembly tests.

A family's forms (:func:`tvm_tirx.tile.ir.forms.forms_of`) are many -- hundreds for
the register families, thousands for ``ld`` / ``st`` -- and the time TVMScript's
parser takes grows faster than a kernel's length, so :func:`form_kernels` writes
them into several kernels of at most :data:`MAX_CALLS` calls each, as source
files loaded the way a user's kernel file is (:func:`load_kernel`).  What a
family needs is one function that writes the lines of one call (its operands'
allocations, then the ``T.cuda.tile.apply``) and, where the operands are views
of shared tensors, the kernel's head (:class:`KernelHead`).
:func:`register_call` writes them for the register families;
:func:`assemble_forms` builds, counts and assembles every kernel.
"""

from __future__ import annotations

import pathlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..build import stages
from ..build.kernel import Kernel
from ..build.kernel import compile as compile_kernel
from .ptx_counts import issue_counts

__all__ = [
    "MAX_CALLS", "KernelHead", "FormKernel", "form_kernels", "register_call", "forms_kernel_source", "load_kernel",
    "BuiltForms", "assemble_forms",
]  # fmt: skip

#: Most tile calls in one generated kernel: parsing 200 register calls takes 1.5 s,
#: 800 take 4.6 s and 1200 take 18 s.
MAX_CALLS = 200

#: ``call(form, i)``: the source lines (without indentation) that issue ``form``, the
#: ``i``-th call of its kernel: allocations of its operands, then the tile call.
CallWriter = Callable[..., Sequence[str]]


@dataclass(frozen=True)
class KernelHead:
    """What every kernel of a family's forms declares before its calls.

    Attributes
    ----------
    params : str
        The kernel's parameters, as written (``'G: T.Tensor(({n}, 64), "float32", align=16)'``);
        may use ``{n}``, the kernel's number of calls.
    launch : str
        The ``T.cuda.LaunchConfig(...)`` expression.
    prologue : tuple[str, ...]
        Lines before the calls (shared tensors, barriers), without indentation; may use
        ``{n}``, the kernel's number of calls.
    guard : str | None
        A condition the calls run under (``'T.cuda.thread_idx("x") == 0'``).
    imports : tuple[str, ...]
        Import lines besides ``from tvm_tirx.script import tirx as T``.
    epilogue : tuple[str, ...]
        Lines after the calls (``T.ptx["wgmma.commit_group.sync.aligned"]()``), not guarded.
    """

    params: str = ""
    launch: str = "T.cuda.LaunchConfig(grid=1, block=1)"
    prologue: tuple = ()
    guard: str | None = None
    imports: tuple = ()
    epilogue: tuple = ()


@dataclass(frozen=True)
class FormKernel:
    """One generated kernel: its name, its TVMScript source and the forms it issues, in order."""

    name: str
    source: str
    forms: tuple

    def load(self, directory):
        """The kernel, parsed from ``directory/<name>.py`` (:func:`load_kernel`)."""
        return load_kernel(self.source, directory, self.name)


def _source(name: str, forms, call: CallWriter, head: KernelHead) -> str:
    params = head.params.format(n=len(forms))
    lines = ["from tvm_tirx.script import tirx as T", *head.imports, "", "@T.function", f"def {name}({params}):"]
    lines.append(f"    T.device_entry(launch={head.launch})")
    lines += ["    " + line.format(n=len(forms)) for line in head.prologue]
    indent = "    "
    if head.guard is not None:
        lines.append(f"    if {head.guard}:")
        indent = "        "
    for i, form in enumerate(forms):
        lines += [indent + line for line in call(form, i)]
    lines += ["    " + line for line in head.epilogue]
    return "\n".join(lines) + "\n"


def form_kernels(
    forms, call: CallWriter, head: KernelHead = KernelHead(), *, name: str = "forms_kernel", max_calls: int = MAX_CALLS
) -> list:
    """Kernels that issue each of ``forms`` once, at most ``max_calls`` of them per kernel.

    Parameters
    ----------
    forms : Sequence[tvm_tirx.tile.ir.forms.Form]
        The forms, in the order they are issued.
    call : Callable[[Form, int], Sequence[str]]
        The lines that issue one form (see :data:`CallWriter`).
    head : KernelHead
        The kernels' parameters, launch and shared declarations.
    name : str
        The kernels' name: ``name`` for a single kernel, else ``name_0``, ``name_1`` ...
    max_calls : int
        The most calls in one kernel.

    Returns
    -------
    list[FormKernel]
        At least one kernel (an empty one for no forms).
    """
    forms = tuple(forms)
    chunks = [forms[i : i + max_calls] for i in range(0, len(forms), max_calls)] or [()]
    names = [name] if len(chunks) == 1 else [f"{name}_{k}" for k in range(len(chunks))]
    return [FormKernel(n, _source(n, chunk, call, head), chunk) for n, chunk in zip(names, chunks)]


def register_call(form, i: int) -> list:
    """The lines issuing a register-family form: every operand its own ``(lanes,)``
    register tensor of the role's first dtype."""
    lines, names = [], []
    for j, role in enumerate(form.contract.roles):
        lines.append(f'r{i}_{j} = T.alloc_local(({role.atom[0]},), "{role.dtypes[0]}")')
        names.append(f"r{i}_{j}")
    lines.append(f'T.cuda.tile.apply(T.ptx["{form.opcode}"], {", ".join(names)})')
    return lines


def forms_kernel_source(forms, name: str = "forms_kernel") -> str:
    """TVMScript source of one one-thread kernel issuing each register-family form once
    (:func:`register_call`), however many there are."""
    return form_kernels(forms, register_call, name=name, max_calls=max(len(forms), 1))[0].source


def load_kernel(source: str, directory, name: str = "forms_kernel"):
    """Write ``source`` to ``directory`` as ``<name>.py``, run it, return its kernel ``name``
    (:func:`tvm_tirx.build.stages.load_kernel`)."""
    path = pathlib.Path(directory) / f"{name}.py"
    path.write_text(source)
    return stages.load_kernel(str(path), name)


@dataclass(frozen=True)
class BuiltForms:
    """One generated kernel, built: the kernel's build, what it issues, and what nvcc made of it."""

    kernel: FormKernel
    build: Kernel
    #: ``{opcode text: issues per thread}`` of the lowered kernel (:func:`~.ptx_counts.issue_counts`).
    issued: dict
    #: The cubin, or the PTX text (``fmt="ptx"``; ptxas checked it too), or None when not assembled.
    assembled: bytes | str | None


def _opcode(item) -> str:
    return item if isinstance(item, str) else item.opcode


def assemble_forms(kernels, directory, *, arch: str = "sm_90a", fmt: str | None = "cubin") -> list:
    """Build every kernel of :func:`form_kernels` for ``arch`` and assemble it with ``nvcc``.

    Every form must be issued (its opcode at least as many times as the kernel has
    forms of that opcode text; a form may be given as its opcode text).

    Parameters
    ----------
    kernels : Sequence[FormKernel]
        The generated kernels.
    directory : str | os.PathLike
        Where their source files are written.
    arch : str
        The target's architecture.
    fmt : str | None
        What ``nvcc`` makes of each kernel: ``"cubin"``, ``"ptx"`` (nvcc runs ptxas on it
        too), or None: lower and compile only (e.g. without ``nvcc``).

    Returns
    -------
    list[BuiltForms]
        One per kernel, in order.

    Raises
    ------
    AssertionError
        A form's opcode is not issued.
    TileError
        A form's call breaks its contract.
    RuntimeError
        ``nvcc`` or ``ptxas`` rejects a kernel.
    """
    built = []
    for fk in kernels:
        func = fk.load(directory)
        issued = issue_counts(func)
        wanted = Counter(_opcode(form) for form in fk.forms)
        missing = {op: (n, issued.get(op, 0)) for op, n in wanted.items() if issued.get(op, 0) < n}
        assert not missing, f"{fk.name}: forms not issued (opcode: (forms, issues)): {missing}"
        kernel = compile_kernel(func, target="cuda", arch=arch)
        assembled = None if fmt is None else stages.assemble(kernel, fmt)
        built.append(BuiltForms(fk, kernel, issued, assembled.decode() if fmt == "ptx" else assembled))
    return built
