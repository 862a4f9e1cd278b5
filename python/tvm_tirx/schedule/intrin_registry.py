"""The table of tvm_tirx's tensor intrinsics: their names, marker, and operand builders.

:mod:`tvm_tirx.schedule.tensor_intrin` fills it (registering each intrinsic
with ``tvm.s_tir.TensorIntrin`` too); :mod:`tvm_tirx.schedule.scheduled` reads
it when it lowers a tensorized block.  It is a module of its own so that the
lowering reads the table without importing the intrinsics themselves (whose
registration builds 186 ``desc`` / ``impl`` PrimFuncs).
"""

from __future__ import annotations

from collections.abc import Callable

from tvm.s_tir import TensorIntrin

__all__ = ["PREFIX", "MARKER", "register", "operand_builder", "registered"]

#: Every intrinsic name registered here starts with it.
PREFIX = "tvm_tirx."
#: AttrStmt key around each implementation's tile call: its value is the
#: intrinsic's name, which :mod:`tvm_tirx.schedule.scheduled` puts in error messages.
MARKER = "tvm_tirx.tensor_intrin"

_REGISTERED: list = []
_OPERANDS: dict = {}


def register(name: str, desc, impl, operands: Callable[..., tuple] | None = None) -> None:
    """Register intrinsic ``name`` (``desc``, ``impl`` s_tir PrimFuncs).

    Parameters
    ----------
    operands : callable | None
        ``operands(*tiles) -> tuple``: the tile call's operands, in the
        instruction family's order, built with ordinary view methods from the
        matched tiles in ``impl``'s parameter order (memory tiles as strided
        views of their source, ``"warp"`` fragments as the thread's own
        registers, see :mod:`tvm_tirx.schedule.scheduled_registers`).  Given, ``impl``
        holds a placeholder call (:func:`~tvm_tirx.tile.rules.op.unchecked_call`)
        that :mod:`tvm_tirx.schedule.scheduled` rebuilds with them; None, ``impl``'s
        call is used as it is.
    """
    TensorIntrin.register(name, desc, impl, override=True)
    _REGISTERED.append(name)
    if operands is not None:
        _OPERANDS[name] = operands


def operand_builder(name: str) -> Callable[..., tuple] | None:
    """The ``operands`` function registered with intrinsic ``name``, or None."""
    return _OPERANDS.get(name)


def registered() -> list:
    """The names registered so far, in registration order."""
    return list(_REGISTERED)
