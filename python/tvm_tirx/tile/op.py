"""The ``T.cuda.tile.apply`` op: construction, parse-time checks and its printed form.

The op is a TVM Op (``tvm_tirx.cuda.tile_apply``) whose Call prints back as
``T.cuda.tile.apply("<opcode>", *operands, *params, [pred,] "<flags>")`` and
re-parses to a structurally equal Call.  The flags string is
``scope=<scope>`` followed by ``pred``, ``keep`` (``preserve_dst=True``) and
``param=<name>`` entries, comma separated.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TileError
from .ptx_table import opcode_text
from .registry import candidates
from .scope import scope_rank
from .static_rules import check_params, param_error, select_contract
from .views import as_view

__all__ = ["OP_NAME", "apply", "TileCall", "decode", "is_tile_call", "set_launch_query"]

#: Registered name of the tile op.
OP_NAME = "tvm_tirx.cuda.tile_apply"
#: Name the TVMScript printer uses (``T.cuda.tile.apply``).
PRINTER_NAME = "cuda.tile.apply"


def register_op() -> None:
    """Register the op's attributes with TVM (idempotent)."""
    from tvm.ir.op import register_op_attr  # pylint: disable=import-outside-toplevel
    from tvm.tirx.expr import CallEffectKind  # pylint: disable=import-outside-toplevel

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
    out = [f"scope={scope}"]
    if pred is not None:
        out.append("pred")
    if preserve_dst:
        out.append("keep")
    out += [f"param={name}" for name in params]
    return ",".join(out)


def _parse_flags(flags: str):
    scope, pred, keep, names = "thread", False, False, []
    for item in filter(None, flags.split(",")):
        if item.startswith("scope="):
            scope = item[len("scope=") :]
        elif item == "pred":
            pred = True
        elif item == "keep":
            keep = True
        elif item.startswith("param="):
            names.append(item[len("param=") :])
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
    for name in reversed(names):
        params[name] = rest.pop()
    return tuple(rest), dict(reversed(list(params.items()))), scope, pred, keep


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
        ``A.sub[0:64, 1:2]`` (every axis kept; see :func:`.views.as_view`).
    scope : str
        Execution scope: ``"thread"``, ``"warp"``, ``"warpgroup"``, ``"cta"`` or
        ``"cluster"`` (see :mod:`tvm_tirx.tile.scope`).
    pred : PrimExpr (bool) | None
        Runtime predicate guarding every emitted instruction.
    preserve_dst : bool
        With ``pred``, a predicated-off register destination keeps its value.
    **params : PrimExpr
        Family parameters, e.g. ``cache_policy`` for ``.L2::cache_hint`` forms.

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
    contract = _parse_time_contract(instr, operands, scope, pred, preserve_dst, params)
    return _call(contract.opcode, operands, params, scope, pred, preserve_dst)


def _parse_time_contract(instr, operands, scope, pred, preserve_dst, params):
    """The form the operands and keyword parameters fit, from the rules parse time can decide."""
    opcode = opcode_text(instr)
    forms = candidates(instr)
    # A collective form's atom holds the threads of its collective: the group
    # counts collectives (scope.py).
    rank = scope_rank(scope, opcode, _parse_time_cluster_rank(opcode, scope), forms[0].collective.width)
    if rank is None:
        # The group axes are unknown until lowering reads the launch: check
        # the opcode and the parameters now, the operands then.
        form = next((f for f in forms if param_error(f, params) is None), forms[0])
        check_params(form, params)
        return form
    # Group extents depend on the launch and on enclosing guards, which
    # lowering sees; here only their number is known.
    return select_contract(forms, operands, (None,) * rank, pred, preserve_dst, params)[0]


def _call(opcode, operands, params, scope, pred, preserve_dst):
    """The tile op's Call: ``(opcode, *operands, *params, [pred,] flags)``."""
    from tvm.tirx.op import call_intrin  # pylint: disable=import-outside-toplevel

    names = sorted(params)
    args = [
        opcode,
        *[getattr(v, "scalar", v) for v in operands],
        *[getattr(params[n], "scalar", params[n]) for n in names],
        *([pred] if pred is not None else []),
        _flags(scope, pred, preserve_dst, names),
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
