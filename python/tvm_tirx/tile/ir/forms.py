"""Enumerate the instruction forms a tile family supports (for docs, stubs and tests).

Forms come from apache-tvm's PTX table (every legal modifier combination of
each entry the family claims) filtered by the family's contract.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import TileError
from .contract import Contract
from .ptx_table import entry_variants, table_entries
from .registry import candidates, families

__all__ = ["Form", "forms_of", "family_named"]


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
    contract: Contract

    @property
    def opcode(self) -> str:
        """The PTX opcode text."""
        return self.contract.opcode


def family_named(name: str):
    """The registered family called ``name`` (``"ld_st"``).

    Raises
    ------
    KeyError
        No family has that name.
    """
    for family in families():
        if family.name == name:
            return family
    raise KeyError(f"no tile family {name!r} (families: {', '.join(f.name for f in families())})")


def forms_of(family, mnemonics=None) -> list:
    """Every supported form of ``family``, in table order.

    Parameters
    ----------
    family : Family | str
        A registered family or its name.
    mnemonics : iterable of str | None
        Only the forms of these mnemonics (None: all of the family's).

    Raises
    ------
    KeyError
        No family has that name.
    """
    family = family_named(family) if isinstance(family, str) else family
    wanted = None if mnemonics is None else set(mnemonics)
    out, seen = [], set()
    for entry in table_entries():
        if not family.owns(entry) or (wanted is not None and entry.mnemonic not in wanted):
            continue
        for opcode in entry_variants(entry.name):
            key = f"{entry.name}:{opcode}"
            if key in seen:
                continue
            try:
                found = [c for c in candidates(opcode) if c.instruction.entry_name == entry.name]
            except TileError:
                continue
            if found:
                seen.add(key)
                out.append(Form(key, found[0]))
    return out
