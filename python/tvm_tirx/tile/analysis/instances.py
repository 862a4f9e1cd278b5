"""The executions of a statement, counted: for each thread that reaches it and
each iteration of the loops around it, the values of some expressions there.

A kernel rule that counts (the arrivals an mbarrier receives, the phases its
waits observe) needs, for one statement, every (thread, loop iteration) that
runs it.  That is known when the loops around it have constant bounds, its
guards read only thread ids, cluster-CTA ids, loop counters and constants,
and the iteration space is small; :meth:`Executions.of` enumerates it then,
and returns None otherwise (the rule then says nothing).  A ``while`` loop
around the statement runs it an unknown number of times: the executions are
reported once, flagged ``repeats``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad, Var

__all__ = ["evaluate", "Execution", "Executions"]

#: Most (iteration, thread) pairs one statement may have before it counts as unknown.
LIMIT = 1 << 16

_BINARY = {
    tirx.Add: operator.add, tirx.Sub: operator.sub, tirx.Mul: operator.mul,
    tirx.FloorDiv: lambda a, b: a // b if b else None, tirx.FloorMod: lambda a, b: a % b if b else None,
    tirx.Min: min, tirx.Max: max, tirx.EQ: operator.eq, tirx.NE: operator.ne, tirx.LT: operator.lt,
    tirx.LE: operator.le, tirx.GT: operator.gt, tirx.GE: operator.ge,
    tirx.And: lambda a, b: bool(a) and bool(b), tirx.Or: lambda a, b: bool(a) or bool(b),
}  # fmt: skip


def _trunc_div(a, b):
    if not b:
        return None
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def evaluate(expr, env: dict):
    """The value (int or bool) of integer expression ``expr`` with the Vars of
    ``env`` (``hash(var) -> int``) replaced, or None when something else remains."""
    if isinstance(expr, int | bool):
        return expr
    kind = type(expr)
    if kind in _BINARY:
        a, b = evaluate(expr.a, env), evaluate(expr.b, env)
        return None if a is None or b is None else _BINARY[kind](a, b)
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    if isinstance(expr, Var):
        return env.get(hash(expr))
    if isinstance(expr, tirx.Not):
        a = evaluate(expr.a, env)
        return None if a is None else not a
    if isinstance(expr, tirx.Cast):
        a = evaluate(expr.value, env)
        return None if a is None else (bool(a) if expr.ty.dtype == "bool" else int(a))
    if isinstance(expr, tirx.Select):
        c = evaluate(expr.condition, env)
        return None if c is None else evaluate(expr.true_value if c else expr.false_value, env)
    if isinstance(expr, tirx.Div | tirx.Mod):
        a, b = evaluate(expr.a, env), evaluate(expr.b, env)
        if a is None or b is None or not b:
            return None
        q = _trunc_div(a, b)
        return q if isinstance(expr, tirx.Div) else a - q * b
    return None


@dataclass(frozen=True)
class Execution:
    """Executions of a statement that share the values asked for.

    Attributes
    ----------
    threads : tuple[tuple[int, int], ...]
        ``(t, c)``: linear thread ``t`` of cluster rank ``c``, for each thread.
    iteration : tuple[int, ...]
        The values of the enclosing ``for`` counters, outermost first.
    values : tuple
        The values of the expressions asked for (ints).
    """

    threads: tuple
    iteration: tuple
    values: tuple


def _vars_in(expr) -> list:
    found = []
    tvm_ffi.structural_walk(expr, (Var, found.append))
    return found


def _has_load(expr) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, (TensorLoad, found.append))
    return bool(found)


class Executions:
    """Enumerates the executions of a kernel's statements (see the module).

    Parameters
    ----------
    facts : KernelFacts
        The kernel (its launch must be known).
    """

    def __init__(self, facts):
        self.facts = facts
        launch = facts.launch
        self.threads = facts.all_threads() if launch is not None else []
        self._ids = {}
        if launch is not None:
            for t, c in self.threads:
                env = {hash(v): int(x) for v, x in {**launch.thread_values(t), **launch.cluster_values(c)}.items()}
                self._ids[(t, c)] = env
        self._per_thread = {hash(v) for v in facts.per_thread_vars()}

    def _iterations(self, loops):
        """``[(loop values, env)]`` of the ``for`` loops in ``loops``, or None."""
        fors = [loop for loop in loops if loop.var is not None]
        envs = [((), {})]
        for loop in fors:
            nxt = []
            for values, env in envs:
                lo = evaluate(self.facts.expand_scalars(loop.min), env)
                n = evaluate(self.facts.expand_scalars(loop.extent), env)
                if lo is None or n is None or n < 0 or loop.step is None:
                    return None
                for i in range(lo, lo + n, loop.step):  # extent: the range, as points.py reads it
                    nxt.append((values + (i,), {**env, hash(loop.var): i}))
                if len(nxt) > LIMIT:
                    return None
            envs = nxt
        return envs

    def _known(self, expr, loops) -> bool:
        """Whether ``expr`` reads only thread / cluster-CTA ids, ``for`` counters of ``loops`` and constants."""
        if _has_load(expr):
            return False
        allowed = self._per_thread | {hash(loop.var) for loop in loops if loop.var is not None}
        return all(hash(v) in allowed for v in _vars_in(expr))

    def of(self, leaf, exprs=()) -> list | None:
        """The executions of :class:`~..kernel.order.Leaf` ``leaf`` with the values of
        ``exprs`` at each, grouped by iteration and values; None when not
        enumerable (see the module).  ``repeats`` of the leaf: :meth:`repeats`."""
        facts = self.facts
        if facts.launch is None:
            return None
        loops = leaf.loops
        whiles = [loop.cond for loop in loops if loop.var is None]
        guards = [facts.expand_scalars(g) for g in leaf.guards if not any(g.same_as(w) for w in whiles)]
        exprs = [facts.expand_scalars(e) for e in exprs]
        if not all(self._known(e, loops) for e in (*guards, *exprs)):
            return None
        iterations = self._iterations(loops)
        if iterations is None or len(iterations) * len(self.threads) > LIMIT:
            return None
        out = []
        for values, env in iterations:
            groups = {}
            for key in self.threads:
                full = {**env, **self._ids[key]}
                held = [evaluate(g, full) for g in guards]
                if None in held:
                    return None  # a guard this module cannot evaluate (a call, elect_sync)
                if not all(held):
                    continue
                got = tuple(evaluate(e, full) for e in exprs)
                if None in got:
                    return None
                groups.setdefault(got, []).append(key)
            out.extend(Execution(tuple(ts), values, got) for got, ts in groups.items())
        return out

    @staticmethod
    def repeats(leaf) -> bool:
        """Whether a ``while`` loop around ``leaf`` runs it an unknown number of times."""
        return any(loop.var is None for loop in leaf.loops)

