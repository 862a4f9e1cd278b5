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

from .. import Contract, Instruction, OperandRole, register_family, register_role
from ._cluster import PEER_ADDRESS, REMOTE_CTA_ID, remote_rule

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


@register_family(claims=lambda entry: entry.mnemonic == "mbarrier", isa={"mbarrier": "9.7.15.16"})
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
