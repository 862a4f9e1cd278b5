"""Family registry keyed by PTX mnemonic: the single source of what tile.apply supports."""

from __future__ import annotations

from ..errors import TileError
from .families import async_copy, matrix, memory, register
from .instruction import resolve

__all__ = ["FAMILIES", "contracts", "supported_mnemonics"]

#: mnemonic -> family module (each exports ``MNEMONICS`` and ``contract``).
FAMILIES = {m: mod for mod in (memory, register, matrix, async_copy) for m in mod.MNEMONICS}


def supported_mnemonics() -> tuple[str, ...]:
    """PTX mnemonics that ``T.cuda.tile.apply`` accepts, sorted."""
    return tuple(sorted(FAMILIES))


def contracts(instr) -> tuple:
    """The tile contracts of every form ``instr`` names (see :func:`.instruction.resolve`).

    Raises
    ------
    TileError
        Unknown/illegal opcode, a mnemonic without a tile family, or a form the
        family does not support (the message gives the family's reason).
    """
    forms = resolve(instr)
    mnemonic = forms[0].mnemonic
    family = FAMILIES.get(mnemonic)
    if family is None:
        raise TileError(
            forms[0].opcode,
            "no tile family for this instruction",
            expected=f"one of {', '.join(supported_mnemonics())}",
            found=mnemonic,
        )
    out, reasons = [], []
    for form in forms:
        result = family.contract(form)
        (reasons if isinstance(result, str) else out).append(result)
    if not out:
        raise TileError(forms[0].opcode, "unsupported form", found="; ".join(reasons))
    return tuple(out)
