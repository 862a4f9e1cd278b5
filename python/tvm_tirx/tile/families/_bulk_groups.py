"""Kernel rule of the ``cp_async_bulk`` family: shared memory a bulk store reads is
not rewritten before the store has read it.

PTX ISA 9.2, 9.7.9.25.5.1 / 9.7.10.28.4.1 (a ``.bulk_group`` TMA or bulk
store reads its shared source asynchronously) and the bulk async-group
instructions beside them: ``cp.async.bulk.commit_group`` closes the thread's
pending bulk operations into a group; ``cp.async.bulk.wait_group{.read} N``
waits until at most the ``N`` most recent groups are pending (``.read``:
until their reads of the source are done).  A store's group is done once a
wait leaves fewer groups pending than were committed since it, counting its
own; only then may the tile be written again -- by another thread, after a
barrier too.

Checked on every path from the store to the next write of memory it reads
(:class:`tvm_tirx.tile.Path`); a write whose address changes with a loop the
path wrapped (a ring of tiles) may be a different tile: that path is not
checked.  The wait is the ``cp.async.bulk.wait_group{.read}`` instruction
(tile or ``T.ptx`` call); inline assembly is not seen as one.
"""

from __future__ import annotations

from .. import TileError, overlaps, protocol_of
from ._sync import region, subset, synchronises, touches_root, varies, where

__all__ = ["bulk_store_read"]


def _writes(protocol, root):
    def stop(leaf):
        if protocol.at(leaf, "opaque") and protocol.names(leaf, root):
            return True
        return any(touches_root(protocol, e, root) for e in protocol.at(leaf, "generic_write", "async_write"))

    return stop


def _read_done(protocol, between):
    """Index in ``between`` after which the store's group has been read (a covering
    ``wait_group``), or None."""
    commits = 0
    for i, leaf in enumerate(between):
        for event in protocol.at(leaf, "bulk_commit", "bulk_wait"):
            if event.kind == "bulk_commit":
                commits += 1
            elif event.value is not None and commits >= event.value + 1:
                return i
    return None


def _check(protocol, store):
    root = protocol.root(store.buffer)
    for path in protocol.program.forward(store.leaf, _writes(protocol, root)):
        if path.stop is None or protocol.at(path.stop, "opaque"):
            continue
        write = next(e for e in protocol.at(path.stop, "generic_write", "async_write") if touches_root(protocol, e, root))
        if varies(protocol, write, path.wrapped) or varies(protocol, store, path.wrapped):
            continue
        if not overlaps(protocol.facts, region(protocol, write), region(protocol, store)):
            continue
        done = _read_done(protocol, path.between)
        if done is None:
            return _error(store, write, "no cp.async.bulk.wait_group.read that covers the store's group between them")
        others = subset(protocol.threads(write.leaf), protocol.threads(store.leaf)) is False
        if others and not any(synchronises(protocol, leaf) for leaf in path.between[done:]):
            return _error(store, write, "other threads write it with no barrier after the wait")
    return None


def _error(store, write, found) -> TileError:
    return TileError(
        write.what,
        "shared memory rewritten before the bulk store has read it",
        expected=f"cp.async.bulk.commit_group and cp.async.bulk.wait_group.read 0 (by the storing thread) after "
        f"the store at {where(store.leaf)}, then a barrier, before this write",
        found=f"the store at {where(store.leaf)}, then this write at {where(write.leaf)}: {found}",
        location=where(write.leaf),
    )


def bulk_store_read(view) -> list:
    """Kernel rule: a tile a bulk (TMA) store reads is written again only after a
    ``cp.async.bulk.wait_group{.read}`` covering the store (see the module)."""
    protocol = protocol_of(view)
    stores = [e for e in protocol.of("async_read") if e.scope == "bulk_group"]
    if protocol.facts.launch is None or not stores:
        return []
    errors = []
    for store in stores:
        err = _check(protocol, store)
        if err is not None:
            errors.append(err)
    return errors
