"""The oldest architecture of every tile form, as measured with ptxas: data, not code.

``families/arch_floors.json`` is written by ``tools/probe_arch_floors.py``: it
assembled every form of every family (:func:`.forms.forms_of`) with the ptxas
of the CUDA toolkit it names, for each target of :data:`TARGETS`, and recorded
the oldest target that accepts each form (its *floor*) and, when the
accepting targets are not all those :func:`satisfies` admits from there, their
list.  :func:`with_floor` folds that record into a family's
:class:`~.contract.Contract` (``min_arch``, and ``archs`` for such a list) for
every form the registry hands out, so no family states its floors in code and
:func:`..rules.static_rules.rule_arch` refuses a form below its floor when the
kernel is lowered for a target.

The record of a PTX table entry is compact: a value per opcode token (the
qualifiers and types after the mnemonic), the value of a form being the
newest of its tokens' (:func:`value_key`; ``ld.global.L2::cache_hint.v4.b32``:
``L2::cache_hint`` needs sm_80), and the forms that rule does not give
exactly, listed whole (``except``).  The probe checks the rule against every form it measured, so
the record reproduces each measurement; ``forms`` counts them.

Architecture names (CUDA C++ Programming Guide, "Compute Capabilities"; ptxas
``--gpu-name``): a plain ``sm_XY`` feature exists on every newer target; an
arch-specific (``sm_XYa``) or family-specific (``sm_XYf``) feature only on
targets with a suffix, so ``sm_90`` lacks what ``sm_90a`` has.
"""

from __future__ import annotations

import functools
import json
import pathlib
from dataclasses import replace
from typing import NamedTuple

from ...arch import parse_arch

__all__ = [
    "TARGETS",
    "Floor",
    "arch_key",
    "satisfies",
    "stricter",
    "value_key",
    "entry_records",
    "record_value",
    "floor_of",
    "with_floor",
    "measured_with",
    "source_of",
]

#: Every real target the ptxas of CUDA 13.0 assembles for, oldest first in the
#: order of :func:`arch_key` (``ptxas --help``, option ``--gpu-name``; sm_75 is
#: its oldest, so a floor of sm_75 means "every target of this toolkit").
TARGETS = (
    "sm_75", "sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_90a",
    "sm_100", "sm_100f", "sm_100a", "sm_103", "sm_103f", "sm_103a",
    "sm_110", "sm_110f", "sm_110a", "sm_120", "sm_120f", "sm_120a", "sm_121", "sm_121f", "sm_121a",
)  # fmt: skip

PATH = pathlib.Path(__file__).parent.parent / "families" / "arch_floors.json"
_SUFFIX_RANK = {"": 0, "f": 1, "a": 2}


def arch_key(arch) -> tuple:
    """``(SM version, suffix rank)`` of ``arch``: ``"sm_90a"`` -> ``(90, 2)``; plain < ``f`` < ``a``.

    Raises
    ------
    ValueError
        ``arch`` is not an SM architecture (:func:`tvm_tirx.arch.parse_arch`).
    """
    major, minor, suffix = parse_arch(arch)
    return 10 * major + minor, _SUFFIX_RANK[suffix]


def satisfies(target, floor) -> bool:
    """Whether a form of floor ``floor`` exists on ``target`` (both ``sm_XY[a|f]``).

    ``target`` is not older than ``floor`` (SM version), and has a suffix
    when ``floor`` has one: an arch- or family-specific feature is not part of
    a plain target (ptxas ``--gpu-name``).  Targets the probe measured that
    break this pattern are listed per form instead (:attr:`Floor.only`).

    Raises
    ------
    ValueError
        Either is not an SM architecture.
    """
    (t_number, t_rank), (f_number, f_rank) = arch_key(target), arch_key(floor)
    return t_number >= f_number and (f_rank == 0 or t_rank > 0)


def value_key(value) -> tuple:
    """Order of recorded values (a floor, or a list of accepting targets, floor
    first): by floor (:func:`arch_key`), a plain floor before a list at the
    same floor.  The record's token rule takes the greatest of a form's tokens."""
    if isinstance(value, str):
        return arch_key(value), 0
    return arch_key(value[0]), 1


def stricter(a, b):
    """The later of two floors by :func:`arch_key` (``None`` is no floor)."""
    if a is None or b is None:
        return a if b is None else b
    return a if arch_key(a) >= arch_key(b) else b


@functools.cache
def _data() -> dict:
    if not PATH.exists():  # a broken install: refusing nothing would let newer forms through
        raise RuntimeError(f"tvm_tirx: {PATH} is missing; reinstall the package (setup.py package_data)")
    return json.loads(PATH.read_text())


@functools.cache
def entry_records() -> dict:
    """``{table entry: record}`` over every family; a record is ``{"forms": n,
    "tokens": {token: floor}, "except": {opcode: floor | [accepting targets]}}``.

    Raises
    ------
    RuntimeError
        The data file is missing (a broken install).
    """
    out = {}
    for family in _data()["families"].values():
        out.update(family["entries"])
    return out


@functools.cache
def _unassembled() -> dict:
    return {key: message for family in _data()["families"].values() for key, message in family["unassembled"].items()}


def measured_with() -> dict:
    """How the data was measured: ``ptxas`` (release and version), ``apache_tvm``, ``targets``, ``how``."""
    return _data()["measured_with"]


class Floor(NamedTuple):
    """The measured floor of one form.

    Attributes
    ----------
    floor : str | None
        The oldest target of :data:`TARGETS` whose ptxas accepts the form; when
        none does, the architecture apache-tvm's table certifies the entry at,
        or None when it certifies none.
    only : tuple[str, ...]
        The accepting targets when they are not those :func:`satisfies` admits
        from ``floor`` (``sm_100a`` and ``sm_103a``, but no ``f`` target); else ``()``.
    refused : str
        ``""`` when some target accepts the form; else what ptxas says of it.
    """

    floor: str | None
    only: tuple
    refused: str


def record_value(record: dict, opcode: str) -> tuple:
    """``(covered, value)``: the value an entry's record gives ``opcode`` -- its
    ``except`` entry, else the greatest of its tokens' (:func:`value_key`) --
    and whether the record covers it (False: a token it does not know).

    ``value``: a floor, a list of accepting targets (floor first), or None (no
    target accepts the form and the table certifies none).
    """
    if opcode in record["except"]:
        return True, record["except"][opcode]
    tokens = opcode.split(".")[1:]
    if not all(t in record["tokens"] for t in tokens):
        return False, None
    return True, max((record["tokens"][t] for t in tokens), key=value_key)


def floor_of(entry: str, opcode: str):
    """The :class:`Floor` recorded for the form ``opcode`` of table entry
    ``entry``, or None when the record does not cover it (an entry or a token
    the probe never saw).

    Raises
    ------
    RuntimeError
        The data file is missing (a broken install).
    """
    record = entry_records().get(entry)
    covered, value = record_value(record, opcode) if record is not None else (False, None)
    if not covered:
        return None
    refused = _unassembled().get(f"{entry}:{opcode}", "")
    if value is None or isinstance(value, str):
        return Floor(value, (), refused)
    return Floor(value[0], tuple(value), refused)


def with_floor(contract):
    """``contract`` with its measured floor, or the reason it is no form.

    ``min_arch`` becomes the stricter of the family's and the data's,
    ``archs`` the data's list when the family names none.  A form that no
    target assembles and that apache-tvm's table certifies at no architecture
    (``ld.volatile.local``: "Modifier '.volatile' cannot be applied to
    '.local' space") is returned as a reason string: it reaches no kernel.
    A form the data does not cover is returned unchanged
    (``tests/python/test_arch_floors.py`` fails for it).
    """
    record = floor_of(contract.instruction.entry_name, contract.opcode)
    if record is None:
        return contract
    floor, only, refused = record
    if floor is None:
        return f"ptxas {measured_with().get('ptxas', '')} assembles it for no target: {refused}"
    min_arch = stricter(contract.min_arch, floor)
    archs = contract.archs or only
    if min_arch == contract.min_arch and archs == contract.archs:
        return contract
    return replace(contract, min_arch=min_arch, archs=archs)


def source_of(contract, section: str = "") -> str:
    """Where the floor of ``contract`` comes from, for messages: its PTX ISA
    ``section`` (the family's registration gives it) and the ptxas that
    measured it (or apache-tvm's certification, for a form no ptxas target
    assembles)."""
    instr = contract.instruction
    record = floor_of(instr.entry_name, instr.opcode)
    ptxas = f"ptxas {measured_with().get('ptxas', '')}".rstrip()
    if record is None:
        how = "stated by the family"
    elif record.refused:
        how = f"apache-tvm's table certifies {record.floor}; {ptxas} assembles it for none of its targets"
    else:
        how = f"measured with {ptxas}"
    return (f"PTX ISA {section}; " if section else "") + how
