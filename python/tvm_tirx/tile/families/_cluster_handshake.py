"""The mbarrier handshake that lets a CTA of a 2-CTA cluster exit without a cluster barrier.

Used by the exit rule of :mod:`._cluster` (not a family: the leading ``_`` keeps
it out of the registry's module scan).  Each CTA arrives on its peer's ``done``
barrier (``mbarrier.arrive...shared::cluster`` with ``remote_cta_id=``) after its
last operation on the peer, then waits on its own ``done`` until the peer's
arrive completes the phase.  A CTA therefore leaves only after its peer has
passed its last peer operation -- what ``T.cuda.cluster_sync()`` would ensure,
without making the faster CTA wait for the whole cluster.

It holds only when the barrier tells the peer's arrive apart: the cluster has
two CTAs (the only other CTA is the peer), every arrival on ``done`` is a
remote one and no instruction no family describes names it (its own CTA cannot
complete the phase), and every CTA makes the arrive and the wait -- their
guards and loops read no CTA rank, block index or memory (the kernel is the
same in both CTAs there).  PTX ISA 9.7.13.15 (``mbarrier``), 9.2 (cluster
shared memory).
"""

from __future__ import annotations

import tvm_ffi
from tvm.ir import TensorLoad, Var

from ._sync import foreign_use, on_root, synchronises

__all__ = ["handshake_roots", "releases"]


def _same_in_every_cta(protocol, leaf) -> bool:
    """Whether every CTA reaches ``leaf`` alike: no guard or loop bound reads a CTA
    rank, a block index or memory."""
    facts = protocol.facts
    launch = facts.launch
    banned = list(launch.cluster_vars) if launch is not None else []
    exprs = list(leaf.guards)
    for loop in leaf.loops:
        exprs.extend(e for e in (loop.min, loop.extent, loop.cond) if e is not None)
    for expr in exprs:
        found = []
        tvm_ffi.structural_walk(expr, (TensorLoad, found.append))
        tvm_ffi.structural_walk(expr, (Var, lambda v: found.append(v) if _cta_dependent(facts, v, banned) else None))
        if found:
            return False
    return True


def _cta_dependent(facts, var, banned) -> bool:
    return any(var.same_as(b) for b in banned) or facts.cuda_names.get(var, "").startswith("blockIdx")


def handshake_roots(protocol) -> list:
    """The barrier roots a handshake may use (see the module docstring); ``[]``
    unless the kernel launches clusters of exactly two CTAs."""
    launch = protocol.facts.launch
    if launch is None or launch.cluster_size != 2:
        return []
    roots = []
    for event in protocol.of("arrive"):
        root = event.element[0] if event.element is not None else None
        if root is None or event.scope != "peer" or any(root.same_as(r) for r in roots):
            continue
        signals = [e for e in protocol.of("arrive", "expect_tx", "complete_tx") if on_root(e, root)]
        if all(e.kind == "arrive" and e.scope == "peer" and _same_in_every_cta(protocol, e.leaf) for e in signals) \
                and not foreign_use(protocol, root):
            roots.append(root)
    return roots


def _waits(protocol, leaf, root) -> bool:
    return _same_in_every_cta(protocol, leaf) and any(
        on_root(e, root) and e.scope == "blocking" for e in protocol.at(leaf, "wait"))


def releases(protocol, leaf, roots) -> bool:
    """Whether ``leaf`` is a handshake's remote arrive on one of ``roots`` after which
    every path to the kernel's end waits on that barrier (or passes a cluster barrier)."""
    if not _same_in_every_cta(protocol, leaf):
        return False
    for event in protocol.at(leaf, "arrive"):
        root = event.element[0] if event.element is not None and event.scope == "peer" else None
        if root is None or not any(root.same_as(r) for r in roots):
            continue
        paths = protocol.program.forward(
            leaf, lambda later, root=root: synchronises(protocol, later, "cluster") or _waits(protocol, later, root))
        if all(path.stop is not None for path in paths):
            return True
    return False
