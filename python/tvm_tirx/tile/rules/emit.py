"""Emission: one ``T.ptx`` call per repeat coordinate, in unrolled loops.

Each operand supplies its PTX arguments at a group and repeat coordinate: a
register operand its registers (the slots its layout gives), a memory operand
its atom address in the role's address form, a scalar itself.  Address forms
and the operand kinds beyond register and memory are roles of a family: its
:class:`~..ir.registry.Family` record lists them (``register_family(...,
kinds={name: OperandKind(...)}, address_forms={name: fn})``), and this module
looks them up there (:func:`operand_kinds`, :func:`address_forms`; two
address forms are built in, :data:`BUILTIN_ADDRESS_FORMS`).  Nothing is
chosen here: the opcode is the contract's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from ...errors import TileInternalError
from ..ir.hooks import AddressForm, KindArgs, KindProof, KindSetup
from ..ir.ptx_table import ptx_call
from ..ir.ptx_types import binding_dtype, is_pred_read, pred_argument
from ..ir.registry import families
from ..ir.views import ViewMap, repeat_shape, role_axes

__all__ = [
    "operand_repeat",
    "operand_kinds",
    "address_forms",
    "BUILTIN_ADDRESS_FORMS",
    "kind_proof",
    "kind_takes_scalar",
    "OperandKind",
    "emit",
    "Emission",
    "ComputedAddress",
]

@dataclass(frozen=True)
class ComputedAddress:
    """An address operand that instructions of its own compute (a ``mapa`` into
    a peer CTA's shared memory): what an address form returns when a plain
    expression does not do.

    Attributes
    ----------
    value : PrimExpr
        The address the instruction reads (e.g. ``scratch[0]``).
    setup : tuple[Stmt, ...]
        Statements computing it, emitted right before the instruction (inside
        the repeat loops when the address varies with them, else once before).
    scratch : tuple[Buffer, ...]
        Local buffers ``setup`` writes, allocated once before the loops.
    """

    value: object
    setup: tuple = ()
    scratch: tuple = ()


@dataclass(frozen=True)
class OperandKind:
    """How operands of one kind beyond register and memory are emitted and proven:
    the values of ``Family.kinds`` (``register_family(..., kinds={"descriptor":
    OperandKind(args, setup=...)})``).

    Attributes
    ----------
    args : callable
        ``fn(call, index) -> [PrimExpr, ...]``: the PTX arguments of operand
        ``index`` of ``call`` (:class:`~..ir.call_view.CallView`) at its ``repeat``
        coordinate (the loop variables of every repeat axis of the call;
        :func:`operand_repeat` picks the ones the operand carries).  The
        operand is a scalar when the kind takes one (``scalar``);
        ``call.value(index)`` is the value ``setup`` gave it.
    setup : callable | None
        ``fn(call, index) -> (stmts, value)``: statements emitted once per call
        before the repeat loops (a matrix descriptor's encoding) and the
        operand value ``args`` then receives in place of the view (a TMA's
        host-encoded tensor map); ``call.facts`` is the kernel's.
    scalar : bool
        Whether a scalar expression may stand for the operand, passed as is
        (a caller-encoded tensor map's address).
    prove : callable | None
        ``fn(call, index) -> TileError | None``: the rules that need the kernel
        (alignment, bounds), as :func:`..analysis.memory_proofs.check_memory` for memory
        operands; ``call.site.facts`` holds the facts at the call.
    """

    args: KindArgs
    setup: KindSetup | None = None
    prove: KindProof | None = None
    scalar: bool = False


def operand_kinds() -> dict:
    """``kind name -> OperandKind`` of every registered family (``Family.kinds``).

    Raises
    ------
    ValueError
        Two families register one kind (:func:`..ir.registry.families`).
    """
    return _kinds_of(families())


@functools.cache
def _kinds_of(registered) -> dict:
    return {name: kind for family in registered for name, kind in family.kinds.items()}


def address_forms() -> dict:
    """``address form name -> fn(call, view, coord)``: :data:`BUILTIN_ADDRESS_FORMS` and
    every registered family's ``address_forms``.

    ``fn`` returns the address operand of view ``view`` at coordinate
    ``coord`` (a list of index expressions) in call ``call``
    (:class:`~..ir.call_view.CallView`: its parameters, site and kernel facts), a
    PrimExpr or a :class:`ComputedAddress`.  Families may give one name only
    with one function (the ``mapa`` form ``"peer_shared"`` is given by each
    family that addresses a peer CTA).

    Raises
    ------
    ValueError
        A family gives a built-in name another function (two families giving
        one name different functions: :func:`..ir.registry.families`).
    """
    return _forms_of(families())


@functools.cache
def _forms_of(registered) -> dict:
    out = dict(BUILTIN_ADDRESS_FORMS)
    for family in registered:
        for name, fn in family.address_forms.items():
            if out.setdefault(name, fn) is not fn:
                raise ValueError(f"tvm_tirx: family {family.name} gives address form {name!r} another function")
    return out


def kind_takes_scalar(kind: str) -> bool:
    """Whether a scalar expression may stand for an operand of registered kind ``kind``."""
    entry = operand_kinds().get(kind)
    return entry is not None and entry.scalar


def kind_proof(kind: str):
    """The ``prove`` hook of operand kind ``kind`` (None: none, or not a registered kind)."""
    entry = operand_kinds().get(kind)
    return entry.prove if entry is not None else None


def operand_repeat(call, index) -> list:
    """The loop variables of the repeat axes operand ``index`` of ``call`` carries
    (``[]`` for an operand without repeat axes, or outside emission)."""
    role, op = call.contract.roles[index], call.operands[index]
    if not call.repeat or op.kind != "tensor" or not repeat_shape(role, op, call.group):
        return []
    return [call.repeat[a] for a in role_axes(role, len(call.repeat))]


def _generic_address(call, buf, coord):  # pylint: disable=unused-argument
    return buf.ptr_to(coord)


def _shared_cta_address(call, buf, coord):  # pylint: disable=unused-argument
    from tvm.tirx import Cast, call_pure_extern  # pylint: disable=import-outside-toplevel

    return Cast("uint32", call_pure_extern("uint64", "__cvta_generic_to_shared", buf.ptr_to(coord)))


#: The address forms of no family: ``"generic"`` (``buf.ptr_to(coord)``, a generic
#: pointer) and ``"shared::cta"`` (the 32-bit ``.shared::cta`` window address, PTX ISA
#: 6.4.1.1, CUDA ``__cvta_generic_to_shared``).
BUILTIN_ADDRESS_FORMS: dict[str, AddressForm] = {"generic": _generic_address, "shared::cta": _shared_cta_address}


class Emission:  # pylint: disable=too-few-public-methods
    """One call's emission context.

    Attributes
    ----------
    contract : Contract
        The chosen form.
    ops : tuple[Operand]
        Classified operands.
    call : CallView
        The call as family hooks see it (with its group coordinate).
    kind_call : CallView
        The same, with the values the kinds' ``setup`` gave their operands
        (``values``: what the kinds' ``args`` receive).
    group : tuple[int, ...]
        The call's group extents.
    group_coord : tuple
        The issuing thread's group coordinate (int32 expressions).
    position : PrimExpr | None
        The thread's position inside its collective (collective forms).
    locals_ : dict
        Register buffer with thread axes -> the thread's flat local view.
    address_forms : dict
        Every address form (:func:`address_forms`).
    """

    def __init__(self, call, preserve_dst, coordinates):
        self.group_coord, self.position = coordinates
        self.call = replace(call, group_coord=tuple(self.group_coord))
        self.contract, self.ops, self.group = call.contract, call.operands, call.group
        self.preserve_dst = preserve_dst
        self.locals_, self.decls, self._retyped_views = {}, [], {}
        #: set-up of computed addresses: once before the loops / in the loop body
        self.outer_setup, self.inner_setup = [], []
        values, kinds = {}, operand_kinds()
        self.address_forms = address_forms()
        for index, (role, op) in enumerate(zip(self.contract.roles, self.ops)):
            if op.kind == "tensor" and role.kind == "register" and op.value not in self.locals_:
                if ViewMap(op.value).has_thread_axes():
                    decl, flat = _thread_local_view(op.value)
                    self.decls.append(decl)
                    self.locals_[op.value] = flat
            kind = kinds.get(role.kind)
            if op.kind == "tensor" and kind is not None and kind.setup is not None:
                stmts, values[index] = kind.setup(self.call, index)
                self.decls.extend(stmts)
        self.kind_call = replace(self.call, values=values)

    def _memory_args(self, role, op, rep):
        inner = list(role.lane_coords(self.position)[0]) if role.lane_coords is not None else [0] * len(role.atom)
        if role.address not in self.address_forms:
            raise TileInternalError(f"{self.contract.opcode}: no address form {role.address!r} is registered")
        coord = [*self.group_coord, *rep, *inner]
        value = self.address_forms[role.address](self.call, op.value, coord)
        if not isinstance(value, ComputedAddress):
            return [value]
        self.decls += [_allocate(buf) for buf in value.scratch]
        (self.inner_setup if rep else self.outer_setup).extend(value.setup)
        return [value.value]

    def _binding(self, role, dtype):
        """The dtype the table takes for a register of ``dtype`` in ``role`` (:func:`..ir.ptx_types.binding_dtype`)."""
        read_write = role.ptx.rw == "rw" or (self.preserve_dst and role.writes)
        bound = binding_dtype(role.ptx, dtype, read_write)
        if bound is None:
            raise TileInternalError(f"{self.contract.opcode}: no register binding for {dtype} (parse-time rule missed it)")
        return bound

    def _retyped(self, buf, dtype):
        """``buf`` seen as ``dtype`` of the same width: the same registers, declared once per call."""
        key = (buf, dtype)
        if key not in self._retyped_views:
            decl, view = _retyped_view(buf, dtype)
            self.decls.append(decl)
            self._retyped_views[key] = view
        return self._retyped_views[key]

    def _bound_scalar(self, ptx_operand, value):
        """``value`` (a scalar expression) as the dtype the table takes for ``ptx_operand``:
        itself, or reinterpreted to its same-width container (``T.float16(1)`` for ``.f16``)."""
        from tvm.tirx import reinterpret  # pylint: disable=import-outside-toplevel

        dtype = getattr(getattr(value, "ty", None), "dtype", None)
        bound = binding_dtype(ptx_operand, dtype) if dtype and ptx_operand.dtypes else dtype
        return reinterpret(bound, value) if bound not in (None, dtype) else value

    def _register_args(self, role, op, rep):
        buf = op.value
        if role.lane_coords is not None:
            # Every thread of the collective holds its fragment registers in the
            # same slots (checked), so position 0's coordinates name them.
            coords = [(*self.group_coord, *rep, *c) for c in role.lane_coords(0)]
        else:
            coords = [(*self.group_coord, *rep, k) for k in range(role.atom[0])]
        # A `.pred` the instruction reads takes the register as it is (tagged).
        bound = buf.dtype if is_pred_read(role.ptx) else self._binding(role, buf.dtype)
        local = self.locals_.get(buf)
        if local is None:
            target = buf if bound == buf.dtype else self._retyped(buf, bound)
            return [target[c] for c in coords]
        # A layout with thread axes: index the issuing thread's own storage at
        # the slot the layout gives (ownership was proven).
        view = ViewMap(buf)
        target = local if bound == local.dtype else self._retyped(local, bound)
        return [target[view.apply(c)["m"]] for c in coords]

    def _kind_args(self, index, role, loop_vars):
        """The PTX arguments of an operand of a registered kind (a scalar passes itself)."""
        kinds = operand_kinds()
        if role.kind not in kinds:
            raise TileInternalError(f"{self.contract.opcode}: no emitter for operand kind {role.kind!r}")
        return list(kinds[role.kind].args(replace(self.kind_call, repeat=tuple(loop_vars)), index))

    def operand_args(self, index, loop_vars):
        """The PTX arguments operand ``index`` supplies at repeat coordinate ``loop_vars``."""
        role, op = self.contract.roles[index], self.ops[index]
        if role.kind not in ("register", "memory"):
            return self._kind_args(index, role, loop_vars)
        if op.kind == "scalar" and is_pred_read(role.ptx):
            return [pred_argument(op.value)] * role.lanes
        if op.kind == "scalar":
            self._binding(role, op.value.ty.dtype)  # the form takes it (parse-time rules)
            return [self._bound_scalar(role.ptx, op.value)] * role.lanes
        has_repeat = bool(repeat_shape(role, op, self.group))
        rep = [loop_vars[a] for a in role_axes(role, len(loop_vars))] if has_repeat else []
        if role.kind == "memory":
            return self._memory_args(role, op, rep)
        args = self._register_args(role, op, rep)
        return [pred_argument(a) for a in args] if is_pred_read(role.ptx) else args

    def ptx_args(self, loop_vars):
        """Every PTX argument of one instruction, in PTX order."""
        args = []
        call = replace(self.call, repeat=tuple(loop_vars))
        for kind, key in self.contract.ptx_order():
            if kind == "param":
                args.append(self._bound_scalar(self.contract.params[key], self.call.params[key]))
            elif kind == "derived" or (kind == "pred" and self.call.pred is not None):
                value = self.contract.derived[key](call)
                args += list(value) if isinstance(value, list | tuple) else [value]
            elif kind == "role":
                args += self.operand_args(key, loop_vars)
        return args


def _allocate(buf):
    """The allocation statement of scratch buffer ``buf`` (its scope: the rest of the expansion)."""
    from tvm import tirx  # pylint: disable=import-outside-toplevel

    return tirx.AllocBuffer(buf)


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


def _retyped_view(buf, dtype):
    """``(DeclBuffer, view)``: ``buf``'s storage as ``dtype`` of the same bit width,
    same shape, layout and offset (apache-tvm's ``Buffer.view(dtype)`` at ratio 1,
    declared outside the parser)."""
    from tvm import tirx  # pylint: disable=import-outside-toplevel
    from tvm.tirx.buffer import buffer_data  # pylint: disable=import-outside-toplevel

    view = tirx.decl_buffer(
        buf.shape,
        dtype,
        name=f"{buf.name}_{dtype}",
        elem_offset=buf.elem_offset,
        scope=buf.scope(),
        data_alignment=int(buf.data_alignment),
        layout=buf.layout,
    )
    return tirx.DeclBuffer(view, data=buffer_data(buf)), view


def emit(emission, repeat, span=None):
    """The expansion of one call: thread-local views (and scratch registers of
    computed addresses), then one unrolled ``for`` per repeat axis (row-major)
    around exactly one ``T.ptx`` call of the form (preceded by the set-up of
    its computed addresses, if any).

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
    if emission.inner_setup:
        body = tirx.SeqStmt([*emission.inner_setup, body])
    for var, extent in reversed(list(zip(loop_vars, repeat))):
        body = tirx.For(var, 0, extent, tirx.ForKind.UNROLLED, body)
    prefix = [*emission.decls, *emission.outer_setup]
    return tirx.SeqStmt([*prefix, body]) if prefix else body
