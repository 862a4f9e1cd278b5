"""The tile layer: the ``T.cuda.tile.apply`` op, instruction families, and its lowering.

This package is also the one facade an instruction family imports from
(``from .. import Contract, register_family, ...`` in ``families/<name>.py``);
``docs/dev/adding_a_family.rst`` says what each name is for.

Describing a form
    :class:`Contract`, :class:`OperandRole`, :class:`Param`, :class:`Collective`
    (:data:`THREAD`, :data:`WARP`, :data:`WARPGROUP`), :func:`register_role`,
    :func:`memory_role`, :func:`replace`, :data:`LOCAL_WINDOW` (the ``.local``
    window conversion); :func:`register_family`, the one
    registration of a family with every role it plays (:class:`RawSpelling`:
    the raw ``T.ptx`` calls it checks; ``kernel_rules``, ``events``,
    ``kinds``, ``address_forms``, ``instrument``: the signatures are in
    :mod:`.ir.hooks`);
    :class:`Instruction` (a resolved PTX form), :func:`ptx_call`, :func:`cert_arch`,
    :func:`bits_of_ptx_type`.
The one argument of every hook
    :class:`CallView` (operands, parameters, contract, scope, site, kernel
    facts, group, repeat coordinate); :func:`reaching` (the threads that reach
    a call).
Operand kinds and address forms (``register_family(kinds=, address_forms=)``)
    :class:`OperandKind`, :class:`ComputedAddress`, :func:`operand_repeat`.
Proof helpers
    :func:`check_bounds`, :func:`root_or_error`, :func:`proves`,
    :func:`exact_values`, :func:`fold` (an expression at given thread ids);
    views: :class:`ViewMap`, :func:`repeat_shape`,
    :func:`int_or_none`, :func:`axis_table`.
Kernel rules and event readers (``register_family(kernel_rules=, events=)``)
    :class:`KernelView`; the protocol events rules pair (:mod:`.kernel.protocol`):
    :func:`protocol_of`, :class:`Event`, :func:`raw_operands`, :func:`describe`;
    program order and memory (:mod:`.kernel.order`): :class:`Path`, :class:`Leaf`,
    :class:`Seq`, :class:`Branch`, :class:`Loop`,
    :func:`element_of`, :func:`same_element`, :func:`byte_range`,
    :func:`overlaps`, :func:`address_target`; :func:`evaluate`.
Errors
    :class:`~tvm_tirx.TileError`, :func:`operand_label`; :func:`device_trap`
    (a run-time check's print-and-trap).
"""

# First: importing tvm runs its tvm.backends hook (tvm_tirx._plugin), which imports
# modules of this package; none of them may be half-imported when it does.
import tvm  # noqa: F401  pylint: disable=unused-import

from ..errors import TileError, operand_label
from .kernel.assumptions import device_trap
from .ir.call_view import CallView
from .ir.contract import (
    LOCAL_WINDOW,
    THREAD,
    WARP,
    WARPGROUP,
    Collective,
    Contract,
    OperandRole,
    Param,
    memory_role,
    register_role,
    replace,
)
from .rules.emit import ComputedAddress, OperandKind, operand_repeat
from .kernel.kernel_rules import KernelView
from .analysis.instances import evaluate
from .analysis.memory_proofs import check_bounds, root_or_error
from .kernel.order import Branch, Leaf, Loop, Path, Seq, address_target, byte_range, element_of, overlaps, same_element
from .analysis.points import exact_values
from .analysis.prover import fold, proves
from .kernel.protocol import SHARED, Event, describe, protocol_of, raw_operands
from .ir.ptx_table import Instruction, cert_arch, ptx_call
from .ir.ptx_types import bits_of_ptx_type
from .rules.raw_calls import RawSpelling
from .ir.registry import register_family
from .analysis.threads import reaching
from .ir.view_tables import axis_table
from .ir.views import ViewMap, int_or_none, repeat_shape

__all__ = [
    "LOCAL_WINDOW", "THREAD", "WARP", "WARPGROUP", "CallView", "Collective", "Contract", "OperandRole", "Param",
    "memory_role", "register_role", "replace", "ComputedAddress", "OperandKind", "operand_repeat",
    "KernelView", "check_bounds",
    "root_or_error", "exact_values", "fold", "proves", "Instruction", "bits_of_ptx_type", "cert_arch",
    "ptx_call", "register_family", "RawSpelling", "reaching", "axis_table", "ViewMap", "int_or_none",
    "repeat_shape", "TileError", "operand_label", "device_trap",
    "evaluate", "Branch", "Leaf", "Loop", "Path", "Seq", "address_target", "byte_range",
    "element_of", "overlaps", "same_element", "SHARED", "Event", "describe", "protocol_of", "raw_operands",
]  # fmt: skip
