"""Launch sizes computed from a kernel's arguments, checked before each launch.

``LaunchConfig(grid=T.ceildiv(n, 256), dynamic_smem_bytes=n * 4)`` gives sizes
that are expressions of the kernel's scalar parameters and symbolic tensor
extents.  apache-tvm's host code computes them at every launch (its
``SplitHostDevice`` pass puts the expressions into the kernel call's launch
arguments).  What the compiler could not check, :class:`LaunchSizes` checks
in :class:`~tvm_tirx.Kernel` before the launch, from the same arguments:

* each grid extent is within CUDA's limits: 1 to 2**31 - 1 CTAs along ``x``,
  1 to 65535 along ``y`` and ``z`` (CUDA C++ Programming Guide, "Technical
  Specifications per Compute Capability": maximum x-/y-/z-dimension of a grid);
* a run-time dynamic shared memory size covers every ``shared.dyn`` carve-out
  (the last byte any of them uses) and, with the kernel's static shared
  memory, fits the target's limit per CTA (:mod:`tvm_tirx.build.smem_limits`).

Above CUDA's default 48 KiB a launch also needs the kernel's dynamic shared
memory attribute raised on its device, which apache-tvm 0.27's launcher does
only for its first launch's size: ``Kernel`` raises it to the device's limit
once per device (:mod:`tvm_tirx.build.dynamic_smem_limit`).

Calls that bypass ``Kernel`` (an exported library, the Relax VM) run without
these checks: the CUDA driver then refuses a launch over its limits, but a
pool smaller than its carve-outs is the caller's mistake; such a caller raises
the dynamic shared memory limit itself with
:func:`tvm_tirx.build.dynamic_smem_limit.raise_dynamic_smem_limit`.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import Var
from tvm.runtime import DataType
from tvm.tirx.exec_scope import _SCOPE_BINDING_TO_PARENT_CUR

from ..tile.analysis.prover import fold
from ..tile.ir.views import int_or_none
from .smem_limits import smem_limit, static_smem_bytes

__all__ = ["LaunchSizes", "GRID_LIMITS"]

#: Most CTAs along x, y, z (CUDA C++ Programming Guide, technical specifications).
GRID_LIMITS = (2**31 - 1, 65535, 65535)

_AXES = "xyz"


def _binding(parent, cur):
    return next(k for k, v in _SCOPE_BINDING_TO_PARENT_CUR.items() if v == (parent, cur))


def _const(expr):
    return int_or_none(expr)


class _Size:
    """One run-time size: its text for messages, and a Python function computing
    it from a call's arguments (:func:`_python`; apache-tvm's arithmetic
    evaluates any expression that translation does not cover)."""

    def __init__(self, what, expr, sources):
        self.what, self.expr = what, expr
        used = []
        tvm_ffi.structural_walk(expr, (Var, lambda v: None if any(v.same_as(u) for u in used) else used.append(v)))
        self.vars = []
        for var in used:
            source = next((src for v, src in sources if v.same_as(var)), None)
            if source is None:
                raise ValueError(
                    f"{what} = {expr} reads {var.name}, which is neither a scalar parameter of the "
                    "kernel nor an extent of one of its tensor parameters"
                )
            self.vars.append((var, source))
        self.compute = self._compile()

    @staticmethod
    def _read(source) -> str:
        index, dim = source
        return f"args[{index}]" if dim is None else f"args[{index}].shape[{dim}]"

    def _compile(self):
        names = {var: self._read(src) for var, src in self.vars}
        code = _python(self.expr, names)
        if code is not None:
            env = {"_tdiv": _tdiv, "_tmod": _tmod}
            exec(f"def compute(args):\n    return int({code})", env)  # pylint: disable=exec-used
            return env["compute"]

        analyzer = tvm.sym.Analyzer()
        readers = [(var, eval(f"lambda args: int({r})")) for var, r in names.items()]  # pylint: disable=eval-used
        return lambda args: fold(analyzer, self.expr, {var: read(args) for var, read in readers})

    def where(self, args) -> str:
        """``"n = 1000, ..."``: the values this size read from ``args``, for messages."""
        return ", ".join(f"{var.name} = {eval(self._read(src), {'args': args})}" for var, src in self.vars)  # pylint: disable=eval-used


def _tdiv(a: int, b: int) -> int:
    """C's integer division (truncation toward zero), as TIR's ``Div`` on integers."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _tmod(a: int, b: int) -> int:
    """C's ``%``: ``a - b * _tdiv(a, b)``."""
    return a - b * _tdiv(a, b)


#: integer and boolean PrimExpr nodes of two operands, as Python source
_BINARY = {tirx.Add: "({} + {})", tirx.Sub: "({} - {})", tirx.Mul: "({} * {})", tirx.FloorDiv: "({} // {})",
           tirx.FloorMod: "({} % {})", tirx.Div: "_tdiv({}, {})", tirx.Mod: "_tmod({}, {})",
           tirx.Min: "min({}, {})", tirx.Max: "max({}, {})", tirx.LT: "({} < {})", tirx.LE: "({} <= {})",
           tirx.GT: "({} > {})", tirx.GE: "({} >= {})", tirx.EQ: "({} == {})", tirx.NE: "({} != {})",
           tirx.And: "({} and {})", tirx.Or: "({} or {})"}  # fmt: skip


def _python(expr, names):
    """Python source computing integer PrimExpr ``expr`` (``names``: Var -> source of
    its value), or None for a node this does not translate."""
    if isinstance(expr, tirx.IntImm):
        return str(int(expr.value))
    if isinstance(expr, Var):
        return next((src for var, src in names.items() if var.same_as(expr)), None)
    if isinstance(expr, tirx.Cast) and str(expr.ty.dtype).startswith(("int", "uint", "bool")):
        return _python(expr.value, names)
    if isinstance(expr, tirx.Select):  # both arms are evaluated, as TIR's Select does
        parts = [_python(e, names) for e in (expr.true_value, expr.condition, expr.false_value)]
        return None if None in parts else "({} if {} else {})".format(*parts)
    if isinstance(expr, tirx.Not):
        value = _python(expr.a, names)
        return None if value is None else f"(not {value})"
    form = _BINARY.get(type(expr))
    if form is None:
        return None
    a, b = _python(expr.a, names), _python(expr.b, names)
    return None if a is None or b is None else form.format(a, b)


def _sources(func):
    """``[(var, (param index, dim or None))]``: where each scalar parameter and
    symbolic tensor extent of ``func`` is read from in a call's arguments."""
    out = []
    for i, param in enumerate(func.params):
        if tirx.is_buffer_var(param):
            out += [(s, (i, d)) for d, s in enumerate(param.shape) if isinstance(s, Var)]
        else:
            out.append((param, (i, None)))
    return out


class LaunchSizes:
    """The run-time launch sizes of one kernel and their checks.

    Build it with :meth:`of`; calling it with a call's arguments (already
    checked by :mod:`tvm_tirx.build.arguments`) raises or returns None.
    """

    def __init__(self, name, grid, dyn_size, high_water, static_bytes, arch):
        self.name, self.grid, self.dyn_size = name, grid, dyn_size
        self.high_water, self.static_bytes, self.arch = high_water, static_bytes, arch
        self._limit = smem_limit(arch) if arch else None
        # the dynamic sizes accepted: [carve-outs' end, limit - static] (no upper bound
        # for an arch the table does not list: the driver refuses the launch then)
        self._lo = max(high_water, 0)
        self._hi = float("inf") if self._limit is None else self._limit - static_bytes

    @classmethod
    def of(cls, func, name: str, arch: str | None):
        """The run-time sizes of PrimFunc ``func`` (the kernel as parsed), or None
        when every launch size is a constant.

        Raises
        ------
        ValueError
            A size reads a variable that a call's arguments do not give.
        """
        grid, pool, high_water = _walk(func)
        if not grid and pool is None:
            return None
        sources = _sources(func)
        grid = [(axis, _Size(f"grid.{_AXES[axis]}", e, sources)) for axis, e in grid]
        dyn = _Size("dynamic_smem_bytes", pool, sources) if pool is not None else None
        return cls(name, grid, dyn, high_water, static_smem_bytes(func), arch)

    def __call__(self, args) -> int | None:
        """The run-time dynamic shared memory size of a launch on ``args`` in bytes (None
        when the kernel has none); raise ValueError for a launch size that CUDA or the
        kernel cannot take."""
        for axis, size in self.grid:
            value = size.compute(args)
            if not 1 <= value <= GRID_LIMITS[axis]:
                raise ValueError(
                    f"{self.name}: {size.what} = {size.expr} = {value} with {size.where(args)}: a CUDA grid "
                    f"has 1 to {GRID_LIMITS[axis]} CTAs along {_AXES[axis]}"
                )
        if self.dyn_size is not None:
            value = self.dyn_size.compute(args)
            if not self._lo <= value <= self._hi:
                self._refuse_dyn(value, args)
            return value
        return None

    def _refuse_dyn(self, value, args):
        size = self.dyn_size
        what = f"{self.name}: {size.what} = {size.expr} = {value} with {size.where(args)}"
        if value < self.high_water:
            raise ValueError(
                f"{what}: the kernel's shared.dyn tensors use bytes [0, {self.high_water}) of it"
            )
        static = f" + {self.static_bytes} bytes of static shared memory" if self.static_bytes else ""
        raise ValueError(
            f"{what}{static}: over the {self._limit} bytes of shared memory a CTA may use on "
            f"{self.arch} (CUDA C++ Programming Guide, technical specifications per compute capability)"
        )


def _walk(func):
    """``(grid, pool size, high water)`` of ``func``: the run-time grid extents as
    ``[(axis, expr)]``, the run-time size of the dynamic shared memory pool (bytes;
    None when constant or absent), and the first byte after every carve-out of it."""
    found = {"grid": [], "pool": None, "ends": []}
    cta = _binding("kernel", "cta")
    analyzer = tvm.sym.Analyzer()

    def nbytes(buf, count):
        return analyzer.simplify(count * (DataType(buf.dtype).bits // 8))

    def visit(node):
        if isinstance(node, tirx.ScopeIdDefStmt):
            d = getattr(node, "def")
            if d.scope == cta and d.extents is not None:
                found["grid"] = [(i, e) for i, e in enumerate(d.extents) if _const(e) is None]
        elif isinstance(node, tirx.AllocBuffer) and node.buffer.scope() == "shared.dyn":
            extent = _prod(node.buffer.shape)
            if _const(extent) is None:
                found["pool"] = (node.buffer, nbytes(node.buffer, extent))
        elif isinstance(node, tirx.DeclBuffer) and node.buffer.scope() == "shared.dyn":
            buf = node.buffer
            span = _const(buf.layout.span()) if buf.layout is not None else None
            end = _const((buf.elem_offset + (span or _prod(buf.shape))) * DataType(buf.dtype).bits // 8)
            found["ends"].append((node, end))

    tvm_ffi.structural_walk(func.body, (object, visit))
    pool = found["pool"]
    if pool is None:
        return found["grid"], None, 0
    # carve-outs over the pool: byte ends known when the kernel is compiled
    ends = [end for node, end in found["ends"] if _views(node, pool[0]) and end is not None]
    return found["grid"], pool[1], max(ends, default=0)


def _views(decl, pool) -> bool:
    args = getattr(decl.data, "args", None)
    return bool(args) and args[0].same_as(pool)


def _prod(shape):
    out = 1
    for s in shape:
        out = out * s
    return out
