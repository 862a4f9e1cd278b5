"""Emission: one ``T.ptx`` call per repeat coordinate, in unrolled loops.

Each operand supplies its PTX arguments at a group and repeat coordinate: a
register operand its registers (the slots its layout gives), a memory operand
its atom address in the role's address form, a scalar itself.  Address forms
and the arguments of operand kinds beyond register and memory are extension
points a family registers (:func:`register_address_form`, :func:`register_kind`).
Nothing is chosen here: the opcode is the contract's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import TileInternalError
from .contract import CallView
from .ptx_table import ptx_call
from .views import ViewMap, repeat_shape, role_axes

__all__ = ["register_address_form", "register_kind", "kind_proof", "OperandKind", "emit", "Emission"]

_ADDRESS_FORMS = {}
_KINDS = {}


def register_address_form(name: str, fn) -> None:
    """Register address form ``name``: ``fn(buf, coord) -> PrimExpr``, the address
    operand of view ``buf`` at coordinate ``coord`` (a list of index expressions).

    Built in: ``"generic"`` (``buf.ptr_to(coord)``, a generic pointer) and
    ``"shared::cta"`` (the 32-bit ``.shared::cta`` window address, PTX ISA
    6.4.1.1, CUDA ``__cvta_generic_to_shared``).  A family registers its own
    (ld/st: the ``.local`` window address); a name registered twice must be
    the same function.

    Raises
    ------
    ValueError
        ``name`` is registered with another function.
    """
    if _ADDRESS_FORMS.get(name, fn) is not fn:
        raise ValueError(f"tvm_tirx: address form {name!r} registered twice")
    _ADDRESS_FORMS[name] = fn


@dataclass(frozen=True)
class OperandKind:
    """How operands of one kind beyond register and memory are emitted and proven.

    Attributes
    ----------
    args : callable
        ``fn(role, op, group_coord, rep) -> [PrimExpr, ...]``: the PTX
        arguments at one repeat coordinate.
    setup : callable | None
        ``fn(role, op, emission) -> (stmts, value)``: statements emitted once
        per call before the repeat loops (a matrix descriptor's encoding) and
        the operand value ``args`` then receives in place of the view.
    prove : callable | None
        ``fn(facts, opcode, role, op, group, repeat, pred, conds) -> TileError | None``:
        the rules that need the kernel (alignment, bounds), as
        :func:`.memory_proofs.check_memory` for memory operands.
    """

    args: object
    setup: object = None
    prove: object = None


def register_kind(kind: str, fn, *, setup=None, prove=None) -> None:
    """Register operand kind ``kind`` (``"descriptor"``, ``"tensor_map"`` ...):
    ``fn(role, op, group_coord, rep) -> [PrimExpr, ...]`` gives its PTX
    arguments; ``setup`` and ``prove`` are the optional hooks of :class:`OperandKind`.

    Raises
    ------
    ValueError
        ``kind`` is already registered.
    """
    if kind in _KINDS:
        raise ValueError(f"tvm_tirx: operand kind {kind!r} registered twice")
    _KINDS[kind] = OperandKind(fn, setup, prove)


def kind_proof(kind: str):
    """The ``prove`` hook of operand kind ``kind`` (None: none, or not a registered kind)."""
    entry = _KINDS.get(kind)
    return entry.prove if entry is not None else None


def _shared_cta_address(buf, coord):
    from tvm.tirx import Cast, call_pure_extern  # pylint: disable=import-outside-toplevel

    return Cast("uint32", call_pure_extern("uint64", "__cvta_generic_to_shared", buf.ptr_to(coord)))


register_address_form("generic", lambda buf, coord: buf.ptr_to(coord))
register_address_form("shared::cta", _shared_cta_address)


class Emission:  # pylint: disable=too-few-public-methods
    """One call's emission context.

    Attributes
    ----------
    contract : Contract
        The chosen form.
    ops : list[Operand]
        Classified operands.
    call : CallView
        Operands, pred and params, as family hooks see them.
    group : tuple[int, ...]
        The call's group extents.
    group_coord : tuple
        The issuing thread's group coordinate (int32 expressions).
    position : PrimExpr | None
        The thread's position inside its collective (collective forms).
    locals_ : dict
        Register buffer with thread axes -> the thread's flat local view.
    """

    def __init__(self, contract, ops, tc, group, coordinates):
        self.contract, self.ops, self.group = contract, ops, group
        self.call = CallView(tuple(ops), tc.pred, dict(tc.params))
        self.preserve_dst = tc.preserve_dst
        self.group_coord, self.position = coordinates
        self.locals_, self.decls, self.kind_values = {}, [], {}
        for index, (role, op) in enumerate(zip(contract.roles, ops)):
            if op.kind == "tensor" and role.kind == "register" and op.value not in self.locals_:
                if ViewMap(op.value).has_thread_axes():
                    decl, flat = _thread_local_view(op.value)
                    self.decls.append(decl)
                    self.locals_[op.value] = flat
            kind = _KINDS.get(role.kind)
            if op.kind == "tensor" and kind is not None and kind.setup is not None:
                stmts, value = kind.setup(role, op, self)
                self.decls.extend(stmts)
                self.kind_values[index] = replace(op, value=value)

    def _memory_args(self, role, op, rep):
        inner = list(role.lane_coords(self.position)[0]) if role.lane_coords is not None else [0] * len(role.atom)
        form = _ADDRESS_FORMS.get(role.address)
        if form is None:
            raise TileInternalError(f"{self.contract.opcode}: no address form {role.address!r} is registered")
        return [form(op.value, [*self.group_coord, *rep, *inner])]

    def _register_args(self, role, op, rep):
        buf = op.value
        if role.lane_coords is not None:
            # Every thread of the collective holds its fragment registers in the
            # same slots (checked), so position 0's coordinates name them.
            coords = [(*self.group_coord, *rep, *c) for c in role.lane_coords(0)]
        else:
            coords = [(*self.group_coord, *rep, k) for k in range(role.atom[0])]
        local = self.locals_.get(buf)
        if local is None:
            return [buf[c] for c in coords]
        # A layout with thread axes: index the issuing thread's own storage at
        # the slot the layout gives (ownership was proven).
        view = ViewMap(buf)
        return [local[view.apply(c)["m"]] for c in coords]

    def operand_args(self, index, loop_vars):
        """The PTX arguments operand ``index`` supplies at repeat coordinate ``loop_vars``."""
        role, op = self.contract.roles[index], self.ops[index]
        if op.kind == "scalar":
            return [op.value] * role.lanes
        has_repeat = bool(repeat_shape(role, op, self.group))
        rep = [loop_vars[a] for a in role_axes(role, len(loop_vars))] if has_repeat else []
        if role.kind == "memory":
            return self._memory_args(role, op, rep)
        if role.kind == "register":
            return self._register_args(role, op, rep)
        if role.kind not in _KINDS:
            raise TileInternalError(f"{self.contract.opcode}: no emitter for operand kind {role.kind!r}")
        return _KINDS[role.kind].args(role, self.kind_values.get(index, op), self.group_coord, rep)

    def ptx_args(self, loop_vars):
        """Every PTX argument of one instruction, in PTX order."""
        args = []
        call = replace(self.call, repeat=tuple(loop_vars))
        for kind, key in self.contract.ptx_order():
            if kind == "param":
                args.append(self.call.params[key])
            elif kind == "derived" or (kind == "pred" and self.call.pred is not None):
                args.append(self.contract.derived[key](call))
            elif kind == "role":
                args += self.operand_args(key, loop_vars)
        return args


def _thread_local_view(buf):
    """``(DeclBuffer, flat view)`` of the calling thread's storage of ``buf``
    (apache-tvm's ``Buffer.local()``, declared outside the parser)."""
    from tvm import tirx  # pylint: disable=import-outside-toplevel
    from tvm.tirx.buffer import buffer_data  # pylint: disable=import-outside-toplevel

    span = int(buf.layout.storage().span())
    flat = tirx.decl_buffer(
        (span,),
        buf.dtype,
        name=f"{buf.name}_local",
        elem_offset=buf.elem_offset,
        scope=buf.scope(),
        data_alignment=int(buf.data_alignment),
        layout="default",
    )
    return tirx.DeclBuffer(flat, data=buffer_data(buf)), flat


def emit(emission, repeat, span=None):
    """The expansion of one call: thread-local views, then one unrolled ``for``
    per repeat axis (row-major) around exactly one ``T.ptx`` call.

    Raises
    ------
    TileInternalError
        The PTX table rejects the built call (a bug of tvm_tirx).
    """
    from tvm import tirx  # pylint: disable=import-outside-toplevel

    contract = emission.contract
    loop_vars = [tirx.Var(f"r{i}", "int32") for i in range(len(repeat))]
    engine_pred = None if contract.pred_operand else emission.call.pred
    call = ptx_call(contract.opcode, emission.ptx_args(loop_vars), engine_pred, emission.preserve_dst)
    body = tirx.Evaluate(call, span=span) if span is not None else tirx.Evaluate(call)
    for var, extent in reversed(list(zip(loop_vars, repeat))):
        body = tirx.For(var, 0, extent, tirx.ForKind.UNROLLED, body)
    return tirx.SeqStmt([*emission.decls, body]) if emission.decls else body
