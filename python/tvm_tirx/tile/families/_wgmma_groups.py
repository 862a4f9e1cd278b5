"""Kernel rule of the wgmma family: accumulators are not touched while a wgmma may
still write them.

``wgmma.mma_async`` writes its accumulator registers asynchronously: after
``wgmma.commit_group`` the group runs until a ``wgmma.wait_group N`` leaves at
most ``N`` newer groups pending (PTX ISA 9.7.15.6, 9.7.15.7).  Reading or
writing the accumulators before that -- an epilogue that stores them, a
``mov`` that clears them -- sees or clobbers half-computed values (the ISA
makes it undefined); only another ``wgmma.mma_async`` on the same
accumulators may come in between (it is ordered after the first).

The rule follows program order from each wgmma tile call: the rest of its
statement sequence, then the statements around it, and for an enclosing loop
both its next iteration (up to the call) and what follows the loop.  It
counts the commit and wait calls met (constant ``N``) and refuses the first
other statement that touches the accumulator's registers before the group is
retired, naming both lines.  Statements inside an ``if`` or a loop met on the
way are taken in textual order, as if they run; a wait with a run-time ``N``
ends the search (unchecked).
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad

from .. import TileError
from ..kernel.sites import location_of

__all__ = ["accumulators_in_flight", "Scan", "follow", "paths", "is_mma"]

_COMMIT, _WAIT = "tirx.ptx.wgmma_commit_group", "tirx.ptx.wgmma_wait_group"


#: The opcode text every ``wgmma.mma_async`` form of the family starts with (PTX ISA 9.7.15.5.2).
MMA_PREFIX = "wgmma.mma_async"


def is_mma(call) -> bool:
    """Whether ``call`` (a decoded :class:`~..rules.op.TileCall` or a
    :class:`~..ir.call_view.CallView`; None for a statement that is no tile call) is a
    ``wgmma.mma_async``."""
    return call is not None and call.opcode.startswith(MMA_PREFIX)


def _op(stmt) -> str:
    return getattr(getattr(getattr(stmt, "value", None), "op", None), "name", "") or ""


def _flat(stmt) -> list:
    """The statement-level leaves of ``stmt`` in textual order."""
    if isinstance(stmt, tirx.SeqStmt):
        return [leaf for s in stmt.seq for leaf in _flat(s)]
    if isinstance(stmt, tirx.IfThenElse):
        return _flat(stmt.then_case) + (_flat(stmt.else_case) if stmt.else_case is not None else [])
    body = getattr(stmt, "body", None)
    return _flat(body) if isinstance(body, tirx.Stmt) else [stmt]


class Scan:  # pylint: disable=too-few-public-methods
    """The forward walk from one wgmma call whose accumulators are ``roots``."""

    def __init__(self, facts, roots, origin):
        self.facts, self.roots, self.origin = facts, roots, origin

    def touches(self, leaf) -> bool:
        bufs = []
        if isinstance(leaf, tirx.BufferStore):
            bufs.append(leaf.buffer)
        if isinstance(leaf, tirx.Evaluate):
            bufs.extend(self.facts.calls.targets(leaf))
        tvm_ffi.structural_walk(leaf, (TensorLoad, lambda load: bufs.append(load.source)))
        roots = [self.facts.root_of(b) for b in bufs]
        return any(r is not None and hash(r) in self.roots for r in roots)

    def step(self, leaf, state):
        """``(state, verdict)``: verdict None (go on), True (retired: stop), or the offending leaf."""
        committed, newer = state
        op = _op(leaf)
        if op.startswith(_COMMIT):
            return ((True, newer + 1 if committed else 0), None)
        if op.startswith(_WAIT):
            n = getattr(leaf.value.args[0], "value", None)
            if n is None:
                return state, True  # a run-time depth: unchecked
            return state, True if committed and newer >= int(n) else None
        if isinstance(leaf, tirx.Evaluate) and is_mma(self.facts.calls.tile_call(leaf)):
            return state, None
        return state, (leaf if self.touches(leaf) else None)

    def run(self, leaves, state):
        """Walk ``leaves``; ``(state, verdict)`` as :meth:`step`, verdict None when they run out."""
        for leaf in leaves:
            if leaf.same_as(self.origin):
                return state, True  # back at the call: its next issue is a later group
            state, verdict = self.step(leaf, state)
            if verdict is not None:
                return state, verdict
        return state, None


def paths(body, target) -> list:
    """``[(node, index)]`` from ``body`` down to statement ``target``."""

    def down(node, path):
        if node.same_as(target):
            return path
        children = node.seq if isinstance(node, tirx.SeqStmt) else [
            c for c in (getattr(node, "then_case", None), getattr(node, "else_case", None), getattr(node, "body", None))
            if isinstance(c, tirx.Stmt)
        ]
        for i, child in enumerate(children):
            found = down(child, path + [(node, i)])
            if found is not None:
                return found
        return None

    return down(body, []) or []


def follow(scan, path, wrap: bool = True) -> object:
    """The first leaf ``scan`` stops at (``scan.touches``) before the group retires, or None;
    ``wrap``: also the next iteration of each enclosing loop, up to the call."""
    state = (False, 0)
    for level in range(len(path) - 1, -1, -1):
        node, idx = path[level]
        if isinstance(node, tirx.SeqStmt):
            state, verdict = scan.run([leaf for s in node.seq[idx + 1 :] for leaf in _flat(s)], state)
            if verdict is not None:
                return None if verdict is True else verdict
        elif wrap and isinstance(node, tirx.For | tirx.While):
            _, verdict = scan.run(_flat(node.body), state)  # the next iteration, up to the call
            if verdict is not None and verdict is not True:
                return verdict
    return None


def accumulators_in_flight(view):
    """Every wgmma's accumulators are left alone until a wait_group retires its group."""
    facts, errors = view.facts, []
    for key, call in view.calls.items():
        if not is_mma(call):
            continue
        site = facts.sites.get(key)
        acc = call.operands[0]
        root = facts.root_of(acc.value) if acc.kind == "tensor" else None
        if site is None or site.stmt is None or root is None:
            continue
        bad = follow(Scan(facts, {hash(root)}, site.stmt), paths(view.body, site.stmt))
        if bad is not None:
            name = root.name or acc.value.name
            where = location_of(getattr(bad, "span", None)) or location_of(getattr(getattr(bad, "value", None), "span", None))
            errors.append(TileError(
                call.opcode, "accumulators used while the wgmma may still write them", operand=call.label(0),
                expected=f"wgmma.commit_group then wgmma.wait_group retiring its group before {name} is "
                f"read or written (PTX ISA 9.7.15.7)",
                found=f"{name} used at {where or 'a later statement'} with the group still pending",
            ).at(site.location))
    return errors
