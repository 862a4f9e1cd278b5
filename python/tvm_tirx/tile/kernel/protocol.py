"""The protocol events of a kernel: what each statement does to mbarriers, to
shared memory and to the asynchronous proxy, for the kernel rules that pair
statements (:mod:`.kernel_rules`).

A Hopper kernel is asynchronous agents (the TMA unit, the tensor cores, the
threads) that meet at mbarriers, fences and barriers.  The rules that check
how they meet read the kernel as a sequence of :class:`Event`\\ s:

* what the shared code derives from a tile call's contract, naming no
  instruction: a shared-memory operand read or written through the generic
  proxy (``generic_read`` / ``generic_write``) or the async proxy
  (:attr:`~..ir.contract.OperandRole.async_proxy`: ``async_read`` /
  ``async_write``), a plain store or load of shared memory, a CTA or cluster
  barrier (``T.cuda.cta_sync()`` / ``cluster_sync()``);
* what an instruction family says of its own instructions, tile calls and raw
  ``T.ptx[...]`` calls alike, through the readers its
  :class:`~..ir.registry.Family` lists (``register_family(..., events=reader)``,
  :data:`~..ir.hooks.EventReader`; asked in family registration order, the first
  that answers describes the statement): barrier ``init`` / ``arrive`` /
  ``expect_tx`` / ``complete_tx`` / ``wait``, fences (``init_fence``,
  ``proxy_fence``), bulk groups (``bulk_commit`` / ``bulk_wait``), operations
  on a peer CTA (``peer``);
* anything else that is a call is ``opaque``: it may touch what it names,
  and, unless apache-tvm's PTX table says it does not order memory, it may be
  a barrier, so a rule that needs threads synchronised says nothing across it.
  It is never taken for a fence or a bulk wait: those are the instructions
  of the ``fence`` and ``cp_async_bulk`` families.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm_ffi
from tvm import tirx
from tvm.ir import Call, TensorLoad, Var

from ...errors import TileError
from .barrier_rules import BARRIERS
from ..analysis.instances import Executions, evaluate
from .order import Program, element_of, loads_of
from ..ir.ptx_table import opcode_of_call, orders_memory, resolve
from ..ir.registry import families
from .sites import call_key
from ..analysis.threads import conjuncts

__all__ = [
    "KINDS", "Event", "Protocol", "event_readers", "protocol_of", "SHARED", "describe", "raw_operands",
]

#: The kinds of :class:`Event`.
KINDS = (
    "init", "arrive", "expect_tx", "complete_tx", "wait", "init_fence", "proxy_fence",
    "async_read", "async_write", "generic_read", "generic_write", "bulk_commit", "bulk_wait",
    "peer", "barrier", "opaque",
)  # fmt: skip
#: Storage scopes of shared memory.
SHARED = ("shared", "shared.dyn")


@dataclass(frozen=True, eq=False)
class Event:
    """One thing a statement does, as the protocol rules see it.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    leaf : Leaf
        The statement (:class:`~.order.Leaf`: its guards, loops, location).
    what : str
        The instruction or statement, for messages (an opcode, ``"store to tile"``).
    element : tuple | None
        Barrier events: the mbarrier, ``(root, byte offset)`` (:func:`~.order.element_of`).
    buffer : object
        Memory events: the view touched; ``opaque``: a tuple of the buffers it names.
    coord : tuple | None
        Memory events: the element's indices when one element is touched, else None (the whole view).
    extent : int | None
        Memory events with ``coord``: the bytes touched from that element
        (a raw bulk copy's size); None: one element; -1: not known (a raw TMA
        box, whose size is in its tensor map).
    value : object
        ``init``: the count; ``arrive``: the arrivals it makes (None: unknown);
        ``expect_tx`` / ``complete_tx``: bytes (None: unknown); ``wait``: the
        parity expression; ``bulk_wait``: the groups left pending (None: unknown).
    detail : str
        Words for messages (``"64 x 64 float32"``).
    scope : str
        ``barrier``: ``"cta"`` or ``"cluster"``; ``async_read``: ``"bulk_group"``
        when a bulk async-group completes it; ``bulk_wait``: ``"read"`` for ``.read``;
        ``arrive`` / ``expect_tx`` / ``complete_tx``: ``"peer"`` on a peer CTA's
        barrier; ``wait``: ``"blocking"`` for a wait that loops until the phase
        completes; ``opaque``: ``"orders"`` when it may order memory (a barrier, a
        fence: apache-tvm's table says so, or it is not a PTX instruction).
    targets : frozenset | None
        ``complete_tx`` of a multicast: the cluster ranks whose barrier (at the
        same offset) it signals, from a constant ``cta_mask``; None otherwise.
    """

    kind: str
    leaf: object
    what: str
    element: tuple | None = None
    buffer: object = None
    coord: tuple | None = None
    extent: int | None = None
    value: object = None
    detail: str = ""
    scope: str = ""
    targets: frozenset | None = None


def event_readers() -> tuple:
    """Every family's event readers (``Family.events``), in family registration order.

    A reader is ``fn(leaf, call, protocol, derived) -> list[Event] | None``
    (:data:`~..ir.hooks.EventReader`): ``call`` is the tile call's
    :class:`~..ir.call_view.CallView` (None for a raw statement: ``leaf.stmt.value``
    is then the call), ``derived`` the events the shared code read from the
    call's contract (``[]`` for a raw call).  The reader returns the
    statement's events (``derived`` kept, changed or extended), or None when
    the statement is not its family's.

    Raises
    ------
    ValueError
        Two families register one reader (:func:`..ir.registry.families`).
    """
    return tuple(reader for family in families() for reader in family.events)


def describe(buf) -> str:
    """``"64 x 64 float32"``: a view's shape and element type, for messages."""
    return " x ".join(str(int(n)) if hasattr(n, "value") else str(n) for n in buf.shape) + f" {buf.dtype}"


@dataclass
class Protocol:
    """The events of one kernel (:func:`protocol_of` builds it once per kernel).

    Attributes
    ----------
    facts : KernelFacts
        The kernel's facts.
    program : Program
        Its body in program order (:class:`~.order.Program`).
    events : dict
        Leaf index -> the leaf's events.
    executions : Executions
        Enumerates a leaf's executions (:mod:`..analysis.instances`).
    """

    facts: object
    program: object
    events: dict = field(default_factory=dict)
    executions: object = None
    _threads: dict = field(default_factory=dict)

    def of(self, *kinds) -> list:
        """Every event of the given kinds, in program order."""
        return [e for leaf in self.program.leaves for e in self.events[leaf.index] if e.kind in kinds]

    def at(self, leaf, *kinds) -> list:
        """The events of ``leaf`` (of the given kinds, or all)."""
        return [e for e in self.events[leaf.index] if not kinds or e.kind in kinds]

    def root(self, buf):
        """The allocation or parameter ``buf`` views (``buf`` itself when unknown)."""
        root = self.facts.root_of(buf)
        return buf if root is None else root

    def names(self, leaf, root) -> bool:
        """Whether ``leaf`` may access ``root``: one of its events touches it, or it is
        opaque and names it."""
        for e in self.events[leaf.index]:
            if e.element is not None and e.element[0].same_as(root):
                return True
            if e.kind == "opaque" and any(self.root(b).same_as(root) for b in e.buffer):
                return True
            if e.kind != "opaque" and e.buffer is not None and self.root(e.buffer).same_as(root):
                return True
        return False

    def threads(self, leaf):
        """``frozenset`` of ``(t, c)`` that may reach ``leaf``: its guards over thread
        ids evaluated thread by thread, those over CTA-wide values (CTA ids, scalar
        parameters, counters of loops whose bounds are such values) taken as held,
        ``while`` conditions ignored; None when a guard is neither."""
        key = leaf.index
        if key not in self._threads:
            self._threads[key] = self._reach(leaf)
        return self._threads[key]

    def _reach(self, leaf):
        facts = self.facts
        if facts.launch is None:
            return None
        whiles = [loop.cond for loop in leaf.loops if loop.var is None]
        parts = []
        for guard in leaf.guards:
            if any(guard.same_as(w) for w in whiles):
                continue
            for part in conjuncts(facts.expand_scalars(guard)):
                kind = self._guard_kind(part)
                if kind is None:
                    return None
                if kind == "threads":
                    parts.append(part)
        out = []
        for t, c in facts.all_threads():
            env = {hash(v): int(x) for v, x in {**facts.launch.thread_values(t), **facts.launch.cluster_values(c)}.items()}
            held = [evaluate(p, env) for p in parts]
            if None in held:
                return None
            if all(held):
                out.append((t, c))
        return frozenset(out)

    def _guard_kind(self, part, depth=0):
        """``"threads"`` (over thread ids and constants), ``"cta"`` (one value over a
        CTA) or None (anything else: a load, a per-thread loop counter)."""
        loads, found = [], []
        tvm_ffi.structural_walk(part, ((TensorLoad, Call), loads.append))
        tvm_ffi.structural_walk(part, (Var, found.append))
        if loads or depth > 8:
            return None  # a load, or a call such as elect_sync(): one value per thread
        ids = {hash(v) for v in self.facts.per_thread_vars()}
        if found and all(hash(v) in ids for v in found):
            return "threads"
        bounds = {hash(var): (lo, n) for var, lo, n, _ in self.facts.loops}
        for v in found:
            if hash(v) in ids:
                return None
            if hash(v) in bounds and any(self._guard_kind(self.facts.expand_scalars(b), depth + 1) != "cta"
                                         for b in bounds[hash(v)] if not isinstance(b, tirx.IntImm)):
                return None
        return "cta"


def _reads(protocol, leaf) -> list:
    """``generic_read`` events of the shared-memory loads ``leaf`` reads as values."""
    out = []
    for load in loads_of(leaf.stmt):
        if load.source.scope() in SHARED:
            out.append(Event("generic_read", leaf, f"load of {load.source.name}", buffer=load.source, coord=tuple(load.indices)))
    return out


def _tile_events(protocol, leaf, call) -> list:
    """Events a tile call's contract implies: its shared-memory operands read or
    written, through the async proxy or the generic one."""
    out = []
    for role, op in zip(call.contract.roles, call.operands):
        if role.kind not in ("memory", "descriptor") or op.kind != "tensor" or op.value.scope() not in SHARED:
            continue
        proxy = "async" if role.async_proxy else "generic"
        kind = f"{proxy}_{'write' if role.writes else 'read'}"
        out.append(Event(kind, leaf, call.opcode, buffer=op.value, detail=describe(op.value)))
    return out


def _classify(protocol, leaf, calls, readers) -> list:
    stmt = leaf.stmt
    if isinstance(stmt, tirx.BufferStore):
        out = _reads(protocol, leaf)
        if stmt.buffer.scope() in SHARED:
            out.append(Event("generic_write", leaf, f"store to {stmt.buffer.name}", buffer=stmt.buffer,
                             coord=tuple(stmt.indices)))  # fmt: skip
        return out
    op = getattr(stmt.value.op, "name", "")
    if op in BARRIERS:
        return [Event("barrier", leaf, BARRIERS[op][0], scope=BARRIERS[op][1])]
    call = calls.get(call_key(stmt))
    if call is not None and call.raw:  # a raw call a family checks: read as written
        call = None
    derived = _tile_events(protocol, leaf, call) if call is not None else []
    for reader in readers:
        got = reader(leaf, call, protocol, derived)
        if got is not None:
            return list(got) + (_reads(protocol, leaf) if call is None else [])
    if call is not None:
        return derived
    what = opcode_of_call(stmt.value) or op
    scope = "" if orders_memory(stmt.value) is False else "orders"
    return [Event("opaque", leaf, what, buffer=tuple(protocol.facts.calls.targets(stmt)), scope=scope)] + _reads(protocol, leaf)


def protocol_of(view) -> Protocol:
    """The :class:`Protocol` of the kernel a :class:`~.kernel_rules.KernelView` shows
    (built on first use, then shared by every rule of the kernel)."""
    cache = view.facts.family_values
    if "protocol" not in cache:
        protocol = Protocol(view.facts, Program(view.body), executions=Executions(view.facts))
        readers = event_readers()
        for leaf in protocol.program.leaves:
            protocol.events[leaf.index] = _classify(protocol, leaf, view.calls, readers)
        cache["protocol"] = protocol
    return cache["protocol"]


def raw_operands(call):
    """``(Instruction, {operand name: [args]})`` of a raw ``T.ptx[...]`` Call (its
    arguments in PTX operand order, one per register of each operand), or None
    for a Call that is not one."""
    opcode = opcode_of_call(call)
    if opcode is None:
        return None
    entry = call.op.name[len("tirx.ptx.") :]
    try:
        forms = [f for f in resolve(opcode) if f.entry_name == entry]
    except TileError:
        return None
    if not forms:
        return None
    args, out, i = list(call.args), {}, 0
    for op in forms[0].operands:
        out[op.name] = args[i : i + op.lanes]
        i += op.lanes
    return forms[0], out
