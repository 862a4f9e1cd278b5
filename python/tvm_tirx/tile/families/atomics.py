"""``atom`` and ``red``: atomic read-modify-write operations on global and shared memory.

PTX ISA
    9.7.15.5 (``atom``) and 9.7.15.6 (``red``), numbered as in the edition
    apache-tvm's table and the other families cite (9.7.12.5 / 9.7.12.6 in
    PTX ISA 8.x); 8 (memory consistency model: ``.sem`` and ``.scope``);
    5.4.6 (alignment); 9.7.10.26 (``mapa``, for a peer CTA's shared memory).
Forms
    ``atom{.sem}{.scope}.space.op{.L2::cache_hint}.type d, [a], b`` with
    ``.op`` one of ``.and .or .xor .add .inc .dec .min .max .exch`` over the
    types the ISA pairs with it (``.b32 .b64 .u32 .u64 .s32 .s64 .f32 .f64``;
    ``.exch`` also ``.b128``), ``atom...cas.type d, [a], b, c`` (``.b16``
    to ``.b128``), ``atom...add.noftz.{f16,bf16,f16x2,bf16x2}``; the vector
    forms ``atom...global.add.v2/.v4.f32`` and
    ``atom...global.{add,min,max}.noftz.v2/.v4/.v8.{f16,bf16}``,
    ``.v2/.v4.{f16x2,bf16x2}``.  ``red`` has the same forms without ``d``
    (no ``.cas``, ``.exch``; ``.sem`` only ``.relaxed`` / ``.release``).
    ``atom`` without ``d`` is the bit-bucket form (``atom ... _, [a], b``):
    pass no destination and the old value is discarded.  ``.space`` is
    ``.global``, ``.shared`` / ``.shared::cta`` (this CTA), or
    ``.shared::cluster`` (a CTA of the cluster: ``remote_cta_id=``); vector
    forms are ``.global`` only; ``.L2::cache_hint`` only on ``.global``.
    ``.sem`` (``.relaxed .acquire .release .acq_rel``) and ``.scope``
    (``.cta .cluster .gpu .sys``) as the table allows.
    Not tile forms: generic addressing (no ``.space``), and PTX ISA 9.4's
    ``.add.noftz.f32`` (scalar and vector), which the ptxas of CUDA 13.0
    (PTX ISA 9.0) assembles for no target (measured).
Operand roles and atoms
    ``atom``: ``dst`` registers ``(n,)`` (the old values), ``mem`` a memory
    view ``(n,)``, ``b`` registers ``(n,)``, and for ``.cas`` ``c``
    registers ``(1,)`` (``b`` the compared value, ``c`` the new one);
    ``red`` and bit-bucket ``atom``: ``mem``, ``b``.  ``n`` is the vector
    length (1, 2, 4 or 8).  ``mem`` is a ``global`` view for ``.global``,
    a ``shared`` / ``shared.dyn`` view otherwise.  Every operand's dtype has
    the PTX type's width and is one the type accepts: ``uint32`` for
    ``.u32``; ``uint32`` / ``int32`` / ``float32`` for ``.b32``; ``float16``
    (or its ``uint16`` bits) for ``.f16``; ``uint32`` for a packed
    ``.f16x2`` / ``.bf16x2`` pair (``.view("uint32")`` a half tensor);
    ``uint128`` / ``int128`` for ``.b128``.  A one-register ``b`` or ``c`` may be a typed scalar
    (``T.uint32(1)``), reused at every repeat coordinate.  Parameters:
    ``cache_policy`` (``uint64``, ``.L2::cache_hint`` forms),
    ``remote_cta_id`` (``.shared::cluster`` forms: the rank, in the cluster,
    of the CTA whose copy of ``mem`` is updated; without it, this CTA's).
Legality
    Each thread's ``mem`` atom is contiguous and aligned to its byte size
    (``n * sizeof(type)``: 16 bytes for ``.v4.f32``, 4 for ``.u32``), inside
    its tensor where the call's ``pred`` holds (PTX ISA 5.4.6); element
    widths are the PTX type's.  ``.shared::cluster`` forms need a cluster
    launch of more than one CTA (``LaunchConfig(cluster=N)``; in a launch
    without clusters ``.shared::cta`` is the same operation) and, when
    constant, a ``remote_cta_id`` inside it.  ``dst`` registers do not
    overlap; ``preserve_dst`` keeps them where ``pred`` is false.
Lowering emits
    One ``atom`` / ``red`` per repeat coordinate per thread, in row-major
    order, with the view's generic address (apache-tvm converts a shared one
    to the ``.shared::cta`` window).  ``remote_cta_id``: per repeat
    coordinate a ``mapa.shared::cluster.u32`` of the view's ``.shared::cta``
    address into a scratch register, then the instruction on that address.
    No fence or barrier is inserted.
Semantics
    Each repeat coordinate is one atomic operation of its own (a vector or
    packed form: one per element, PTX ISA 9.7.15.5), on the address of that
    coordinate, by the issuing thread: a call of repeat ``(4,)`` is four
    atomics, not one atomic update of four words.  No order among them, or
    with other memory operations, is implied beyond the opcode's ``.sem``
    (``.relaxed`` when absent) at its ``.scope`` (``.gpu`` when absent); two
    atomics are atomic with respect to each other only if each one's scope
    includes the other thread.  ``atom`` writes, per thread and repeat
    coordinate, the value ``mem`` held just before its own operation into
    ``dst``: a work counter hands out distinct tickets::

        if tid == 0:
            T.cuda.tile.apply(T.ptx["atom.global.add.u32"], old, Counter.sub[0:1], T.uint32(1))

    ``.inc`` / ``.dec`` wrap at ``b`` (``inc: old >= b ? 0 : old + 1``);
    ``.cas`` stores ``c`` where ``old == b``; ``.add.f32`` on global memory
    flushes subnormals to zero, on shared memory it does not.
Architectures
    sm_75, every target of ptxas 13.0: the scalar forms of ``.global`` and
    ``.shared`` / ``.shared::cta``, ``.sem`` and the ``.cta`` / ``.gpu`` /
    ``.sys`` scopes, the ``f16`` adds and the ``.b16`` ``.cas`` (the ISA: from
    sm_70 and older).  sm_80: ``.L2::cache_hint``.  sm_90: the vector forms,
    ``.b128``, the ``bf16`` adds, ``.shared::cluster`` and the ``.cluster``
    scope.  Measured with ptxas 13.0 (``tools/probe_arch_floors.py``,
    ``arch_floors.json``).
"""

from __future__ import annotations

from .. import Contract, Instruction, OperandRole, memory_role, register_family, register_role
from ._cluster import ADDRESS_FORMS, PEER_ADDRESS, REMOTE_CTA_ID, needs_cluster, remote_rule

#: State spaces of the tile forms (``.shared::cluster``: a CTA of the cluster).
SPACES = ("global", "shared", "shared::cta", "shared::cluster")
#: Buffer storage scopes of a shared ``mem``.
SHARED = ("shared", "shared.dyn")
#: The space that addresses another CTA's shared memory.
CLUSTER_SPACE = "shared::cluster"


def _excluded(instr: Instruction) -> str | None:
    """Why the form is not a tile form, or None."""
    mods = instr.modifiers
    if not mods.get("space"):
        return "generic addressing is not a tile form: name the state space (" + ", ".join("." + s for s in SPACES) + ")"
    if mods.get("noftz") and mods.get("type") == "f32":
        return (
            ".add.noftz.f32 (PTX ISA 9.4) is not a tile form: the ptxas of CUDA 13.0 assembles it for no target; "
            "use .add.f32 (global memory flushes f32 subnormals to zero)"
        )
    return None


def _value_roles(instr: Instruction) -> list:
    """The register roles of the values combined with memory, in PTX order: ``b``,
    and ``c`` for ``.cas`` (``atom.cas d, [a], b, c``: ``b`` compared, ``c`` stored)."""
    values = [op for op in instr.operands if op.kind == "reg" and not op.writes and op.name != "cache_policy"]
    return [register_role(name, op) for name, op in zip(("b", "c"), values)]


def _mem_role(instr: Instruction, value: OperandRole) -> OperandRole:
    """The memory role: one element per register of ``value`` (the vector), of its dtypes."""
    addr = next(op for op in instr.operands if op.kind == "addr")
    return memory_role(
        "mem",
        addr,
        value.ptx,
        writes=True,
        dtypes=value.dtypes,
        scopes=("global",) if addr.space == "global" else SHARED,
        address=PEER_ADDRESS if addr.space == CLUSTER_SPACE else "generic",
    )


def _cluster_rule(opcode: str):
    """``kernel_check`` of a ``.shared::cluster`` form: a cluster launch of more than
    one CTA, and a constant ``remote_cta_id`` inside it."""
    rank_rule = remote_rule(opcode)

    def check(call):
        return needs_cluster(opcode, call.facts.launch, f".{CLUSTER_SPACE}") or rank_rule(call)

    return check


@register_family(
    claims=lambda entry: entry.mnemonic in ("atom", "red"),
    isa={"atom": "9.7.15.5", "red": "9.7.15.6"},
    address_forms=ADDRESS_FORMS,
)
def contract(instr: Instruction) -> Contract | str:
    """The tile contract of an ``atom`` / ``red`` form, or the reason it has none.

    Parameters
    ----------
    instr : Instruction
        A resolved form of one of the family's 22 table entries (PTX ISA 9.7.15.5 /
        9.7.15.6): ``atom``, ``atom_cas``, ``atom_exch``, the half, vector and
        ``.noftz.f32`` entries, their ``_bitbucket`` siblings (no ``d``), and ``red``'s.

    Returns
    -------
    Contract | str
        Roles ``dst`` (registers ``(n,)``, absent without ``d``), ``mem`` (a
        ``global`` or ``shared`` view ``(n,)`` of the PTX type's width, aligned to
        its ``n * sizeof(type)`` bytes), ``b`` (and ``c`` for ``.cas``: registers
        ``(n,)`` or a typed scalar for one register); parameters ``cache_policy``
        (``uint64``) and, for ``.shared::cluster``, ``remote_cta_id``, whose launch
        rule raises :class:`~tvm_tirx.TileError` when lowered.  A string: why the
        form is not a tile form (the user sees it as an ``unsupported form`` error).
    """
    reason = _excluded(instr)
    if reason:
        return reason
    values = _value_roles(instr)
    dst = [register_role("dst", op) for op in instr.operands if op.kind == "reg" and op.writes]
    mem = _mem_role(instr, values[0])
    cluster = mem.address == PEER_ADDRESS
    policy = {op.name: op for op in instr.operands if op.name == "cache_policy"}
    return Contract(
        instruction=instr,
        roles=(*dst, mem, *values),
        params=policy,
        options={"remote_cta_id": REMOTE_CTA_ID} if cluster else {},
        kernel_check=_cluster_rule(instr.opcode) if cluster else None,
    )
