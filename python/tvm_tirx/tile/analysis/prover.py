"""Symbolic proofs under the facts of a call site.

Every rule that must *prove* something about a kernel (a view inside its
tensor, an atom address aligned, a predicate uniform over a warp) asks
:func:`proves`.  It uses apache-tvm's arithmetic analyzer: its own rewrite
and bound analyses first, then its Z3 back end
(``tvm.sym.ProofStrength.SYMBOLIC_BOUND``), with the ranges of the kernel's
thread ids and loop counters bound (symbolic extents too) and the site's
guards, assumptions and the call's predicate entered as constraints.  So
``i + 1 <= n`` follows from ``if i < n:`` whatever ``n`` is at run time, and
``k * 16 + 16 <= kd * 16`` from ``for k in T.serial(kd)``.

A proof that Z3 cannot finish within :data:`Z3_RLIMIT` (a deterministic
resource budget, not a clock) is a failed proof: the rule then refuses the
call, naming the fact it could not show.

Every proof runs in a clone of the kernel's analyzer (its ranges and
bindings, and a Z3 solver of its own), never in the analyzer itself: with
one solver answering every query of a kernel, a proof near the budget
passed or failed depending on the queries before it and on where objects
happened to lie in memory (the deterministic attention backward in
sections of one head compiled in some processes and was refused in
others).  In a solver of its own a verdict depends on the query alone.
"""

from __future__ import annotations

import contextlib

import tvm
from tvm.sym import ProofStrength

__all__ = ["Z3_RLIMIT", "make_analyzer", "proves", "show", "fold"]

#: Z3 resource limit per query (deterministic; about 0.1 s of solving).
Z3_RLIMIT = 400_000


def make_analyzer():
    """A fresh ``tvm.sym.Analyzer`` with the Z3 budget set (when apache-tvm has Z3)."""
    analyzer = tvm.sym.Analyzer()
    if analyzer.is_z3_enabled:
        analyzer.set_z3_rlimit(Z3_RLIMIT)
    return analyzer


class _Loads:  # pylint: disable=too-few-public-methods
    """Memory loads as variables: structurally equal loads become one Var, so
    that a fact about ``j[0]`` is a fact about every ``j[0]`` of the goal
    (the facts of a call site hold for the memory as it is at the call:
    :mod:`..kernel.sites` drops those that a write in between may break)."""

    def __init__(self):
        self.vars = []  # [(load, var)]

    def __call__(self, expr):
        import tvm_ffi  # pylint: disable=import-outside-toplevel
        from tvm.ir import TensorLoad  # pylint: disable=import-outside-toplevel

        return tvm_ffi.structural_map(expr, (TensorLoad, self._var))

    def _var(self, load):
        import tvm_ffi  # pylint: disable=import-outside-toplevel
        from tvm import tirx  # pylint: disable=import-outside-toplevel

        for seen, var in self.vars:
            if tvm_ffi.structural_equal(seen, load):
                return var
        var = tirx.Var(f"load{len(self.vars)}", load.ty.dtype)
        self.vars.append((load, var))
        return var


def proves(analyzer, cond, facts=()) -> bool:
    """Whether bool expression ``cond`` follows from ``facts`` (bool expressions)
    and the ranges bound in ``analyzer``.

    Loads from memory are opaque values (equal loads, equal values).  A fact
    the analyzer cannot take as a constraint is dropped (the proof can only
    get weaker, never wrong).  ``analyzer`` itself is left as it was: the
    proof runs in its clone.
    """
    loads = _Loads()
    cond, facts = loads(cond), [loads(f) for f in facts]
    facts += _dtype_ranges([cond, *facts])
    analyzer = analyzer.clone()  # a solver of its own (module docstring)
    with contextlib.ExitStack() as stack:
        for fact in facts:
            try:
                stack.enter_context(analyzer.constraint_scope(fact))
            except Exception:  # pylint: disable=broad-except
                pass  # a condition the analyzer cannot take as a fact
        if analyzer.can_prove(cond):
            return True
        return bool(analyzer.can_prove(cond, ProofStrength.SYMBOLIC_BOUND))


def _dtype_ranges(exprs) -> list:
    """``lo <= v <= hi`` for each narrow integer Var of ``exprs`` (``int32``,
    ``uint32``, ...): apache-tvm 0.27's Z3 back end states a var's type range
    only the first time it meets the var, inside the constraint scope of that
    query, so later queries lose it; stated with every query instead."""
    import tvm_ffi  # pylint: disable=import-outside-toplevel
    from tvm import tirx  # pylint: disable=import-outside-toplevel

    found = []
    for e in exprs:
        tvm_ffi.structural_walk(e, (tirx.Var, lambda v: None if any(v.same_as(f) for f in found) else found.append(v)))
    out = []
    for v in found:
        name = str(v.ty.dtype)
        digits = name[4:] if name.startswith("uint") else name[3:] if name.startswith("int") else ""
        bits = int(digits) if digits.isdigit() else 0
        if 1 < bits < 64:
            lo, hi = (0, (1 << bits) - 1) if name.startswith("u") else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
            out.append(tirx.all(tirx.IntImm(name, lo) <= v, v <= tirx.IntImm(name, hi)))
    return out


def show(facts, display) -> str:
    """``facts`` as text for a message (``"i <= n and k < 4"``), each shown by
    ``display(expr)``; ``""`` when there are none."""
    return " and ".join(display(f) for f in facts)


def fold(analyzer, expr, values):
    """``expr`` with each var of ``values`` (var -> int) replaced by its value and
    simplified: an int, or None when something else remains."""
    import tvm_ffi  # pylint: disable=import-outside-toplevel
    from tvm.ir import Var  # pylint: disable=import-outside-toplevel
    from tvm.tirx import IntImm  # pylint: disable=import-outside-toplevel

    def sub(v):
        for var, value in values.items():
            if v.same_as(var):
                return IntImm(v.ty.dtype, value)
        return v

    folded = analyzer.simplify(tvm_ffi.structural_map(expr, (Var, sub)))
    return int(folded.value) if isinstance(folded, IntImm) else None
