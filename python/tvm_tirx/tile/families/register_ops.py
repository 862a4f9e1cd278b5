"""Register instructions: ``mov``, ``cvt`` and the arithmetic instructions.

PTX ISA
    9.7.1 (integer), 9.7.3 (floating point), 9.7.4 (half precision), 9.7.5
    (mixed precision), 9.7.10.3 / 9.7.10.4 (``mov``: scalar / pack-unpack),
    9.7.10.24 (``cvt``).
Forms
    Every form of ``mov cvt add sub mul fma min max div rcp sqrt ex2 lg2 tanh
    abs neg`` whose operands are all registers (no ``.pred`` operand).
Operand roles and atoms
    The PTX operands, in PTX order: ``dst`` first, then the sources under the
    ISA's names (``a``, ``b``, ``c``); a one-source form calls its source
    ``src``, and the packed conversions ``cvt.rn.f16x2.f32 d, a, b`` call theirs
    ``hi`` and ``lo`` (``a`` fills the upper half).  Each atom is ``(n,)``,
    ``n`` = registers in the PTX group (1, or the group length of ``mov``'s
    pack/unpack forms).
Legality
    Every operand is a register of the issuing thread; a typed scalar may
    stand in for any one-register source and is reused at every repeat.
    Rounding, saturation, packing and types come from the opcode only; the
    element width equals the PTX type's (a packed ``f16x2`` value is one
    ``uint32``, ``f32x2`` one ``uint64``).  When no form of an opcode fits
    (``mov.b64`` names a scalar, a pack and an unpack form), the scalar form's
    error is the one reported.
Lowering emits
    One instruction per repeat coordinate per thread.
Architectures
    sm_75 for most forms; sm_80 for ``bf16`` arithmetic, ``.relu``, ``.NaN``,
    ``tf32``; sm_86 for ``.xorsign.abs``; sm_89 for the ``e4m3x2`` / ``e5m2x2``
    conversions; sm_90 for ``s16x2`` / ``u16x2`` arithmetic; sm_100 for
    ``f32x2`` arithmetic; sm_100f / sm_100a for the narrow ``cvt`` formats, and
    only sm_100a / sm_103a for ``cvt.rs`` and the ``x4`` formats (measured with
    ptxas 13.0 (``tools/probe_arch_floors.py``, ``arch_floors.json``); every
    form in the reference page). Forms no ptxas target assembles keep the
    architecture apache-tvm's table certifies (sm_100a, sm_107f).
"""

from __future__ import annotations

from .. import Contract, Instruction, register_family, register_role

#: The mnemonics the family claims: each form's result is a function of its source
#: registers only (its contracts say so: ``Contract.register_function``).
MNEMONICS = (
    "mov",
    "cvt",
    "add",
    "sub",
    "mul",
    "fma",
    "min",
    "max",
    "div",
    "rcp",
    "sqrt",
    "ex2",
    "lg2",
    "tanh",
    "abs",
    "neg",
)


def _role_names(instr: Instruction) -> list:
    sources = [op for op in instr.operands if not op.writes]
    names = {}
    if len(sources) == 1:
        names[sources[0].name] = "src"
    elif instr.mnemonic == "cvt" and [op.name for op in sources] == ["a", "b"]:
        names.update(a="hi", b="lo")  # PTX ISA 9.7.10.24: d = {cvt(a), cvt(b)}
    return [("dst" if op.writes else names.get(op.name, op.name)) for op in instr.operands]


@register_family(
    claims=lambda entry: entry.mnemonic in MNEMONICS,
    isa={
        "mov": "9.7.10.3 (scalar) and 9.7.10.4 (pack / unpack)",
        "cvt": "9.7.10.24",
        "*": "9.7.1 (integer), 9.7.3 (floating point), 9.7.4 (half precision), 9.7.5 (mixed precision)",
    },
)
def contract(instr: Instruction) -> Contract | str:
    """The tile contract of a register-family form, or the reason it has none."""
    if any(op.kind != "reg" for op in instr.operands):
        return "only register operands are tile operands in this family"
    if any(op.ptx_type == "pred" for op in instr.operands):
        return ".pred operands are not tile operands"
    roles = tuple(register_role(name, op) for name, op in zip(_role_names(instr), instr.operands))
    # The form named after the mnemonic (the scalar one) is what a user most
    # likely meant when no form fits: its error is reported.
    priority = 1 if instr.entry_name == instr.mnemonic else 0
    return Contract(instruction=instr, roles=roles, error_priority=priority, register_function=True)
