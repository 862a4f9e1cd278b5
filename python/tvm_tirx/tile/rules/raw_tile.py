"""Raw ``T.ptx[...]`` calls with address operands, read as the tile call they spell.

``T.ptx["ld.global.v4.b32"](r[0], r[1], r[2], r[3], T.address_of(A[i, j]))`` loads what
``T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r.sub[0:4], A.sub[i, j : j + 4])`` loads.
:func:`raw_tile_call` rebuilds that tile call (a :class:`~.op.TileCall`) from the raw
call's PTX operands whenever each of them names a tile operand:

* a register operand: ``lanes`` elements of one ``T.alloc_local`` tensor that follow
  each other on its last axis (``r[0], r[1], ...``), or, read as one register, any
  typed scalar expression;
* a memory operand: the address of an element, ``T.address_of(A[i, j])`` or, for a
  ``.shared`` / ``.local`` form, its window address (``A.ptr_to([i, j])`` of a shared
  tensor, ``__cvta_generic_to_local``): the operand is the form's atom from that
  element on.  A generic address passed where the form takes a window address is
  refused (PTX ISA 6.4.1.1: the instruction would read another location);
* a PTX operand the form binds to a keyword parameter: its value.

A collective form (``ldmatrix``, ``mma.sync``: each lane passes its own part) spells no
thread-scope tile call and is not rebuilt.

The lowering checks the rebuilt call by the tile form's rules -- operand dtypes and
scopes, bounds, alignment, ownership, the family's ``bind`` and ``kernel_check`` -- and
leaves the raw call as written.  A raw call whose operands name no tile call (an address
computed as an integer, registers that are not one tensor's neighbours, an operand the
tile form derives itself) is not rebuilt; the protocol rules read it as written.  The
families that read raw calls into their own views (:class:`~.raw_calls.RawSpelling`:
the barriers and warp-synchronous instructions) keep doing so.
"""

from __future__ import annotations

from tvm.ir import TensorLoad
from tvm.runtime import DataType

from ...errors import TileError
from ..analysis.prover import make_analyzer
from ..ir.contract import LOCAL_WINDOW
from ..ir.ptx_table import opcode_of_call
from ..ir.registry import candidates
from .op import TileCall
from .raw_calls import is_raw_checked, split_raw

__all__ = ["raw_tile_call", "raw_tile_contract", "is_raw_tile_candidate"]

_PREFIX = "tirx.ptx."
#: State space -> how a raw call converts an element's generic address into that space's
#: window (PTX ISA 6.4.1.1: a ``.shared`` or ``.local`` address is an offset in its window,
#: not a generic address): apache-tvm wraps the address of a raw ``.shared`` operand in
#: ``cvta_generic_to_shared`` itself; a ``.local`` one is written ``__cvta_generic_to_local``.
_WINDOWS = {
    "shared": ("tirx.cuda.cvta_generic_to_shared", None),
    "shared::cta": ("tirx.cuda.cvta_generic_to_shared", None),
    "local": ("tirx.call_pure_extern", LOCAL_WINDOW),
}
_SPELLING = {"shared": "A.ptr_to([i])", "shared::cta": "A.ptr_to([i])",
             "local": f'T.call_pure_extern("uint64", "{LOCAL_WINDOW}", A.ptr_to([i]))'}


def raw_tile_contract(call):
    """The tile contract of the form raw ``T.ptx`` Call ``call`` issues, or None (no PTX
    call, or an instruction no family claims)."""
    opcode = opcode_of_call(call)
    if opcode is None:
        return None
    entry = call.op.name[len(_PREFIX) :]
    try:
        forms = candidates(opcode)
    except TileError:  # an instruction no family claims, or one of no tile form
        return None
    return next((c for c in forms if c.instruction.entry_name == entry), None)


def is_raw_tile_candidate(call) -> bool:
    """Whether ``call`` (an ``Evaluate``'s value) is a raw ``T.ptx`` call of an instruction
    a family claims, other than those the family reads itself (:func:`~.raw_calls.is_raw_checked`)."""
    return not is_raw_checked(call) and raw_tile_contract(call) is not None


def _unwrap(address):
    """``(inner address, window space or None)``: ``address`` without the conversion to
    a state space's window it is wrapped in (see :data:`_WINDOWS`)."""
    if getattr(getattr(address, "op", None), "name", "") == "tirx.reinterpret" and len(address.args) == 1:
        address = address.args[0]  # a window address as a pointer: the same bits
    name = getattr(getattr(address, "op", None), "name", "")
    for space, (op, extern) in _WINDOWS.items():
        if name != op:
            continue
        args = list(address.args)
        if extern is None and len(args) == 1:
            return args[0], space
        if extern is not None and len(args) == 2 and getattr(args[0], "value", None) == extern:
            return args[1], space
    return address, None


def _element(address):
    """``(buffer, indices, window space or None)`` of the element whose address
    ``address`` is (converted to a state space's window or not), or None."""
    address, window = _unwrap(address)
    if getattr(getattr(address, "op", None), "name", "") != "tirx.address_of" or len(address.args) != 1:
        return None
    load = address.args[0]
    return (load.source, list(load.indices), window) if isinstance(load, TensorLoad) else None


def _check_window(role, window):
    """Raise when a ``.shared`` / ``.local`` operand is passed a generic address."""
    space = role.ptx.space
    if space not in _WINDOWS or _WINDOWS.get(window) == _WINDOWS[space]:
        return
    raise TileError("", f"raw address not in the .{space} window", operand=role.role,
                    expected=f"the .{space} address of the element (PTX ISA 6.4.1.1): {_SPELLING[space]}",
                    found="a generic address (T.address_of)" if window is None else f"a .{window} window address")


def _bits(dtype) -> int:
    return DataType(str(dtype)).bits * DataType(str(dtype)).lanes


def _as_accepted(role, dtype) -> str | None:
    """The dtype ``role`` accepts that reads an element of ``dtype`` bit for bit: ``dtype``
    itself, else one of the same width (a raw call moves bits: ``atom.add.u32`` on an int32
    tensor, an mbarrier in an int64 one; PTX ISA 5.2.2, relaxed type checking of ld / st);
    None when the widths differ (punning a bf16 tensor as ``.b32`` words)."""
    if str(dtype) in role.dtypes:
        return str(dtype)
    # every dtype a role accepts has the PTX type's width (Contract.roles)
    return role.dtypes[0] if role.dtypes and _bits(role.dtypes[0]) == _bits(dtype) else None


def _registers(role, values, declare):
    """The tile operand of register ``role`` passed as ``values``, or None."""
    loads = [v for v in values if isinstance(v, TensorLoad)]
    if len(values) == 1 and not role.writes and not loads:
        return values[0]  # a typed scalar stands for one register read
    if len(loads) != len(values) or any(v.source.scope() != "local" or not len(v.indices) for v in loads):
        return None
    buf, first = loads[0].source, loads[0].indices
    dtype = _as_accepted(role, buf.dtype)
    analyzer = make_analyzer()
    for i, load in enumerate(loads):
        same = load.source.same_as(buf) and all(
            _equal(analyzer, a, b) for a, b in zip(load.indices[:-1], first[:-1]))
        if dtype is None or not same or not _equal(analyzer, load.indices[-1], first[-1] + i):
            return None
    try:
        return declare(buf, list(first), len(loads), dtype)
    except ValueError:  # registers past their tensor, or a layout the view cannot take: not rebuilt
        return None


def _equal(analyzer, a, b) -> bool:
    return getattr(analyzer.simplify(a - b), "value", None) == 0


def _memory(role, values, declare):
    """The tile operand of memory ``role`` whose address is ``values[0]``, or None.

    Raises
    ------
    TileError
        The address is a generic one where the form takes a ``.shared`` / ``.local``
        window address, or the vector runs past a static extent of the tensor.
    """
    found = _element(values[0]) if len(values) == 1 else None
    if found is None or role.image or role.run_time_extents or not role.atom or role.atom[-1] is None:
        return None
    buf, indices, window = found
    _check_window(role, window)
    dtype = _as_accepted(role, buf.dtype)
    if dtype is None or not indices:
        return None
    extent = 1
    for n in role.atom:
        extent *= n
    try:
        return declare(buf, indices, extent, dtype)
    except ValueError:
        shape = " x ".join(str(n) for n in buf.shape)
        raise TileError("", "raw address past the tensor's extent", operand=role.role,
                        expected="the element addressed and the values the instruction moves inside the tensor",
                        found=f"{extent} elements from element [{', '.join(map(str, indices))}] of {buf.name} "
                        f"({shape})") from None


def raw_tile_call(call, contract, declare) -> TileCall | None:
    """The tile call raw ``T.ptx`` Call ``call`` spells (scope ``"thread"``), or None when
    one of its operands names no tile operand (see the module).  ``contract`` is
    :func:`raw_tile_contract`'s for ``call`` (None: nothing to rebuild).

    ``declare(buf, indices, extent, dtype) -> Buffer | None`` makes the view of ``extent``
    elements of ``buf`` from element ``indices`` on, read as ``dtype`` (of the same width),
    or None where no view names them (a swizzled tensor at a run-time offset); the
    lowering declares it in a scratch frame and records its parent in the kernel facts.
    It raises ``ValueError`` for a vector past a static extent.

    Raises
    ------
    TileError
        A memory operand's vector runs past a static extent of its tensor.
    """
    if contract is None or is_raw_checked(call) or contract.collective.width > 1:
        return None  # a collective's raw call passes one lane's operands: no thread-scope tile call
    args, pred, flags = split_raw(call, contract)
    if any(f.startswith("s") and f != "sink" for f in flags) or contract.pred_operand is not None:
        return None
    positional, params = [None] * sum(r.keyword is None for r in contract.roles), {}
    names = [op.name for op in contract.instruction.operands]
    for (kind, key), name in zip((p for p in contract.ptx_order() if p[0] != "pred"), names):
        if kind == "param":
            params[key] = args[name][0]
            continue
        if kind != "role":
            return None  # an operand the tile form derives itself
        role = contract.roles[key]
        read = {"register": _registers, "memory": _memory}.get(role.kind)
        value = read(role, args[name], declare) if read is not None else None
        if value is None:
            return None
        if role.keyword is None:
            positional[key] = value
        else:
            params[role.keyword] = value
    return TileCall(contract.opcode, tuple(positional), params, "thread", pred, False)
