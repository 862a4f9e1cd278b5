"""``ld`` and ``st``: move values between memory and the issuing thread's registers.

PTX ISA 9.7.10.8 (ld) and 9.7.10.11 (st).  Operands, in call order:

* ``ld``: ``registers, memory`` -- atoms ``(n,)`` and ``(n,)``
* ``st``: ``memory, registers`` -- atoms ``(n,)`` and ``(n,)``

``n`` is the vector length (1, ``.v2`` -> 2, ``.v4`` -> 4).  The memory atom
must be contiguous and aligned to ``n * sizeof(type)`` bytes (PTX ISA 5.4.6:
vector accesses are naturally aligned to the vector's size).  State spaces
``.global``, ``.shared``, ``.shared::cta`` and ``.local``; generic addressing
and ``.shared::cluster`` are not tile forms.  Parameter: ``cache_policy``
(a ``uint64`` from ``createpolicy``) for ``.L2::cache_hint`` forms.
"""

from __future__ import annotations

from ..contract import Contract, bits_of_ptx_type, memory_role, register_role
from ..instruction import Instruction

MNEMONICS = ("ld", "st")
PARAMS = ("cache_policy",)
SPACES = ("global", "shared", "shared::cta", "local")


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
    roles = []
    for op in instr.operands:
        if op is addr:
            roles.append(memory_role("dst" if not loads else "src", op, data, writes=not loads))
        elif op is data:
            roles.append(register_role("dst" if loads else "src", op))
    return Contract(
        instruction=instr, roles=tuple(roles), params=params, min_arch="sm_100" if wide else None
    )
