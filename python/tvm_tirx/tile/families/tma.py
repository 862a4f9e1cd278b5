"""``cp.async.bulk.tensor`` / ``cp.reduce.async.bulk.tensor``: TMA box copies
between a global tensor and a shared image.

PTX ISA
    9.7.9.25.5.1 (``cp.async.bulk.tensor``), 9.7.9.25.5.2
    (``cp.reduce.async.bulk.tensor``), 5.5 (tensors, bounding box, tiled mode,
    swizzling modes); CUDA Driver API ``cuTensorMapEncodeTiled`` (the
    tensor-map rules).
Forms
    Tiled loads ``cp.async.bulk.tensor.{1..5}d.shared::cluster.global[.tile]
    .mbarrier::complete_tx::bytes[.multicast::cluster][.L2::cache_hint]`` (and
    the ``.shared::cta`` destination), stores ``cp.async.bulk.tensor.Nd.global
    .shared::cta[.tile].bulk_group[.L2::cache_hint]`` and reductions
    ``cp.reduce.async.bulk.tensor.Nd.global.shared::cta.<op>[.tile].bulk_group``
    with ``<op>`` one of add, min, max, inc, dec, and, or, xor.  Not tile
    forms: ``.tile::gather4`` / ``.tile::scatter4`` (four rows, not a box),
    the ``im2col`` modes, ``.multicast::cluster::16b/32b``.
Operand roles and atoms
    Load: ``dst`` shared image, ``src`` global tensor, and by keyword
    ``mbar=`` a ``uint64`` shared view of shape ``(1,)``.  Store and
    reduce: ``dst`` global tensor, ``src`` shared image.  The shared operand is
    ``(*repeat, *box)``: its last N axes (N from ``.Nd``) are the box, in the
    tensor's axis order; each repeat coordinate issues one instruction.  The
    global operand is a kernel tensor parameter or a strided view of one with
    N axes -- its tensor map is encoded on the host, once per distinct
    encoding -- or a caller-encoded map, ``T.address_of(map)`` (the caller
    then owns every field of the map).  Parameters: ``coords`` (required; one
    int32 per tensor axis, outermost first, the box's first element),
    ``coord_steps`` (one tuple of N per repeat axis: added to ``coords`` per
    unit of that axis; required with repeat axes), ``box`` (optional; must
    equal the shared operand's last N extents), ``swizzle`` (0 none, 1 32B,
    2 64B, 3 128B; default 0), ``l2_promotion`` (0..3, the map's L2 promotion
    of none/64B/128B/256B; default 0), ``cta_mask`` (``uint16``, with
    ``.multicast::cluster``), ``cache_policy`` (``uint64``, with
    ``.L2::cache_hint``).
Legality
    The shared operand's layout equals the image the TMA writes: row-major
    for no swizzle, else :func:`swizzled_layout` (the 16-byte chunk ``c`` of
    each 128-byte row ``r`` stored at ``c ^ (r % 8)``, over ``2 ** swizzle``
    chunks); each image starts 128-byte aligned, and at a multiple of the
    swizzle's repeat (256, 512, 1024 bytes) when swizzled, so its layout is
    the same relative to its first byte.  Element types equal on both sides,
    one the TMA unit moves.  From ``cuTensorMapEncodeTiled``: the innermost
    tensor axis is contiguous, the other strides are multiples of 16 bytes
    (below ``2**40``), the map's base is 16-byte aligned, every box extent is
    1..256, the inner box row is a multiple of 16 bytes and, when swizzled,
    at most the swizzle span (32/64/128 bytes).  A box may hang over the
    tensor's edge: the TMA fills out-of-range elements with zeros on a load
    and skips them on a store, so the global operand has no bounds rule.
    Reductions take the element types PTX ISA 9.7.9.25.5.2 lists per
    operation (:data:`REDUCE_DTYPES`; 9.7.9.27.1.3 in PTX ISA 9.1).  ``mbar`` is
    8-byte aligned and within its tensor.  The rules are in :mod:`._tma_rules`,
    the host encoding of the maps in :mod:`._tma_host`.
Lowering emits
    One instruction per repeat coordinate (the issuing thread: guard the call
    or pass ``pred=``), its coordinates ``coords + sum(r_k * coord_steps[k])``
    innermost first; for a host-encoded map, ``T.tvm_stack_alloca`` and
    ``T.tensormap_encode_tiled`` before the kernel's device entry (the kernel
    receives the map as a ``__grid_constant__ CUtensorMap``).  Completion is
    the user's: ``mbarrier.arrive.expect_tx`` and a wait for loads; a
    ``fence.proxy.async.shared::cta`` before a store of values written by
    threads, then ``cp.async.bulk.commit_group`` / ``wait_group``.
Architectures
    sm_90 (loads, stores, reductions; ``.multicast::cluster`` included).
    ``.cta_group::1/::2`` (PTX ISA 9.7.9.25.5.1: "requires sm_100a"): ptxas
    accepts them for sm_100f/a, sm_103f/a and sm_110f/a only, not for plain or
    sm_120 targets (measured with ptxas 13.0 (``tools/probe_arch_floors.py``,
    ``arch_floors.json``)).
"""

from __future__ import annotations

from tvm.tirx import IntImm

from .. import (
    Contract,
    Event,
    Instruction,
    OperandRole,
    Param,
    address_target,
    describe,
    element_of,
    int_or_none,
    raw_operands,
    register_family,
    replace,
)
from ._tma_host import KINDS, host_setup
from ._tma_rules import (
    DESCRIPTOR_DTYPE,
    IMAGE_ALIGN,
    REDUCE_DTYPES,
    RULES,
    SWIZZLE_BYTES,
    TmaCall,
    constant_ints,
    element_bytes,
    image_period,
    swizzled_layout,
)

__all__ = ["swizzled_layout", "SWIZZLE_BYTES", "REDUCE_DTYPES", "contract"]

ENTRIES = (
    "cp_async_bulk_tensor_g2s_cluster",
    "cp_async_bulk_tensor_g2s_cta",
    "cp_async_bulk_tensor_s2g",
    "cp_reduce_async_bulk_tensor",
    "cp_async_bulk_tensor_g2s_cluster_multicast16",
    "cp_async_bulk_tensor_g2s_cluster_multicast32",
    "cp_async_bulk_tensor_g2s_cta_im2col",
    "cp_async_bulk_tensor_g2s_cluster_im2col",
    "cp_async_bulk_tensor_s2g_im2col_no_offs_w",
    "cp_reduce_async_bulk_tensor_im2col_no_offs_w",
)


# -- parameters ------------------------------------------------------------------------------


def _check_swizzle(value):
    v = int_or_none(value)
    return None if v in SWIZZLE_BYTES else f"{value} (one of 0, 1, 2, 3)"


def _check_l2(value):
    v = int_or_none(value)
    return None if v in (0, 1, 2, 3) else f"{value} (one of 0, 1, 2, 3)"


def _check_coords(value):
    if not isinstance(value, tuple | list) or not value:
        return f"{value!r} (a tuple of int32 expressions)"
    for v in value:
        if not (isinstance(v, int) or getattr(getattr(v, "ty", None), "dtype", None) == "int32"):
            return f"element {v!r} (int32 expressions or ints)"
    return None


def _check_int_tuple(value):
    if isinstance(value, tuple | list) and all(constant_ints(row) is not None for row in value):
        return None
    return f"{value!r} (a tuple of constant int tuples)"


def _check_box(value):
    return None if constant_ints(value) is not None else f"{value!r} (a tuple of constant ints)"


OPTIONS = {
    "coords": Param("the box's first element, one int32 per tensor axis, outermost first", _check_coords),
    "coord_steps": Param(
        "per repeat axis, the coordinate step of one unit, one int per tensor axis", _check_int_tuple,
        required=False,
    ),
    "box": Param("the box extents (the shared operand's last extents)", _check_box, required=False),
    "swizzle": Param("0 none, 1 32B, 2 64B, 3 128B", _check_swizzle, required=False),
    "l2_promotion": Param("the map's L2 promotion: 0 none, 1 64B, 2 128B, 3 256B", _check_l2, required=False),
}


def _bind(call):
    """Check the call's parameters with its operands; align the image to its swizzle's repeat."""
    contract = call.contract
    c = TmaCall(contract, call)
    for rule in RULES:
        err = rule(c)
        if err:
            return err
    roles = list(contract.roles)
    roles[c.s_index] = replace(roles[c.s_index], align=image_period(c.swizzle))
    return replace(contract, roles=tuple(roles))


def _coords(call):
    """The instruction's coordinates, innermost first (PTX order)."""
    coords = [IntImm("int32", v) if isinstance(v, int) else v for v in call.params["coords"]]
    for r, steps in zip(call.repeat, call.params.get("coord_steps", ())):
        coords = [x + r * int(s) if int(s) else x for x, s in zip(coords, constant_ints(steps))]
    return list(reversed(coords))


# -- the contract ----------------------------------------------------------------------------


def _excluded(instr: Instruction) -> str | None:
    name, mods = instr.entry_name, instr.modifiers
    if "im2col" in name:
        return "the im2col modes are not tile forms (a box of the tiled mode only)"
    if "multicast16" in name or "multicast32" in name:
        return ".multicast::cluster::16b/32b are not tile forms (sm_100+; use .multicast::cluster)"
    if mods.get("load_mode", "") not in ("", "tile"):
        return f".{mods['load_mode']} moves four rows, not a box: not a tile form"
    return None


def _roles(instr: Instruction, ops: dict):
    rank = int(instr.modifiers["dim"][0])
    atom = (None,) * rank
    dtypes = tuple(DESCRIPTOR_DTYPE)
    shared_scopes = ("shared", "shared.dyn")
    loads = "dst_mem" in ops
    image = OperandRole(
        "dst" if loads else "src", ops["dst_mem" if loads else "src_mem"], "memory", atom, dtypes,
        loads, shared_scopes, align=IMAGE_ALIGN, image=True, async_proxy=True,
    )  # fmt: skip
    tmap = OperandRole(
        "src" if loads else "dst", ops["tmap"], "tensor_map", atom, dtypes, not loads, ("global",), repeat_axes=(),
        run_time_extents=True,
    )
    if not loads:
        return (tmap, image)
    mbar = OperandRole(
        "mbar", ops["mbar"], "memory", (1,), ("uint64", "int64"), True, shared_scopes,
        repeat_axes=(), align=8, keyword="mbar",
    )  # fmt: skip
    return (image, tmap, mbar)


def _image_bytes(call) -> int:
    """The bytes a load completes on its barrier: the shared image's, every box of
    every repeat coordinate (out-of-bounds elements count: the TMA writes zeros)."""
    image = call.operands[0]
    n = 1
    for extent in image.shape:
        n *= int(extent)
    return n * element_bytes(image.value.dtype)


def contract(instr: Instruction) -> Contract | str:
    """The tile contract of a TMA form, or the reason it has none."""
    reason = _excluded(instr)
    if reason:
        return reason
    ops = {op.name: op for op in instr.operands}
    params = {name: ops[name] for name in ("cta_mask", "cache_policy") if name in ops}
    return Contract(
        instruction=instr,
        roles=_roles(instr, ops),
        params=params,
        options=dict(OPTIONS),
        derived={"coords": _coords},
        bind=_bind,
        host_setup=host_setup,
        completes_tx=None if instr.modifiers.get("multicast") or "dst_mem" not in ops else _image_bytes,
    )


# -- protocol events ---------------------------------------------------------------------------


def _multicast(instr) -> bool:
    return bool(instr.modifiers.get("multicast"))


def _tile_events(leaf, call, protocol):
    """A TMA tile call: the image written (completing on ``mbar=``) or read (a bulk group)."""
    contract = call.contract
    image = next(op for r, op in zip(contract.roles, call.operands) if r.image)
    if contract.roles[0].kind == "tensor_map":  # a store or a reduction reads the image
        return [Event("async_read", leaf, contract.opcode, buffer=image.value, scope="bulk_group")]
    multicast = _multicast(contract.instruction)
    element = element_of(protocol.facts, call.operands[-1].value)
    bytes_ = _image_bytes(call) if multicast or contract.completes_tx is not None else None
    detail = f"TMA load: {describe(image.value)}" + (" (multicast)" if multicast else "")
    out = [
        Event("async_write", leaf, contract.opcode, element=element, buffer=image.value, detail=detail),
        Event("complete_tx", leaf, contract.opcode, element=element, value=bytes_, detail=detail,
              scope="peer" if multicast else "", targets=_mask_ranks(call, protocol) if multicast else None),
    ]  # fmt: skip
    if multicast:
        out.append(Event("peer", leaf, contract.opcode, detail="writes and signals the CTAs of cta_mask"))
    return out


def _mask_ranks(call, protocol):
    """The cluster ranks a multicast's constant ``cta_mask`` names (a frozenset), or None."""
    mask, launch = getattr(call.params.get("cta_mask"), "value", None), protocol.facts.launch
    if mask is None or launch is None:
        return None
    return frozenset(r for r in range(launch.cluster_size) if int(mask) >> r & 1)


def _memory(protocol, arg):
    target = address_target(arg)
    return (None, None) if target is None else target


def _raw_events(leaf, call, protocol):
    """A raw ``T.ptx`` TMA call: its box is in the tensor map, so its size is not known here."""
    raw = raw_operands(call)
    if raw is None:
        return None
    instr, args = raw
    if "dst_mem" not in args:  # a store or a reduction: reads the shared image
        buf, coord = _memory(protocol, args["src_mem"][0])
        if buf is None:
            return [Event("opaque", leaf, instr.opcode, buffer=())]
        return [Event("async_read", leaf, instr.opcode, buffer=buf, coord=coord, extent=-1, scope="bulk_group")]
    buf, coord = _memory(protocol, args["dst_mem"][0])
    bar, bar_coord = _memory(protocol, args["mbar"][0]) if "mbar" in args else (None, None)
    element = element_of(protocol.facts, bar, bar_coord) if bar is not None else None
    peer = "peer" if _multicast(instr) else ""
    out = [Event("complete_tx", leaf, instr.opcode, element=element, value=None, detail="TMA load", scope=peer)]
    if buf is not None:
        out.append(Event("async_write", leaf, instr.opcode, element=element, buffer=buf, coord=coord, extent=-1))
    if peer:
        out.append(Event("peer", leaf, instr.opcode, detail="writes and signals the CTAs of cta_mask"))
    return out


def protocol_events(leaf, call, protocol, derived):  # pylint: disable=unused-argument
    """What a TMA copy (tile or raw ``T.ptx`` call) does: the shared image it writes
    and the barrier it completes on, or the image a store reads; None for other statements."""
    if call is not None:
        return _tile_events(leaf, call, protocol) if call.contract.instruction.entry_name in ENTRIES else None
    name = getattr(leaf.stmt.value.op, "name", "")
    if name.startswith("tirx.ptx.") and name[len("tirx.ptx.") :] in ENTRIES:
        return _raw_events(leaf, leaf.stmt.value, protocol)
    return None


# The family: its contract and every role it plays (one registry.Family).
register_family(
    entries=ENTRIES,
    isa={"cp": "9.7.9.25.5.1 (cp.async.bulk.tensor), 9.7.9.25.5.2 (cp.reduce.async.bulk.tensor)"},
    events=protocol_events,
    kinds=KINDS,
)(contract)
