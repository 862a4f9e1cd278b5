"""Helpers for tests of tile kernels (ours and users'), in TVM's testing style.

* :data:`requires_cuda` -- pytest marker: the test needs a CUDA GPU and torch with CUDA.
* :func:`lower` -- run ``LowerTileApply`` alone on a PrimFunc.
* :func:`assemble` -- assemble a kernel's CUDA for its arch with ``nvcc``/``ptxas``.
* :func:`compile_and_show` -- compile, print the PTX lines of interest, assemble (the tutorials' step).
* :func:`requires_arch` -- pytest marker: the test needs a GPU of at least an SM version.
* :func:`count_ptx` -- how many times a PTX opcode (or every one a pattern matches) is issued per thread.
* :func:`do_bench` -- time GPU work with CUDA events (median and spread).
* :func:`sweep` -- compile configurations in parallel, drop failures, time the rest.
"""

from __future__ import annotations

import shutil

from .arch import device_capability, parse_arch
from .benchmark import SweepResult, SweepRow, Timing, do_bench, sweep

__all__ = [
    "requires_cuda",
    "has_cuda",
    "has_nvcc",
    "requires_nvcc",
    "lower",
    "assemble",
    "compile_and_show",
    "forms_kernel_source",
    "load_kernel",
    "ptxas_errors",
    "requires_arch",
    "arch_supported",
    "count_ptx",
    "ptx_opcode_of",
    "do_bench",
    "sweep",
    "Timing",
    "SweepRow",
    "SweepResult",
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


def assemble(kernel, fmt: str = "cubin") -> bytes:
    """Assemble ``kernel``'s CUDA source with ``nvcc`` for its arch (``fmt``: cubin or ptx),
    with the kernel's compile options' flags.

    Raises
    ------
    RuntimeError
        ``nvcc``/``ptxas`` rejects the code.
    """
    from .kernel import _nvcc  # pylint: disable=import-outside-toplevel

    options = getattr(kernel, "options", None)
    return _nvcc(kernel.cuda_source, kernel.target, fmt, flags=options.compiler_args() if options else ())


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
    from .kernel import compile as compile_kernel  # pylint: disable=import-outside-toplevel

    kernel = compile_kernel(func, target="cuda", arch=arch)
    target_arch = kernel.target.attrs["arch"]
    out(f"--- {kernel.name} ({target_arch}): PTX excerpt")
    for line in kernel.ptx.splitlines():
        if any(n in line for n in needles):
            out(f"    {line.strip()}")
    out(f"assembled {kernel.name} for {target_arch}: {len(assemble(kernel))}-byte cubin")
    return kernel


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
    (:func:`tvm_tirx.cli.load_kernel`)."""
    import pathlib  # pylint: disable=import-outside-toplevel

    from .cli import load_kernel as _load  # pylint: disable=import-outside-toplevel

    path = pathlib.Path(directory) / f"{name}.py"
    path.write_text(source)
    return _load(str(path), name)


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


# -- GPU architecture markers ---------------------------------------------------------------


_parse_arch = parse_arch
_device_capability = device_capability


def arch_supported(arch, capability: tuple[int, int] | None) -> bool:
    """Whether a GPU of compute ``capability`` runs code built for ``arch``.

    A plain ``sm_XY`` needs capability ``(X, Y)`` or newer.  Arch-specific
    targets are not forward compatible: ``sm_XYa`` needs exactly ``(X, Y)``,
    and a family target ``sm_XYf`` needs major ``X`` with minor ``Y`` or newer.
    ``capability=None`` (no GPU) supports nothing.

    Raises
    ------
    ValueError
        ``arch`` is not an SM architecture.
    """
    major, minor, suffix = _parse_arch(arch)
    if capability is None:
        return False
    capability = (int(capability[0]), int(capability[1]))
    if suffix == "a":
        return capability == (major, minor)
    if suffix == "f":
        return capability[0] == major and capability[1] >= minor
    return capability >= (major, minor)


def requires_arch(arch):
    """pytest marker factory: run the test only on a GPU that supports ``arch``.

    Use it as a decorator on a test function or class::

        @tvm_tirx.testing.requires_arch("sm_90a")
        def test_wgmma_kernel():
            ...

    The test is marked ``gpu`` (so ``pytest -m gpu`` selects it) and skipped
    unless GPU 0 is at least that SM version (see :func:`arch_supported`: an
    ``a`` suffix needs exactly that version).  The GPU is queried with
    ``torch.cuda.get_device_capability`` when torch with CUDA is available.

    Parameters
    ----------
    arch : str | int
        ``"sm_90a"``, ``"sm_80"``, ``"90"`` or ``90``.

    Returns
    -------
    Callable
        A decorator applying the ``gpu`` mark and a ``skipif`` mark.

    Raises
    ------
    ValueError
        ``arch`` is not an SM architecture (raised at decoration time).
    """
    import pytest  # pylint: disable=import-outside-toplevel

    _parse_arch(arch)
    capability = _device_capability()
    found = "no CUDA GPU" if capability is None else f"a GPU of compute capability {capability[0]}.{capability[1]}"
    skip = pytest.mark.skipif(
        not arch_supported(arch, capability), reason=f"needs a GPU that runs {arch} code; found {found}"
    )

    def decorate(test):
        return pytest.mark.gpu(skip(test))

    return decorate


# -- counting emitted PTX -----------------------------------------------------------------


def ptx_opcode_of(call) -> str | None:
    """The PTX opcode text a ``T.ptx`` Call issues (``"ld.global.v4.b32"``), or None.

    apache-tvm's PTX engine lays a Call to ``tirx.ptx.<entry>`` out as
    ``[operands..., pred?] [one token per modifier slot] [flag marker]``;
    the opcode is the entry's mnemonic followed by the non-empty tokens in
    slot order -- the text its CUDA helper puts in the ``asm`` statement.
    Returns None for Calls that are not PTX instructions (``tirx.ptx.addr``
    and any other op).
    """
    from .tile.ptx_table import opcode_of_call  # pylint: disable=import-outside-toplevel

    return opcode_of_call(call)


def _ptx_issue_counts(stmt) -> dict:
    """``{(table entry, opcode text): issues per thread}`` for every PTX Call in ``stmt``.

    A Call counts once per iteration of each enclosing ``for``.

    Raises
    ------
    ValueError
        A ``for`` around a PTX call has a non-constant extent.
    """
    from tvm import tirx  # pylint: disable=import-outside-toplevel

    counts: dict = {}

    def visit(node, mult):
        if isinstance(node, tirx.For):
            body_counts = _ptx_issue_counts(node.body)
            if not body_counts:
                return
            if not isinstance(node.extent, tirx.IntImm):
                raise ValueError(
                    f"count_ptx: the loop over {node.loop_var} has a non-constant extent "
                    f"({node.extent}), so the PTX issued per thread is not a number"
                )
            for key, n in body_counts.items():
                counts[key] = counts.get(key, 0) + n * mult * int(node.extent.value)
            return
        if isinstance(node, tirx.Evaluate):
            opcode = ptx_opcode_of(node.value)
            if opcode is not None:
                key = (node.value.op.name[len("tirx.ptx.") :], opcode)
                counts[key] = counts.get(key, 0) + mult
            return
        if isinstance(node, tirx.SeqStmt):
            for child in node.seq:
                visit(child, mult)
            return
        for field in ("body", "then_case", "else_case"):
            child = getattr(node, field, None)
            if isinstance(child, tirx.Stmt):
                visit(child, mult)

    visit(stmt, 1)
    return counts


def count_ptx(kernel_or_func, opcode: str = "*") -> int:
    """How many times the PTX instruction ``opcode`` is issued per thread.

    The kernel is lowered with ``LowerTileApply`` and every ``T.ptx`` Call
    whose opcode text (see :func:`ptx_opcode_of`) matches ``opcode`` counts
    once per iteration of each enclosing constant-extent ``for`` -- a tile
    call with repeat shape ``(3, 2)`` counts 6.  Hand-written ``T.ptx[...]``
    calls count too.  Calls under an ``if`` count as if the branch is taken.

    Parameters
    ----------
    kernel_or_func : Kernel | PrimFunc
        A compiled :class:`~tvm_tirx.Kernel` (its ``.func`` is lowered for its
        target) or a PrimFunc, before or after ``LowerTileApply``.
    opcode : str
        The exact opcode as it appears in the PTX, qualifiers in apache-tvm's
        slot order: ``"ld.global.v4.b32"``, ``"ld.global.L2::cache_hint.v4.b32"``;
        or a shell-style pattern over that text (:func:`fnmatch.fnmatchcase`):
        ``"ld.*"`` every ``ld`` (not ``ldmatrix``), ``"cp.async.c[ag].*"``,
        ``"*"`` every PTX instruction (the default).  Without a wildcard the
        match is exact: ``"ld.global.v4"`` counts nothing.

    Returns
    -------
    int
        Issues per thread; 0 when the kernel never issues ``opcode``.

    Raises
    ------
    TypeError
        ``kernel_or_func`` is neither a Kernel nor a PrimFunc.
    TileError
        A tile call breaks its contract (raised by ``LowerTileApply``).
    ValueError
        A loop around a PTX call has a non-constant extent.
    """
    import fnmatch  # pylint: disable=import-outside-toplevel

    from tvm import tirx  # pylint: disable=import-outside-toplevel

    from .kernel import Kernel  # pylint: disable=import-outside-toplevel

    if isinstance(kernel_or_func, Kernel):
        with kernel_or_func.target:
            func = lower(kernel_or_func.func)
    elif isinstance(kernel_or_func, tirx.PrimFunc):
        func = lower(kernel_or_func)
    else:
        raise TypeError(f"count_ptx: expected a tvm_tirx.Kernel or a PrimFunc, got {type(kernel_or_func).__name__}")
    want = str(opcode).strip()
    return sum(n for (_, text), n in _ptx_issue_counts(func.body).items() if fnmatch.fnmatchcase(text, want))
