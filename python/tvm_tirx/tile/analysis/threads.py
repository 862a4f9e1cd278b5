"""Which threads reach a statement: its guards, split into what depends on the
thread ids (evaluated thread by thread) and what is uniform (decided for a
whole warp, warpgroup or CTA at once, :mod:`.uniformity`).

A guard part over the thread and cluster-CTA ids alone (``tid < 64``,
``T.cuda.warp_id() == 0``) is evaluated at every thread of the launch.  Any
other part must be uniform over the scope the statement needs (a warp for a
warp collective, the CTA for a CTA barrier): then it runs the whole scope or
none of it, and it does not split the group.  A part that is neither is
refused, naming the value that is not uniform and why.
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad, Var

from ...errors import TileError
from .prover import fold
from .uniformity import level_of_scope

__all__ = ["active_threads", "conjuncts", "reaching"]


def conjuncts(cond) -> list:
    """``cond`` split at its top-level ``and``s."""
    if isinstance(cond, tirx.And):
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def _over_thread_ids(facts, part) -> bool:
    """Whether ``part`` reads nothing but the thread / cluster-CTA ids and constants."""
    per_thread = facts.per_thread_vars()
    loads, others = [], []
    tvm_ffi.structural_walk(part, (TensorLoad, loads.append))
    tvm_ffi.structural_walk(part, (Var, lambda v: None if any(v.same_as(p) for p in per_thread) else others.append(v)))
    return not loads and not others


def _split(facts, guards, what, need):
    """The guard parts to evaluate per thread; raises for a part neither
    per-thread nor uniform over ``need``."""
    per_thread = []
    for guard in guards:
        for part in conjuncts(guard):
            expanded = facts.expand_scalars(part)
            if _over_thread_ids(facts, expanded):
                if _reads_ids(facts, expanded):
                    per_thread.append(expanded)
                continue
            why = facts.uniformity.why_not(part, need)
            if why is not None:
                raise TileError(
                    what,
                    f"guard not uniform over the {need}",
                    expected=(
                        f"a guard over thread ids, or one with one value for all threads of each {need} "
                        "(docs: Barriers, shuffles and uniform values)"
                    ),
                    found=f"if {facts.display(part)}: {why}",
                )
    return per_thread


def _reads_ids(facts, part) -> bool:
    found = []
    per_thread = facts.per_thread_vars()
    tvm_ffi.structural_walk(part, (Var, lambda v: found.append(v) if any(v.same_as(p) for p in per_thread) else None))
    return bool(found)


def active_threads(facts, guards, what, scope="thread"):
    """``[(t, c)]``: linear thread ``t`` in cluster rank ``c`` for which every
    guard holds.

    Parameters
    ----------
    facts : KernelFacts
        The kernel (its launch must be known).
    guards : sequence of PrimExpr
        The if/while conditions around the statement.
    what : str
        The statement, for messages (an opcode, ``"T.cuda.cta_sync()"``).
    scope : str
        The scope the statement needs whole (a collective's name, a tile call's
        scope): a guard part that is not over thread ids must be uniform over it.

    Raises
    ------
    TileError
        A guard part is neither over thread ids nor uniform over ``scope``.
    """
    need = level_of_scope(scope)
    parts = _split(facts, guards, what, need)
    key = tuple(str(p) for p in parts)
    cache = facts.family_values.setdefault("active_threads", {})
    if key not in cache:
        launch = facts.launch
        cache[key] = [
            (t, c)
            for t, c in facts.all_threads()
            if all(_holds(facts, part, {**launch.thread_values(t), **launch.cluster_values(c)}, what) for part in parts)
        ]
    return cache[key]


def _holds(facts, part, values, what) -> bool:
    held = fold(facts.analyzer, part, values)
    if held is None:
        raise TileError(
            what,
            "guard not understood",
            expected="an if or while condition over thread ids (threadIdx, lane_id, warp_id, cluster_ctaid)",
            found=f"if {facts.display(part)}",
        )
    return bool(held)


def reaching(call, scope: str | None = None) -> list:
    """``[(t, c)]``: the threads (linear id in the CTA, rank in the cluster) that
    reach tile call ``call`` (a :class:`~..ir.call_view.CallView` while lowering),
    from its site's guards (:func:`active_threads`); a guard part not over
    thread ids must be uniform over ``scope`` (default: the call's scope).

    Raises
    ------
    TileError
        A guard is neither over thread ids nor uniform over ``scope``.
    """
    guards = call.site.guards if call.site is not None else ()
    if not guards:
        return call.facts.all_threads()
    return active_threads(call.facts, guards, call.opcode, scope or call.scope)
