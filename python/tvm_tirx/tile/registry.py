"""The family registry: which module owns which PTX table entries, and the one
entry point from an opcode to its candidate contracts.

A family module declares itself with :func:`register_family`, keyed by the
PTX table *entries* it claims (by name, or by a predicate over
:class:`~.ptx_table.TableEntry`) -- not by mnemonic: apache-tvm names every
``cp.async*`` entry ``cp``.  Two families claiming one entry is an error when
the registry is first used (at import of :mod:`.families`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import TileError
from .arch_floors import with_floor
from .contract import Contract
from .ptx_table import Instruction, TableEntry, opcode_text, resolve, table_entries

__all__ = ["Family", "register_family", "families", "family_of", "candidates", "supported_mnemonics"]


@dataclass(frozen=True)
class Family:
    """One registered instruction family.

    Attributes
    ----------
    name : str
        The module's short name (``"ld_st"``): its reference page is
        ``docs/reference/family_<name>``, its tests ``tests/python/test_family_<name>.py``.
    module : str
        The module's dotted name (its docstring opens the reference page).
    contract : callable
        ``fn(Instruction) -> Contract | str``: the form's contract, or the
        reason the family has none for it.
    entries : frozenset[str]
        Table entry names claimed by name.
    claims : callable | None
        ``fn(TableEntry) -> bool``: entries claimed by a predicate.
    isa : dict[str, str]
        PTX ISA section per mnemonic (key ``"*"``: the rest), for the reference.
    raw : RawSpelling | None
        The raw ``T.ptx[...]`` calls of its entries the family checks, and how
        their PTX operands map to its keywords (:mod:`.raw_calls`); None: its
        raw calls are left alone.
    """

    name: str
    module: str
    contract: Callable[[Instruction], Contract | str]
    entries: frozenset
    claims: Callable[[TableEntry], bool] | None
    isa: dict
    raw: object = None

    def owns(self, entry: TableEntry) -> bool:
        """Whether the family claims table ``entry``."""
        return entry.name in self.entries or (self.claims is not None and bool(self.claims(entry)))

    def mnemonics(self) -> tuple:
        """Mnemonics of the claimed entries, in table order."""
        return tuple(dict.fromkeys(e.mnemonic for e in table_entries() if self.owns(e)))

    def isa_section(self, mnemonic: str) -> str:
        """The PTX ISA section of ``mnemonic`` (``""`` when the family gives none)."""
        return self.isa.get(mnemonic, self.isa.get("*", ""))


_FAMILIES: list = []


def register_family(*, entries=(), claims=None, isa=None, raw=None):
    """Decorator: register the decorated ``contract(instr)`` function as a family.

    Parameters
    ----------
    entries : iterable of str
        PTX table entry names the family claims.
    claims : callable | None
        ``fn(TableEntry) -> bool`` for entries claimed by a rule (e.g. every
        entry of a mnemonic no other family shares).
    isa : dict[str, str] | None
        PTX ISA section per mnemonic (``"*"``: default).
    raw : RawSpelling | None
        The raw ``T.ptx[...]`` calls of claimed entries that are decoded into
        the tile form's :class:`~.call_view.CallView` and checked by its rules
        (:class:`~.raw_calls.RawSpelling`); None: raw calls are not checked.

    Raises
    ------
    ValueError
        The module registers twice, claims nothing, or declares raw entries
        it does not claim.
    """

    def decorate(fn):
        module = fn.__module__
        name = module.rsplit(".", 1)[-1]
        if any(f.module == module for f in _FAMILIES):
            raise ValueError(f"tvm_tirx: family module {module} registered twice")
        if not entries and claims is None:
            raise ValueError(f"tvm_tirx: family {name} claims no PTX table entry")
        if raw is not None and not raw.entries <= frozenset(entries):
            extra = ", ".join(sorted(raw.entries - frozenset(entries)))
            raise ValueError(f"tvm_tirx: family {name} declares raw entries it does not claim by name: {extra}")
        _FAMILIES.append(Family(name, module, fn, frozenset(entries), claims, dict(isa or {}), raw))
        _owners.cache_clear()
        return fn

    return decorate


def families() -> tuple:
    """Every registered family, in registration order."""
    # The family modules register themselves with this module, so it loads them on
    # first use rather than at its own import.
    from . import families as _load  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

    _owners()  # the overlap check
    return tuple(_FAMILIES)


@functools.cache
def _owners() -> dict:
    """``entry name -> Family`` for every claimed entry.

    Raises
    ------
    ValueError
        Two families claim one entry (a registration error of the package).
    """
    out = {}
    for entry in table_entries():
        owners = [f for f in _FAMILIES if f.owns(entry)]
        if len(owners) > 1:
            names = ", ".join(f.name for f in owners)
            raise ValueError(f"tvm_tirx: PTX table entry {entry.name!r} is claimed by families {names}")
        if owners:
            out[entry.name] = owners[0]
    return out


def family_of(entry: TableEntry):
    """The family that claims table ``entry``, or None."""
    families()
    return _owners().get(entry.name)


def supported_mnemonics() -> tuple:
    """PTX mnemonics with at least one claimed entry, sorted."""
    return tuple(sorted({m for f in families() for m in f.mnemonics()}))


def candidates(instr) -> tuple:
    """The contracts of every form ``instr`` names: THE entry point from an opcode.

    Parse time (``tile.apply``) and lowering both call it; it is memoised per
    opcode text (a ``T.ptx[...]`` chain: per its table candidates, since the
    chain does not keep the text the user wrote).

    ``instr`` is what :func:`.ptx_table.resolve` takes.  Each contract carries
    the form's measured arch floor (:func:`.arch_floors.with_floor`; a form
    ptxas assembles for no target is excluded).  The result is never
    empty; every contract of one opcode has the same :class:`~.contract.Collective`.

    Raises
    ------
    TileError
        Unknown/illegal opcode (the table's reason), an instruction no family
        claims (the message lists the families), or forms the family excludes
        (its reasons).
    """
    return _contracts(resolve(instr))


@functools.cache
def _contracts(forms) -> tuple:
    out, reasons, claimed = [], [], False
    for form in forms:
        family = family_of(form.entry)
        if family is None:
            continue
        claimed = True
        result = family.contract(form)
        if not isinstance(result, str):
            result = with_floor(result)  # the measured arch floor, whichever the family
        (reasons if isinstance(result, str) else out).append(result)
    if not claimed:
        listing = "; ".join(f"{f.name} ({', '.join(f.mnemonics())})" for f in families())
        raise TileError(
            forms[0].opcode,
            "no tile family for this instruction",
            expected=f"an instruction of a tile family: {listing}",
            found=forms[0].mnemonic,
        )
    if not out:
        raise TileError(forms[0].opcode, "unsupported form", found="; ".join(reasons))
    return tuple(out)


def opcode_of(instr) -> str:
    """The PTX text of ``instr`` for messages (:func:`.ptx_table.opcode_text`)."""
    return opcode_text(instr)
