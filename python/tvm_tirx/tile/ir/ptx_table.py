"""The one adapter to apache-tvm's PTX table (``tvm.backend.cuda.ptx``).

Every fact about an instruction is read here: its table entry, modifier slots,
operand slots with their register-group lengths ("lanes"), PTX types, accepted
TVM dtypes and state spaces; and here the emitted ``T.ptx`` call is built.
Nothing about an instruction is restated, and no other module of ours imports
``tvm.backend.cuda.ptx`` but :mod:`.ptx_types` (the PTX types' dtypes and C
bindings).

Opcodes are PTX text as the ISA writes it (``"shfl.sync.bfly.b32"``);
apache-tvm's own spelling of a multi-word mnemonic (``T.ptx["shfl_sync.bfly.b32"]``)
is accepted too (:func:`namespace_text`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from tvm.backend.cuda.ptx import PTXNamespace
from tvm.backend.cuda.ptx.table import (
    TABLE,
    mods,
    operand_dtypes,
    operand_layout,
    operand_space,
    operand_type,
    variants,
)
from tvm.ir import StringImm

from ...errors import TileError, TileInternalError

__all__ = [
    "Instruction",
    "PtxOperand",
    "TableEntry",
    "resolve",
    "opcode_text",
    "canonical_text",
    "table_entries",
    "entry_variants",
    "cert_arch",
    "ptx_call",
    "opcode_of_call",
    "namespace_text",
    "orders_memory",
]


@dataclass(frozen=True)
class PtxOperand:
    """One operand of a PTX instruction form, in PTX operand order.

    Attributes
    ----------
    name : str
        The table's operand name (``"d"``, ``"a"``, ``"addr"``, ``"cache_policy"``).
    kind : str
        ``"reg"`` (register or register group), ``"addr"`` (memory address),
        ``"ptr"`` or ``"imm"``, as in the table.
    rw : str
        ``"r"``, ``"w"`` or ``"rw"``: whether the instruction reads or writes it.
    lanes : int
        Registers in the operand's group (the ``.v4`` of ``ld.v4`` gives 4).
    ptx_type : str | None
        The operand's PTX type token (``"b32"``, ``"f32"``) for ``"reg"`` operands.
    dtypes : tuple[str, ...]
        TVM dtypes the table accepts for a ``"reg"`` operand (canonical first).
    space : str
        State space of an ``"addr"`` operand (``"global"``, ``"shared"``,
        ``"shared::cta"``, ``"local"``; ``""`` = generic).
    """

    name: str
    kind: str
    rw: str
    lanes: int
    ptx_type: str | None
    dtypes: tuple[str, ...]
    space: str

    @property
    def writes(self) -> bool:
        """Whether the instruction writes this operand."""
        return self.rw in ("w", "rw")


@dataclass(frozen=True)
class Instruction:
    """One fully specified PTX instruction form.

    Attributes
    ----------
    opcode : str
        Canonical PTX text, modifiers in the ISA's order (``"ld.global.v4.b32"``).
    mnemonic : str
        The instruction name (``"ld"``, ``"st"``, ``"mov"``).
    entry_name : str
        apache-tvm's table entry (``"ld_vec"``, ``"mov_pack_b32x2"``).
    modifiers : dict[str, str]
        Modifier slot -> token (``""`` when omitted), e.g. ``{"space": "global", ...}``.
    operands : tuple[PtxOperand, ...]
        The operands a call supplies, in PTX order.
    """

    opcode: str
    mnemonic: str
    entry_name: str
    modifiers: dict
    operands: tuple

    @property
    def entry(self) -> "TableEntry":
        """The table entry of this form (what the family registry is keyed by)."""
        return TableEntry(self.entry_name, self.mnemonic)

    def __hash__(self):
        return hash((self.opcode, self.entry_name))


@dataclass(frozen=True)
class TableEntry:
    """One entry of apache-tvm's PTX table, as the family registry sees it.

    Attributes
    ----------
    name : str
        The entry's name (``"ld_vec"``, ``"cp_async_ca"``), unique in the table.
    mnemonic : str
        The PTX instruction name the entry renders (``"ld"``, ``"cp"``); several
        entries share one (every ``cp.async*`` entry is ``"cp"``).
    """

    name: str
    mnemonic: str


def _ptx_namespace():
    return _namespace_singleton(PTXNamespace)


@functools.cache
def _namespace_singleton(cls):
    return cls()


@functools.cache
def _multi_word_mnemonics() -> tuple:
    """``(mnemonic, family)`` of every table entry whose PTX mnemonic has several
    words (``"shfl.sync"`` -> ``"shfl_sync"``), longest mnemonic first."""
    pairs = {e.ptx_name: e.family for e in TABLE.values() if "." in e.ptx_name and e.family != e.ptx_name}
    return tuple(sorted(pairs.items(), key=lambda kv: (-len(kv[0]), kv[0])))


def namespace_text(text: str) -> str:
    """``text`` as apache-tvm's ``T.ptx[...]`` spells it.

    The PTX ISA writes some mnemonics as several words (``shfl.sync``,
    ``vote.sync``, ``cvt.pack``); apache-tvm's namespace reads the first word
    as the instruction family and names those families with an underscore
    (``T.ptx["shfl_sync.bfly.b32"]``).  The text a user writes is the ISA's
    (``"shfl.sync.bfly.b32"``): its multi-word mnemonic, read from the table's
    entries, becomes the family name.  Text of any other instruction is
    returned unchanged.
    """
    for mnemonic, family in _multi_word_mnemonics():
        if text == mnemonic or text.startswith(mnemonic + "."):
            return family + text[len(mnemonic) :]
    return text


def _namespace_chain(text: str):
    """``T.ptx[text]`` for PTX text in the ISA's spelling or in apache-tvm's.

    Raises
    ------
    KeyError, AttributeError
        apache-tvm's namespace refuses both spellings (its message, for the ISA's).
    """
    namespace = _ptx_namespace()
    spelled = namespace_text(text)
    try:
        return namespace[spelled]
    except (KeyError, AttributeError):
        if spelled == text:
            raise
        try:  # a one-word mnemonic whose next token looks like a multi-word one
            return namespace[text]
        except (KeyError, AttributeError):
            pass
        raise


def _ptx_spelled(message: str) -> str:
    """apache-tvm's message with its family names (``shfl_sync``) in the ISA's spelling."""
    for mnemonic, family in _multi_word_mnemonics():
        message = re.sub(rf"(?<![\w.]){re.escape(family)}(?![\w])", mnemonic, message)
    return message


def _chain_candidates(chain):
    """``(entry, filled_tokens)`` pairs of a ``T.ptx`` attribute chain.

    apache-tvm 0.27 keeps them in ``_InstrChain._cands``; this is the one place
    that reads that attribute.
    """
    return tuple(chain._cands)  # pylint: disable=protected-access


def canonical_text(entry, tokens) -> str:
    """PTX text of table ``entry`` with modifier ``tokens`` (one per slot, ``""`` or
    None when omitted): the mnemonic, then the tokens in slot order -- the order
    the ISA writes them and apache-tvm's helper renders them."""
    return ".".join([entry.ptx_name, *[t for t in tokens if t]])


def opcode_text(instr) -> str:
    """The PTX text of ``instr`` (a ``T.ptx[...]`` chain or a string), for messages.

    A chain's candidates may read the same tokens into different slots
    (``cvt.f32.bf16``: destination or source type first, by entry), so this is
    the text of its first candidate; the form finally chosen carries its own
    canonical text (:attr:`Instruction.opcode`).
    """
    if isinstance(instr, str):
        return instr
    entry, filled = _chain_candidates(instr)[0]
    return canonical_text(entry, filled)


def resolve(instr) -> tuple[Instruction, ...]:
    """Resolve ``instr`` to the complete instruction forms it can name.

    Parameters
    ----------
    instr : str | T.ptx chain
        ``"ld.global.v4.b32"`` or ``T.ptx["ld.global.v4.b32"]``.

    Returns
    -------
    tuple[Instruction, ...]
        One entry per operand shape the text names (``mov.b64`` has a scalar,
        a pack and an unpack form); never empty.

    Raises
    ------
    TileError
        The text is not a PTX instruction of apache-tvm's table, a modifier is
        unknown or missing, or the modifier combination is illegal (the
        table's own check, which follows the PTX ISA).
    """
    if isinstance(instr, str):
        return _resolve_text(instr)
    return _resolve_candidates(opcode_text(instr), _chain_candidates(instr))


@functools.cache
def _resolve_text(text: str) -> tuple[Instruction, ...]:
    if not isinstance(text, str) or not text:
        raise TileError("", "unknown opcode", expected="a PTX opcode string", found=repr(text))
    try:
        chain = _namespace_chain(text)
    except (KeyError, AttributeError) as err:
        msg = err.args[0] if err.args else str(err)
        raise TileError(text, "unknown or illegal opcode spelling", found=_ptx_spelled(str(msg))) from None
    return _resolve_candidates(text, _chain_candidates(chain))


@functools.cache
def _resolve_candidates(text: str, candidates) -> tuple[Instruction, ...]:
    reasons = []
    out = []
    for entry, filled in candidates:
        missing = [s.name for s, t in zip(entry.slots, filled) if t is None and not s.optional]
        if missing:
            reasons.append(f"missing required modifier(s) {', '.join(missing)}")
            continue
        tokens = tuple(t or "" for t in filled)
        mod_map = mods(entry, tokens)
        if entry.check is not None:
            error = entry.check(mod_map)
            if error:
                reasons.append(error)
                continue
        operands = []
        for slot, _, lanes in operand_layout(entry, mod_map):
            if lanes == 0:
                continue
            is_reg = slot.kind == "reg"
            operands.append(
                PtxOperand(
                    name=slot.name,
                    kind=slot.kind,
                    rw=slot.rw,
                    lanes=lanes,
                    ptx_type=operand_type(slot, mod_map) if is_reg else None,
                    dtypes=tuple(operand_dtypes(slot, mod_map)) if is_reg else (),
                    space=operand_space(slot, mod_map) if slot.kind == "addr" else "",
                )
            )
        canonical = canonical_text(entry, tokens)
        out.append(
            Instruction(
                opcode=canonical,
                mnemonic=entry.ptx_name,
                entry_name=entry.name,
                modifiers=dict(mod_map),
                operands=tuple(operands),
            )
        )
    if not out:
        raise TileError(
            text,
            "illegal opcode",
            expected="a complete, legal PTX instruction",
            found="; ".join(dict.fromkeys(reasons)) or "no matching form",
        )
    return tuple(out)


def table_entries() -> tuple:
    """Every entry of the table, in table order, as :class:`TableEntry`."""
    return tuple(TableEntry(e.name, e.ptx_name) for e in TABLE.values())


def entry_variants(entry_name: str):
    """Yield the PTX text of every legal modifier combination of table entry ``entry_name``."""
    entry = TABLE[entry_name]
    for tokens in variants(entry):
        yield canonical_text(entry, tokens)


def cert_arch(entry_name: str) -> str | None:
    """The architecture apache-tvm's table certifies table entry ``entry_name`` at
    (``"sm_103a"``), or None.  Nothing gates on it; a family may cite it as the
    floor of forms that no ptxas at hand assembles."""
    return TABLE[entry_name].cert_arch or None


def ptx_call(opcode: str, args, pred=None, preserve_dst: bool = False):
    """The ``T.ptx[opcode](*args, pred=, preserve_dst=)`` Call (a void ``tirx.ptx.<entry>`` Call).

    Parameters
    ----------
    opcode : str
        Canonical PTX text of a form that :func:`resolve` accepted.
    args : list[PrimExpr]
        PTX operands in PTX order: destinations as writable element loads,
        addresses as pointers or integer addresses, as the table's slots take them.
    pred : PrimExpr | None
        A bool guarding the instruction (``@p``).
    preserve_dst : bool
        Bind register destinations read-write, so a false ``pred`` keeps them.

    Raises
    ------
    TileInternalError
        The table rejects the operands: the lowering built a wrong call (a bug
        of tvm_tirx, not of the kernel).
    """
    instr = _namespace_chain(opcode)
    try:
        return instr(*args, pred=pred, preserve_dst=preserve_dst)
    except (ValueError, AssertionError) as err:  # AssertionError: two table entries match
        raise TileInternalError(f"{opcode}: the PTX table rejected the expansion: {err}") from None


def opcode_of_call(call) -> str | None:
    """The PTX opcode text a ``T.ptx`` Call issues (``"ld.global.v4.b32"``), or None.

    apache-tvm's PTX engine lays a Call to ``tirx.ptx.<entry>`` out as
    ``[operands..., pred?] [one token per modifier slot] [flag marker]``;
    the opcode is the entry's mnemonic followed by the non-empty tokens in
    slot order.  None for Calls that are not PTX instructions.
    """
    name = getattr(getattr(call, "op", None), "name", "")
    entry = TABLE.get(name[len("tirx.ptx.") :]) if name.startswith("tirx.ptx.") else None
    if entry is None:
        return None
    n_slots = len(entry.slots)
    args = list(call.args)
    if len(args) < n_slots + 1:
        return None
    tokens = args[len(args) - n_slots - 1 : -1]
    if not all(isinstance(tok, StringImm) for tok in tokens):
        return None
    return canonical_text(entry, [str(tok.value) for tok in tokens])


def orders_memory(call) -> bool | None:
    """Whether the ``T.ptx`` Call ``call`` is an instruction the table marks as
    ordering memory (barriers, fences, waits); None for a Call that is not a PTX
    instruction (an intrinsic, inline asm: it may do anything)."""
    name = getattr(getattr(call, "op", None), "name", "")
    entry = TABLE.get(name[len("tirx.ptx.") :]) if name.startswith("tirx.ptx.") else None
    return None if entry is None else bool(entry.orders_memory)
