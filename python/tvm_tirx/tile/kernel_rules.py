"""Rules over a whole kernel, run once per kernel after every tile call of it
was checked and expanded.

Some rules pair statements: an mbarrier's arrivals with its waits, a fence
with the stores before it, a CTA barrier with the threads that reach it.  A
rule is a function of a :class:`KernelView` returning the ``TileError``\\ s it
finds (several, each pointing at its source line); it is registered with
:func:`register_kernel_rule`.  :func:`run_kernel_rules` runs every rule, in
registration order, and returns all their errors.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KernelView", "register_kernel_rule", "kernel_rules", "run_kernel_rules"]

_RULES = []


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
        its :class:`~.contract.CallView` (operands, parameters, contract, site),
        for the calls that passed their own checks; the raw ``T.ptx`` calls a
        family checks are there too, decoded into their tile form's view
        (``CallView.raw``, :mod:`.raw_calls`).
    """

    facts: object
    body: object
    calls: dict


def register_kernel_rule(fn):
    """Decorator: run ``fn(KernelView) -> iterable of TileError`` once per kernel.

    Raises
    ------
    ValueError
        ``fn`` is registered twice.
    """
    if fn in _RULES:
        raise ValueError(f"tvm_tirx: kernel rule {fn.__qualname__} registered twice")
    _RULES.append(fn)
    return fn


def kernel_rules() -> tuple:
    """Every registered kernel rule, in registration order (the families' are
    registered when :mod:`.families` is imported)."""
    from . import families  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

    return tuple(_RULES)


def run_kernel_rules(view: KernelView) -> list:
    """Every rule's errors for the kernel ``view`` describes, in rule order."""
    errors = []
    for rule in kernel_rules():
        errors.extend(rule(view) or ())
    return errors
