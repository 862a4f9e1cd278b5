"""Enumerate the instruction forms the tile families support (for docs, stubs and tests).

Forms come from apache-tvm's PTX table (every legal modifier combination of
each entry whose mnemonic has a family) filtered by the family's contract.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TileError
from .instruction import canonical_text
from .registry import FAMILIES, contracts

__all__ = ["Form", "forms_of"]


@dataclass(frozen=True)
class Form:
    """One supported instruction form.

    Attributes
    ----------
    key : str
        ``"<table entry>:<opcode>"``, unique per form.
    contract : Contract
        Its operand contract (roles, atoms, dtypes, ``min_arch``).
    """

    key: str
    contract: object

    @property
    def opcode(self) -> str:
        """The PTX opcode text."""
        return self.contract.opcode


def forms_of(mnemonics) -> list:
    """Every supported form of the given mnemonics, in table order.

    Parameters
    ----------
    mnemonics : iterable of str
        PTX mnemonics with a tile family (``"add"``, ``"cvt"`` ...).

    Raises
    ------
    KeyError
        A mnemonic without a tile family.
    """
    from tvm.backend.cuda.ptx.table import TABLE, variants  # pylint: disable=import-outside-toplevel

    wanted = set(mnemonics)
    for m in wanted:
        if m not in FAMILIES:
            raise KeyError(f"no tile family for {m!r}")
    out, seen = [], set()
    for entry in TABLE.values():
        if entry.ptx_name not in wanted:
            continue
        for tokens in variants(entry):
            opcode = canonical_text(entry, tokens)
            key = f"{entry.name}:{opcode}"
            if key in seen:
                continue
            try:
                found = [c for c in contracts(opcode) if c.instruction.entry_name == entry.name]
            except TileError:
                continue
            if found:
                seen.add(key)
                out.append(Form(key, found[0]))
    return out
