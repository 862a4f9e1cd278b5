"""Kernel rule: a CTA barrier is reached by the whole CTA.

``T.cuda.cta_sync()`` (CUDA ``__syncthreads()``, PTX ``bar.sync 0``) waits
until every thread of the CTA arrives (PTX ISA 9.7.13.1, ``bar``/``barrier``:
"all threads in the CTA participate"); under a guard that only part of the
CTA passes it deadlocks, or (on sm_70+, where ``bar.sync`` counts arrivals per
warp) silently synchronises the wrong threads.  ``T.cuda.cluster_sync()``
likewise needs every thread of every CTA of the cluster (PTX ISA 9.7.13.3,
``barrier.cluster``).  Each guard around such a barrier must keep every thread
(a guard over thread ids that every thread passes) or be uniform over the
CTA (:mod:`..analysis.uniformity`) -- over the cluster for ``cluster_sync``.
"""

from __future__ import annotations

from tvm import tirx

from ...errors import TileError
from .sites import collect_sites
from ..analysis.threads import active_threads

__all__ = ["BARRIERS", "whole_cta_barriers"]

#: Op name -> (how the user writes it, the scope every thread of which must reach it).
BARRIERS = {
    "tirx.cuda.cta_sync": ("T.cuda.cta_sync()", "cta"),
    "tirx.cuda.cluster_sync": ("T.cuda.cluster_sync()", "cluster"),
}


def _op_name(stmt):
    return getattr(getattr(getattr(stmt, "value", None), "op", None), "name", None)


def whole_cta_barriers(view):
    """Kernel rule (:data:`.kernel_rules.SHARED_RULES`): each CTA (cluster) barrier of the
    kernel is reached by all of the CTA's (cluster's) threads.

    Parameters
    ----------
    view : KernelView
        The kernel (:class:`~.kernel_rules.KernelView`).

    Returns
    -------
    list[TileError]
        One error per barrier that part of its CTA (cluster) reaches, or whose
        guard is not understood.
    """
    facts = view.facts
    if facts.launch is None:
        return []
    sites = collect_sites(view.body, facts.calls.targets, facts.root_of, lambda s: isinstance(s, tirx.Evaluate) and _op_name(s) in BARRIERS)
    errors = []
    for site in sites.values():
        if not site.guards:
            continue
        text, scope = BARRIERS[_op_name(site.stmt)]
        try:
            reached = active_threads(facts, site.guards, text, scope)
        except TileError as err:
            errors.append(err.at(site.location))
            continue
        per_cta = facts.launch.threads
        counts = {}
        for _, rank in reached:
            counts[rank] = counts.get(rank, 0) + 1
        if scope == "cluster":
            total, partial = len(facts.all_threads()), len(reached) not in (0, len(facts.all_threads()))
        else:  # each CTA of a cluster on its own: all of its threads, or none
            total, partial = per_cta, any(n != per_cta for n in counts.values())
        if partial:
            guards = " and ".join(facts.display(g) for g in site.guards)
            name = "CTA" if scope == "cta" else "cluster"
            errors.append(
                TileError(
                    text,
                    f"{name} barrier reached by part of the {name}",
                    expected=f"all {total} threads of the {name} (a barrier over fewer threads is a named "
                    "barrier: T.cuda.tile.apply(T.ptx[\"bar.sync\"], id=..., count=...))",
                    found=f"{min(counts.values()) if scope == 'cta' else len(reached)} threads under if {guards}",
                ).at(site.location)
            )
    return errors
