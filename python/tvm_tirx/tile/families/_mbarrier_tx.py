"""Kernel rule of the ``mbarrier`` family: the bytes an ``expect_tx`` announces
against the bytes of the copies that complete on that barrier in that phase.

PTX ISA 9.2, 9.7.15.16 (``mbarrier``; its "phase completion" and
"expect-tx / complete-tx operation" subsections): a phase completes when its
pending arrival count *and* its transaction count reach zero;
``expect_tx`` (alone or with ``arrive``) raises the transaction count by the
bytes it names, each ``.mbarrier::complete_tx::bytes`` copy
(``cp.async.bulk{.tensor}``, PTX ISA 9.7.9.25.5.1 / 9.7.10.28.4.1) lowers it
by the bytes it writes.  Fewer bytes than announced: the phase never
completes, the waiters hang.  More: it completes early, and the rest of the
bytes count against the next phase.

What a phase is, here: the events on one barrier between two waits on it in
one statement sequence, with the branches on thread ids (``if tid == 0:``)
taken together; the body of a loop, and each arm of an if on anything else,
is a phase of its own.  A phase is checked when every byte count in it is a
constant, every event's threads are known (guards over thread ids) and its
barrier elements can be told apart.  A TMA multicast with a constant
``cta_mask`` counts its box on the barrier of every CTA the mask names (the
ISA signals each at the same offset), issued by whichever CTA of the cluster
runs it: in a cluster-symmetric kernel each CTA's ``expect_tx`` must count
the bytes its peers multicast into it.  A multicast of a run-time mask or
issued under a guard that cannot be evaluated, a raw or bulk multicast, a
peer CTA's barrier, a barrier an instruction no family describes touches, a
barrier the kernel never initialises, or a copy whose barrier is a computed
address leave the barrier unchecked.  A
phase that does not balance is refused only when every other phase on that
barrier balances (else two of them may be halves of one) and some thread
waits on the barrier.
"""

from __future__ import annotations

import tvm_ffi
from tvm.ir import Var

from .. import Branch, Leaf, Loop, Seq, TileError, protocol_of, same_element
from ._sync import element_name, foreign_use, initialised, on_root, over_threads, where

__all__ = ["expect_tx_bytes"]

TX = ("expect_tx", "complete_tx")


def _phases(protocol, root) -> list:
    """The groups of ``expect_tx`` / ``complete_tx`` events on ``root`` that make one phase."""
    groups = []

    def close(events):
        if events:
            groups.append(list(events))

    def collect(node):
        """``(before, after, waits)``: events before the first wait on ``root`` in
        ``node``, after the last one, and whether ``node`` waits at all."""
        if isinstance(node, Leaf):
            tx = [e for e in protocol.at(node, *TX) if on_root(e, root)]
            waits = any(on_root(e, root) for e in protocol.at(node, "wait"))
            return ([], tx, True) if waits else (tx, [], False)
        if isinstance(node, Seq):
            return _sequence(node)
        if isinstance(node, Branch):
            arms = [collect(a) for a in (node.then, node.other) if a is not None]
            if over_threads(protocol.facts, node.cond):  # threads split: one phase together
                waits = any(w for _, _, w in arms)
                before = [e for b, a, w in arms for e in (b if w or not waits else b + a)]
                return before, [e for _, a, w in arms if w for e in a], waits
            for before, after, _ in arms:  # a condition of data: each arm on its own
                close(before)
                close(after)
            return [], [], any(w for _, _, w in arms)
        if isinstance(node, Loop) and node.body is not None:
            before, after, waits = collect(node.body)
            close(before)
            close(after)
            return [], [], waits
        return [], [], False

    def _sequence(seq):
        first, current, seen = [], [], False
        for item in seq.items:
            before, after, waits = collect(item)
            if waits:
                if seen:
                    close(current + before)
                else:
                    first, seen = current + before, True
                current = list(after)
            else:
                current += before
        return (first, current, True) if seen else (current, [], False)

    before, after, _ = collect(protocol.program.root)
    close(before)
    close(after)
    return groups


def _instances(protocol, event, threads) -> list:
    """``[(rank, offset, threads)]``: the barrier element each thread of ``threads``
    names with ``event`` (an offset reading thread ids differs per thread)."""
    facts, offset = protocol.facts, event.element[1]
    ids = {hash(v): v for v in facts.per_thread_vars()}
    found = []
    tvm_ffi.structural_walk(offset, (Var, lambda v: found.append(v) if hash(v) in ids else None))
    counts = {}
    for t, c in threads:
        if found:
            values = {**facts.launch.thread_values(t), **facts.launch.cluster_values(c)}
            mapped = tvm_ffi.structural_map(offset, (Var, lambda v, vs=values: _const(v, vs)))
            at = facts.analyzer.simplify(mapped)
        else:
            at = offset
        key = (c, str(at))
        counts.setdefault(key, [at, 0])[1] += 1
    return [(c, at, n) for (c, _), (at, n) in counts.items()]


def _const(var, values):
    from tvm.tirx import IntImm  # pylint: disable=import-outside-toplevel

    for v, x in values.items():
        if v.same_as(var):
            return IntImm(var.ty.dtype, x)
    return var


def _receivers(event, rank):
    """The cluster ranks whose barrier an event issued by CTA ``rank`` changes: its own,
    or a multicast's ``targets``; None for another peer event (not followed)."""
    if event.scope != "peer":
        return (rank,)
    return tuple(sorted(event.targets)) if event.kind == "complete_tx" and event.targets is not None else None


def _balance(protocol, group):
    """``{(rank, key): [announced, completed, offset, events]}`` of a phase, or None when unknown."""
    sums = {}
    for event in group:
        threads = protocol.threads(event.leaf)
        if event.value is None or threads is None:
            return None
        for issuer, at, n in _instances(protocol, event, threads):
            ranks = _receivers(event, issuer)
            if ranks is None:
                return None
            for rank in ranks:
                entry = sums.setdefault((rank, str(at)), [0, 0, at, []])
                entry[0 if event.kind == "expect_tx" else 1] += n * int(event.value)
                entry[3].append((event, n, issuer))
    offsets = {(k[0], k[1]): v[2] for k, v in sums.items()}
    items = list(offsets.items())
    for i, (ka, a) in enumerate(items):
        for kb, b in items[i + 1 :]:
            if ka[0] == kb[0] and same_element(protocol.facts, (group[0].element[0], a), (group[0].element[0], b)) is not False:
                return None  # two offsets that may be one barrier
    return sums


def _error(protocol, root, announced, completed, offset, events) -> TileError:
    name = element_name(protocol, (root, offset))
    expects = [(e, n) for e, n, _ in events if e.kind == "expect_tx"]
    copies = [(e, n, i) for e, n, i in events if e.kind == "complete_tx"]
    shown = "; ".join(
        f"{e.detail or e.what} at {where(e.leaf)}" + (f" by {n} threads" if n > 1 else "")
        + (f" from CTA {i}" if e.scope == "peer" else "")
        for e, n, i in copies
    )
    found = " + ".join(f"{e.value}" for e, _ in expects)
    return TileError(
        expects[0][0].what,
        "expect_tx bytes differ from the copies of the phase",
        expected=f"the {completed} bytes the copies completing on mbarrier {name} in that phase bring "
        f"({shown or 'no copy'})",
        found=f"expect_tx of {found} bytes at {', '.join(where(e.leaf) for e, _ in expects)}"
        + (f", issued by {expects[0][1]} threads" if expects[0][1] > 1 else "")
        + (f" ({announced} in all)" if len(expects) > 1 or expects[0][1] > 1 else ""),
        location=where(expects[0][0].leaf),
    )


def expect_tx_bytes(view) -> list:
    """Kernel rule: each phase's ``expect_tx`` bytes equal the bytes of the copies
    completing on its barrier in that phase (see the module)."""
    protocol = protocol_of(view)
    if protocol.facts.launch is None or not protocol.of("expect_tx"):
        return []
    if any(e.element is None for e in protocol.of(*TX)):
        return []  # a barrier named by a computed address: any barrier may be it
    roots = []
    for event in protocol.of("expect_tx"):
        if not any(event.element[0].same_as(r) for r in roots):
            roots.append(event.element[0])
    errors = []
    for root in roots:
        if not any(on_root(e, root) for e in protocol.of("wait")):
            continue
        if foreign_use(protocol, root):
            continue
        phases = [(g, _balance(protocol, g)) for g in _phases(protocol, root)]
        bad = [(g, s, k) for g, s in phases if s is not None for k, v in s.items() if v[0] != v[1]]
        unknown = [g for g, s in phases if s is None]
        groups_bad = {id(g) for g, _, _ in bad}
        if unknown or len(groups_bad) != 1:
            continue
        group, sums, key = bad[0]
        announced, completed, offset, events = sums[key]
        if any(e.kind == "expect_tx" for e, _, _ in events) and initialised(protocol, (root, offset)):
            errors.append(_error(protocol, root, announced, completed, offset, events))
    return errors
