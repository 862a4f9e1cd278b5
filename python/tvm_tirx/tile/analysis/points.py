"""The points that reach a tile call, enumerated one by one when there are few.

A point gives a value to each thread and cluster-CTA id of the launch, each
loop counter (its own step, and bounds that may depend on outer counters) and
each CTA id that an expression or its guards read.  The proofs use it where
symbolic arithmetic cannot decide (an alignment that holds only for the
threads a guard keeps, a bound reached only at some loop iterations).
"""

from __future__ import annotations

from .prover import fold

__all__ = ["EXACT_POINTS", "NOT_ENUMERATED", "exact_values", "exact_range"]

#: Most points (thread x loop-counter values) evaluated one by one.
EXACT_POINTS = 4096
#: Why points were not enumerated, for messages.
NOT_ENUMERATED = (
    f"it reads memory or a run-time value, or reaches more than {EXACT_POINTS} thread and loop points"
)


def _contains(vars_, v) -> bool:
    return any(v.same_as(f) for f in vars_)


def _free_vars(exprs):
    """The vars ``exprs`` read, or None when they read memory."""
    import tvm_ffi  # pylint: disable=import-outside-toplevel
    from tvm.ir import TensorLoad, Var  # pylint: disable=import-outside-toplevel

    found, loads = [], []
    for e in exprs:
        tvm_ffi.structural_walk(e, (TensorLoad, loads.append))
        tvm_ffi.structural_walk(e, (Var, lambda v: None if _contains(found, v) else found.append(v)))
    return None if loads else found


def _loop_order(free, loops):
    """The loop counters needed -- those ``free`` reads, and those their bounds
    read -- outer ones first; ``free`` gains the vars the bounds read.  None
    when a bound reads memory or the counters depend on each other in a cycle."""
    deps, todo = {}, [v for v in free if v in loops]
    while todo:
        v = todo.pop()
        if v in deps:
            continue
        more = _free_vars(loops[v][:2])
        if more is None:
            return None
        deps[v] = [m for m in more if m in loops]
        todo += deps[v]
        free += [m for m in more if not _contains(free, m)]
    order, pending = [], list(deps)
    while pending:
        ready = [v for v in pending if not any(_contains(pending, m) for m in deps[v])]
        if not ready:
            return None
        order += ready
        pending = [v for v in pending if not _contains(ready, v)]
    return order


class _Enumeration:
    """Depth-first walk over the values of ``order``'s vars, collecting
    ``(value, where)`` of ``expr`` where every cond holds."""

    def __init__(self, facts, expr, conds, free, loops):
        self.facts, self.expr, self.conds, self.free, self.loops = facts, expr, conds, free, loops
        self.out, self.budget = [], EXACT_POINTS

    def _leaf(self, env) -> bool:
        self.budget -= 1
        for cond in self.conds:
            held = fold(self.facts.analyzer, cond, env)
            if held is None:
                return False
            if not held:
                return True
        value = fold(self.facts.analyzer, self.expr, env)
        if value is None:
            return False
        where = ", ".join(f"{self.facts.name_of(v)}={x}" for v, x in env.items() if _contains(self.free, v))
        self.out.append((value, where))
        return True

    def visit(self, env, rest) -> bool:
        """False when a point cannot be evaluated or the budget runs out."""
        if self.budget <= 0:
            return False
        if not rest:
            return self._leaf(env)
        var, rest = rest[0], rest[1:]
        if var in self.loops:
            lo, ext, step = self.loops[var]
            lo, ext = fold(self.facts.analyzer, lo, env), fold(self.facts.analyzer, ext, env)
            if lo is None or ext is None:
                return False
            values = range(lo, lo + ext, step)
        else:
            values = range(*self.facts.ranges[var])
        return all(self.visit({**env, var: x}, rest) for x in values)


def exact_values(facts, expr, conds):
    """``[(value, where)]``: ``expr`` at every point where all of ``conds`` hold, or None.

    None when something else is read (memory, a run-time scalar), a loop is
    not understood, or there are more than :data:`EXACT_POINTS` points.
    ``where`` describes the point as ``name=value`` text.
    """
    free = _free_vars([expr, *conds])
    if free is None:
        return None
    loops = {var: (lo, ext, step) for var, lo, ext, step in facts.loops}
    order = _loop_order(free, loops)
    if order is None:
        return None
    per_thread = facts.per_thread_vars()
    for v in free:
        if v in loops or _contains(per_thread, v):
            continue
        if v not in facts.ranges:
            return None  # a run-time value
        order.insert(0, v)  # a CTA id or another constant-range id: outermost
    threads = [{}]
    if any(_contains(per_thread, v) for v in free):
        launch = facts.launch
        threads = [{**launch.thread_values(t), **launch.cluster_values(c)} for t, c in facts.all_threads()]
    walk = _Enumeration(facts, expr, conds, free, loops)
    for values in threads:
        if not walk.visit(dict(values), order):
            return None
    return walk.out


def exact_range(facts, expr, conds):
    """``(min, max, argmin, argmax)`` of :func:`exact_values`; ``()`` when no point
    reaches the call; None when unknown."""
    values = exact_values(facts, expr, conds)
    if values is None:
        return None
    if not values:
        return ()
    lo = min(values, key=lambda p: p[0])
    hi = max(values, key=lambda p: p[0])
    return lo[0], hi[0], lo[1], hi[1]
