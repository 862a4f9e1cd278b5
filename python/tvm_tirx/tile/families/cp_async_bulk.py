"""``cp.async.bulk`` (non-tensor): asynchronous copies of contiguous runs of bytes, issued by one thread.

PTX ISA
    9.2, 9.7.10.28.4.1 (``cp.async.bulk``), 9.7.10.28.4.3
    (``cp.async.bulk.prefetch``); 9.7.10.26 (``mapa``, for the peer CTA).
Forms
    global -> shared: ``cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes``
    and ``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes``
    (optionally ``.multicast::cluster``, ``.L2::cache_hint``);
    shared -> a peer CTA's shared memory:
    ``cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes``;
    shared -> global: ``cp.async.bulk.global.shared::cta.bulk_group``
    (optionally ``.L2::cache_hint``); ``cp.async.bulk.prefetch.L2.global``.
    Refused with the architecture they need: ``.cp_mask`` (sm_100), the
    explicit ``.weak`` / ``.relaxed.scope`` ``.b128`` forms (the table
    certifies sm_103a; the ptxas of CUDA 13.0 assembles them for no target).
    Not tile forms: ``.ignore_oob``, the ``.mbarrier::report::*`` forms, ``.multicast::cluster::16b/32b`` and
    ``.L2::evict_last`` prefetches (all certified at sm_103a / sm_107f).
Operand roles and atoms
    ``dst``, ``src`` (``prefetch``: ``src`` only): views whose last axis is
    the run, of any element type: shape ``(*repeat, n)``, the run's byte size
    ``n * sizeof(dtype)`` is the copy size (PTX ``size``, derived).  ``dst``
    and ``src`` are ``shared`` / ``shared.dyn`` or ``global`` as the opcode
    names them.  ``mbar=`` (the ``.mbarrier::complete_tx::bytes`` forms): the
    ``uint64`` mbarrier view, shape ``(1,)``, one barrier for the whole call
    (it counts the bytes of every repeat coordinate).  Parameters:
    ``cta_mask`` (``uint16``, ``.multicast::cluster``), ``cache_policy``
    (``uint64``, ``.L2::cache_hint``), ``remote_cta_id`` (the destination
    CTA's rank in the cluster, shared -> shared::cluster).
Legality
    Thread scope: one thread issues each copy (a guard or ``pred=`` elects
    it).  Both runs have the same byte size, a positive multiple of 16, are
    contiguous and 16-byte aligned (not aligned to the size); the barrier is
    8-byte aligned (PTX ISA 9.7.10.28.4.1).  ``.multicast::cluster`` and
    ``remote_cta_id`` need a cluster launch of more than one CTA; a constant
    ``cta_mask`` names only CTAs of the cluster, a constant ``remote_cta_id``
    is a rank inside it.
Lowering emits
    One copy per repeat coordinate, ``size`` the run's bytes; shared and
    global operands as generic addresses (apache-tvm converts the shared
    ones to the ``.shared::cta`` window).  shared -> shared::cluster: the
    barrier is mapped into CTA ``remote_cta_id`` with ``mapa.shared::cluster.u32``
    once before the repeat loops, the destination once per repeat coordinate.
    Completion is the user's: ``mbarrier.arrive.expect_tx`` with the total
    bytes and a wait on the barrier, or ``cp.async.bulk.commit_group`` /
    ``wait_group`` for ``.bulk_group``; nothing is inserted.
Architectures
    sm_90 (``.multicast::cluster`` included: ptxas accepts it for sm_90, the
    PTX ISA calls it optimised for sm_90a); ``.cp_mask``: sm_100; the ``.weak``
    / ``.relaxed`` / ``.b128`` forms: sm_103a, the table's certification
    (measured with ptxas 13.0 (``tools/probe_arch_floors.py``,
    ``arch_floors.json``)).
"""

from __future__ import annotations

from dataclasses import replace

from tvm.runtime import DataType
from tvm.tirx import IntImm

from .. import (
    cert_arch,
    Contract,
    Event,
    Instruction,
    operand_label,
    OperandRole,
    address_target,
    describe,
    element_of,
    int_or_none,
    raw_operands,
    register_family,
    TileError,
)
from ._bulk_groups import bulk_store_read
from ._cluster import ADDRESS_FORMS, PEER_ADDRESS, REMOTE_CTA_ID, cluster_exit, needs_cluster, remote_rule

#: The copy size unit and the alignment of both runs (PTX ISA 9.7.10.28.4.1).
RUN_BYTES = 16
#: PTX operand name -> keyword of the call.
PARAMS = {"cache_policy": "cache_policy", "cta_mask": "cta_mask", "byte_mask": "byte_mask"}
ANY_DTYPE = (
    "uint8", "int8", "uint16", "int16", "float16", "bfloat16",
    "uint32", "int32", "float32", "uint64", "int64", "float64",
)  # fmt: skip
SHARED = ("shared", "shared.dyn")
#: Entries whose forms are not tile forms, with the reason.
NOT_TILE = {
    "cp_async_bulk_g2s_cta_report": ".mbarrier::report::* is not a tile form (the table certifies sm_107f)",
    "cp_async_bulk_g2s_cluster_report": ".mbarrier::report::* is not a tile form (the table certifies sm_107f)",
    "cp_async_bulk_g2s_cluster_multicast16": ".multicast::cluster::16b is not a tile form (the table certifies sm_107f)",
    "cp_async_bulk_g2s_cluster_multicast32": ".multicast::cluster::32b is not a tile form (the table certifies sm_107f)",
    "cp_async_bulk_prefetch_evict_last": ".L2::evict_last is not a tile form (the table certifies sm_107f)",
}


def _bytes(op) -> int:
    return op.shape[-1] * DataType(op.value.dtype).bits // 8


def _check(call):
    """Every run holds the same number of bytes, a positive multiple of 16."""
    contract, operands = call.contract, call.operands
    runs = [(r, o) for r, o in zip(contract.roles, operands) if r.keyword is None and o.kind == "tensor"]
    first = None
    for role, op in runs:
        size = _bytes(op)
        label = operand_label(role.role, op.index)
        if size <= 0 or size % RUN_BYTES:
            return TileError(
                contract.opcode,
                "bulk copy size not a positive multiple of 16 bytes",
                operand=label,
                expected=f"a last axis of a positive multiple of {RUN_BYTES} bytes (PTX ISA 9.7.10.28.4.1)",
                found=f"{op.shape[-1]} x {op.value.dtype} = {size} bytes",
            )
        if first is not None and size != first[0]:
            return TileError(
                contract.opcode,
                "bulk copy runs differ in size",
                operand=label,
                expected=f"{first[0]} bytes like {first[1]}",
                found=f"{size} bytes",
            )
        first = first or (size, label)
    return None


def _run_bytes(call) -> int:
    """The bytes a copy completes on its barrier: the run's, times its repeat count."""
    dst = call.operands[0]
    n = 1
    for extent in dst.shape[:-1]:
        n *= int(extent)
    return n * _bytes(dst)


def _size(call):
    return IntImm("uint32", _bytes(call.operands[0]))


def _run_role(name, op, peer=False):
    scopes = ("global",) if op.space == "global" else SHARED
    return OperandRole(
        name, op, "memory", (None,), ANY_DTYPE, name == "dst", scopes, align=RUN_BYTES,
        address=PEER_ADDRESS if peer else "generic", async_proxy=op.space != "global",
    )  # fmt: skip


def _mbar_role(op, peer=False):
    return OperandRole(
        "mbar", op, "memory", (1,), ("uint64",), True, SHARED, repeat_axes=(), align=8,
        address=PEER_ADDRESS if peer else "generic", keyword="mbar",
    )  # fmt: skip


def _multicast_rule(opcode):
    """``kernel_check`` of ``.multicast::cluster``: a cluster launch; a constant mask names its CTAs."""

    def check(call):
        launch = call.facts.launch
        err = needs_cluster(opcode, launch, ".multicast::cluster")
        if err is not None:
            return err
        mask, size = getattr(call.params.get("cta_mask"), "value", None), launch.cluster_size
        if isinstance(mask, int) and not 0 < mask < (1 << size):
            return TileError(
                opcode,
                "cta_mask names CTAs outside the cluster",
                operand="parameter cta_mask",
                expected=f"a non-zero mask below {1 << size} (bit i: CTA rank i of {size})",
                found=hex(mask),
            )
        return None

    return check


def contract(instr: Instruction) -> Contract | str:
    """The tile contract of a non-tensor ``cp.async.bulk`` form, or the reason it has none."""
    if instr.entry_name in NOT_TILE:
        return NOT_TILE[instr.entry_name]
    if instr.modifiers.get("ignore_oob"):
        return f".ignore_oob is not a tile form (the table certifies {cert_arch(instr.entry_name)})"
    ops = {op.name: op for op in instr.operands}
    peer = instr.entry_name == "cp_async_bulk_s2c"
    roles = [_run_role(role, ops[f"{role}_mem"], peer and role == "dst") for role in ("dst", "src") if f"{role}_mem" in ops]
    if "mbar" in ops:
        roles.append(_mbar_role(ops["mbar"], peer))
    options, check = {}, None
    if peer:
        options, check = {"remote_cta_id": replace(REMOTE_CTA_ID, required=True)}, remote_rule(instr.opcode)
    elif instr.modifiers.get("multicast"):
        check = _multicast_rule(instr.opcode)
    return Contract(
        instruction=instr,
        roles=tuple(roles),
        params={kw: ops[name] for name, kw in PARAMS.items() if name in ops},
        options=options,
        derived={"size": _size},
        check=_check,
        kernel_check=check,
        # bytes a load lands here; a multicast or a copy into a peer completes elsewhere too
        completes_tx=_run_bytes if "mbar" in ops and not peer and not instr.modifiers.get("multicast") else None,
    )


# -- protocol events ---------------------------------------------------------------------------

#: The copies of this family (tile forms and raw ``T.ptx`` calls alike).
COPIES = ("cp_async_bulk_g2s_cta", "cp_async_bulk_g2s_cluster", "cp_async_bulk_s2c", "cp_async_bulk_s2g")
#: The bulk async-group instructions: entry -> event kind.
GROUPS = {"cp_async_bulk_commit_group": "bulk_commit", "cp_async_bulk_wait_group": "bulk_wait"}


def _copy_events(leaf, instr, dst, src, element, size):
    """Events of one copy: ``dst`` / ``src`` are ``(view, coord, extent)`` or None (global)."""
    peer = instr.entry_name == "cp_async_bulk_s2c" or bool(instr.modifiers.get("multicast"))
    out = []
    if src is not None:  # reads shared memory: a store (bulk group) or a copy to a peer
        scope = "bulk_group" if instr.entry_name == "cp_async_bulk_s2g" else ""
        out.append(Event("async_read", leaf, instr.opcode, buffer=src[0], coord=src[1], extent=src[2], scope=scope))
    if dst is not None and instr.entry_name != "cp_async_bulk_s2c":
        detail = f"bulk copy: {describe(dst[0])}" if dst[1] is None else f"bulk copy of {size} bytes"
        out.append(Event("async_write", leaf, instr.opcode, element=element, buffer=dst[0], coord=dst[1], extent=dst[2],
                         detail=detail))  # fmt: skip
    if "mbar" in [op.name for op in instr.operands]:
        out.append(Event("complete_tx", leaf, instr.opcode, element=element, value=None if peer else size,
                         detail=out[-1].detail if out else "", scope="peer" if peer else ""))  # fmt: skip
    if peer:
        out.append(Event("peer", leaf, instr.opcode, detail="writes and signals another CTA"))
    return out


def _tile_copy(leaf, call, protocol):
    roles, ops, instr = call.contract.roles, call.operands, call.contract.instruction
    views = {r.role: op.value for r, op in zip(roles, ops)}
    shared = lambda name: (views[name], None, None) if name in views and views[name].scope() != "global" else None  # noqa: E731
    element = element_of(protocol.facts, views["mbar"]) if "mbar" in views else None
    size = call.contract.completes_tx(call) if call.contract.completes_tx is not None else None
    return _copy_events(leaf, instr, shared("dst"), shared("src"), element, size)


def _raw(leaf, call, protocol):
    raw = raw_operands(call)
    if raw is None:
        return None
    instr, args = raw
    if instr.entry_name in GROUPS:
        kind = GROUPS[instr.entry_name]
        n = int_or_none(args["group"][0]) if "group" in args else None
        return [Event(kind, leaf, instr.opcode, value=n, scope="read" if instr.modifiers.get("read") else "")]
    size = int_or_none(args["size"][0]) if "size" in args else None

    def shared(name):
        op = next((o for o in instr.operands if o.name == name), None)
        if op is None or op.space == "global":
            return None
        target = address_target(args[name][0])
        return None if target is None else (target[0], target[1], size if size is not None else -1)

    bar = address_target(args["mbar"][0]) if "mbar" in args else None
    element = element_of(protocol.facts, *bar) if bar is not None else None
    return _copy_events(leaf, instr, shared("dst_mem"), shared("src_mem"), element, size)


def protocol_events(leaf, call, protocol, derived):  # pylint: disable=unused-argument
    """What a bulk copy or a bulk async-group instruction does (tile or raw
    ``T.ptx`` call); None for other statements."""
    if call is not None:
        entry = call.contract.instruction.entry_name
        return _tile_copy(leaf, call, protocol) if entry in COPIES else ([] if entry == "cp_async_bulk_prefetch" else None)
    name = getattr(leaf.stmt.value.op, "name", "")[len("tirx.ptx.") :]
    if name in COPIES or name in GROUPS or name == "cp_async_bulk_prefetch":
        return _raw(leaf, leaf.stmt.value, protocol) if name != "cp_async_bulk_prefetch" else []
    return None


# The family: its contract and every role it plays (one registry.Family).
register_family(
    entries=(
        "cp_async_bulk_g2s_cta", "cp_async_bulk_g2s_cluster", "cp_async_bulk_s2c", "cp_async_bulk_s2g",
        "cp_async_bulk_prefetch", *NOT_TILE,
    ),
    isa={"cp": "9.7.10.28.4.1 (cp.async.bulk) and 9.7.10.28.4.3 (cp.async.bulk.prefetch)"},
    kernel_rules=(cluster_exit, bulk_store_read),  # cluster_exit: ._cluster's, first as before
    events=protocol_events,
    address_forms=ADDRESS_FORMS,
)(contract)  # fmt: skip
