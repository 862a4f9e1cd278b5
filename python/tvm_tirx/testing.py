"""Helpers for tests of tile kernels (ours and users'), in TVM's testing style.

* :data:`requires_cuda` -- pytest marker: the test needs a CUDA GPU and torch with CUDA.
* :func:`lower` -- run ``LowerTileApply`` alone on a PrimFunc.
* :func:`count_ptx_calls` -- PTX intrinsic calls a statement executes per thread.
* :func:`assemble` -- assemble a kernel's CUDA for its arch with ``nvcc``/``ptxas``.
"""

from __future__ import annotations

import shutil

__all__ = [
    "requires_cuda",
    "has_cuda",
    "has_nvcc",
    "requires_nvcc",
    "lower",
    "count_ptx_calls",
    "assemble",
    "forms_kernel_source",
    "load_kernel",
    "ptxas_errors",
]


def has_cuda() -> bool:
    """Whether torch sees a CUDA GPU (False without torch)."""
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def has_nvcc() -> bool:
    """Whether ``nvcc`` is on the PATH."""
    return shutil.which("nvcc") is not None


def _marker(condition, reason):
    import pytest  # pylint: disable=import-outside-toplevel

    return pytest.mark.skipif(not condition, reason=reason)


def __getattr__(name):
    # Markers are built on first use so that importing this module does not import pytest.
    if name == "requires_cuda":
        import pytest  # pylint: disable=import-outside-toplevel

        mark = _marker(has_cuda(), "needs a CUDA GPU and torch with CUDA")
        return lambda f: pytest.mark.gpu(mark(f))
    if name == "requires_nvcc":
        return _marker(has_nvcc(), "needs nvcc on the PATH")
    raise AttributeError(name)


def lower(func):
    """``func`` (a PrimFunc) after ``LowerTileApply`` alone.

    Raises
    ------
    TileError
        As the pass does.
    """
    from .tile.lower import lower_tile_apply  # pylint: disable=import-outside-toplevel

    return lower_tile_apply(func)


def count_ptx_calls(stmt, opcode_prefix: str | None = None) -> int:
    """How many PTX intrinsic calls ``stmt`` executes per thread.

    Each ``T.ptx`` Call counts once per iteration of its enclosing ``for``
    loops with constant extents.  ``opcode_prefix`` (e.g. ``"ld"``, ``"mov"``)
    restricts the count to ops named ``tirx.ptx.<prefix>...``.
    """
    from tvm import tirx  # pylint: disable=import-outside-toplevel

    if hasattr(stmt, "body") and isinstance(stmt, tirx.PrimFunc):
        stmt = stmt.body

    def count(node, mult):
        total = 0
        if isinstance(node, tirx.For):
            return count(node.body, mult * int(node.extent))
        if isinstance(node, tirx.Evaluate):
            op = getattr(getattr(node.value, "op", None), "name", "")
            if op.startswith("tirx.ptx.") and op != "tirx.ptx.addr":
                name = op[len("tirx.ptx.") :]
                if opcode_prefix is None or name.startswith(opcode_prefix):
                    return mult
            return 0
        if isinstance(node, tirx.SeqStmt):
            return sum(count(s, mult) for s in node.seq)
        for field in ("body", "then_case", "else_case"):
            child = getattr(node, field, None)
            if isinstance(child, tirx.Stmt):
                total += count(child, mult)
        return total

    return count(stmt, 1)


def assemble(kernel, fmt: str = "cubin") -> bytes:
    """Assemble ``kernel``'s CUDA source with ``nvcc`` for its arch (``fmt``: cubin or ptx).

    Raises
    ------
    RuntimeError
        ``nvcc``/``ptxas`` rejects the code.
    """
    from .kernel import _nvcc  # pylint: disable=import-outside-toplevel

    return _nvcc(kernel.cuda_source, kernel.target, fmt)


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
    """Write ``source`` to ``directory`` as a module, import it, return its ``name``."""
    import importlib.util  # pylint: disable=import-outside-toplevel
    import pathlib  # pylint: disable=import-outside-toplevel

    path = pathlib.Path(directory) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"_tvm_tirx_generated_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def ptxas_errors(ptx: str, arch: str) -> list:
    """``[(line, message, instruction text)]`` that ``ptxas -arch=<arch>`` reports for ``ptx``."""
    import re  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel
    import tempfile  # pylint: disable=import-outside-toplevel

    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/k.ptx"
        with open(path, "w", encoding="utf-8") as f:
            f.write(ptx)
        out = subprocess.run(
            ["ptxas", f"-arch={arch}", path, "-o", f"{tmp}/k.cubin"],
            capture_output=True,
            text=True,
            check=False,
        )
    lines = ptx.splitlines()
    errors = []
    for m in re.finditer(r"line (\d+); error\s*:\s*(.*)", out.stderr):
        n = int(m.group(1))
        errors.append((n, m.group(2).strip(), lines[n - 1].strip() if n <= len(lines) else ""))
    if out.returncode != 0 and not errors:
        errors.append((0, out.stderr.strip(), ""))
    return errors
