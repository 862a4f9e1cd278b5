"""What a statement-level call makes the registers it writes, for the uniformity
rules (:mod:`.uniformity`): the ``result_level`` hook :class:`~..kernel.kernel_facts.KernelFacts`
gives them.

A tile call and a raw ``T.ptx`` call that a family checks (:mod:`..rules.raw_calls`)
are read through their form's contract: an operand the form only reads is not
written; a written one is as uniform as the form's ``uniform_result`` says
(a ``shfl.sync.idx`` broadcast, a ``vote.sync`` ballot over the whole warp).
"""

from __future__ import annotations

from ..ir.operands import Operand

__all__ = ["result_level"]


def result_level(facts, stmt, buf):
    """The scope call statement ``stmt`` (an ``Evaluate``) makes the registers of its
    operand ``buf`` uniform over.

    Returns
    -------
    str | None
        For a tile call or a raw call a family checks: :data:`~.uniformity.NOT_WRITTEN`
        when its form only reads ``buf``, else the form's ``uniform_result``
        (None: per thread); None for any other statement.
    """
    from .uniformity import NOT_WRITTEN  # pylint: disable=import-outside-toplevel  (it calls this module)

    view = facts.calls.view(stmt)
    if view is None:
        return None
    index = next((i for i, op in enumerate(view.operands) if _names_buffer(op, buf)), None)
    form = view.contract
    if index is None or index >= len(form.roles):
        return None
    if not form.roles[index].writes:
        return NOT_WRITTEN
    if form.uniform_result is None:
        return None
    return form.uniform_result(view, index)


def _names_buffer(op, buf) -> bool:
    """Whether call operand ``op`` is ``buf``: a tile call's operand as written (a
    buffer), or a raw call's register (:class:`~..ir.operands.Operand` of kind
    ``"element"``: an element load of ``buf``, or a group of them)."""
    if not isinstance(op, Operand):
        return op.same_as(buf)
    if op.kind != "element":
        return False
    loads = op.value if isinstance(op.value, tuple) else (op.value,)
    return any(load.source.same_as(buf) for load in loads)
