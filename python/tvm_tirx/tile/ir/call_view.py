"""The one argument of every family hook: :class:`CallView`, what a hook sees of one call."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import operand_label

__all__ = ["CallView"]


@dataclass(frozen=True)
class CallView:
    """What every family hook sees of one call: the one argument (after which a
    hook about one operand takes its index, a host hook the statement it wraps).

    Attributes
    ----------
    operands : tuple[Operand, ...]
        The classified operands, in role order (keyword roles last).
    pred : PrimExpr | None
        The call's predicate.
    params : dict
        Keyword parameters, name -> value (a tuple parameter is a tuple).
    contract : Contract | None
        The call's form (before ``bind`` refines it, while ``bind`` runs).
    scope : str
        The call's execution scope (``"thread"``, ``"warp"`` ...).
    site : CallSite
        What encloses the call in its kernel (:class:`~..kernel.sites.CallSite`): its
        guards, the facts that hold there, its loops, its source span.
        :data:`~..kernel.sites.EMPTY_SITE` at parse time.
    facts : KernelFacts | None
        While lowering: what is known of the kernel (``launch``, ``arch``,
        ``entry_attrs``, ``uniformity``, and ``family_values``, a dict a
        family keeps values in that every call of the kernel shares, such as
        one tensor map per distinct encoding); None at parse time.
    group : tuple[int, ...]
        The call's group extents (the guarded box of collectives or threads
        that run it); ``()`` at thread scope and at parse time.
    group_coord : tuple
        While emitting: the issuing thread's group coordinate (int32
        expressions); ``()`` otherwise.
    repeat : tuple
        While emitting one instruction: its repeat coordinate (one int32 loop
        variable per call repeat axis); ``()`` otherwise.
    values : dict
        While emitting: operand index -> the value its kind's ``setup`` gave it
        (:class:`~..rules.emit.OperandKind`, ``Family.kinds``); see :meth:`value`.
    raw : bool
        The call is a raw ``T.ptx[...]`` call decoded into this view
        (:mod:`..rules.raw_calls`): checked by the form's rules, never expanded.
        Its register operands are then of kind ``"element"`` (an element of a
        ``T.alloc_local`` tensor, a tuple of them for a register group) or
        ``"scalar"``.
    """

    operands: tuple
    pred: object = None
    params: dict = field(default_factory=dict)
    contract: object = None
    scope: str = "thread"
    site: object = None
    facts: object = None
    group: tuple = ()
    group_coord: tuple = ()
    repeat: tuple = ()
    values: dict = field(default_factory=dict)
    raw: bool = False

    def value(self, index: int):
        """Operand ``index``'s value: the one its kind's ``setup`` gave it, else its own."""
        return self.values.get(index, self.operands[index].value)

    @property
    def opcode(self) -> str:
        """The call's opcode text (its form's), for messages."""
        return self.contract.opcode if self.contract is not None else ""

    def role(self, index: int):
        """The :class:`OperandRole` of operand ``index``."""
        return self.contract.roles[index]

    def label(self, index: int) -> str:
        """Operand ``index`` named for messages (``"dst (operand 1)"``)."""
        return operand_label(self.contract.roles[index].role, self.operands[index].index)
