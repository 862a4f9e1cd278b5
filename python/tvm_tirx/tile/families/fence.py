"""``fence.proxy`` / ``fence.mbarrier_init``: order memory between proxies, and an mbarrier's init before its use.

``T.cuda.tile.apply(T.ptx["fence.proxy.async.shared::cta"])`` is the same
instruction as the raw ``T.ptx["fence.proxy.async.shared::cta"]()``; both
are what the kernel rule of this module looks for.

PTX ISA
    9.7.13.4 (``membar`` / ``fence``: ``fence.proxy.<kind>``,
    ``fence.mbarrier_init``), 8.6 ("Proxies": the generic proxy of
    ``ld`` / ``st`` and the async proxy of TMA, bulk copies and ``wgmma``).
Forms
    ``fence.proxy.async{.global, .shared::cta, .shared::cluster}``,
    ``fence.proxy.alias`` and ``fence.mbarrier_init.release.cluster``.  The
    other fences (``fence.sc`` / ``fence.acq_rel``, the tensormap proxy
    fences) are not claimed.
Operand roles and atoms
    None: a fence takes no operand.
Legality
    Thread scope: each thread that runs the call fences its own accesses
    (guard it or not, as the protocol needs).  Kernel rule
    (:func:`proxy_fenced`): shared memory that the generic proxy wrote
    (``st.shared``, ``stmatrix``, a plain store) and that the async proxy then
    reads (a TMA store, a bulk copy, a ``wgmma`` operand) needs a
    ``fence.proxy.async`` (all state spaces, or ``.shared::cta`` /
    ``.shared::cluster``) after the write and, when other threads wrote it, a
    barrier after the fence; without them the async proxy may read stale data
    (PTX ISA 8.6).
Lowering emits
    The fence, once per thread that runs the call.
Architectures
    Measured with ptxas (``tools/probe_arch_floors.py fence``, recorded in
    ``arch_floors.json``): ``fence.proxy.async`` and ``fence.mbarrier_init``
    from sm_90, ``fence.proxy.alias`` from sm_75 (ptxas 13.0's oldest target;
    the PTX ISA gives sm_70).
"""

from __future__ import annotations

from .. import Contract, Event, Instruction, TileError, protocol_of, raw_operands
from .. import RawSpelling, overlaps, register_family
from ._sync import region, subset, synchronises, touches_root, varies, where

__all__ = ["contract", "proxy_fenced", "SHARED_FENCES"]

ENTRIES = ("fence_proxy", "fence_mbarrier_init")
#: ``.space`` of the ``fence.proxy.async`` forms that order shared memory ("": every space).
SHARED_FENCES = ("", "shared::cta", "shared::cluster")


def contract(instr: Instruction) -> Contract:
    """The tile contract of a fence form (every claimed form is one: no operands)."""
    return Contract(instruction=instr, roles=())


def _kind(instr) -> str | None:
    """The protocol event a fence form is (``proxy_fence``, ``init_fence``), or None."""
    mods = instr.modifiers
    if instr.entry_name == "fence_mbarrier_init":
        return "init_fence"
    if mods.get("proxykind") == "async" and mods.get("space", "") in SHARED_FENCES:
        return "proxy_fence"
    return None


def protocol_events(leaf, call, protocol, derived):  # pylint: disable=unused-argument
    """What a fence (tile or raw ``T.ptx`` call) orders; None for other statements."""
    if call is not None:
        instr = call.contract.instruction
    else:
        name = getattr(leaf.stmt.value.op, "name", "")
        raw = raw_operands(leaf.stmt.value) if name[len("tirx.ptx.") :] in ENTRIES else None
        if raw is None:
            return None
        instr = raw[0]
    if instr.entry_name not in ENTRIES:
        return None
    kind = _kind(instr)
    return [Event(kind, leaf, instr.opcode)] if kind else []


# -- the kernel rule --------------------------------------------------------------------------------


def _last_generic_write(protocol, read):
    """``(path, write)``: going back from an async read, the first statement that
    writes the same memory, when that is a generic-proxy write."""
    root = protocol.root(read.buffer)

    def writes(leaf):
        if protocol.at(leaf, "opaque") and protocol.names(leaf, root):
            return True
        return any(touches_root(protocol, e, root) for e in protocol.at(leaf, "generic_write", "async_write"))

    for path in protocol.program.backward(read.leaf, writes):
        if path.stop is None or protocol.at(path.stop, "async_write", "opaque"):
            continue
        write = next((e for e in protocol.at(path.stop, "generic_write") if touches_root(protocol, e, root)), None)
        if write is None:
            continue
        if varies(protocol, write, path.wrapped) or varies(protocol, read, path.wrapped):
            continue
        if overlaps(protocol.facts, region(protocol, write), region(protocol, read)):
            yield path, write


def proxy_fenced(view) -> list:
    """Kernel rule: shared memory written through the generic proxy and then read by
    the async proxy has a ``fence.proxy.async`` (and, when other threads wrote it, a
    barrier after it) in between (see the module)."""
    protocol = protocol_of(view)
    if protocol.facts.launch is None or not protocol.of("async_read"):
        return []
    errors = []
    for read in protocol.of("async_read"):
        for path, write in _last_generic_write(protocol, read):
            between = path.between[::-1]  # program order: write ... read
            fences = [i for i, leaf in enumerate(between) if protocol.at(leaf, "proxy_fence")]
            if not fences:
                errors.append(_error(read, write, "no fence.proxy.async between them"))
                break
            others = subset(protocol.threads(write.leaf), protocol.threads(read.leaf)) is False
            if others and not any(synchronises(protocol, leaf) for leaf in between[fences[0] :]):
                errors.append(_error(read, write, "a fence but no barrier after it, and other threads wrote it"))
                break
    return errors


def _error(read, write, found) -> TileError:
    return TileError(
        read.what,
        "generic-proxy write not fenced before an async-proxy read",
        expected=f"fence.proxy.async.shared::cta after the write at {where(write.leaf)} (by the writing threads), "
        "then a barrier, before this read",
        found=f"{write.what} at {where(write.leaf)}, then this read at {where(read.leaf)}: {found}",
        location=where(read.leaf),
    )


# The family: its contract and every role it plays (one registry.Family).
register_family(
    entries=ENTRIES,
    isa={"fence": "9.7.13.4"},
    kernel_rules=(proxy_fenced,),
    events=protocol_events,
    # a raw fence (T.ptx["fence.proxy.async.shared::cta"]()) is checked as its tile form
    # (the target-arch rule); the protocol rules read it either way
    raw=RawSpelling(ENTRIES),
)(contract)
