"""Kernel rules of the ``mbarrier`` family on program order: an init made visible
before others use the barrier, and the tiles copies fill read only after the
wait and refilled only after the readers are done.

PTX ISA 9.2, 9.7.15.16 (``mbarrier.init``: a generic-proxy write of the
barrier object) and 9.7.13.4 (``fence.mbarrier_init.release.cluster``: makes
prior ``mbarrier.init``\\ s visible to the cluster and to the async proxy);
9.7.13.1 / 9.7.13.2 (``bar`` / ``barrier.cluster``: order memory between the
threads of a CTA / cluster); 9.7.9.25.5.1 and 9.7.10.28.4.1 (a
``.mbarrier::complete_tx::bytes`` copy writes its destination
asynchronously; its data is visible to a thread once that thread observed
the phase complete, by a wait on the barrier).

* **init visibility**: a barrier initialised by some threads and used by
  another thread needs a CTA barrier between the init and the use; used by
  the TMA unit (a copy completing on it), ``fence.mbarrier_init`` or a CTA
  barrier; by a peer CTA (a multicast, a remote arrive), the fence and a
  cluster barrier.
* **read before the wait**: a read of a tile, with the copy that fills it
  before it on some path and no wait in between.  A CTA barrier alone does not
  count: it publishes a wait made before it by another thread, but without any
  wait on the path the copy's writes are ordered with nothing.
* **refill while read**: a copy into a tile, with a read of it by other
  threads before it on some path and no wait (nor barrier) in between.

Tiles are followed when their copies complete on a barrier the kernel
initialises.  Paths are those of :class:`tvm_tirx.tile.Path` (both arms of a branch, loops
wrapping); a statement no family describes may be a barrier and ends the
question (for a read, only one with an operand that is not a constant: it
may be a wait written as inline asm; ``wgmma.fence`` is not).  Regions must provably overlap (:func:`tvm_tirx.tile.overlaps`)
and not change with a loop the path wrapped; thread sets must be known.
"""

from __future__ import annotations

from tvm import tirx
from tvm.ir import StringImm

from .. import TileError, overlaps, protocol_of, same_element
from ._sync import (
    element_name, initialised, region, subset, synchronises, touches_root, varies, waits_on, where,
)

__all__ = ["init_visible", "copies_and_reads"]

USES = ("arrive", "expect_tx", "complete_tx", "wait")


def _init_need(protocol, init, use):
    """What must run between ``init`` and ``use``: ``(need_fence, barrier scope)`` or None (nothing)."""
    if use.scope == "peer" or protocol.at(use.leaf, "peer"):
        return True, "cluster"
    if use.kind == "complete_tx" and protocol.at(use.leaf, "async_write"):
        return True, None  # the TMA unit: the fence, or a barrier
    if subset(protocol.threads(use.leaf), protocol.threads(init.leaf)) is False:
        return False, "cta"
    return None


def _covered(protocol, between, need) -> bool:
    fence, scope = need
    fenced = any(
        protocol.at(leaf, "init_fence", "proxy_fence") or any(e.scope == "orders" for e in protocol.at(leaf, "opaque"))
        for leaf in between
    )  # an instruction no family describes may be a fence
    synced = scope is not None and any(synchronises(protocol, leaf, scope) for leaf in between)
    if scope == "cluster":
        return fenced and synced
    if scope is None:
        return fenced or any(synchronises(protocol, leaf) for leaf in between)
    return synced or (fence and fenced)


def init_visible(view) -> list:
    """Kernel rule: an mbarrier's init is made visible before another thread, the TMA
    unit or a peer CTA uses it (see the module)."""
    protocol = protocol_of(view)
    if protocol.facts.launch is None or not protocol.of("init"):
        return []
    errors, seen = [], set()
    for init in protocol.of("init"):
        if init.leaf.index in seen:
            continue  # one report per init statement
        for use in protocol.of(*USES):
            if use.leaf is init.leaf or use.element is None:
                continue
            if same_element(protocol.facts, use.element, init.element) is False:
                continue
            need = _init_need(protocol, init, use)
            paths = protocol.program.forward(init.leaf, lambda leaf, u=use.leaf: leaf is u) if need else ()
            if any(p.stop is not None and not _covered(protocol, p.between, need) for p in paths):
                errors.append(_init_error(protocol, init, use, need))
                seen.add(init.leaf.index)
                break
    return errors


def _init_error(protocol, init, use, need) -> TileError:
    fence, scope = need
    name = element_name(protocol, init.element)
    wanted = {
        "cluster": "fence.mbarrier_init.release.cluster and T.cuda.cluster_sync() (a peer CTA uses it)",
        None: "fence.mbarrier_init.release.cluster or a CTA barrier (the TMA unit completes on it)",
        "cta": "a CTA barrier, T.cuda.cta_sync() (another thread uses it)",
    }[scope]
    return TileError(
        use.what,
        "mbarrier used before its init is visible",
        expected=f"{wanted} between the init of mbarrier {name} at {where(init.leaf)} and this use",
        found=f"nothing that orders them on a path from {where(init.leaf)} to {where(use.leaf)}",
        location=where(use.leaf),
    )


# -- tiles: read after the wait, refilled after the reads -------------------------------------------

READS = ("generic_read", "async_read")


def _same_data(protocol, a, b, path) -> bool:
    if varies(protocol, a, path.wrapped) or varies(protocol, b, path.wrapped):
        return False
    return overlaps(protocol.facts, region(protocol, a), region(protocol, b))


def _unguarded_read(protocol, read, fill_roots):
    """The copy a read of a copied tile meets first, going back, with no wait or barrier between."""
    root = protocol.root(read.buffer)
    if not any(root.same_as(r) for r in fill_roots):
        return None

    def writes(leaf):
        return any(touches_root(protocol, e, root) for e in protocol.at(leaf, "async_write", "generic_write")) or (
            protocol.names(leaf, root) and protocol.at(leaf, "opaque")
        )

    for path in protocol.program.backward(read.leaf, writes):
        if path.stop is None:
            continue
        copy = next((e for e in protocol.at(path.stop, "async_write") if touches_root(protocol, e, root)), None)
        if copy is None or not _same_data(protocol, copy, read, path):
            continue
        if any(waits_on(protocol, leaf) or _may_wait(protocol, leaf) for leaf in path.between):
            continue
        return copy, any(synchronises(protocol, leaf) for leaf in path.between)
    return None


def _may_wait(protocol, leaf) -> bool:
    """Whether ``leaf`` is an instruction no family describes that may order memory and
    may name a barrier (it may be a wait written as inline asm): one whose operands are
    all constants (``wgmma.fence``, ``wgmma.wait_group 0``) names none.  A CTA barrier is
    not one either: it orders the threads, not the copy's writes, which only a wait on
    its mbarrier makes visible."""
    if not any(e.scope == "orders" for e in protocol.at(leaf, "opaque")):
        return False
    return not all(isinstance(a, tirx.IntImm | tirx.FloatImm | StringImm) for a in leaf.stmt.value.args)


def _refill_over_read(protocol, copy):
    """A read of ``copy``'s tile by other threads met first going back, with no wait or barrier between."""
    root = protocol.root(copy.buffer)

    def reads(leaf):
        return any(touches_root(protocol, e, root) and e.scope != "bulk_group" for e in protocol.at(leaf, *READS))

    for path in protocol.program.backward(copy.leaf, reads):
        if path.stop is None or path.stop is copy.leaf:
            continue
        read = next(e for e in protocol.at(path.stop, *READS) if touches_root(protocol, e, root) and e.scope != "bulk_group")
        if not _same_data(protocol, copy, read, path):
            continue
        if subset(protocol.threads(read.leaf), protocol.threads(copy.leaf)) is not False:
            continue
        if any(waits_on(protocol, leaf) or synchronises(protocol, leaf) for leaf in path.between):
            continue
        return read
    return None


def copies_and_reads(view) -> list:
    """Kernel rule: a tile an mbarrier-completed copy fills is read only after a wait
    on that barrier, and refilled only after the threads that read it are done (see the module)."""
    protocol = protocol_of(view)
    copies = [e for e in protocol.of("async_write") if initialised(protocol, e.element)]
    if protocol.facts.launch is None or not copies:
        return []
    fill_roots = []
    for copy in copies:
        if not any(protocol.root(copy.buffer).same_as(r) for r in fill_roots):
            fill_roots.append(protocol.root(copy.buffer))
    errors = []
    for read in protocol.of(*READS):
        found = _unguarded_read(protocol, read, fill_roots)
        if found is not None:
            errors.append(_read_error(protocol, read, *found))
    for copy in copies:
        read = _refill_over_read(protocol, copy)
        if read is not None:
            errors.append(_refill_error(protocol, read, copy))
    return errors


def _read_error(protocol, read, copy, barrier) -> TileError:
    name = element_name(protocol, copy.element)
    between = (
        f"no wait on mbarrier {name} between, only a CTA barrier (it orders the threads, not the copy's writes)"
        if barrier else "no wait between"
    )
    return TileError(
        read.what,
        "tile read before the wait on its copy's mbarrier",
        expected=f"a wait on mbarrier {name} (the copy at {where(copy.leaf)} completes on it) before this read, "
        "by this thread or by another one before a barrier",
        found=f"the copy at {where(copy.leaf)}, then this read at {where(read.leaf)} with {between}",
        location=where(read.leaf),
    )


def _refill_error(protocol, read, copy) -> TileError:
    return TileError(
        copy.what,
        "tile refilled while threads may still read it",
        expected=f"a wait on an mbarrier the readers arrive on (or a CTA barrier) between the read at "
        f"{where(read.leaf)} and this copy",
        found=f"the read at {where(read.leaf)} ({len(protocol.threads(read.leaf) or ())} threads), then this copy "
        f"at {where(copy.leaf)} with nothing between",
        location=where(copy.leaf),
    )
