"""Offload Relax matmuls to the Hopper GEMM (:func:`tvm_tirx.kernels.gemm.make_gemm`) and
Relax attention to the attention kernel (:mod:`.relax_attention`).

:func:`partition_for_tvm_tirx` rewrites every supported ``R.matmul`` of a Relax module
into an ``R.call_tir`` of the GEMM (and every supported ``R.nn.attention`` into one of the
attention kernel), as ``tvm.relax.backend.cuda.cublas.partition_for_cublas`` does for
cuBLAS; then build with this package's pipelines::

    mod = partition_for_tvm_tirx(mod)
    ex = tvm.compile(mod, tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}),
                     relax_pipeline="tvm_tirx", tir_pipeline="tvm_tirx")

The GEMM computes ``C (m, n) = A (m, k) @ B (n, k)^T``.  Two forms are matched:

* ``R.matmul(x, w)`` with ``w`` of shape ``(k, n)``: ``w`` is transposed into ``(n, k)``
  by an ``R.permute_dims(w, [1, 0])`` emitted before the call (a run-time transpose,
  unless a later pass folds or lifts it);
* ``R.matmul(x, R.permute_dims(w))`` with ``w`` of shape ``(n, k)`` (the "linear" form of
  ``torch.nn.functional.linear``): ``w`` is passed as it is.

``x`` is ``(*rows, k)``; with more than one row axis (batch, sequence) it is reshaped
into ``(prod(rows), k)`` and the result back into ``(*rows, n)``.  One PrimFunc per ``(n, k, dtypes)`` serves
every call site: its ``m`` is a run-time extent, so static and symbolic batch or sequence
sizes share it and symbolic ones stay symbolic.  A bias add after the matmul is not part
of the pattern: it stays an ``R.add`` on the GEMM's (rounded) output, lowered as usual.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Callable, NamedTuple

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, PyExprVisitor, mutator, visitor

from .. import _plugin
from ..kernels.gemm.config import MAX_SIZE, TMA_STRIDE
from .gemm_kernels import gemm_prim_func
from .relax_attention import SkippedAttention, attention_kernel_func, emit_attention, match_attention

__all__ = ["IN_DTYPES", "OUT_DTYPES", "MAX_M", "SkippedMatmul", "GemmMatch", "gemm_prim_func", "match_gemm",
           "Bindings", "count_uses", "call_readers", "Offloader", "emit_gemm_call", "fusable_options", "gemm_offloader", "attention_offloader", "offload_pass", "OffloadGemm", "partition_for_tvm_tirx"]

#: Input dtypes offloaded (both operands the same).
IN_DTYPES = ("bfloat16",)
#: Output dtypes offloaded (``R.matmul``'s ``out_dtype``).
OUT_DTYPES = ("bfloat16", "float32")
#: Largest ``m`` (rows of the flattened ``x``): the generator's size bound (int32 row indices).
MAX_M = MAX_SIZE


@dataclass(frozen=True)
class SkippedMatmul:
    """An ``R.matmul`` left to the default lowering: the Relax function's name, the name
    of the variable the matmul is bound to, and why it was not offloaded."""

    function: str
    var: str
    reason: str


@dataclass(frozen=True)
class GemmMatch:  # pylint: disable=too-many-instance-attributes
    """An ``R.matmul`` the GEMM computes (:func:`match_gemm`).

    ``x``: the left operand, shape ``(*batch, k)``; ``b``: the weight, ``(n, k)``, or
    ``(k, n)`` when ``transpose_b``; ``batch``: ``x``'s leading extents (PrimExprs,
    static or symbolic); ``m``: their product; ``n``, ``k``: ints; ``in_dtype``,
    ``out_dtype``: dtype names.
    """

    x: relax.Expr
    b: relax.Expr
    transpose_b: bool
    batch: tuple
    m: tvm.tirx.PrimExpr
    n: int
    k: int
    in_dtype: str
    out_dtype: str


def _static(value) -> int | None:
    return int(value) if isinstance(value, int | tvm.tirx.IntImm) else None


def _weight(rhs: relax.Expr, lookup):
    """``(b, transpose_b)`` for the matmul's right operand, or the reason it is refused."""
    bound = lookup(rhs) if isinstance(rhs, relax.Var) else None
    if isinstance(bound, relax.Call) and bound.op == tvm.ir.Op.get("relax.permute_dims"):
        axes = bound.attrs.axes
        if bound.args[0].ty.ndim == 2 and (axes is None or [int(a) for a in axes] == [1, 0]):
            return bound.args[0], False  # linear: x @ w^T with w (n, k)
    if rhs.ty.ndim != 2:
        return f"the weight has {rhs.ty.ndim} axes (a 2-D (k, n) weight is offloaded)"
    return rhs, True


def _check_dtypes(x, w, out_dtype) -> str | None:
    if str(x.ty.dtype) != str(w.ty.dtype) or str(x.ty.dtype) not in IN_DTYPES:
        return f"inputs {x.ty.dtype} x {w.ty.dtype} (offloaded: both in {list(IN_DTYPES)})"
    if out_dtype not in OUT_DTYPES:
        return f"output {out_dtype} (offloaded: {list(OUT_DTYPES)})"
    return None


def _check_sizes(m, n, k, in_dtype) -> str | None:
    if n is None:
        return "n is not a compile-time constant (the GEMM needs a static n)"
    if k is None:
        return "k is not a compile-time constant"
    row = k * tvm.runtime.DataType(in_dtype).bits // 8
    if row % TMA_STRIDE:
        return (f"k = {k}: rows of {row} bytes are not a multiple of {TMA_STRIDE} "
                "(the TMA's stride rule)")
    m_static = _static(m)
    if m_static is not None and not 1 <= m_static <= MAX_M:
        return f"m = {m_static} outside 1 .. {MAX_M}"
    return None


def match_gemm(call: relax.Call, lookup=lambda var: None):
    """Whether ``call`` is an ``R.matmul`` the GEMM computes, and how.

    Parameters
    ----------
    call : tvm.relax.Call
        A call of ``relax.matmul``, its operands with known types.
    lookup : callable
        ``Var -> Expr | None``: the value a variable is bound to (a mutator's
        ``lookup_binding``); it finds the ``R.permute_dims`` of the linear form.

    Returns
    -------
    GemmMatch | str
        The match, or a sentence saying why the call is left to the default lowering:
        dtypes outside :data:`IN_DTYPES` / :data:`OUT_DTYPES`, unknown shapes, a 1-D
        ``x``, a batched weight, a run-time ``n`` or ``k``, rows of ``k *
        sizeof(dtype)`` bytes not a multiple of 16, a static ``m`` outside ``1 ..``
        :data:`MAX_M`.  Nothing is raised for an unsupported call.
    """
    x, rhs = call.args
    if x.ty.shape is None or rhs.ty.shape is None:
        return "an operand's shape is unknown"
    if x.ty.ndim < 2:
        return "x has fewer than 2 axes"
    weight = _weight(rhs, lookup)
    if isinstance(weight, str):
        return weight
    b, transpose_b = weight
    in_dtype, out_dtype = str(x.ty.dtype), str(call.ty.dtype)
    reason = _check_dtypes(x, b, out_dtype)
    if reason:
        return reason
    shape = list(x.ty.shape.values)
    b_shape = [_static(v) for v in b.ty.shape.values]
    n, k = (b_shape[1], b_shape[0]) if transpose_b else (b_shape[0], b_shape[1])
    k = k if k is not None and _static(shape[-1]) == k else None
    m = functools.reduce(operator.mul, shape[:-1])
    reason = _check_sizes(m, n, k, in_dtype)
    if reason:
        return reason
    return GemmMatch(x, b, transpose_b, tuple(shape[:-1]), m, n, k, in_dtype, out_dtype)


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


class Offloader(NamedTuple):
    """How one Relax operator is offloaded: ``match(call, lookup)`` returns a match or the
    reason the call is left alone (``lookup`` is a :class:`Bindings`); ``kernel(match)`` the PrimFunc (added to the module once
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
        self.bindings = Bindings(self.lookup_binding, {}, {})

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


def emit_gemm_call(emit, kernel: tvm.ir.GlobalVar, g: GemmMatch, extra: tuple = ()) -> relax.Expr:
    """``R.call_tir(kernel, (x, b, *extra), (m, n))`` for the match ``g``: ``x`` reshaped
    to ``(m, k)`` first and the result back to ``(*batch, n)`` when ``x`` has more than
    one row axis; a ``(k, n)`` weight transposed by ``R.permute_dims`` first."""
    x = g.x if len(g.batch) == 1 else emit(relax.op.reshape(g.x, [g.m, g.k]))
    b = emit(relax.op.permute_dims(g.b, [1, 0])) if g.transpose_b else g.b
    out = relax.call_tir(kernel, [x, b, *extra], relax.TensorType([g.m, g.n], g.out_dtype))
    if len(g.batch) == 1:
        return out
    return relax.op.reshape(emit(out), [*g.batch, g.n])


def fusable_options(gemm_options: dict | None) -> dict:
    """A copy of ``gemm_options``; ValueError if it sets ``bias`` or ``activation`` (the
    offload chooses those per call site)."""
    options = dict(gemm_options or {})
    fused = sorted(set(options) & {"bias", "activation"})
    if fused:
        raise ValueError(f"gemm_options: {', '.join(fused)} cannot be given to the Relax offload (it fuses the "
                         "bias add and activation it finds after a matmul itself)")
    return options


def gemm_offloader(gemm_options: dict | None = None) -> Offloader:
    """The :class:`Offloader` of ``R.matmul`` (:func:`match_gemm`, :func:`gemm_prim_func`
    with ``gemm_options``)."""
    options = fusable_options(gemm_options)
    return Offloader("relax.matmul", match_gemm,
                     lambda g: gemm_prim_func(g.n, g.k, g.in_dtype, g.out_dtype, **options), emit_gemm_call,
                     SkippedMatmul)


def attention_offloader() -> Offloader:
    """The :class:`Offloader` of ``R.nn.attention`` (:mod:`.relax_attention`)."""
    return Offloader("relax.nn.attention", match_attention, attention_kernel_func, emit_attention, SkippedAttention)


def offload_pass(offloaders, skipped: list | None = None, name: str = "tvm_tirx.Offload"):
    """A module pass rewriting the calls each of ``offloaders`` matches (see :class:`Offloader`).

    A function with a rewritten call then loses its unused dataflow bindings
    (``relax.analysis.remove_all_unused``); other calls and functions are left as they are.

    Running the pass also registers the ``"tvm_tirx"`` TIR and Relax pipelines the
    rewritten module is built with (:func:`tvm_tirx._plugin.install`): apache-tvm's
    ``tvm.backends`` entry point does that at ``import tvm`` only when the package is
    installed, not when it is found through ``PYTHONPATH``.
    """
    offloaders = tuple(offloaders)

    @tvm.transform.module_pass(opt_level=0, name=name)
    def _pass(mod, _ctx):
        _plugin.install()
        return _Offload(mod, skipped, offloaders).run(mod)

    return _pass


def OffloadGemm(skipped: list | None = None, gemm_options: dict | None = None):  # pylint: disable=invalid-name
    """Module pass: rewrite supported ``R.matmul`` calls into ``R.call_tir`` of the GEMM.

    Each matmul :func:`match_gemm` accepts becomes ``R.call_tir(gemm, (x, b),
    R.Tensor((m, n), out_dtype))`` with ``gemm`` = :func:`gemm_prim_func` ``(n, k, ...)``
    added to the module once per ``(n, k, dtypes)`` (a run-time ``m``: one kernel for
    every batch and sequence size); ``x`` with batch axes is reshaped to ``(m, k)`` and
    the result back; a ``(k, n)`` weight gets an ``R.permute_dims(w, [1, 0])``.
    A function with a rewritten matmul then loses its unused dataflow bindings
    (``relax.analysis.remove_all_unused``), the linear form's ``permute_dims`` among them.
    Other matmuls, every other op, and functions without a match are left as they are.
    A ``(n,)`` bias add and an activation after a matmul are folded into its GEMM first
    (:mod:`tvm_tirx.ops.relax_epilogue`).

    Parameters
    ----------
    skipped : list | None
        If a list, a :class:`SkippedMatmul` is appended for each matmul left alone.
    gemm_options : dict | None
        ``make_gemm`` keyword options for every kernel (``stages``, ``persistent``, ...),
        over the torch operators' (:data:`tvm_tirx.ops.gemm_kernels.CONFIG`).

    Returns
    -------
    tvm.transform.Pass
        A module pass.  The rewritten module builds only for an ``sm_90a`` CUDA target,
        with ``relax_pipeline="tvm_tirx", tir_pipeline="tvm_tirx"``.

    Raises
    ------
    ValueError
        When it runs, from ``make_gemm``, for ``gemm_options`` it refuses.
    """
    from .relax_epilogue import epilogue_offloaders  # pylint: disable=import-outside-toplevel  (it imports us)

    return tvm.transform.Sequential([offload_pass(epilogue_offloaders(gemm_options), None, "tvm_tirx.OffloadGemmEpilogues"),
                                     offload_pass([gemm_offloader(gemm_options)], skipped, "tvm_tirx.OffloadGemm")],
                                    name="tvm_tirx.OffloadGemmAll")


def partition_for_tvm_tirx(mod: tvm.IRModule, skipped: list | None = None,
                           gemm_options: dict | None = None, attention: bool = True,
                           epilogues: bool = True) -> tvm.IRModule:
    """Offload the supported matmuls (and attentions) of ``mod`` to this package's kernels.

    The counterpart of ``partition_for_cublas``: call it on a Relax module before
    ``tvm.compile(mod, target, relax_pipeline="tvm_tirx", tir_pipeline="tvm_tirx")``
    with an ``sm_90a`` CUDA target.

    Parameters
    ----------
    mod : tvm.IRModule
        A Relax module; ``R.matmul`` calls on bfloat16 operands of static ``n`` and ``k``
        (``k`` a multiple of 8) are offloaded to the GEMM, whatever ``m`` (static or
        symbolic), and ``R.nn.attention`` calls to the attention kernel
        (:mod:`tvm_tirx.ops.relax_attention` says which).
    skipped : list | None
        If a list, receives a :class:`SkippedMatmul` (or
        :class:`~tvm_tirx.ops.relax_attention.SkippedAttention`) per call left alone, with why.
    gemm_options : dict | None
        ``make_gemm`` keyword options for every kernel, over the torch operators'
        (:data:`tvm_tirx.ops.gemm_kernels.CONFIG`).
    attention : bool
        Offload ``R.nn.attention`` too.
    epilogues : bool
        First fold a ``(n,)`` bias add and a ReLU / SiLU / tanh-GELU after a matmul into
        the GEMM's fused epilogue (:mod:`tvm_tirx.ops.relax_epilogue`; one rounding
        instead of one per op).

    Returns
    -------
    tvm.IRModule
        A new module; ``mod`` is not changed.

    Raises
    ------
    ValueError
        From ``make_gemm``, for ``gemm_options`` it refuses; ``gemm_options`` with
        ``bias`` or ``activation`` (the offload chooses those per call site).
    """
    if epilogues:
        from .relax_epilogue import epilogue_offloaders  # pylint: disable=import-outside-toplevel  (it imports us)

        mod = offload_pass(epilogue_offloaders(gemm_options), None, "tvm_tirx.OffloadGemmEpilogues")(mod)
    offloaders = [gemm_offloader(gemm_options)] + ([attention_offloader()] if attention else [])
    return offload_pass(offloaders, skipped, "tvm_tirx.Offload")(mod)
