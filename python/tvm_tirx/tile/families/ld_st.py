"""``ld`` and ``st``: move values between memory and the issuing thread's registers.

PTX ISA
    9.7.10.8 (``ld``), 9.7.10.9 (``ld.global.nc``), 9.7.10.11 (``st``); 5.4.6 (alignment);
    9.4.1 (operand size exceeding the instruction type).
Forms
    Every ``ld`` / ``st`` entry of the table with a state space ``.global``,
    ``.shared``, ``.shared::cta`` or ``.local``; vector lengths 1, ``.v2``,
    ``.v4`` (``.v8`` of 32-bit and ``.v4`` of 64-bit types: 256-bit vectors);
    cache, eviction and ``.L2::cache_hint`` qualifiers as the table allows.
    Generic addressing and ``.shared::cluster`` are not tile forms.
Operand roles and atoms
    ``ld``: ``dst`` registers ``(n,)``, ``src`` memory ``(n,)``;
    ``st``: ``dst`` memory ``(n,)``, ``src`` registers ``(n,)``.  ``n`` is the
    vector length.  Parameter ``cache_policy`` (a ``uint64`` from
    ``createpolicy``) for ``.L2::cache_hint`` forms.
Legality
    The memory atom is contiguous and aligned to ``n * sizeof(type)`` bytes
    (vector accesses are naturally aligned); the memory tensor's element width
    is the PTX type's, and so is the registers' -- except that the registers
    of an 8- or 16-bit integer or bit type (``.s8 .u8 .b8 .s16 .u16 .b16``)
    may also be ``int32`` / ``uint32``: a load sign-extends (``.sN``) or
    zero-extends (``.uN``, ``.bN``) each value into its 32-bit register, a
    store writes the register's low ``N`` bits (PTX ISA 9.4.1).  No other
    widening exists here (a float register stays the PTX type's width).
    A false ``pred`` skips the access, so bounds are checked where it holds.
Lowering emits
    One ``ld``/``st`` per repeat coordinate per thread.  A ``.local`` address
    is the thread's local-window offset of the view (CUDA
    ``__cvta_generic_to_local``, PTX ISA 6.4.1.1), other spaces take the view's
    generic address.
Architectures
    sm_75; ``.L2::cache_hint`` and ``.L2::256B``: sm_80; the ``.cluster``
    scope: sm_90; 256-bit vectors (``.v8`` of 32-bit, ``.v4`` of 64-bit types,
    PTX ISA 9.7.10.8 / 9.7.10.11) and ``.L2::evict_*``: sm_100 (measured with
    ptxas 13.0 (``tools/probe_arch_floors.py``, ``arch_floors.json``)). The
    combinations ptxas refuses for every target (``.volatile`` on ``.local``,
    ``.mmio`` without ``.relaxed``) are no tile forms; ``.proxy::readonly``
    keeps the table's sm_90 (ptxas 13.0 does not know it).
"""

from __future__ import annotations

from tvm.tirx import call_pure_extern

from .. import (
    LOCAL_WINDOW,
    Contract,
    Instruction,
    memory_role,
    register_family,
    register_role,
    replace,
)

PARAMS = ("cache_policy",)
SPACES = ("global", "shared", "shared::cta", "local")
#: PTX types whose values may travel in a wider integer register (PTX ISA 9.4.1:
#: a load extends -- sign for .sN, zero for .uN/.bN -- a store truncates).
NARROW_INTEGER_TYPES = ("s8", "u8", "b8", "s16", "u16", "b16")
#: The wider registers a tile call may use for them.
WIDE_REGISTERS = ("int32", "uint32")


def _local_window_address(call, buf, coord):  # pylint: disable=unused-argument
    """The ``.local``-window address of ``buf`` at ``coord`` (CUDA ``__cvta_generic_to_local``):
    a ``.local`` address is an offset in the thread's local window, not the
    generic address C++ takes of a local array (PTX ISA 6.4.1.1)."""
    return call_pure_extern("uint64", LOCAL_WINDOW, buf.ptr_to(coord))


def _data_role(name, op):
    """The register role of ``op``, with the 32-bit registers PTX ISA 9.4.1 allows
    for a narrow integer or bit type (those the table takes)."""
    role = register_role(name, op)
    if op.ptx_type not in NARROW_INTEGER_TYPES:
        return role
    wide = tuple(d for d in WIDE_REGISTERS if d in op.dtypes and d not in role.dtypes)
    return replace(role, dtypes=role.dtypes + wide)


@register_family(
    claims=lambda entry: entry.mnemonic in ("ld", "st"),
    isa={"ld": "9.7.10.8 (ld) and 9.7.10.9 (ld.global.nc)", "st": "9.7.10.11"},
    address_forms={"local_window": _local_window_address},
)
def contract(instr: Instruction) -> Contract | str:
    """The tile contract of an ``ld``/``st`` form, or the reason it has none."""
    addr = next((op for op in instr.operands if op.kind == "addr"), None)
    if addr is None or addr.space not in SPACES:
        space = addr.space if addr is not None else "none"
        return (
            f"state space must be one of {', '.join('.' + s for s in SPACES)} "
            f"(found {'.' + space if space else 'generic addressing'})"
        )
    params = {op.name: op for op in instr.operands if op.name in PARAMS}
    data = next(op for op in instr.operands if op.kind == "reg" and op.name not in params)
    loads = instr.mnemonic == "ld"
    address = "local_window" if addr.space == "local" else "generic"
    roles = []
    for op in instr.operands:
        if op is addr:
            roles.append(memory_role("src" if loads else "dst", op, data, writes=not loads, address=address))
        elif op is data:
            roles.append(_data_role("dst" if loads else "src", op))
    return Contract(instruction=instr, roles=tuple(roles), params=params)
