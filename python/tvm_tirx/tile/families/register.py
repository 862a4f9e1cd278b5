"""``mov``: copy register bits within the issuing thread (PTX ISA 9.7.10.4).

Operands, in call order: ``dst, src``.  Scalar forms (``mov.b16/.b32/.b64``
and the typed spellings) have atoms ``(1,)`` and ``(1,)``; a scalar
expression may stand in for ``src`` and is reused at every repeat.  The pack
and unpack forms (``mov.b64 d, {a, b}``) give the grouped operand an atom of
its group length, one register per element.  ``mov`` never converts: the
element widths must equal the PTX type's.
"""

from __future__ import annotations

from ..contract import Contract, register_role
from ..instruction import Instruction

MNEMONICS = ("mov",)


def contract(instr: Instruction) -> Contract | str:
    """The tile contract of a ``mov`` form, or the reason it has none."""
    if any(op.kind != "reg" for op in instr.operands):
        return "only register forms of mov are tile forms"
    roles = tuple(
        register_role("dst" if op.writes else "src", op) for op in instr.operands
    )
    return Contract(instruction=instr, roles=roles)
