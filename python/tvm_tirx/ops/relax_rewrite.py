"""The Relax offload's mechanism: :class:`Offloader` (how one operator is matched,
which kernel replaces it, how the call is emitted) and :func:`offload_pass`, the module
pass that applies a list of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from .relax_bindings import Bindings, call_readers, count_uses

__all__ = ["Offloader", "SkippedCall", "offload_pass"]


@dataclass(frozen=True)
class SkippedCall:
    """A call an offloader left to apache-tvm's lowering: the Relax function's name, the
    variable the call is bound to, and why it was not offloaded."""

    function: str
    var: str
    reason: str


class Offloader(NamedTuple):
    """How one Relax operator is offloaded: ``match(call, lookup)`` returns a match, the
    reason the call is left alone (recorded in ``skipped``), or None when the call is not
    of the offloaded form at all (nothing recorded: an offloader rooted at a common
    operator such as ``relax.add`` sees many calls that are not its pattern; ``lookup`` is
    a :class:`Bindings`); ``kernel(match)`` the PrimFunc (added to the module once
    per global symbol); ``emit(emit_fn, kernel_var, match)`` the replacement expression;
    ``skipped(function, var, reason)`` the record of a call left alone."""

    op: str
    match: Callable
    kernel: Callable
    emit: Callable
    skipped: Callable


@mutator
class _Offload(PyExprMutator):
    """Rewrites the matched calls of one module (see :func:`offload_pass`)."""

    def __init__(self, mod, skipped, offloaders):
        super().__init__(mod)
        self.skipped = skipped
        self.offloaders = {tvm.ir.Op.get(o.op): o for o in offloaders}
        self.kernels, self.function, self.var, self.changed = {}, "", "", False
        self.bindings = None  # the function's Bindings, set by run()

    def run(self, mod):
        """The module with every function's matched calls rewritten."""
        for gv, func in mod.functions_items():
            if isinstance(func, relax.Function):
                self.function, self.changed = gv.name_hint, False
                self.bindings = Bindings(self.lookup_binding, count_uses(func), call_readers(func))
                new = self.visit_expr(func)
                if self.changed:
                    self.builder_.update_func(gv, relax.analysis.remove_all_unused(new))
        return self.builder_.get()

    def visit_var_binding_(self, binding):
        self.var = binding.var.name
        self.bindings.current = binding.var
        super().visit_var_binding_(binding)

    def visit_call_(self, call):  # pylint: disable=arguments-renamed
        call = super().visit_call_(call)
        offloader = self.offloaders.get(call.op) if isinstance(call.op, tvm.ir.Op) else None
        if offloader is None:
            return call
        found = offloader.match(call, self.bindings)
        if found is None:
            return call
        if isinstance(found, str):
            if self.skipped is not None:
                self.skipped.append(offloader.skipped(self.function, self.var, found))
            return call
        self.changed = True
        return offloader.emit(self.builder_.emit, self._kernel(offloader.kernel(found)), found)

    def _kernel(self, func) -> tvm.ir.GlobalVar:
        name = str(func.attrs["global_symbol"])
        if name not in self.kernels:
            self.kernels[name] = self.builder_.add_func(func, name)
        return self.kernels[name]


def offload_pass(offloaders, skipped: list | None = None, name: str = "tvm_tirx.Offload"):
    """A module pass rewriting the calls each of ``offloaders`` matches (see :class:`Offloader`).

    A function with a rewritten call then loses its unused dataflow bindings
    (``relax.analysis.remove_all_unused``); other calls and functions are left as they are.

    """
    offloaders = tuple(offloaders)

    @tvm.transform.module_pass(opt_level=0, name=name)
    def _pass(mod, _ctx):
        return _Offload(mod, skipped, offloaders).run(mod)

    return _pass
