"""Helpers for tests of tile kernels (ours and users'), in TVM's testing style.

* :data:`requires_cuda` -- pytest marker: the test needs a CUDA GPU and torch with CUDA.
* :func:`lower` -- run ``LowerTileApply`` alone on a PrimFunc.
* :func:`count_ptx_calls` -- PTX intrinsic calls a statement executes per thread.
* :func:`assemble` -- assemble a kernel's CUDA for its arch with ``nvcc``/``ptxas``.
"""

from __future__ import annotations

import shutil

__all__ = ["requires_cuda", "has_cuda", "has_nvcc", "requires_nvcc", "lower", "count_ptx_calls", "assemble"]


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
    from .compile import _nvcc  # pylint: disable=import-outside-toplevel

    return _nvcc(kernel.cuda_source, kernel.target, fmt)
