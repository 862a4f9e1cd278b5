"""The signatures of the hooks a family's contract and its family record carry
(:mod:`.contract`, :class:`~.registry.Family`).

Every hook is optional (None: the shared modules' default).  Checks follow the
package's convention: a rule or check *returns* the :class:`~tvm_tirx.TileError`
a call breaks (or, for a parameter's check, the reason as text), None when the
call keeps the rule, and its caller raises; a function that raises itself is
named ``require_*``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:  # for the annotations only: contract.py imports this module
    from tvm.tirx import Stmt

    from tvm.tirx import PrimFunc

    from ...errors import TileError
    from .call_view import CallView
    from .contract import Contract
    from ..kernel.kernel_rules import KernelView

__all__ = [
    "LaneCoords", "ParamCheck", "Derived", "ContractCheck", "Bind", "KernelCheck", "HostSetup",
    "KindArgs", "KindSetup", "KindProof", "AddressForm", "UniformResult", "KernelRule", "EventReader",
    "Instrument", "CYCLES_PER_MS",
]

#: ``OperandRole.lane_coords``: ``position -> [atom coordinate, ...]`` of the thread at
#: ``position`` of its collective (an int or an int32 expression).
LaneCoords: TypeAlias = Callable[[Any], list]
#: ``Param.check``: ``value -> why it is not acceptable``, or None.
ParamCheck: TypeAlias = Callable[[Any], "str | None"]
#: A value of ``Contract.derived``: ``CallView -> PrimExpr`` (or a list of them); the
#: CallView's ``repeat`` is the instruction's repeat coordinate.
Derived: TypeAlias = Callable[["CallView"], Any]
#: ``Contract.check``: a parse-time rule, ``CallView -> TileError | None`` (``facts`` None).
ContractCheck: TypeAlias = Callable[["CallView"], "TileError | None"]
#: ``Contract.bind``: ``CallView -> refined Contract | TileError | None`` (the CallView's
#: ``contract`` is the form being refined).
Bind: TypeAlias = Callable[["CallView"], "Contract | TileError | None"]
#: ``Contract.kernel_check``: a rule on one call in its kernel, ``CallView -> TileError | None``.
KernelCheck: TypeAlias = Callable[["CallView"], "TileError | None"]
#: ``Contract.host_setup``: ``(CallView, device entry stmt) -> the stmt, wrapped``.
HostSetup: TypeAlias = Callable[["CallView", "Stmt"], "Stmt"]
#: An operand kind's arguments (``Family.kinds``: an :class:`~..rules.emit.OperandKind`'s ``args``):
#: ``(CallView, index) -> [PrimExpr]`` at the CallView's ``repeat`` coordinate.
KindArgs: TypeAlias = Callable[["CallView", int], list]
#: An operand kind's set-up: ``(CallView, index) -> (stmts, value)``, once per call before the loops.
KindSetup: TypeAlias = Callable[["CallView", int], tuple]
#: An operand kind's proof: ``(CallView, index) -> TileError | None`` while lowering.
KindProof: TypeAlias = Callable[["CallView", int], "TileError | None"]
#: ``Contract.uniform_result``: ``(CallView, index) -> the scope over which the registers
#: the call writes in operand ``index`` hold one value``.
UniformResult: TypeAlias = Callable[["CallView", int], "str | None"]
#: An address form (a value of ``Family.address_forms``): ``(CallView, view, coord) -> PrimExpr``
#: (or a :class:`~..rules.emit.ComputedAddress`).
AddressForm: TypeAlias = Callable[["CallView", Any, list], Any]

# The roles of a family beyond its contracts (:func:`.registry.register_family`).

#: ``Family.kernel_rules``: a rule over a whole kernel, ``KernelView -> iterable of TileError``
#: (:mod:`..kernel.kernel_rules`), run once per kernel after its tile calls were checked and expanded.
KernelRule: TypeAlias = Callable[["KernelView"], Any]
#: ``Family.events``: ``(leaf, call, protocol, derived) -> list[Event] | None``, the protocol
#: events of a statement of the family's instructions (:mod:`..kernel.protocol`): ``leaf`` an
#: :class:`~..kernel.order.Leaf`, ``call`` the tile call's ``CallView`` (None for a raw ``T.ptx``
#: statement), ``derived`` the events the shared code read from the contract; None: not
#: the family's statement.
EventReader: TypeAlias = Callable[[Any, "CallView | None", Any, list], "list | None"]
#: ``Family.instrument``: a debug build's instrumentation, ``(lowered PrimFunc, source PrimFunc,
#: options) -> PrimFunc``: ``lowered`` is the kernel after ``LowerTileApply``, ``source`` the
#: same kernel before it, ``options`` the build's ``tvm_tirx.build.debug.DebugOptions``
#: (``detect_hangs``: milliseconds, 0 off; ``check_assumptions``: bool); returns ``lowered``
#: itself when the options ask for nothing the family adds.
Instrument: TypeAlias = Callable[["PrimFunc", "PrimFunc", Any], "PrimFunc"]
#: SM cycles per millisecond of ``detect_hangs`` (about 2 GHz on the H100 / H200): the unit
#: the instrument hooks and the build's option checks share.
CYCLES_PER_MS = 2_000_000
