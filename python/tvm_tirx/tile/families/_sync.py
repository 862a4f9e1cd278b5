"""Helpers the protocol rules of several families share (:mod:`._mbarrier_tx`,
:mod:`._mbarrier_phases`, :mod:`._mbarrier_order`, :mod:`.fence`,
:mod:`._bulk_groups`, :mod:`._cluster`): naming sites and barriers in
messages, which statements synchronise threads, who reaches a statement,
and the region an event touches.

Not a family (the leading ``_`` keeps it out of the registry's module scan).
"""

from __future__ import annotations

import tvm_ffi
from tvm.ir import TensorLoad, Var
from tvm.runtime import DataType

from .. import byte_range, int_or_none, same_element

__all__ = [
    "where", "element_name", "synchronises", "waits_on", "subset", "region", "varies", "over_threads",
    "on_root", "touches_root", "foreign_use", "BARRIER_KINDS", "initialised", "tally",
]  # fmt: skip


#: The events that use an mbarrier as one.
BARRIER_KINDS = ("init", "arrive", "expect_tx", "complete_tx", "wait")


def where(leaf) -> str:
    """``file:line`` of a statement, for messages (``"?"`` when unknown)."""
    return leaf.location or "?"


def element_name(protocol, element) -> str:
    """``"full[1]"``: an mbarrier element by its root's name and index (the root's
    name alone when it holds one barrier; ``"[offset + s]"`` when symbolic)."""
    root, offset = element
    size = DataType(root.dtype).bits // 8
    base = root.elem_offset * size
    n = 1
    for extent in root.shape:
        n *= int_or_none(extent) or 2
    if n == 1:
        return str(root.name)
    index = int_or_none(protocol.facts.analyzer.simplify((offset - base) // size))
    if index is not None:
        return f"{root.name}[{index}]"
    return f"{root.name}[{protocol.facts.display(protocol.facts.analyzer.simplify((offset - base) // size))}]"


def synchronises(protocol, leaf, scope: str = "cta") -> bool:
    """Whether ``leaf`` may synchronise the threads of a CTA (``scope="cta"``: a
    CTA or cluster barrier) or of a cluster (``"cluster"``: a cluster barrier),
    or is opaque and may order memory (an instruction no family describes,
    such as a named barrier, may be one)."""
    for event in protocol.at(leaf, "barrier", "opaque"):
        if event.kind == "opaque":
            if event.scope == "orders":
                return True
        elif scope == "cta" or event.scope == "cluster":
            return True
    return False


def waits_on(protocol, leaf, root=None) -> bool:
    """Whether ``leaf`` waits on an mbarrier (of ``root``, when given)."""
    for event in protocol.at(leaf, "wait"):
        if root is None or event.element is None or event.element[0].same_as(root):
            return True
    return False


def subset(a, b) -> bool | None:
    """Whether thread set ``a`` is inside ``b`` (None when either is unknown)."""
    if a is None or b is None:
        return None
    return a <= b


def region(protocol, event):
    """The byte range a memory event touches (:func:`~tvm_tirx.tile.byte_range`;
    ``extent`` bytes from ``coord`` when the event gives them), or None."""
    if event.extent == -1:
        return None
    rng = byte_range(protocol.facts, event.buffer, event.coord)
    if rng is None or event.extent is None:
        return rng
    return rng[0], rng[1], rng[1] + event.extent


def _vars(expr) -> list:
    found = []
    tvm_ffi.structural_walk(expr, (Var, found.append))
    tvm_ffi.structural_walk(expr, (TensorLoad, found.append))
    return found


def varies(protocol, event, loop_vars) -> bool:
    """Whether the region of memory event ``event`` may change with one of
    ``loop_vars`` (a path that wrapped those loops compares two iterations), or
    reads a value not expanded to one (a load)."""
    rng = region(protocol, event)
    if rng is None:
        return True
    keys = {hash(v) for v in loop_vars if v is not None}
    for expr in rng[1:]:
        for v in _vars(expr):
            if isinstance(v, TensorLoad) or hash(v) in keys:
                return True
    return False


def over_threads(facts, cond) -> bool:
    """Whether ``cond`` reads only thread / cluster-CTA ids and constants (after its
    scalars are expanded): a branch on it splits threads, and every thread runs one arm."""
    expanded = facts.expand_scalars(cond)
    ids = {hash(v) for v in facts.per_thread_vars()}
    found = _vars(expanded)
    return bool(found) and all(not isinstance(v, TensorLoad) and hash(v) in ids for v in found)


def on_root(event, root) -> bool:
    """Whether a barrier event names an element of ``root``."""
    return event.element is not None and event.element[0].same_as(root)


def touches_root(protocol, event, root) -> bool:
    """Whether a memory event touches a view of ``root``."""
    return event.buffer is not None and event.kind != "opaque" and protocol.root(event.buffer).same_as(root)


def foreign_use(protocol, root) -> bool:
    """Whether a statement uses ``root`` other than as an mbarrier (an instruction no
    family describes that names it, a load or a store of it): its state is then not
    the rules' to follow."""
    for leaf in protocol.program.leaves:
        for event in protocol.at(leaf):
            if event.kind in BARRIER_KINDS:
                continue
            if event.kind == "opaque":
                if any(protocol.root(b).same_as(root) for b in event.buffer):
                    return True
            elif event.buffer is not None and protocol.root(event.buffer).same_as(root):
                return True
    return False


def initialised(protocol, element) -> bool:
    """Whether the kernel initialises ``element`` (or a barrier that may be it): the rules
    follow a barrier from its ``init`` (a kernel that never initialises it shows
    only part of its protocol, such as a fragment under test)."""
    if element is None:
        return False
    return any(
        on_root(e, element[0]) and same_element(protocol.facts, e.element, element) is not False
        for e in protocol.of("init")
    )


def tally(out: dict, key, event) -> None:
    """Count ``event``'s arrivals (its ``value``) under ``key`` of ``out``:
    ``out[key] = [total, {event: count}]``, created on first use."""
    entry = out.setdefault(key, [0, {}])
    entry[0] += event.value
    entry[1][event] = entry[1].get(event, 0) + event.value
