"""Raw ``T.ptx[...]`` calls of the instructions a family claims: decoded into the
:class:`~..ir.call_view.CallView` of their tile form and checked by its rules.

A kernel may write an instruction as apache-tvm's intrinsic call
(``T.ptx["bar.sync"](T.uint32(1), T.uint32(256))``) instead of the tile form
(``T.cuda.tile.apply(T.ptx["bar.sync"], id=T.uint32(1), count=T.uint32(256))``).
A family that declares a :class:`RawSpelling` for some of its table entries
has those raw calls read back into the view its hooks take -- operands in
role order, keyword parameters, ``pred``, the form's contract, the call's
site -- and checked by the same hooks (``bind``, the target-arch rule,
``kernel_check``) and kernel rules (:mod:`..kernel.kernel_rules`) as its tile calls.
A raw call is only checked: the lowering leaves it as written.

How the PTX operands map to the tile form is the form's own data
(:meth:`~..ir.contract.Contract.ptx_order`: roles and PTX-bound parameters); a
family adds, in its :class:`RawSpelling`, the keyword each operand it fills
itself (``Contract.derived``) comes from.  A raw call whose operands cannot be
read that way (an address, a register that is not an element of a
``T.alloc_local`` tensor, a sunk lane) is refused, naming the tile form to
write instead.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import tvm
from tvm.ir import TensorLoad

from ...errors import TileError
from ..ir.call_view import CallView
from ..ir.operands import Operand
from ..ir.ptx_table import namespace_text, opcode_of_call

__all__ = ["RawSpelling", "is_raw_checked", "decode_raw", "check_raw", "split_raw", "raw_positions", "tile_form_text"]

_PREFIX = "tirx.ptx."


@dataclass(frozen=True)
class RawSpelling:
    """The raw ``T.ptx[...]`` calls a family checks (:func:`~..ir.registry.register_family`'s ``raw=``).

    Attributes
    ----------
    entries : frozenset[str]
        Table entries (claimed by the family by name) whose raw calls are
        decoded and checked.
    params : dict[str, str]
        PTX operand name -> the keyword of the tile form it comes from, for
        each operand the form fills itself (``Contract.derived``): shfl.sync's
        ``membermask`` is ``membermask=``.  Roles and PTX-bound parameters
        (``Contract.params``) need no entry.
    """

    entries: frozenset
    params: dict = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "entries", frozenset(self.entries))


@functools.cache
def _spellings() -> dict:
    """``entry name -> RawSpelling`` of every raw entry some family declares."""
    from ..ir.registry import families  # pylint: disable=import-outside-toplevel

    return {entry: f.raw for f in families() if f.raw is not None for entry in f.raw.entries}


def _entry(call) -> str | None:
    """The table entry of a ``T.ptx`` Call whose raw calls a family checks, or None."""
    name = getattr(getattr(call, "op", None), "name", "")
    entry = name[len(_PREFIX) :] if name.startswith(_PREFIX) else None
    return entry if entry in _spellings() else None


def is_raw_checked(call) -> bool:
    """Whether ``call`` (an ``Evaluate``'s value) is a raw ``T.ptx`` call that a family checks."""
    return _entry(call) is not None and opcode_of_call(call) is not None


def _contract(entry: str, opcode: str):
    """The contract of the form a raw call of table ``entry`` issues (the entry's among ``opcode``'s)."""
    from ..ir.registry import candidates  # pylint: disable=import-outside-toplevel

    return next(c for c in candidates(opcode) if c.instruction.entry_name == entry)


def split_raw(call, contract):
    """``({PTX operand: [args]}, pred, flags)`` of raw ``call``: apache-tvm lays its
    arguments out as ``[operands..., pred?] [one token per modifier slot] [flags]``."""
    args = list(call.args)
    flags = [f for f in str(args[-1].value).split(",") if f]
    n_tokens = len(contract.instruction.modifiers)
    operands = args[: len(args) - n_tokens - 1]
    pred = operands.pop() if "pred" in flags else None
    out, i = {}, 0
    for op in contract.instruction.operands:
        out[op.name] = operands[i : i + op.lanes]
        i += op.lanes
    return out, pred, flags


def tile_form_text(contract, spelling=None) -> str:
    """The tile call of ``contract``'s form, for messages:
    ``T.cuda.tile.apply(T.ptx["shfl_sync.bfly.b32"], dst, src, b=..., c=..., membermask=...)``."""
    words = [f'T.ptx["{namespace_text(contract.opcode)}"]']
    words += [r.role for r in contract.roles if r.keyword is None]
    keywords = [*contract.params, *contract.options, *(spelling.params.values() if spelling else ())]
    words += [f"{k}=..." for k in dict.fromkeys(keywords)]
    return f"T.cuda.tile.apply({', '.join(words)})"


def _unreadable(contract, spelling, what: str, found) -> TileError:
    """The TileError of a raw call whose operand ``what`` the checker cannot read."""
    return TileError(
        contract.opcode,
        "raw call whose operands the checker cannot read",
        operand=what,
        expected=f"the tile form, which the checker reads: {tile_form_text(contract, spelling)}",
        found=found,
    )


def _is_register(value) -> bool:
    """Whether raw argument ``value`` is an element of a ``T.alloc_local`` tensor."""
    return isinstance(value, TensorLoad) and value.source.scope() == "local"


def _register(contract, spelling, role, values, position) -> Operand:
    """The :class:`~..ir.operands.Operand` of register role ``role`` given its raw
    ``values``: an element of a ``T.alloc_local`` tensor per register written,
    any scalar expression for a read (kind ``"element"`` when all are elements).

    Raises
    ------
    TileError
        A value is neither (:func:`_unreadable`).
    """
    for value in values:
        if not (_is_register(value) or (not role.writes and tvm.ir.is_prim_expr(value))):
            raise _unreadable(contract, spelling, f"{role.role} (operand {position})",
                              f"{value} (not an element of a T.alloc_local tensor)")  # fmt: skip
    kind = "element" if all(_is_register(v) for v in values) else "scalar"
    return Operand(values[0] if len(values) == 1 else tuple(values), kind, position)


def raw_positions(contract) -> dict:
    """``{PTX operand name: 1-based argument position}`` of each operand's first value in a
    raw call of ``contract``'s form (apache-tvm passes the PTX operands in order, one
    argument per register), for messages that point at the raw call's argument
    (:func:`tvm_tirx.excerpts.excerpt` underlines argument ``position - 1``)."""
    out, position = {}, 1
    for op in contract.instruction.operands:
        out[op.name] = position
        position += op.lanes
    return out


def _read(contract, spelling, args):
    """``(operands in role order, params)`` of a raw call's PTX operands ``args``.

    Raises
    ------
    TileError
        An operand the form's data does not say how to read (:func:`_unreadable`).
    """
    operands, params, positions = [None] * len(contract.roles), {}, raw_positions(contract)
    names = [op.name for op in contract.instruction.operands]
    for (kind, key), name in zip((p for p in contract.ptx_order() if p[0] != "pred"), names):
        position = positions[name]
        values = args[name]
        if kind == "role":
            role = contract.roles[key]
            if role.kind != "register":
                raise _unreadable(contract, spelling, f"{role.role} (operand {position})", f"{role.kind} operand {values}")
            operands[key] = _register(contract, spelling, role, values, position)
        elif kind == "param":
            params[key] = values[0]
        elif name in spelling.params:
            params[spelling.params[name]] = values[0]
        else:
            raise _unreadable(contract, spelling, f"operand {position} ({name})", "an operand the tile form derives")
    if contract.pred_operand is not None:
        raise _unreadable(contract, spelling, "pred", "a predicate the tile form places as an operand")
    return tuple(operands), params


def decode_raw(call, facts=None, site=None):
    """The :class:`~..ir.call_view.CallView` of raw ``T.ptx`` Call ``call`` in its tile
    form (``raw=True``, scope ``"thread"``, at ``site``: its
    :class:`~..kernel.sites.CallSite` in ``facts``' kernel), or None when no family checks it.

    Raises
    ------
    TileError
        Its operands cannot be read into the tile form (the message names it).
    """
    entry = _entry(call)
    opcode = opcode_of_call(call) if entry is not None else None
    if opcode is None:
        return None
    contract, spelling = _contract(entry, opcode), _spellings()[entry]
    args, pred, flags = split_raw(call, contract)
    sunk = [f for f in flags if f.startswith("s") and f != "sink"]
    if sunk:
        raise _unreadable(contract, spelling, "operands", f"sunk register lanes ({', '.join(sunk)})")
    operands, params = _read(contract, spelling, args)
    return CallView(operands, pred, params, contract, "thread", site, facts, raw=True)


def check_raw(call, facts, site):
    """Check raw ``T.ptx`` Call ``call`` at ``site`` by its tile form's rules: its
    parameters, the family's ``bind``, the target-arch rule and ``kernel_check``.

    Returns
    -------
    CallView | None
        The call's view (for the kernel rules), None when no family checks it.

    Raises
    ------
    TileError
        The first rule the call breaks, pointing at its source line.
    """
    from .static_rules import bind_call, param_error, rule_arch  # pylint: disable=import-outside-toplevel

    try:
        view = decode_raw(call, facts, site)
        if view is None:
            return None
        err = param_error(view.contract, view.params)
        if err is None:
            view = replace(view, contract=bind_call(view))
            contract = view.contract
            err = rule_arch(contract, facts.arch) or (contract.kernel_check and contract.kernel_check(view))
        if err:
            raise err
    except TileError as err:
        raise err.at(site.location) from None
    return view
