"""Rules over a whole kernel, run once per kernel after every tile call of it
was checked and expanded.

Some rules pair statements: an mbarrier's arrivals with its waits, a fence
with the stores before it, a CTA barrier with the threads that reach it.  A
rule is a function of a :class:`KernelView` returning the ``TileError``\\ s it
finds (several, each pointing at its source line).  A family lists its rules
in its :class:`~..ir.registry.Family` record (``register_family(...,
kernel_rules=(...))``); the rules of no family -- a CTA barrier reached by the
whole CTA (:mod:`.barrier_rules`) -- are :data:`SHARED_RULES`.
:func:`run_kernel_rules` runs every rule, the shared ones first, then each
family's in family registration order, and returns all their errors.
"""

from __future__ import annotations

from dataclasses import dataclass

from .barrier_rules import whole_cta_barriers
from ..ir.registry import families

__all__ = ["KernelView", "SHARED_RULES", "kernel_rules", "run_kernel_rules"]

#: The kernel rules of no family, run before the families' rules.
SHARED_RULES = (whole_cta_barriers,)


@dataclass(frozen=True)
class KernelView:
    """What a kernel rule sees.

    Attributes
    ----------
    facts : KernelFacts
        The kernel's facts (launch, roots, sites of its tile calls, uniformity).
    body : tvm.tirx.Stmt
        The kernel's body as written (tile calls not yet expanded).
    calls : dict
        :func:`.sites.call_key` of each tile-call ``Evaluate`` of ``body`` ->
        its :class:`~..ir.call_view.CallView` (operands, parameters, contract, site),
        for the calls that passed their own checks; the raw ``T.ptx`` calls a
        family checks are there too, decoded into their tile form's view
        (``CallView.raw``, :mod:`..rules.raw_calls`).
    """

    facts: object
    body: object
    calls: dict


def kernel_rules() -> tuple:
    """Every kernel rule: :data:`SHARED_RULES`, then each registered family's
    ``kernel_rules`` (:func:`..ir.registry.families`, in registration order, each
    family's in the order it lists them).

    Raises
    ------
    ValueError
        Two families register one rule (:func:`..ir.registry.families`).
    """
    return SHARED_RULES + tuple(rule for family in families() for rule in family.kernel_rules)


def run_kernel_rules(view: KernelView) -> list:
    """Every rule's errors for the kernel ``view`` describes, in rule order (:func:`kernel_rules`).

    Parameters
    ----------
    view : KernelView
        The kernel.

    Returns
    -------
    list[TileError]
        Each rule's errors, in rule order.
    """
    errors = []
    for rule in kernel_rules():
        errors.extend(rule(view) or ())
    return errors
