"""``T.assume(cond)``: a fact the author states, and its run-time check.

The proofs (:mod:`..analysis.prover`) take every ``T.assume(cond)`` that precedes a
tile call as a fact (:mod:`.sites` says how long it lasts).  It is the one
way to tell the checker what it cannot derive -- an index read from memory
that the author knows to be in range, a run-time size that is a multiple of
8 -- and it is visible where it is written.  Built normally, an assumption
costs nothing (apache-tvm's ``RemoveAssume`` deletes it after lowering);
built with ``tvm_tirx.compile(..., options={"check_assumptions": True})``
each one becomes a check that, when ``cond`` is false, prints the source
line, the condition, the CTA and the thread, then traps (the launch fails
with ``cudaErrorLaunchFailure``, "unspecified launch failure").  ``cond`` is
read over mathematical integers (:mod:`..analysis.machine_ints`): the check computes its
``int32`` arithmetic in ``int64``.

``T.assume`` is :func:`assume`: apache-tvm's, refusing a condition that is
not boolean (``T.assume(A[i])`` states nothing the prover can use).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ...errors import TileError
from ..analysis.machine_ints import widened
from .sites import expansion_of, is_assume, location_of

__all__ = ["assume", "check_assumptions", "device_trap"]

#: The device function every check calls: prints its format with the CTA and
#: thread ids first, then up to three values, and traps (PTX ``trap``, PTX ISA 9.7.19.6).
TRAP_FUNCTION = "tvm_tirx_trap"
TRAP_SOURCE = r"""
__device__ __noinline__ void tvm_tirx_trap(const char* fmt, long long a, long long b, long long c) {
  printf(fmt, (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z,
         (int)threadIdx.x, (int)threadIdx.y, (int)threadIdx.z, a, b, c);
  __trap();
}
"""


def _dtype_of(cond) -> str:
    return str(getattr(cond, "dtype", None) or getattr(getattr(cond, "ty", None), "dtype", None) or "")


def assume(cond=None):
    """``T.assume(cond)``: the fact ``cond`` for the proofs (see the module docstring).

    Parameters
    ----------
    cond : PrimExpr or bool
        A boolean condition (``0 <= j[0] and j[0] < n``).

    Returns
    -------
    tvm.tirx.PrimExpr
        apache-tvm's ``tirx.assume`` call.

    Raises
    ------
    TileError
        ``cond`` is not boolean (an ``int32`` value such as ``A[i]``): at the
        user's line when written in a ``@T.function``.
    """
    if isinstance(cond, bool):
        cond = tirx.const(cond, "bool")
    dtype = _dtype_of(cond)
    if not dtype.startswith("bool"):  # also a Python number or None: no dtype
        found = f"{cond} ({dtype})" if dtype else repr(cond)
        raise TileError(
            "",
            "T.assume needs a boolean condition",
            expected="a bool expression such as A[i] != 0 or 0 <= j[0] and j[0] < n",
            found=found,
        )
    return tirx.assume(cond)


def _c_string(text: str) -> str:
    """``text`` safe inside a C string literal handed to ``printf`` as its format."""
    return text.replace("\\", "/").replace('"', "'").replace("%", "%%").replace("\n", " ")


def device_trap(message: str, values=()):
    """The statement that prints ``message`` and traps the kernel.

    Parameters
    ----------
    message : str
        What went wrong (``"file.py:12: T.assume(i < n) does not hold"``);
        printed after ``tvm_tirx: CTA (x,y,z) thread (x,y,z):``.  ``printf``
        conversions in it are escaped.
    values : sequence of (str, PrimExpr)
        At most three ``name=value`` pairs printed as 64-bit integers after
        the message (a barrier's parity, an expected count).

    Returns
    -------
    tvm.tirx.Stmt
        A call of the device function :data:`TRAP_SOURCE` (CUDA device
        ``printf``, then ``__trap()``): the grid stops and the launch reports
        ``cudaErrorLaunchFailure``.

    Raises
    ------
    ValueError
        More than three values.
    """
    values = list(values)
    if len(values) > 3:
        raise ValueError(f"device_trap prints at most 3 values, got {len(values)}")
    fmt = "tvm_tirx: CTA (%d,%d,%d) thread (%d,%d,%d): " + _c_string(message)
    fmt += "".join(f" {_c_string(name)}=%lld" for name, _ in values) + "\\n"
    args = [tirx.Cast("int64", v) for _, v in values]
    args += [tirx.IntImm("int64", 0)] * (3 - len(args))
    call = tirx.call_intrin(
        "void", "tirx.cuda.func_call", TRAP_FUNCTION, tvm.ir.StringImm(fmt), *args, TRAP_SOURCE
    )
    return tirx.Evaluate(call)


def _check(stmt):
    """``if not cond: print and trap`` for ``T.assume(cond)`` statement ``stmt``."""
    cond = stmt.value.args[0]
    span = stmt.value.span if location_of(stmt.value.span) else stmt.span
    where = (location_of(span) or "<unknown line>") + (expansion_of(span) or "")
    message = f"{where}: T.assume({cond}) does not hold"
    return tirx.IfThenElse(tirx.Not(widened(cond)), device_trap(message), None)


def check_assumptions(func):
    """PrimFunc ``func`` with every ``T.assume(cond)`` replaced by its run-time
    check (:func:`device_trap` when ``cond`` is false).

    Run after ``LowerTileApply`` (the proofs read the assumptions first), for
    builds with ``options={"check_assumptions": True}``.
    """

    def rewrite(node):
        return _check(node) if is_assume(node) else node

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.Evaluate, rewrite)))
