"""Kernel rules of the ``mbarrier`` family over loops: the parity of a wait flips
between the uses of a barrier, and one loop iteration does not arrive more than
the barrier's init count.

PTX ISA 9.2, 9.7.15.16 (``mbarrier``): a phase completes after ``count``
arrivals (the init count), and the barrier moves to the next phase, of the
other parity; ``try_wait.parity p`` returns at once while the barrier is in a
phase of parity ``1 - p``.

* **parity reuse**: one thread runs the same wait twice in a row on one barrier
  element, with the same parity, in two iterations of a loop whose body
  arrives on an mbarrier (it releases a stage or refills one), and the kernel's
  arrivals on that element complete at least two phases.  The second wait finds
  the barrier in the phase after the one it saw complete -- of the other
  parity -- and returns at once: the refill has not landed (a ring consumer
  waiting on parity 0 at every use of its stage).  The parity must flip per
  reuse: ``(k // stages) % 2``, or a register flipped with ``phase ^= 1``.
* **arrivals per iteration**: the arrivals on one barrier element in one
  iteration of the innermost loop around them (every thread, every arrive of
  that loop body) exceed its init count, and that loop body waits on none of
  the barrier tensor's elements.  The first ``count`` arrivals complete the
  phase; the rest complete the next phases before their uses happened (an
  ``empty`` barrier of count 1 that 128 consumers release).

Both read what :mod:`._mbarrier_phases` enumerated (constant trip counts, guards
over thread ids and loop counters); a parity or an element read from memory, a
loop of run-time trip count, arrivals under ``elect_sync()`` leave the barrier
unchecked.
"""

from __future__ import annotations

from .. import TileError
from ._sync import element_name, tally, waits_on, where

__all__ = ["parity_reuse", "arrivals_per_iteration"]


def _fors(leaf) -> list:
    return [loop for loop in leaf.loops if loop.var is not None]


def _iteration_text(leaf, iteration) -> str:
    """``"k=3"``: the ``for`` counters of ``leaf`` at ``iteration``."""
    return ", ".join(f"{loop.var.name}={value}" for loop, value in zip(_fors(leaf), iteration)) or "one pass"


def _loop_arrives(protocol, before, after):
    """The ``for`` loop whose iteration separates two executions of one wait, when its
    body arrives on an mbarrier (a release or a refill between them), else None."""
    fors = _fors(before.event.leaf)
    for loop, a, b in zip(fors, before.iteration, after.iteration):
        if a != b:
            body = protocol.program.flat(loop.body)
            return loop if any(protocol.at(leaf, "arrive") for leaf in body) else None
    return None


def parity_reuse(protocol, root, inits, arrivals, waits) -> list:
    """The parity-reuse rule (see the module) on barrier tensor ``root``: ``inits``,
    ``arrivals`` and ``waits`` as :mod:`._mbarrier_phases` counted them.  Returns at
    most one ``TileError`` (the first offending element)."""
    for (t, rank, offset), seq in sorted(waits.items(), key=lambda kv: (kv[0][2], kv[0][1], kv[0][0])):
        init, got = inits.get((rank, offset)), arrivals.get((rank, offset))
        if init is None or got is None or init[0] <= 0 or got[0] < 2 * init[0]:
            continue  # fewer than two phases: nothing is reused
        for before, after in zip(seq, seq[1:]):
            if before.event is after.event and before.parity == after.parity and _loop_arrives(protocol, before, after):
                return [_reuse_error(protocol, (root, offset), t, before, after, got[1])]
    return []


def _reuse_error(protocol, element, t, before, after, by_event) -> TileError:
    name, leaf, p = element_name(protocol, element), after.event.leaf, after.parity
    sites = "; ".join(f"{e.what} at {where(e.leaf)}" for e in by_event)
    return TileError(
        after.event.what,
        "wait parity does not flip between uses of the mbarrier",
        expected=f"parity {1 - p} on mbarrier {name} at {_iteration_text(leaf, after.iteration)}: the wait "
        f"already saw the phase of parity {p} complete at {_iteration_text(leaf, before.iteration)}, and the "
        f"next phase has parity {1 - p} (flip it per reuse: (k // stages) % 2, or phase ^= 1)",
        found=f"parity {p} again (thread {t}) at {where(leaf)}: the barrier is in a phase of parity {1 - p}, "
        f"so the wait returns at once, before the arrivals that refill it ({sites}) complete that phase",
        location=where(leaf),
    )


def _per_iteration(protocol, root, events) -> dict:
    """``{(rank, offset, loop, iteration): [total, {event: count}]}``: the arrivals on each
    element in each iteration of the innermost loop around them; None when not countable."""
    out = {}
    for event in events:
        fors = _fors(event.leaf)
        if not fors or any(waits_on(protocol, leaf, root) for leaf in protocol.program.flat(fors[-1].body)):
            continue
        runs = protocol.executions.of(event.leaf, [event.element[1]])
        if runs is None:
            return None
        for run in runs:
            for _, rank in run.threads:
                tally(out, (rank, run.values[0], fors[-1], run.iteration), event)
    return out


def arrivals_per_iteration(protocol, root, inits, events) -> list:
    """The arrivals-per-iteration rule (see the module) on barrier tensor ``root``:
    ``inits`` as :mod:`._mbarrier_phases` counted them, ``events`` its ``arrive``
    events (their counts known).  Returns at most one ``TileError``."""
    sums = _per_iteration(protocol, root, events)
    for (rank, offset, loop, iteration), (total, by_event) in (sums or {}).items():
        init = inits.get((rank, offset))
        if init is not None and total > init[0]:
            return [_iteration_error(protocol, (root, offset), init, loop, iteration, total, by_event)]
    return []


def _iteration_error(protocol, element, init, loop, iteration, total, by_event) -> TileError:
    count, init_event = init
    name, first = element_name(protocol, element), next(iter(by_event))
    shown = "; ".join(f"{e.what} at {where(e.leaf)}: {n}" for e, n in by_event.items())
    return TileError(
        first.what,
        "more arrivals in one iteration than the mbarrier's init count",
        expected=f"at most {count} arrival(s) on mbarrier {name} per iteration of the loop over {loop.var.name} "
        f"(init count {count} at {where(init_event.leaf)}: one phase per use), or an init count of {total}",
        found=f"{total} arrival(s) at {loop.var.name}={iteration[-1]} ({shown}): the first {count} complete the "
        "phase, the rest complete the next ones before their uses",
        location=where(first.leaf),
    )
