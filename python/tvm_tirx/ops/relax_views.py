"""Reshapes at the end of a dataflow block as views instead of copies.

apache-tvm's ``relax.transform.RewriteDataflowReshape`` turns a reshape into a view
(``vm.builtin.reshape``, no kernel) only when its result is a dataflow variable; a reshape
bound to one of the block's outputs stays a TIR kernel that copies the tensor.  An
offloaded matmul with batch axes ends in such a reshape (the GEMM writes ``(m, n)``, the
model wants ``(batch, seq, n)``), so a decoder block returning its last projection
copied the whole output once more (0.34 ms of 12 at 8 x 2048 on the H200).

:func:`ViewReshapedOutputs` binds each such reshape to a new dataflow variable and the
output to that variable, so the reshape is rewritten like any other.  It runs right
before ``RewriteDataflowReshape`` (:func:`tvm_tirx.ops.relax.relax_pipeline` places it
there): ``FuseTIR`` folds such an alias back into one binding.  The memory planner
(``StaticPlanBlockMemory``) then sees the reshaped tensor flow out of the function and
gives its storage to no other tensor.
"""

from __future__ import annotations

import tvm
import tvm.s_tir
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from .relax_bindings import count_uses

__all__ = ["ViewReshapedOutputs"]


@mutator
class _Rebind(PyExprMutator):
    """Re-emits ``out = reshape`` (``out`` not a dataflow variable) as ``lv = reshape;
    out = lv``, in dataflow blocks only."""

    def __init__(self, mod):
        super().__init__(mod)
        self.mod = mod
        self.ops = (tvm.ir.Op.get("relax.reshape"), tvm.ir.Op.get("relax.call_tir"))
        self.fresh = (self.ops[1], tvm.ir.Op.get("relax.call_dps_packed"))
        self.block_values = {}  # the dataflow variables of the block being visited -> their values
        self.uses = {}  # variable -> reads in the function being visited

    def _is_reshape(self, value) -> bool:
        """``R.reshape(...)``, or ``R.call_tir`` of a PrimFunc that only reshapes (what
        ``RewriteDataflowReshape`` rewrites)."""
        if not isinstance(value, relax.Call) or value.op not in self.ops:
            return False
        if value.op == self.ops[0]:
            return True
        callee = self.mod.functions.get(value.args[0]) if isinstance(value.args[0], tvm.ir.GlobalVar) else None
        # the analysis reads a block-structured body only (a tile kernel's is not: not a reshape)
        return (isinstance(callee, tvm.tirx.PrimFunc) and isinstance(callee.body, tvm.s_tir.SBlockRealize)
                and relax.analysis.has_reshape_pattern(callee))

    def _of_fresh_tensor(self, value) -> bool:
        """Whether the reshaped tensor is a dataflow variable a destination-passing call of
        this block wrote (a new allocation, not a parameter or a view) and that nothing but
        this reshape reads (no other output, view or in-place call shares it)."""
        src = value.args[0] if value.op == self.ops[0] else value.args[1].fields[0]
        if not isinstance(src, relax.DataflowVar) or self.uses.get(src, 0) != 1:
            return False
        made = self.block_values.get(src)
        return (isinstance(made, relax.Call) and made.op in self.fresh and not self._is_reshape(made))

    def visit_dataflow_block_(self, block):  # pylint: disable=arguments-renamed
        self.block_values = {b.var: b.value for b in block.bindings if isinstance(b, relax.VarBinding)}
        try:
            return super().visit_dataflow_block_(block)
        finally:
            self.block_values = {}  # outside a dataflow block no source is fresh

    def visit_var_binding_(self, binding):
        value = binding.value
        if not isinstance(binding.var, relax.DataflowVar) and self._is_reshape(value) and self._of_fresh_tensor(value):
            view = self.builder_.emit(self.visit_expr(value), name_hint=f"{binding.var.name}_view")
            self.builder_.emit_normalized(relax.VarBinding(binding.var, view))
            return
        super().visit_var_binding_(binding)


def ViewReshapedOutputs():  # pylint: disable=invalid-name
    """Module pass: each reshape (``R.reshape``, or ``R.call_tir`` of a PrimFunc
    ``relax.analysis.has_reshape_pattern`` accepts) bound to a dataflow block's output is
    bound to a dataflow variable first (``lv = reshape; out = lv``), so that
    ``RewriteDataflowReshape``, run next, makes it a view instead of a copy kernel.  Only
    reshapes of a tensor that a ``call_tir`` / ``call_dps_packed`` of the same block wrote
    and that nothing else reads are rebound: the output then owns that allocation alone,
    never a view of a parameter, of another output, or of a tensor a later call changes.  Functions without
    such a reshape are returned unchanged; semantics are unchanged.

    Returns
    -------
    tvm.transform.Pass
        A module pass over the Relax functions of a module.
    """

    @tvm.transform.module_pass(opt_level=0, name="tvm_tirx.ViewReshapedOutputs")
    def _pass(mod, _ctx):
        rebind = _Rebind(mod)
        for gv, func in mod.functions_items():
            if isinstance(func, relax.Function):
                rebind.uses = count_uses(func)
                rebind.builder_.update_func(gv, rebind.visit_expr(func))
        return rebind.builder_.get()

    return _pass
