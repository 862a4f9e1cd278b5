"""``ldmatrix`` and ``stmatrix``: warp-collective 8x8 matrix moves between shared memory and registers.

PTX ISA
    9.7.14.5.15 (``ldmatrix``), 9.7.14.5.16 (``stmatrix``).
Forms
    ``ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared{::cta}.b16`` and
    ``stmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared{::cta}.b16``.
Operand roles and atoms
    ``ldmatrix``: ``dst`` registers, ``src`` shared rows; ``stmatrix``: ``dst``
    shared rows, ``src`` registers.  Both atoms are ``(count, 8, 4)`` b32 words:
    ``count`` 8x8 matrices of 16-bit elements, rows of four words.
Legality
    Warp-collective: the 32 lanes of a warp issue it together, so the lane is
    part of the atom (no group axes at ``scope="warp"``; the warps are the
    group at wider scopes) and a guard keeps whole warps.  Lane ``8*m + r``
    supplies the address of row ``r`` of matrix ``m`` (for ``.x1``/``.x2`` the
    remaining lanes repeat the rows of the first matrices; the ISA ignores
    their addresses); word ``(m, r, w)`` is register ``m`` of lane ``4*r + w``.
    Each row is 16 contiguous, 16-byte aligned bytes; rows may be anywhere.
Lowering emits
    One instruction per repeat coordinate per warp; each lane passes its own
    row address and its ``count`` registers.
Architectures
    ``ldmatrix``: sm_75; ``stmatrix``: sm_90 (measured with ptxas 13.0
    (``tools/probe_arch_floors.py``, ``arch_floors.json``)).
"""

from __future__ import annotations

from .. import WARP, Contract, Instruction, OperandRole, register_family, register_role

_COUNT = {"x1": 1, "x2": 2, "x4": 4}


def ldmatrix_word_coords(count: int):
    """``lane -> [(m, r, w) for m in range(count)]``: the b32 word each lane
    receives in register ``m`` (PTX ISA 9.7.14.5.15: lane ``4*r + w``)."""
    return lambda lane: [(m, lane // 4, lane % 4) for m in range(count)]


def ldmatrix_row_address(count: int):
    """``lane -> [(m, r, 0)]``: the row whose address lane supplies (lane ``8*m + r``)."""
    return lambda lane: [((lane // 8) % count, lane % 8, 0)]


@register_family(
    entries=("ldmatrix", "ldmatrix_s8_s4", "ldmatrix_m16n16_b8", "ldmatrix_b8fmt", "stmatrix", "stmatrix_m16n8_b8"),
    isa={"ldmatrix": "9.7.14.5.15", "stmatrix": "9.7.14.5.16"},
)
def contract(instr: Instruction) -> Contract | str:
    """The tile contract of an ldmatrix/stmatrix form, or the reason it has none."""
    if instr.modifiers.get("shape") != "m8n8" or instr.entry_name not in ("ldmatrix", "stmatrix"):
        return "only the .m8n8 .b16 forms of ldmatrix/stmatrix are tile forms"
    count = _COUNT[instr.modifiers["num"]]
    addr = next(op for op in instr.operands if op.kind == "addr")
    if addr.space not in ("shared", "shared::cta"):
        return f"{instr.mnemonic} tile forms name the state space .shared or .shared::cta (found generic addressing)"
    regs = next(op for op in instr.operands if op.kind == "reg")
    loads = instr.mnemonic == "ldmatrix"
    reg_role = register_role(
        "dst" if loads else "src", regs, atom=(count, 8, 4), lane_coords=ldmatrix_word_coords(count)
    )
    mem_role = OperandRole(
        role="src" if loads else "dst",
        ptx=addr,
        kind="memory",
        atom=(count, 8, 4),
        dtypes=("uint32", "int32", "float32"),
        writes=not loads,
        scopes=("shared", "shared.dyn"),
        lane_coords=ldmatrix_row_address(count),
    )
    roles = (reg_role, mem_role) if loads else (mem_role, reg_role)
    return Contract(instruction=instr, roles=roles, collective=WARP)
