"""What the Relax offload's match functions may ask of the function being rewritten:
the value a variable is bound to, how often a variable is read, and by which call."""

from __future__ import annotations

from tvm import relax
from tvm.relax.expr_functor import PyExprVisitor, visitor

__all__ = ["Bindings", "count_uses", "call_readers"]


class Bindings:
    """What a match function may ask of the function being rewritten: ``bindings(var)``,
    the value ``var`` is bound to (None for a parameter); ``bindings.uses(var)``, how many
    times ``var`` is read in the function as it was before the rewrite;
    ``bindings.reader(var)``, the call that reads it when that is its only read; and
    ``bindings.current``, the variable the call being matched is bound to."""

    def __init__(self, lookup, uses: dict, readers: dict):
        self._lookup, self._uses, self._readers = lookup, uses, readers
        self.current = None

    def __call__(self, var):
        return self._lookup(var)

    def uses(self, var) -> int:
        """Reads of ``var`` in the original function (0 for a variable it does not hold)."""
        return self._uses.get(var, 0)

    def reader(self, var):
        """The original call reading ``var``, if ``var`` is read once and by a call's
        argument; else None."""
        readers = self._readers.get(var, ())
        return readers[0] if self.uses(var) == 1 and len(readers) == 1 else None


@visitor
class _CountUses(PyExprVisitor):
    """Counts the reads of each variable of a function."""

    def __init__(self):
        super().__init__()
        self.counts = {}

    def visit_var_(self, op):  # pylint: disable=arguments-renamed
        self.counts[op] = self.counts.get(op, 0) + 1

    def visit_dataflow_var_(self, op):  # pylint: disable=arguments-renamed
        self.counts[op] = self.counts.get(op, 0) + 1


def count_uses(func: relax.Function) -> dict:
    """``{Var: reads}`` of ``func``."""
    counter = _CountUses()
    counter.visit_expr(func)
    return counter.counts


def call_readers(func: relax.Function) -> dict:
    """``{Var: [calls]}``: the bound calls of ``func`` that take each variable as an argument."""
    readers = {}
    blocks = func.body.blocks if isinstance(func.body, relax.SeqExpr) else ()
    for block in blocks:
        for binding in block.bindings:
            if isinstance(binding, relax.VarBinding) and isinstance(binding.value, relax.Call):
                for arg in binding.value.args:
                    if isinstance(arg, relax.Var):
                        readers.setdefault(arg, []).append(binding.value)
    return readers
