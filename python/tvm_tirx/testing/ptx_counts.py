"""How many times each PTX instruction a kernel issues per thread: :func:`count_ptx`."""

from __future__ import annotations

import fnmatch

from tvm import tirx

from ..build.kernel import Kernel
from ..build.stages import lower
from ..tile.ir.ptx_table import opcode_of_call

__all__ = ["count_ptx", "issue_counts", "ptx_opcode_of"]


def ptx_opcode_of(call) -> str | None:
    """The PTX opcode text a ``T.ptx`` Call issues (``"ld.global.v4.b32"``), or None.

    apache-tvm's PTX engine lays a Call to ``tirx.ptx.<entry>`` out as
    ``[operands..., pred?] [one token per modifier slot] [flag marker]``;
    the opcode is the entry's mnemonic followed by the non-empty tokens in
    slot order -- the text its CUDA helper puts in the ``asm`` statement.
    Returns None for Calls that are not PTX instructions (``tirx.ptx.addr``
    and any other op).
    """
    return opcode_of_call(call)


def _ptx_issue_counts(stmt) -> dict:
    """``{(table entry, opcode text): issues per thread}`` for every PTX Call in ``stmt``.

    A Call counts once per iteration of each enclosing ``for``.

    Raises
    ------
    ValueError
        A ``for`` around a PTX call has a non-constant extent.
    """
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
    want = str(opcode).strip()
    return sum(n for text, n in issue_counts(kernel_or_func).items() if fnmatch.fnmatchcase(text, want))


def issue_counts(kernel_or_func) -> dict:
    """``{opcode text: issues per thread}`` of every PTX instruction the kernel issues,
    counted as :func:`count_ptx` counts them.

    Raises
    ------
    TypeError
        ``kernel_or_func`` is neither a Kernel nor a PrimFunc.
    TileError
        A tile call breaks its contract (raised by ``LowerTileApply``).
    ValueError
        A loop around a PTX call has a non-constant extent.
    """
    if isinstance(kernel_or_func, Kernel):
        with kernel_or_func.target:
            func = lower(kernel_or_func.func)
    elif isinstance(kernel_or_func, tirx.PrimFunc):
        func = lower(kernel_or_func)
    else:
        raise TypeError(f"count_ptx: expected a tvm_tirx.Kernel or a PrimFunc, got {type(kernel_or_func).__name__}")
    counts: dict = {}
    for (_, text), n in _ptx_issue_counts(func.body).items():
        counts[text] = counts.get(text, 0) + n
    return counts
