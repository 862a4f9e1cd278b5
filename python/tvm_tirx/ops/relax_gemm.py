"""The Relax matmuls the Hopper GEMM computes: :func:`match_gemm`, how the call is emitted
(:func:`emit_gemm_call`) and the :class:`~tvm_tirx.ops.relax_rewrite.Offloader` of
``R.matmul`` (:func:`gemm_offloader`)."""

from __future__ import annotations

import functools
import inspect
import operator
from dataclasses import dataclass

import tvm
from tvm import relax

from ..kernels.gemm import BN, make_gemm
from ..kernels.gemm.planner import choose_gemm, k_padding
from ..kernels.gemm.config import MAX_SIZE, TMA_STRIDE
from .gemm_kernels import GemmSpec, gemm_spec
from .relax_rewrite import Offloader

__all__ = ["IN_DTYPES", "OUT_DTYPES", "MAX_M", "SkippedMatmul", "GemmMatch", "match_gemm", "b_major",
           "emit_gemm_call", "fusable_options", "tile_options", "match_spec", "gemm_offloader", "k_pad"]

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


def b_major(g: GemmMatch) -> str:
    """The kernel's ``b_major`` for the match ``g``: ``"n"`` for a ``(k, n)`` weight whose
    rows (``n * sizeof(dtype)`` bytes) are a multiple of 16 (the kernel reads it as it
    is), else ``"k"`` (an ``(n, k)`` weight, or a ``(k, n)`` one that
    :func:`emit_gemm_call` transposes first)."""
    row = g.n * tvm.runtime.DataType(g.in_dtype).bits // 8
    return "n" if g.transpose_b and row % TMA_STRIDE == 0 else "k"


def k_pad(g: GemmMatch) -> int:
    """Zero columns the offload appends to the K-major ``x (m, k)`` and ``b (n, k)`` of the
    match ``g`` (:func:`~tvm_tirx.kernels.gemm.planner.k_padding`: rows of a multiple of
    64 bytes, where the copies cost less than they save): 0 for a symbolic ``m`` (the
    trade-off depends on it) or an N-major ``b`` (:func:`b_major`)."""
    m = _static(g.m)
    if m is None or b_major(g) != "k":
        return 0
    return k_padding(m, g.n, g.k, tvm.runtime.DataType(g.in_dtype).bits // 8)


def emit_gemm_call(emit, kernel: tvm.ir.GlobalVar, g: GemmMatch, extra: tuple = (), pad: int = 0) -> relax.Expr:
    """``R.call_tir(kernel, (x, b, *extra), (m, n))`` for the match ``g``: ``x`` reshaped
    to ``(m, k)`` first and the result back to ``(*batch, n)`` when ``x`` has more than
    one row axis; a ``(k, n)`` weight passed as it is to the N-major kernel
    (:func:`b_major`), or when its rows do not suit the TMA transposed by
    ``R.permute_dims`` first; with ``pad`` (:func:`k_pad`, a K-major ``b``), ``x`` and
    ``b`` given ``pad`` zero columns by ``R.nn.pad`` (the kernel is then built for ``k +
    pad``: the product is the same)."""
    x = g.x if len(g.batch) == 1 else emit(relax.op.reshape(g.x, [g.m, g.k]))
    b = emit(relax.op.permute_dims(g.b, [1, 0])) if b_major(g) == "k" and g.transpose_b else g.b
    if pad:
        x, b = (emit(relax.op.nn.pad(t, [0, 0, 0, pad])) for t in (x, b))
    out = relax.call_tir(kernel, [x, b, *extra], relax.TensorType([g.m, g.n], g.out_dtype))
    if len(g.batch) == 1:
        return out
    return relax.op.reshape(emit(out), [*g.batch, g.n])


#: make_gemm parameters the offload sets per call site (the rest are gemm_options)
PER_CALL = ("m", "n", "k", "out_dtype", "in_dtype", "bias", "activation", "gated", "residual", "a_major", "b_major")


def fusable_options(gemm_options: dict | None) -> dict:
    """A copy of ``gemm_options`` after checking its names: ``make_gemm`` options other
    than those the offload sets per call site (:data:`PER_CALL`).

    Raises
    ------
    ValueError
        A name of :data:`PER_CALL` (``bias`` and ``activation``: the offload fuses the
        bias add and activation it finds after a matmul itself), ``splits`` or
        ``block_scales`` (kernel forms the offload cannot call), or one ``make_gemm``
        does not take.
    """
    options = dict(gemm_options or {})
    kernel_forms = sorted(set(options) & {"splits", "block_scales"})
    if kernel_forms:
        raise ValueError(f"gemm_options: {', '.join(kernel_forms)} cannot be given to the Relax offload (split-K "
                         f"takes workspaces the offload does not keep; block scales take scale tensors a bf16 "
                         f"matmul does not have)")
    per_call = sorted(set(options) & set(PER_CALL))
    if per_call:
        raise ValueError(f"gemm_options: {', '.join(per_call)} cannot be given to the Relax offload (it sets "
                         f"{', '.join(PER_CALL)} per call site from the matmul and what follows it)")
    known = [p for p in inspect.signature(make_gemm).parameters if p not in PER_CALL]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"gemm_options: unknown option {', '.join(map(repr, unknown))} (make_gemm's options: "
                         f"{', '.join(known)})")
    return options


def tile_options(g: GemmMatch, options: dict) -> dict:
    """``options`` with the match's :func:`b_major` (when ``"n"``) and the tile width of
    :func:`~tvm_tirx.kernels.gemm.planner.choose_gemm` (the torch operators' planner, its
    tile kernel: the offload has no small-M form yet) for a static ``m`` (and the deepest ring
    that fits it) unless ``options`` sets ``block_n``; a symbolic ``m`` keeps the default
    128 x 256 tiles (the kernel serves every ``m``)."""
    options = {**options, "b_major": "n"} if b_major(g) == "n" else dict(options)
    m = _static(g.m)
    if m is None or "block_n" in options:
        return options
    fused = any(options.get(name) for name in ("bias", "activation", "residual"))
    # no split-K: the offload has no workspaces to pass (the counters must stay zero between calls)
    tile = choose_gemm(m, g.n, g.k, g.out_dtype, small_m=False, fused=fused, split_k=False)
    if not isinstance(tile, dict) or (tile["block_n"] == BN and "block_m" not in tile):
        return options
    rows = {"block_m": tile["block_m"]} if "block_m" in tile else {}  # a 64- or 256-row tile
    return {**options, "block_n": tile["block_n"], "stages": options.get("stages", tile["stages"]), **rows}


def match_spec(g: GemmMatch, options: dict | None = None) -> GemmSpec:
    """The kernel spec (:class:`~tvm_tirx.kernels.gemm.spec.GemmSpec`) the offload gives
    the match ``g``: :func:`~tvm_tirx.ops.gemm_kernels.gemm_spec` of its ``n``, ``k`` and
    dtypes with ``options`` (checked ``gemm_options``, :func:`fusable_options`) and
    :func:`tile_options`; the torch operators' :func:`~tvm_tirx.ops.torch_checks.gemm_key`
    gives an equal spec for the same call."""
    return gemm_spec(g.n, g.k + k_pad(g), g.in_dtype, g.out_dtype, **tile_options(g, dict(options or {})))


def gemm_offloader(gemm_options: dict | None = None) -> Offloader:
    """The :class:`~tvm_tirx.ops.relax_rewrite.Offloader` of ``R.matmul`` (:func:`match_gemm`,
    the run-time-``m`` kernel of :func:`match_spec` with ``gemm_options``)."""
    options = fusable_options(gemm_options)
    return Offloader("relax.matmul", match_gemm, lambda g: match_spec(g, options).prim_func(),
                     lambda emit, kernel, g: emit_gemm_call(emit, kernel, g, pad=k_pad(g)), SkippedMatmul)
