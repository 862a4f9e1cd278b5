"""Kernel rules of the ``mbarrier`` family: an mbarrier's init count against the
arrivals its phases receive, and the parity of its first wait.

PTX ISA 9.2, 9.7.15.16 (``mbarrier``): ``init`` sets the expected arrival
count and phase 0; a phase completes when that many arrivals (``arrive``,
``arrive.expect_tx``, each counting ``count`` or 1) have happened and its
transaction count is zero, and the barrier moves to the next phase.
``try_wait.parity`` / ``test_wait.parity`` with parity ``p`` returns true once
the phase of parity ``p`` has completed -- and at once when the barrier is in
a phase of the other parity: on a fresh barrier (phase 0), a wait on parity 1
returns immediately (the "previous" phase counts as completed).

Counted, not modelled: for each barrier element and each thread, the
parities its blocking waits use, in program order; each change of parity
(starting from 1, a fresh barrier's) needs one more completed phase.  The
waits need ``phases x count`` arrivals; when every arrival of the kernel on
that element is counted and they are fewer, the waits hang.  Counting needs
every arrival, init and blocking wait on the barrier to be enumerable: loops
of constant bounds, guards over thread ids and loop counters
(:mod:`tvm_tirx.tile.analysis.instances`); remote arrivals, ``arrive_drop`` and
barriers an unknown instruction touches leave it unchecked.  A first wait on
parity 1 is refused only on a barrier copies complete on (its phases carry
data) when no thread waits on parity 0 first.  The same counts feed the loop
rules of :mod:`._mbarrier_loops` (a parity that does not flip per reuse, more
arrivals in one iteration than the init count).
"""

from __future__ import annotations

from typing import NamedTuple

from .. import TileError, protocol_of
from ._mbarrier_loops import arrivals_per_iteration, parity_reuse
from ._sync import element_name, foreign_use, on_root, tally, where

__all__ = ["arrivals_and_parity", "Wait"]


class Wait(NamedTuple):
    """One thread's execution of a blocking wait: its program-order key, the parity
    (0 or 1), the wait's event and the ``for`` counter values it ran at."""

    order: tuple
    parity: int
    event: object
    iteration: tuple


def _executions(protocol, event, exprs):
    return protocol.executions.of(event.leaf, [event.element[1], *exprs])


def _inits(protocol, events):
    """``{(rank, offset): (count, event)}``, or None when not countable."""
    out = {}
    for event in events:
        runs = _executions(protocol, event, [event.value])
        if runs is None or protocol.executions.repeats(event.leaf):
            return None
        for run in runs:
            for rank in {c for _, c in run.threads}:
                if (rank, run.values[0]) in out:
                    return None  # initialised twice: not followed
                out[(rank, run.values[0])] = (run.values[1], event)
    return out


def _arrivals(protocol, events):
    """``{(rank, offset): [total, {event: count}]}``, or None when not countable."""
    out = {}
    for event in events:
        if event.value is None or event.scope == "peer" or protocol.executions.repeats(event.leaf):
            return None
        runs = _executions(protocol, event, [])
        if runs is None:
            return None
        for run in runs:
            for _, rank in run.threads:
                tally(out, (rank, run.values[0]), event)
    return out


def _waits(protocol, events):
    """``{(t, rank, offset): [Wait]}`` in program order, or None."""
    out = {}
    for event in events:
        runs = _executions(protocol, event, [event.value])
        if runs is None:
            return None
        for run in runs:
            key = protocol.program.order_key(event.leaf, run.iteration)
            for t, rank in run.threads:
                out.setdefault((t, rank, run.values[0]), []).append(Wait(key, run.values[1] % 2, event, run.iteration))
    for seq in out.values():
        seq.sort(key=lambda item: item.order)
    return out


def _count_error(protocol, root, offset, init, need, arrivals) -> TileError:
    count, init_event = init
    name = element_name(protocol, (root, offset))
    total, by_event = arrivals or (0, {})
    shown = "; ".join(f"{e.what} at {where(e.leaf)}: {n}" for e, n in by_event.items()) or "none"
    phases, parity, wait_event = need
    return TileError(
        init_event.what,
        "arrivals never reach the mbarrier's init count",
        expected=f"{phases * count} arrivals on mbarrier {name} (init count {count} at {where(init_event.leaf)}, "
        f"times the {phases} phase(s) the wait at {where(wait_event.leaf)} on parity {parity} needs)",
        found=f"{total} arrival(s) in the whole kernel ({shown})",
        location=where(wait_event.leaf),
    )


def _needed(seq):
    """``(phases, parity, event)``: the completed phases one thread's waits need,
    and the wait needing the last of them (None when none is needed)."""
    previous, phases, last = 1, 0, None
    for wait in seq:
        if wait.parity != previous:
            phases, last, previous = phases + 1, (wait.parity, wait.event), wait.parity
    return (phases, *last) if last else None


def _parity_errors(protocol, root, waits, copies) -> list:
    """A first wait on parity 1 on an element copies complete on, when no thread waits
    on parity 0 first (one report per barrier tensor)."""
    firsts = {}
    for (_, rank, offset), seq in waits.items():
        firsts.setdefault((rank, offset), []).append(seq[0])
    bad = [(offset, heads) for (rank, offset), heads in firsts.items() if not rank and all(w.parity == 1 for w in heads)]
    if not bad:
        return []
    offset, heads = bad[0]
    name = element_name(protocol, (root, offset)) + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
    event = heads[0].event
    return [
        TileError(
            event.what,
            "first wait on parity 1 of a fresh mbarrier returns at once",
            expected=f"parity 0 for the first phase of mbarrier {name}, which the copies completing on it "
            f"fill ({', '.join(sorted({where(c.leaf) for c in copies}))})",
            found=f"parity 1 at {where(event.leaf)}: a barrier starts in phase 0, so the wait returns "
            "before the data lands",
            location=where(event.leaf),
        )
    ]


def _check_root(protocol, root) -> list:
    on = lambda *kinds: [e for e in protocol.of(*kinds) if on_root(e, root)]  # noqa: E731
    blocking = [e for e in on("wait") if e.scope == "blocking"]
    if not blocking or foreign_use(protocol, root):
        return []
    inits, arrivals, waits = _inits(protocol, on("init")), _arrivals(protocol, on("arrive")), _waits(protocol, blocking)
    if inits is None or arrivals is None or waits is None:
        return []
    copies = [e for e in on("complete_tx") if e.scope != "peer"]
    errors = _parity_errors(protocol, root, waits, copies) if copies else []
    errors += parity_reuse(protocol, root, inits, arrivals, waits)
    errors += arrivals_per_iteration(protocol, root, inits, on("arrive"))
    worst = {}
    for (_, rank, offset), seq in waits.items():
        need = _needed(seq)
        if need is not None and (rank, offset) in inits and need[0] > worst.get((rank, offset), (0,))[0]:
            worst[(rank, offset)] = need
    for (rank, offset), need in worst.items():
        count = inits[(rank, offset)][0]
        got = arrivals.get((rank, offset))
        if need[0] * count > (got[0] if got else 0):
            errors.append(_count_error(protocol, root, offset, inits[(rank, offset)], need, got))
    return errors


def arrivals_and_parity(view) -> list:
    """Kernel rule: the arrivals on each mbarrier reach its init count for every phase
    its waits need, and a barrier copies complete on is first waited on parity 0
    (see the module)."""
    protocol = protocol_of(view)
    if protocol.facts.launch is None or not protocol.of("init") or not protocol.of("wait"):
        return []
    if any(e.element is None for e in protocol.of("init", "arrive", "wait")):
        return []
    roots = []
    for event in protocol.of("init"):
        if not any(event.element[0].same_as(r) for r in roots):
            roots.append(event.element[0])
    return [err for root in roots for err in _check_root(protocol, root)]
