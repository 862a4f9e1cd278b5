"""The family registry: which module owns which PTX table entries, and the one
entry point from an opcode to its candidate contracts.

A family module declares itself with :func:`register_family`, keyed by the
PTX table *entries* it claims (by name, or by a predicate over
:class:`~.ptx_table.TableEntry`) -- not by mnemonic: apache-tvm names every
``cp.async*`` entry ``cp``.  Two families claiming one entry is an error when
the registry is first used (at import of :mod:`..families`).

A family is one :class:`Family` record: besides its contracts, every role it
plays in the shared modules is a field of it, with one signature each
(:mod:`.hooks`) -- its kernel rules, its protocol event readers, its operand
kinds, its address forms and its debug-build instrumentation.  The shared
modules ask :func:`families` for them (:func:`..kernel.kernel_rules.kernel_rules`,
:mod:`..kernel.protocol`, :mod:`..rules.emit`, ``tvm_tirx.build.debug.instrument``); this
module imports none of them, nor any family module (the families register
themselves when :mod:`..families` is first imported, on first use), so each of
them may import it without a cycle.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import TileError
from .arch_floors import with_floor
from .contract import Contract
from .ptx_table import Instruction, TableEntry, opcode_text, resolve, table_entries

__all__ = ["Family", "register_family", "families", "family_of", "candidates", "supported_mnemonics"]


@dataclass(frozen=True, eq=False)
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
        their PTX operands map to its keywords (:mod:`..rules.raw_calls`); None: its
        raw calls are left alone.
    kernel_rules : tuple[KernelRule, ...]
        ``fn(KernelView) -> iterable of TileError``: its rules over a whole
        kernel (:mod:`..kernel.kernel_rules`), run in this order after those of the
        families registered before it.
    events : tuple[EventReader, ...]
        ``fn(leaf, call, protocol, derived) -> list[Event] | None``: the
        readers of its statements' protocol events (:mod:`..kernel.protocol`).
    kinds : dict[str, OperandKind]
        Operand kind name (an ``OperandRole.kind`` beyond ``"register"`` and
        ``"memory"``) -> how its operands are emitted and proven
        (:class:`~..rules.emit.OperandKind`).
    address_forms : dict[str, AddressForm]
        Address form name (an ``OperandRole.address``) -> ``fn(call, view, coord)``,
        the address operand (:mod:`..rules.emit`).
    instrument : Instrument | None
        ``fn(lowered PrimFunc, source PrimFunc, DebugOptions) -> PrimFunc``: what a
        debug build adds to a lowered kernel (the mbarrier family's hang
        detector); None: nothing.

    Two objects are one family only if they are the same object (the record
    holds functions and dicts: it compares and hashes by identity).
    """

    name: str
    module: str
    contract: Callable[[Instruction], Contract | str]
    entries: frozenset
    claims: Callable[[TableEntry], bool] | None
    isa: dict
    raw: object = None
    kernel_rules: tuple = ()
    events: tuple = ()
    kinds: dict = field(default_factory=dict)
    address_forms: dict = field(default_factory=dict)
    instrument: Callable | None = None

    def owns(self, entry: TableEntry) -> bool:
        """Whether the family claims table ``entry``."""
        return entry.name in self.entries or (self.claims is not None and bool(self.claims(entry)))

    def mnemonics(self) -> tuple:
        """Mnemonics of the claimed entries, in table order."""
        return tuple(dict.fromkeys(e.mnemonic for e in table_entries() if self.owns(e)))

    def isa_section(self, mnemonic: str) -> str:
        """The PTX ISA section of ``mnemonic`` (``""`` when the family gives none)."""
        return self.isa.get(mnemonic, self.isa.get("*", ""))


#: The package whose modules are the instruction families (:func:`families` loads it).
FAMILIES_PACKAGE = __name__.rsplit(".", 2)[0] + ".families"

_FAMILIES: list = []


def register_family(
    *, entries=(), claims=None, isa=None, raw=None, kernel_rules=(), events=(), kinds=None, address_forms=None,
    instrument=None,
):  # pylint: disable=too-many-arguments
    """Decorator: register the decorated ``contract(instr)`` function as a family,
    with every role the family plays (the fields of :class:`Family`).

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
        (:class:`~..rules.raw_calls.RawSpelling`); None: raw calls are not checked.
    kernel_rules : iterable of KernelRule
        ``fn(KernelView) -> iterable of TileError``, run once per kernel, in this order.
    events : EventReader | iterable of EventReader
        ``fn(leaf, call, protocol, derived) -> list[Event] | None`` (one, or a tuple).
    kinds : dict[str, OperandKind] | None
        Operand kinds the family's roles use (:class:`~..rules.emit.OperandKind`).
    address_forms : dict[str, AddressForm] | None
        Address forms the family's roles use, ``fn(call, view, coord)``.
    instrument : Instrument | None
        ``fn(lowered, source, options) -> PrimFunc``: its debug-build instrumentation.

    Raises
    ------
    ValueError
        The module registers twice, claims nothing, declares raw entries it
        does not claim, or gives a role that is not of its documented type.

    Examples
    --------
    Roles defined below the contract are registered by calling the decorator
    at the module's end: ``register_family(entries=..., kernel_rules=(rule,),
    events=reader)(contract)``.
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
        roles = _roles(name, kernel_rules, events, kinds, address_forms, instrument)
        _FAMILIES.append(Family(name, module, fn, frozenset(entries), claims, dict(isa or {}), raw, *roles))
        _owners.cache_clear()
        return fn

    return decorate


def _roles(name, kernel_rules, events, kinds, address_forms, instrument) -> tuple:
    """``(kernel_rules, events, kinds, address_forms, instrument)`` as :class:`Family` holds them.

    Raises
    ------
    ValueError
        A hook is not callable, a kind has no callable ``args``, or a kernel
        rule or event reader is given twice.
    """
    events = (events,) if callable(events) else tuple(events)
    kernel_rules, kinds, forms = tuple(kernel_rules), dict(kinds or {}), dict(address_forms or {})
    hooks = [("kernel rule", f) for f in kernel_rules] + [("event reader", f) for f in events]
    hooks += [(f"address form {k!r}", f) for k, f in forms.items()]
    hooks += [(f"operand kind {k!r}", getattr(v, "args", None)) for k, v in kinds.items()]
    hooks += [("instrument hook", instrument)] if instrument is not None else []
    bad = [what for what, fn in hooks if not callable(fn)]
    ids = [id(fn) for _, fn in hooks]
    bad += [f"{what} {getattr(fn, '__qualname__', fn)} (given twice)"
            for what, fn in hooks[: len(kernel_rules) + len(events)] if ids.count(id(fn)) > 1]
    if bad:
        listing = ", ".join(dict.fromkeys(bad))
        raise ValueError(f"tvm_tirx: family {name}: not a function, or a function given twice: {listing}")
    return kernel_rules, events, kinds, forms, instrument


def families() -> tuple:
    """Every registered family, in registration order (the modules of :mod:`..families`
    are imported, and so register themselves, on the first call).

    Raises
    ------
    ValueError
        Two families claim one PTX table entry or share a role (:func:`_check_roles`).
    """
    # The family modules register themselves with this module, so it loads them on
    # first use rather than at its own import -- by name, as a plugin registry loads
    # its plugins: the families sit above every stage of the tile package.
    importlib.import_module(FAMILIES_PACKAGE)

    _owners()  # the overlap check
    return tuple(_FAMILIES)


@functools.cache
def _owners() -> dict:
    """``entry name -> Family`` for every claimed entry (and the families' roles checked).

    Raises
    ------
    ValueError
        Two families claim one entry, or share a role (a registration error of
        the package, :func:`_check_roles`).
    """
    _check_roles()
    out = {}
    for entry in table_entries():
        owners = [f for f in _FAMILIES if f.owns(entry)]
        if len(owners) > 1:
            names = ", ".join(f.name for f in owners)
            raise ValueError(f"tvm_tirx: PTX table entry {entry.name!r} is claimed by families {names}")
        if owners:
            out[entry.name] = owners[0]
    return out


def _check_roles() -> None:
    """Check that no two families register one kernel rule, event reader or operand
    kind, nor one address form name with different functions.

    Raises
    ------
    ValueError
        The first such role, naming both families.
    """
    seen = {}
    for family in _FAMILIES:
        keys = [(("kernel rule", id(f)), f.__qualname__, f) for f in family.kernel_rules]
        keys += [(("event reader", id(f)), f.__qualname__, f) for f in family.events]
        keys += [(("operand kind", k), repr(k), None) for k in family.kinds]
        keys += [(("address form", k), repr(k), f) for k, f in family.address_forms.items()]
        for key, label, fn in keys:
            other = seen.setdefault(key, (family, fn))
            if other[0] is not family and not (key[0] == "address form" and other[1] is fn):
                raise ValueError(f"tvm_tirx: {key[0]} {label} is registered by families {other[0].name}, {family.name}")


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
