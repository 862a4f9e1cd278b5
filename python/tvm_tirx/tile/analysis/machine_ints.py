"""Machine integers for the bounds proofs.

apache-tvm's analyzer reasons over ideal integers: ``T.Cast("int32", u)`` of a
``uint32`` ``u`` is ``u`` (so never negative), and ``row * n + col`` is the
mathematical sum however large.  The kernel computes neither: a ``uint32`` of
2**31 or more cast to ``int32`` is negative, an ``int64`` narrowed to ``int32``
loses its high bits, and an ``int32`` product past 2**31 - 1 wraps (undefined
behaviour in CUDA C++).  :class:`MachineInts` rewrites the expressions of a
bounds proof so that the analyzer's ideal reasoning is sound for them:

- a ``Cast`` to an integer type whose range the source's value does not
  provably fit becomes an opaque value of the target type (structurally equal
  casts, one value), so a fact about ``T.Cast("int32", j)`` is a fact about
  the value the kernel computes, and nothing is assumed of its sign;
- in the facts of a site (guards, a call's predicate), ``+ - *`` of integers
  whose result does not provably fit its type become opaque values of that
  type: a wrapped guard says nothing about the ideal sum;
- in the index arithmetic a view's address is computed from,
  :meth:`MachineInts.overflow` finds the first ``+ - *`` whose result does
  not provably fit its type: the bounds rule refuses the call, naming it,
  unless the view is inside its tensor whatever value that operation takes.

What bounds the sizes: a tensor parameter whose run-time extents are
``int32`` holds at most :data:`INT32_ELEMENTS` elements (:func:`extent_facts`;
``Kernel``'s argument check refuses a larger one), a host ``assert`` before
``T.device_entry`` holds for the whole kernel, and ``T.assume(cond)`` states
``cond`` over mathematical integers (its arithmetic does not wrap; a
``check_assumptions`` build evaluates it with :func:`widened`): the way to
bound run-time sizes the prover cannot bound (``T.assume(n <= 4096)``).
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx
from tvm.runtime import DataType

from ...errors import TileError
from .prover import proves, show

__all__ = [
    "MachineInts", "int_range", "is_int", "index_overflow", "wrapped_note", "extent_facts", "INT32_ELEMENTS", "widened",
]

#: Most elements of a tensor parameter with ``int32`` run-time extents.
INT32_ELEMENTS = 2**31 - 1


def is_int(dtype) -> bool:
    """Whether ``dtype`` (a dtype or its name) is a scalar signed or unsigned integer
    (``bool`` excluded)."""
    name = str(dtype)
    return name.startswith(("int", "uint")) and DataType(name).lanes == 1 and DataType(name).bits > 1


def int_range(dtype) -> tuple:
    """``(lo, hi)``: the values of integer ``dtype`` (``int32``: -2**31 .. 2**31 - 1)."""
    bits = DataType(str(dtype)).bits
    if str(dtype).startswith("uint"):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _dtype(expr) -> str:
    return str(expr.ty.dtype)


_ARITH = (tirx.Add, tirx.Sub, tirx.Mul)


def _conjuncts(conds):
    """``conds`` with every ``a and b`` split, left to right."""
    out = []
    for cond in conds:
        if isinstance(cond, tirx.And):
            out += _conjuncts((cond.a, cond.b))
        else:
            out.append(cond)
    return out


class MachineInts:
    """The machine-integer rewrite of one bounds proof (see the module docstring).

    Parameters
    ----------
    analyzer : tvm.sym.Analyzer
        The kernel's analyzer (thread, CTA and loop ranges bound).
    given : sequence of PrimExpr
        Facts that hold of the values themselves (loop and id ranges, tensor
        extents not negative): used as they are.
    ranges : dict
        Var -> ``(lo, hi)``: the constant range ``[lo, hi)`` of loop and id
        vars, stated with each proof that reads the var.
    """

    def __init__(self, analyzer, given=(), ranges=None):
        self.analyzer = analyzer
        self.given = tuple(given)
        self.ranges = ranges or {}
        #: [(node, var)]: the opaque values, in order of creation
        self.opaque = []

    def known(self, facts=()) -> tuple:
        """``facts`` after the given facts and the range of each opaque value:
        what a proof under these machine integers takes as given."""
        ranges = tuple(
            tirx.all(lo <= v, v <= hi)
            for v, (lo, hi) in ((v, int_range(_dtype(v))) for _, v in self.opaque)
            if DataType(_dtype(v)).bits < 64
        )
        return (*self.given, *ranges, *facts)

    def _with_ranges(self, expr, facts) -> tuple:
        """:meth:`known` and the constant ranges of the vars ``expr`` and the facts read."""
        known = self.known(facts)
        found = []
        for e in (expr, *known):
            tvm_ffi.structural_walk(e, (tirx.Var, lambda v: None if any(v.same_as(f) for f in found) else found.append(v)))
        bounded = [(v, self.ranges[v]) for v in found if v in self.ranges]
        return (*known, *(tirx.all(lo <= v, v < hi) for v, (lo, hi) in bounded))

    def fits(self, expr, facts=()) -> bool:
        """Whether integer ``expr``'s value, computed from its operands' values
        without wrapping, provably lies in the range of its own dtype."""
        lo, hi = int_range(_dtype(expr))
        if _within(self.analyzer.const_int_bound(expr), lo, hi):
            return True
        wide = _widened(expr)
        if DataType(_dtype(expr)).bits >= 64:
            # the analyzer's int64 is ideal, but folds no constant past it: prove a
            # range half as wide, which no index comes near
            wide, lo, hi = expr, max(lo, -(2**62)), min(hi, 2**62)
        try:
            return proves(self.analyzer, tirx.all(lo <= wide, wide <= hi), self._with_ranges(wide, facts))
        except Exception:  # pylint: disable=broad-except
            return False  # apache-tvm refuses a constant folded past int64: not proven

    def _value(self, node):
        """The opaque value standing for ``node`` (one per structurally equal node)."""
        for seen, var in self.opaque:
            if tvm_ffi.structural_equal(seen, node):
                return var
        var = tirx.Var(f"wrapped{len(self.opaque)}", node.ty.dtype)
        self.opaque.append((node, var))
        return var

    def rewrite(self, expr, facts=(), arithmetic=True):
        """``expr`` with each integer ``Cast`` whose source does not provably fit
        its target (and, when ``arithmetic``, each ``+ - *`` that does not
        provably fit its dtype) replaced by its opaque value; ``facts`` are the
        (rewritten) facts the fits proofs may use."""

        def node(e):
            if isinstance(e, tirx.Cast) and is_int(_dtype(e)) and is_int(_dtype(e.value)):
                lo, hi = int_range(_dtype(e))
                if _within(self.analyzer.const_int_bound(e.value), lo, hi):
                    return e
                if DataType(_dtype(e.value)).bits < 64 or DataType(_dtype(e)).bits < 64:
                    wide = tirx.Cast("int64", e.value)
                    if proves(self.analyzer, tirx.all(lo <= wide, wide <= hi), self._with_ranges(wide, facts)):
                        return e
                return self._value(e)
            if arithmetic and isinstance(e, _ARITH) and is_int(_dtype(e)) and not self.fits(e, facts):
                return self._value(e)
            return e

        return tvm_ffi.structural_map(expr, ((tirx.Cast, *_ARITH), node))

    def facts(self, guards=(), assumptions=()) -> tuple:
        """The facts of a proof: ``guards`` (conditions the kernel computes:
        if-conditions, a predicate) under machine integers, each conjunct
        proved from the assumptions and the conjuncts before it, and ``assumptions`` (``T.assume``
        conditions: mathematical integers, casts still the kernel's values)."""
        out = [self.rewrite(a, arithmetic=False) for a in assumptions]
        for part in _conjuncts(guards):
            out.append(self.rewrite(part, out))
        return tuple(out)

    def overflow(self, index, facts=()):
        """The first ``+ - *`` of ``index`` (post-order) whose value does not provably
        fit its integer dtype given ``facts``, or None."""
        found = []

        def node(e):
            if not found and is_int(_dtype(e)) and not self.fits(e, facts):
                found.append(e)
            return e

        tvm_ffi.structural_map(self.rewrite(index, facts, arithmetic=False), (_ARITH, node))
        return found[0] if found else None

    def restore(self, expr):
        """``expr`` with each opaque value replaced by the node it stands for (for messages)."""

        def back(v):
            return next((node for node, var in self.opaque if var.same_as(v)), v)

        return tvm_ffi.structural_map(expr, (tirx.Var, back))

    def wrapped_casts(self, expr) -> list:
        """The casts of ``expr`` that were made opaque (for messages)."""
        found = []
        tvm_ffi.structural_walk(
            expr, (tirx.Cast, lambda c: found.append(c) if any(tvm_ffi.structural_equal(c, n) for n, _ in self.opaque) else None)
        )
        return found


def _within(bound, lo, hi) -> bool:
    """Whether a ``ConstIntBound`` lies in ``[lo, hi]``; its ends at the int64 limits
    are apache-tvm's infinities (no bound), inside no range."""
    if bound.min_value <= -(2**63) or bound.max_value >= 2**63 - 1:
        return False
    return lo <= bound.min_value and bound.max_value <= hi


def _widened(expr):
    """``a op b`` of a narrow integer dtype recomputed in ``int64`` (the operands
    are values of their dtype; the result is the ideal one); ``expr`` itself
    when it is 64 bits wide."""
    if DataType(_dtype(expr)).bits >= 64:
        return expr
    wide = [tirx.Cast("int64", x) for x in (expr.a, expr.b)]
    return type(expr)(*wide)


def _failing_bound(machine, node, facts) -> str:
    """``"node <= hi"`` or ``"node >= lo"``: the side of ``node``'s dtype range that
    does not follow (the upper one first)."""
    lo, hi = shown = int_range(_dtype(node))
    wide = _widened(node)
    if DataType(_dtype(node)).bits >= 64:
        lo, hi = max(lo, -(2**62)), min(hi, 2**62)  # as :meth:`MachineInts.fits` proves it
    try:
        if not proves(machine.analyzer, wide <= hi, machine._with_ranges(wide, facts)):  # pylint: disable=protected-access
            return f"<= {shown[1]}"
    except Exception:  # pylint: disable=broad-except
        return f"<= {shown[1]}"
    return f">= {shown[0]}"


def index_overflow(facts, machine, opcode, label, index, given, conds):
    """The rule that a view's index arithmetic does not wrap: a TileError naming
    the first ``+ - *`` of ``index`` (the element offset the kernel computes,
    or None: no check) whose value does not provably fit its integer dtype at
    every point that reaches the call, or None.

    ``given`` are the machine facts of :meth:`MachineInts.facts`; ``conds``
    the site's conditions as written (for the message).
    """
    if index is None or not is_int(_dtype(index)):
        return None
    node = machine.overflow(index, given)
    if node is None:
        return None
    failing, node = _failing_bound(machine, node, given), machine.restore(node)
    dtype = _dtype(node)
    lo, hi = int_range(dtype)
    shown = show(conds, facts.display)
    err = TileError(
        opcode,
        f"index arithmetic may overflow {dtype}",
        operand=label,
        expected=(
            f"{facts.display(node)} within the {dtype} range [{lo}, {hi}] at every point that reaches the call"
            + (f" (given {shown})" if shown else "")
        ),
        found=(
            f"element offset {facts.display(index)}: {facts.display(node)} {failing} "
            f"does not follow ({dtype} arithmetic wraps: bound the sizes with if, or state them with "
            "T.assume(cond), e.g. T.assume(n <= 4096))"
        ),
    )
    err.wraps = f"{facts.display(node)} may also overflow {dtype}"
    return err


def wrapped_note(facts, machine, expr) -> str:
    """``"; T.Cast(...) is any int32 value ..."``: the casts of ``expr`` the proof
    read as unknown values of their type, for a message; ``""`` when none."""
    casts = machine.wrapped_casts(expr)
    if not casts:
        return ""
    cast = casts[0]
    src, dst = _dtype(cast.value), _dtype(cast)
    lo, hi = int_range(dst)
    return (
        f"; {facts.display(cast)} is any {dst} in [{lo}, {hi}]: a {src} value outside that range "
        "does not keep its value, so check the cast's result (0 <= value) or bound the value before the cast"
    )


def extent_facts(params) -> list:
    """``0 <= n`` for each symbolic extent ``n`` of the tensor parameters (a
    DLPack tensor's shape is never negative), and for each parameter whose
    run-time extents are ``int32``, its element count (in ``int64``) at most
    ``2**31 - 1``: its element offsets are ``int32`` arithmetic, and the
    kernel's argument check (:mod:`tvm_tirx.build.arguments`) refuses a larger
    tensor before the launch."""
    found, counts = [], []
    for param in params:
        for extent in param.shape:
            tvm_ffi.structural_walk(extent, (tirx.Var, lambda v: None if any(v.same_as(f) for f in found) else found.append(v)))
        if not all(isinstance(e, tirx.IntImm) for e in param.shape) and all(str(e.ty.dtype) == "int32" for e in param.shape):
            count = tirx.IntImm("int64", 1)
            for extent in param.shape:
                count = count * tirx.Cast("int64", extent)
            counts.append(count <= tirx.IntImm("int64", INT32_ELEMENTS))
    return [v >= 0 for v in found] + counts


_COMPARE = (tirx.LT, tirx.LE, tirx.GT, tirx.GE, tirx.EQ, tirx.NE)


def _narrow_int(expr) -> bool:
    return is_int(_dtype(expr)) and DataType(_dtype(expr)).bits < 64


def widened(cond):
    """Boolean ``cond`` with its integer ``+ - *`` of fewer than 64 bits computed in
    ``int64`` (their operands cast), so that the run-time check of ``T.assume(cond)``
    evaluates the mathematical value the proofs read it as; comparisons,
    ``and``, ``or`` and ``not`` are rebuilt around them, anything else kept."""

    def value(e):
        if isinstance(e, _ARITH) and _narrow_int(e):
            return type(e)(value(e.a), value(e.b))
        return tirx.Cast("int64", e) if _narrow_int(e) else e

    def same_width(a, b):
        if _dtype(a) == _dtype(b):
            return a, b
        return tuple(tirx.Cast("int64", x) if _narrow_int(x) else x for x in (a, b))

    if isinstance(cond, (tirx.And, tirx.Or)):
        return type(cond)(widened(cond.a), widened(cond.b))
    if isinstance(cond, tirx.Not):
        return tirx.Not(widened(cond.a))
    if isinstance(cond, _COMPARE) and any(isinstance(x, _ARITH) and _narrow_int(x) for x in (cond.a, cond.b)):
        return type(cond)(*same_width(*(value(x) if isinstance(x, _ARITH) else x for x in (cond.a, cond.b))))
    return cond

