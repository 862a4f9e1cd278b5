"""``ld`` and ``st``: move values between memory and the issuing thread's registers.

PTX ISA
    9.7.10.8 (``ld``), 9.7.10.9 (``ld.global.nc``), 9.7.10.11 (``st``); 5.4.6 (alignment).
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
    (vector accesses are naturally aligned); element width = the PTX type's.
    A false ``pred`` skips the access, so bounds are checked where it holds.
Lowering emits
    One ``ld``/``st`` per repeat coordinate per thread.  A ``.local`` address
    is the thread's local-window offset of the view (CUDA
    ``__cvta_generic_to_local``, PTX ISA 6.4.1.1), other spaces take the view's
    generic address.
Architectures
    sm_90a; 256-bit vectors need sm_100 (PTX ISA 9.7.10.8 / 9.7.10.11).
"""

from __future__ import annotations

from ..contract import Contract, memory_role, register_role
from ..emit import register_address_form
from ..ptx_table import Instruction, bits_of_ptx_type
from ..registry import register_family

PARAMS = ("cache_policy",)
SPACES = ("global", "shared", "shared::cta", "local")


def _local_window_address(buf, coord):
    """The ``.local``-window address of ``buf`` at ``coord`` (CUDA ``__cvta_generic_to_local``):
    a ``.local`` address is an offset in the thread's local window, not the
    generic address C++ takes of a local array (PTX ISA 6.4.1.1)."""
    from tvm.tirx import call_pure_extern  # pylint: disable=import-outside-toplevel

    return call_pure_extern("uint64", "__cvta_generic_to_local", buf.ptr_to(coord))


register_address_form("local_window", _local_window_address)


@register_family(
    claims=lambda entry: entry.mnemonic in ("ld", "st"),
    isa={"ld": "9.7.10.8 (ld) and 9.7.10.9 (ld.global.nc)", "st": "9.7.10.11"},
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
    # PTX ISA 9.7.10.8/9.7.10.11: 256-bit vectors (.v8 of 32-bit, .v4 of
    # 64-bit types) require sm_100.
    wide = data.lanes * bits_of_ptx_type(data.ptx_type) > 128
    address = "local_window" if addr.space == "local" else "generic"
    roles = []
    for op in instr.operands:
        if op is addr:
            roles.append(memory_role("src" if loads else "dst", op, data, writes=not loads, address=address))
        elif op is data:
            roles.append(register_role("dst" if loads else "src", op))
    return Contract(instruction=instr, roles=tuple(roles), params=params, min_arch="sm_100" if wide else None)
