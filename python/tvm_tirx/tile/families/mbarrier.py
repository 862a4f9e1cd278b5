"""``mbarrier``: initialise, arrive on, expect transactions on, and test the phase of shared-memory barriers.

PTX ISA
    9.2, 9.7.15.16 (``mbarrier``: ``init``, ``inval``, ``expect_tx``,
    ``complete_tx``, ``arrive``, ``arrive_drop``, ``test_wait`` /
    ``try_wait``); 9.7.10.26 (``mapa``, for a peer CTA's barrier).
Forms
    ``mbarrier.init{.shared{::cta}}.b64`` (``count=``), ``mbarrier.inval``;
    ``mbarrier.{arrive,arrive_drop}{.sem.scope}{.space}.b64`` with the ``_``
    state sink, with or without ``count=``; ``mbarrier.{arrive,arrive_drop}
    .expect_tx`` and ``mbarrier.{expect_tx,complete_tx}`` (``tx=`` bytes);
    ``mbarrier.{try_wait,test_wait}.parity{.sem.scope}{.shared{::cta}}.b64``
    (``phase=``, ``try_wait`` also ``time_hint=``).  ``.space`` is ``.shared``
    / ``.shared::cta`` (this CTA's barrier) or, for arrive/expect_tx/
    complete_tx, ``.shared::cluster`` (a barrier of the cluster; with
    ``remote_cta_id=`` the peer CTA's copy of the view).  Not tile forms:
    generic addressing (no ``.space``), the forms returning the barrier state
    or waiting on a state, ``.noComplete``, the ``report`` / ``pending_count``
    / ``check_layout`` forms, ``.multicast::cluster::32b`` (sm_107f), and the
    PTX 9.2 qualifiers ``.phase_type::*`` and ``.layout::*``, which the ptxas
    of CUDA 13.0 does not assemble for any target.
Operand roles and atoms
    ``bar``: a ``uint64`` view in shared memory (``shared`` / ``shared.dyn``),
    shape ``(*repeat, 1)``: one barrier per repeat coordinate, so
    ``bars`` of shape ``(stages, 1)`` sets up every stage in one call.
    The waits first take ``done``: a ``uint32`` register tensor of the same
    repeat shape, ``(*repeat, 1)``, set to 1 when the phase of parity
    ``phase`` has completed, else 0.  Parameters (``uint32`` expressions):
    ``count`` (arrivals: ``init``'s expected count, or an ``arrive``'s count),
    ``tx`` (transaction bytes), ``phase`` (parity, 0 or 1), ``time_hint``
    (nanoseconds); ``remote_cta_id`` for ``.shared::cluster`` forms.
Legality
    Thread scope: one thread issues each instruction; the caller elects it
    with a guard (``if tid == 0:``) or ``pred=``.  Each barrier is 8-byte
    aligned (PTX ISA 9.7.15.16.1: an mbarrier object is an opaque 64-bit
    object, aligned to 8 bytes), inside its tensor.  ``remote_cta_id`` needs a
    cluster launch of more than one CTA and, when constant, a rank inside it.
Lowering emits
    One instruction per repeat coordinate, with the barrier's generic
    address (apache-tvm converts it to the ``.shared::cta`` window).  With
    ``remote_cta_id``: per repeat coordinate a ``mapa.shared::cluster.u32``
    of the barrier's ``.shared::cta`` address into a scratch register, then
    the instruction on that address.  No fence is inserted: after ``init``
    the user writes ``T.ptx["fence.mbarrier_init.release.cluster"]()`` and a
    barrier.  ``T.cuda.mbarrier_wait_phase(bar, phase)`` is the spin-wait.
Architectures
    sm_90; sm_80 for ``init``, ``inval``, ``test_wait.parity`` without a
    ``.cluster`` scope and ``arrive`` / ``arrive_drop`` without a count on the
    CTA's own barrier (``.release.cta`` included); ``expect_tx``,
    ``complete_tx``, ``try_wait``, a count, ``.shared::cluster`` and the
    ``.cluster`` scope need sm_90 (measured with ptxas 13.0
    (``tools/probe_arch_floors.py``, ``arch_floors.json``)).
"""

from __future__ import annotations

from .. import (
    Contract,
    Event,
    Instruction,
    OperandRole,
    address_target,
    element_of,
    int_or_none,
    raw_operands,
    register_family,
    register_role,
)
from ._cluster import ADDRESS_FORMS, PEER_ADDRESS, REMOTE_CTA_ID, remote_rule
from ._mbarrier_hangs import detect_hangs
from ._mbarrier_order import copies_and_reads, init_visible
from ._mbarrier_phases import arrivals_and_parity
from ._mbarrier_tx import expect_tx_bytes

#: PTX operand name -> keyword of the call.
KEYWORDS = {"count": "count", "tx_count": "tx", "phase": "phase", "time_hint": "time_hint"}
#: Spaces of this CTA's barrier.
LOCAL_SPACES = ("shared", "shared::cta")
#: Entries that are not tile forms, with the reason the user sees.
NOT_TILE = {
    "state": "the form returning the barrier state: the tile form discards it (the `_` sink form)",
    "state_wait": "waits on a state: use the .parity form with phase=",
    "no_complete": ".noComplete is not a tile form",
    "report": "report forms are not tile forms",
    "multicast32": ".multicast::cluster::32b needs sm_107f (the table's certification); not a tile form",
    "other": "not a tile form of mbarrier",
}
#: Qualifiers of PTX ISA 9.2 that the ptxas of CUDA 13.0 rejects on every target.
UNASSEMBLED = ("phase_type::", "layout::")


def _excluded(instr: Instruction) -> str | None:
    """Why the form is not a tile form, or None."""
    name, mods = instr.entry_name, instr.modifiers
    kinds = (
        ("multicast32", "multicast32" in name),
        ("report", "report" in name or name in ("mbarrier_pending_count", "mbarrier_check_layout")),
        ("no_complete", "no_complete" in name),
        ("state", name.endswith("_state")),
        ("state_wait", name in ("mbarrier_test_wait", "mbarrier_try_wait", "mbarrier_try_wait_hint")),
    )
    for kind, hit in kinds:
        if hit:
            return NOT_TILE[kind]
    token = next((t for t in mods.values() if t and t.startswith(UNASSEMBLED)), None)
    if token:
        return f".{token} (PTX ISA 9.2) is not assembled by the ptxas of CUDA 13.0 for any target"
    if not mods.get("space"):
        return "generic addressing: name the state space (.shared::cta, or .shared::cluster for arrive / expect_tx)"
    return None


def _bar_role(addr, writes: bool) -> OperandRole:
    peer = addr.space not in LOCAL_SPACES
    return OperandRole(
        "bar",
        addr,
        "memory",
        (1,),
        ("uint64",),
        writes,
        ("shared", "shared.dyn"),
        align=8,
        address=PEER_ADDRESS if peer else "generic",
    )


def contract(instr: Instruction) -> Contract | str:
    """The tile contract of an mbarrier form, or the reason it has none."""
    reason = _excluded(instr)
    if reason:
        return reason
    roles, params = [], {}
    waits = instr.modifiers.get("action") in ("try_wait", "test_wait")
    for op in instr.operands:
        if op.kind == "addr":
            roles.append(_bar_role(op, writes=not waits))
        elif op.name == "wait_complete":
            roles.append(register_role("done", op, dtypes=("uint32",)))
        elif op.name in KEYWORDS:
            params[KEYWORDS[op.name]] = op
        else:
            return NOT_TILE["other"]
    peer = any(r.address == PEER_ADDRESS for r in roles)
    return Contract(
        instruction=instr,
        roles=tuple(roles),
        params=params,
        options={"remote_cta_id": REMOTE_CTA_ID} if peer else {},
        kernel_check=remote_rule(instr.opcode) if peer else None,
    )


# -- protocol events (read by the kernel rules of _mbarrier_*.py) --------------------------------

#: apache-tvm's spin-wait intrinsics (``T.cuda.mbarrier_wait_phase``): op name -> how it is written.
WAIT_LOOPS = {
    "tirx.cuda.mbarrier_wait": "T.cuda.mbarrier_wait_phase",
    "tirx.cuda.mbarrier_wait_acquire_cluster": 'T.cuda.mbarrier_wait_phase(scope="cluster")',
}


def _event(kind, leaf, instr, element, value, peer=False, blocking=False):
    scope = "peer" if peer else ("blocking" if blocking else "")
    return Event(kind, leaf, instr.opcode if instr is not None else "", element=element, value=value, scope=scope)


def _barrier_events(leaf, instr, element, values, peer):
    """The events of one mbarrier instruction on one barrier ``element``:
    ``values`` maps the PTX operand names to their (first) argument."""
    action = instr.modifiers.get("action")
    in_loop = any(loop.var is None for loop in leaf.loops)
    count = values.get("count")
    if action == "init":
        return [_event("init", leaf, instr, element, count)]
    if action in ("try_wait", "test_wait"):
        return [_event("wait", leaf, instr, element, values.get("phase"), blocking=in_loop)]
    out = []
    if action == "arrive":
        out.append(_event("arrive", leaf, instr, element, 1 if count is None else int_or_none(count), peer))
    elif action == "arrive_drop":
        out.append(_event("arrive", leaf, instr, element, None, peer))  # changes the count: not followed
    if instr.modifiers.get("expect_tx") or action == "expect_tx":
        out.append(_event("expect_tx", leaf, instr, element, int_or_none(values.get("tx_count")), peer))
    if action == "complete_tx":
        out.append(_event("complete_tx", leaf, instr, element, int_or_none(values.get("tx_count")), peer))
    return out or [Event("opaque", leaf, instr.opcode, buffer=(element[0],) if element else ())]


def _tile_events(leaf, call, protocol):
    instr = call.contract.instruction
    index = next(i for i, r in enumerate(call.contract.roles) if r.role == "bar")
    bar = call.operands[index].value
    values = {op.name: call.params[kw] for op, kw in ((o, KEYWORDS.get(o.name)) for o in instr.operands) if kw in call.params}
    peer = "remote_cta_id" in call.params
    shape = [int_or_none(n) for n in bar.shape[:-1]]
    if None in shape:
        return [Event("opaque", leaf, instr.opcode, buffer=(bar,))]
    out = []
    for flat in range(max(1, _prod(shape))):
        coord, rest = [], flat
        for n in reversed(shape):
            coord.insert(0, rest % n)
            rest //= n
        out += _barrier_events(leaf, instr, element_of(protocol.facts, bar, (*coord, 0)), values, peer)
    return out


def _prod(shape):
    out = 1
    for n in shape:
        out *= n
    return out


def protocol_events(leaf, call, protocol, derived):  # pylint: disable=unused-argument
    """What an mbarrier instruction (tile or raw ``T.ptx`` call) or a
    ``T.cuda.mbarrier_wait_phase`` loop does to its barrier; None for other statements."""
    if call is not None:
        return _tile_events(leaf, call, protocol) if call.contract.instruction.mnemonic == "mbarrier" else None
    value = leaf.stmt.value
    name = getattr(value.op, "name", "")
    if name in WAIT_LOOPS:
        target = address_target(value.args[0])
        element = element_of(protocol.facts, target[0], target[1]) if target else None
        return [Event("wait", leaf, WAIT_LOOPS[name], element=element, value=value.args[1], scope="blocking")]
    if not name.startswith("tirx.ptx.mbarrier"):
        return None
    raw = raw_operands(value)
    if raw is None:
        return None
    instr, args = raw
    target = address_target(args["addr"][0]) if "addr" in args else None
    element = element_of(protocol.facts, target[0], target[1]) if target else None
    # a .shared::cluster address the kernel computed (mapa) names a barrier of any CTA
    return _barrier_events(leaf, instr, element, {k: v[0] for k, v in args.items() if v}, element is None)


# The family: its contract and every role it plays (one registry.Family).
register_family(
    claims=lambda entry: entry.mnemonic == "mbarrier",
    isa={"mbarrier": "9.7.15.16"},
    kernel_rules=(expect_tx_bytes, arrivals_and_parity, init_visible, copies_and_reads),
    events=protocol_events,
    address_forms=ADDRESS_FORMS,
    instrument=detect_hangs,
)(contract)
