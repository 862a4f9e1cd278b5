"""The ``T.cuda.tile.apply`` op: construction, parse-time checks and its printed form.

The op is a TVM Op (``tvm_tirx.cuda.tile_apply``) whose Call prints back as
``T.cuda.tile.apply("<opcode>", *operands, *params, [pred,] "<flags>")`` and
re-parses to a structurally equal Call.  The flags string is
``scope=<scope>`` followed by ``pred``, ``keep`` (``preserve_dst=True``) and
``param=<name>`` entries, comma separated.  A parameter whose value is a
tuple (``coords=(y, x)``) or a tuple of equal-length tuples is stored as its
elements, row-major, and flagged with its shape: ``param=coords[2]``,
``param=coord_steps[2x3]``; Python ints in it become ``int32`` constants
(``uint32`` from 2**31 to 2**32 - 1, a lane mask such as ``0xffffffff``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm.ir.op import register_op_attr
from tvm.tirx import IntImm
from tvm.tirx.expr import CallEffectKind
from tvm.tirx.op import call_intrin

from ...errors import TileError, TileInternalError
from ..ir.operands import as_view
from ..ir.ptx_table import opcode_text
from ..ir.registry import candidates
from ..ir.scope import scope_rank
from ..ir.call_view import CallView
from .static_rules import bind_call, param_error, require_params, select_contract

__all__ = ["OP_NAME", "apply", "unchecked_call", "TileCall", "decode", "is_tile_call", "set_launch_query"]

#: Registered name of the tile op.
OP_NAME = "tvm_tirx.cuda.tile_apply"
#: Name the TVMScript printer uses (``T.cuda.tile.apply``).
PRINTER_NAME = "cuda.tile.apply"


def register_op() -> None:
    """Register the op's attributes with TVM (idempotent)."""
    register_op_attr(OP_NAME, "TCallEffectKind", CallEffectKind.Opaque.value)
    register_op_attr(OP_NAME, "TScriptPrinterName", PRINTER_NAME, level=20)


@dataclass(frozen=True)
class TileCall:
    """A decoded tile-apply Call.

    Attributes
    ----------
    opcode : str
        PTX opcode text.
    operands : tuple
        Tensor views / scalar expressions, in call order.
    params : dict[str, PrimExpr]
        Family parameters (``cache_policy``).
    scope : str
        Execution scope.
    pred : PrimExpr | None
        Runtime predicate.
    preserve_dst : bool
        Keep predicated-off register destinations.
    """

    opcode: str
    operands: tuple
    params: dict
    scope: str
    pred: object
    preserve_dst: bool


def _flags(scope, pred, preserve_dst, params) -> str:
    """``params``: name -> shape (``None`` for a single value)."""
    out = [f"scope={scope}"]
    if pred is not None:
        out.append("pred")
    if preserve_dst:
        out.append("keep")
    for name, shape in params.items():
        out.append(f"param={name}" if shape is None else f"param={name}[{'x'.join(map(str, shape))}]")
    return ",".join(out)


def _param_shape(value):
    """``None`` for a single value, else the tuple's shape (one or two levels)."""
    if not isinstance(value, tuple | list):
        return None
    inner = {len(v) if isinstance(v, tuple | list) else None for v in value}
    if len(inner) == 1 and None not in inner:
        return (len(value), inner.pop())
    if inner <= {None}:
        return (len(value),)
    # a family's parameter check accepted a ragged tuple: not the kernel's fault
    raise TileInternalError(f"tuple parameter {value!r} is neither flat nor of equal-length rows")


def _flat(value, shape):
    """The elements of a parameter value, row-major; Python ints become int32 constants."""
    if shape is None:
        items = [value]
    elif len(shape) == 1:
        items = list(value)
    else:
        items = [x for row in value for x in row]
    return [_int_constant(x) if isinstance(x, int) and not isinstance(x, bool) else getattr(x, "scalar", x) for x in items]


def _int_constant(x: int):
    """A Python int parameter as a constant: int32, or uint32 where only 32 unsigned
    bits hold it (a lane mask ``0xffffffff``); a larger one is refused by ``IntImm``."""
    return IntImm("uint32" if 2**31 <= x < 2**32 else "int32", x)


def _unflat(items, shape):
    """Inverse of :func:`_flat` (elements stay IR values)."""
    if shape is None:
        return items[0]
    if len(shape) == 1:
        return tuple(items)
    n = shape[1]
    return tuple(tuple(items[i * n : (i + 1) * n]) for i in range(shape[0]))


def _parse_flags(flags: str):
    scope, pred, keep, names = "thread", False, False, {}
    for item in filter(None, flags.split(",")):
        if item.startswith("scope="):
            scope = item[len("scope=") :]
        elif item == "pred":
            pred = True
        elif item == "keep":
            keep = True
        elif item.startswith("param="):
            name, _, shape = item[len("param=") :].partition("[")
            names[name] = tuple(int(n) for n in shape.rstrip("]").split("x") if n) if shape else None
        else:
            raise TileError("", "malformed tile.apply flags", expected="scope=/pred/keep/param=", found=item)
    return scope, pred, keep, names


def _unpack_printed(args):
    """Split the printed argument list ``(*operands, *params, [pred,] flags)``."""
    flags = args[-1]
    flags = flags.value if hasattr(flags, "value") else flags
    scope, has_pred, keep, names = _parse_flags(str(flags))
    rest = list(args[:-1])
    pred = rest.pop() if has_pred else None
    params = {}
    for name, shape in reversed(list(names.items())):
        count = 1 if shape is None else _prod(shape)
        items = rest[len(rest) - count :] if count else []
        del rest[len(rest) - count :]
        params[name] = _unflat(items, shape)
    return tuple(rest), dict(reversed(list(params.items()))), scope, pred, keep


def _prod(shape) -> int:
    out = 1
    for n in shape:
        out *= n
    return out


def apply(instr, *operands, scope="thread", pred=None, preserve_dst=False, **params):
    """Repeat one explicitly named PTX instruction over tensor views.

    ``T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], registers, A.sub[tid, :])``

    Parameters
    ----------
    instr : T.ptx chain | str
        The exact PTX instruction, e.g. ``T.ptx["ld.global.v4.b32"]`` or the
        same text as a string.  It is never changed by the lowering.
    *operands : Buffer view | TensorRegion | PrimExpr
        In the instruction family's order (``ld``: registers, memory; ``st``:
        memory, registers; ``mov``: dst, src).  Each tensor operand's shape is
        ``(*group, *repeat, *atom)``: the atom is the values one native
        instruction touches (``(4,)`` for ``.v4``, counted in elements of the
        operand's dtype, which must have the PTX type's bit width); repeat axes
        are unrolled, one instruction per coordinate in row-major order; group
        axes follow ``scope`` (none at ``"thread"``).  A typed scalar
        expression may stand in for a single-register read operand.  A
        buffer region ``A[0:64, 1:2]`` is taken as the view
        ``A.sub[0:64, 1:2]`` (every axis kept; see :func:`..ir.operands.as_view`).
    scope : str
        Execution scope: ``"thread"``, ``"warp"``, ``"warpgroup"``, ``"cta"`` or
        ``"cluster"`` (see :mod:`tvm_tirx.tile.ir.scope`).
    pred : PrimExpr (bool) | None
        Runtime predicate guarding every emitted instruction.
    preserve_dst : bool
        With ``pred``, a predicated-off register destination keeps its value.
    **params : PrimExpr | tuple | Buffer view
        Family parameters, e.g. ``cache_policy`` for ``.L2::cache_hint`` forms,
        or a tuple of them (``coords=(y, x)``).  An operand whose role names a
        keyword (:attr:`~..ir.contract.OperandRole.keyword`, e.g. a bulk copy's
        or a TMA's ``mbar=``) is passed by that keyword, never by position.

    Returns
    -------
    tvm.ir.Call
        A void Call of the tile op; ``LowerTileApply`` expands it.

    Raises
    ------
    TileError
        Any contract rule that shapes, dtypes, layouts and the opcode decide
        (:mod:`.static_rules`), e.g. unknown opcode, wrong atom shape.
    """
    if isinstance(instr, str) and operands and isinstance(operands[-1], str):
        operands, printed_params, scope, pred, preserve_dst = _unpack_printed(operands)
        params = {**printed_params, **params}
    # a region operand A[0:64, 1:2] is the view A.sub[0:64, 1:2]: declared once, here
    operands = tuple(as_view(v) for v in operands)
    contract, classified = _parse_time_contract(instr, operands, scope, pred, preserve_dst, params)
    if classified is not None:
        bind_call(CallView(tuple(classified), pred, dict(params), contract, scope))
    return _call(contract.opcode, operands, params, scope, pred, preserve_dst)


def unchecked_call(opcode, *operands, scope="thread", pred=None, preserve_dst=False, **params):
    """The tile op's Call for ``opcode`` over ``operands``, without parse-time checks.

    For generated code whose operands are rebuilt before lowering (a tensor
    intrinsic's implementation, see :mod:`tvm_tirx.schedule.tensor_intrin`): the call's
    tiles are placeholders there, and ``LowerTileApply`` checks the rebuilt
    call like any other.  Arguments are those of :func:`apply`, with
    ``opcode`` as text (``"ldmatrix.sync.aligned.m8n8.x4.shared.b16"``).

    Returns
    -------
    tvm.ir.Call
        A void Call of the tile op.
    """
    return _call(opcode_text(opcode), operands, params, scope, pred, preserve_dst)


def _parse_time_contract(instr, operands, scope, pred, preserve_dst, params):
    """``(contract, classified operands or None)``: the form the operands and
    keyword parameters fit, from the rules parse time can decide."""
    opcode = opcode_text(instr)
    forms = candidates(instr)
    # A collective form's atom holds the threads of its collective: the group
    # counts collectives (scope.py).
    rank = scope_rank(scope, opcode, _parse_time_cluster_rank(opcode, scope), forms[0].collective.width)
    if rank is None:
        # The group axes are unknown until lowering reads the launch: check
        # the opcode and the parameters now, the operands then.
        form = next((f for f in forms if param_error(f, params) is None), forms[0])
        require_params(form, params)
        return form, None
    # Group extents depend on the launch and on enclosing guards, which
    # lowering sees; here only their number is known.
    return select_contract(forms, operands, (None,) * rank, pred, preserve_dst, params)


def _call(opcode, operands, params, scope, pred, preserve_dst):
    """The tile op's Call: ``(opcode, *operands, *params, [pred,] flags)``."""
    shapes = {n: _param_shape(params[n]) for n in sorted(params)}
    args = [
        opcode,
        *[getattr(v, "scalar", v) for v in operands],
        *[x for n, shape in shapes.items() for x in _flat(params[n], shape)],
        *([pred] if pred is not None else []),
        _flags(scope, pred, preserve_dst, shapes),
    ]
    return call_intrin("", OP_NAME, *args)


#: ``fn() -> launch | None``: the launch of the kernel being parsed (an object
#: with ``cluster`` and ``cluster_used``), installed by the script layer
#: (:func:`set_launch_query`) so that this module does not import it.
_LAUNCH_QUERY = [lambda: None]


def set_launch_query(fn) -> None:
    """Install ``fn() -> launch | None``, the launch of the kernel being parsed."""
    _LAUNCH_QUERY[0] = fn


def _parse_time_cluster_rank(opcode, scope):
    """Cluster axes of the launch being parsed (None when unknown)."""
    if scope != "cluster":
        return None
    launch = _LAUNCH_QUERY[0]()
    if launch is None:
        return None
    if launch.cluster is None:
        raise TileError(
            opcode,
            "cluster scope without a cluster launch",
            expected="T.device_entry(launch=T.cuda.LaunchConfig(..., cluster=...))",
            found="a launch without clusters",
        )
    return len(launch.cluster_used)


def decode(call) -> TileCall:
    """Decode a tile-apply ``Call`` back into its parts."""
    args = list(call.args)
    opcode = args[0].value
    operands, params, scope, pred, keep = _unpack_printed(args[1:])
    return TileCall(opcode, operands, params, scope, pred, keep)


def is_tile_call(node) -> bool:
    """Whether ``node`` is a Call of the tile op."""
    op = getattr(node, "op", None)
    return getattr(op, "name", None) == OP_NAME
