"""``LowerTileApply``: check each tile call against its contract and expand it.

For every ``T.cuda.tile.apply`` Call the pass

1. re-runs the parse-time checks (the IR may have been built without the parser),
2. proves what needs the kernel: each memory atom's alignment (from the root
   tensor's declared ``align`` and the view's index arithmetic over the ranges
   of the thread and loop variables) and that the view is not provably outside
   its tensor,
3. replaces the call by one unrolled ``for`` per repeat axis whose body is
   exactly one apache-tvm ``T.ptx[...]`` intrinsic call.

It never chooses an instruction: the opcode is the user's.
"""

from __future__ import annotations

import itertools

from ..errors import TileError, operand_label
from . import operands as _ops
from .contract import arch_number
from .instruction import _ptx_namespace
from .op import decode, is_tile_call, select_contract
from .scope import group_shape

__all__ = ["LowerTileApply", "lower_tile_apply"]


class _KernelFacts:
    """What the proofs need from the enclosing PrimFunc: root tensors and variable ranges."""

    def __init__(self, func):
        import tvm  # pylint: disable=import-outside-toplevel
        import tvm_ffi  # pylint: disable=import-outside-toplevel
        from tvm import tirx  # pylint: disable=import-outside-toplevel

        self.roots = {}  # root buffer var -> element extent
        self.parent = {}  # view buffer var -> the buffer it views
        self.analyzer = tvm.sym.Analyzer()
        for p in func.params:
            if tirx.is_buffer_var(p):
                self.roots[p] = _prod(p.shape)

        def visit(node):
            if isinstance(node, tirx.AllocBuffer):
                buf = node.buffer
                self.roots[buf] = _alloc_extent(buf)
            elif isinstance(node, tirx.DeclBuffer):
                data = node.data
                args = getattr(data, "args", None)
                if args and tirx.is_buffer_var(args[0]):
                    self.parent[node.buffer] = args[0]
            elif isinstance(node, tirx.ScopeIdDefStmt):
                d = getattr(node, "def")
                if d.extents is not None:
                    for var, ext in zip(d.def_ids, d.extents):
                        self._bind(var, 0, ext)
            elif isinstance(node, tirx.For):
                self._bind(node.loop_var, node.min, node.min + node.extent)

        tvm_ffi.structural_walk(func.body, (object, visit))

    def _bind(self, var, lo, hi):
        import tvm  # pylint: disable=import-outside-toplevel

        try:
            self.analyzer.bind(var, tvm.ir.Range(lo, hi))
        except Exception:  # pylint: disable=broad-except
            pass  # a symbolic range the analyzer cannot take: leave the var unbounded

    def root_of(self, buf):
        """The parameter or allocation that ``buf`` views, or None."""
        seen = 0
        while buf not in self.roots and buf in self.parent and seen < 64:
            buf, seen = self.parent[buf], seen + 1
        return buf if buf in self.roots else None


def _prod(shape):
    out = 1
    for s in shape:
        out *= s
    return out


def _alloc_extent(buf):
    layout = buf.layout
    if layout is not None:
        try:
            return int(layout.span())
        except (TypeError, ValueError):
            pass
    return _prod(buf.shape)


def _location(span) -> str | None:
    if span is None:
        return None
    name = getattr(getattr(span, "source_name", None), "name", None)
    line = getattr(span, "line", None)
    if not name or not line:
        return None
    return f"{name}:{line}"


def _const_bound(analyzer, expr):
    b = analyzer.const_int_bound(expr)
    inf = 1 << 62
    lo = None if b.min_value <= -inf else int(b.min_value)
    hi = None if b.max_value >= inf else int(b.max_value)
    return lo, hi


def check_memory(facts, opcode, role, op, group, repeat):
    """Alignment and bounds of one memory operand; return a TileError or None."""
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel
    from tvm.tirx import floormod  # pylint: disable=import-outside-toplevel

    buf = op.value
    label = operand_label(role.role, op.index)
    root = facts.root_of(buf)
    if root is None:
        return TileError(
            opcode,
            "memory view without a known tensor",
            operand=label,
            expected="a view of a kernel parameter or an allocation",
            found=buf.name,
        )
    elem_bytes = DataType(buf.dtype).bits // 8
    need = role.atom[0] * elem_bytes
    view = _ops.ViewMap(buf)
    lead = (0,) * len(group)
    offsets = [view.offset((*lead, *c)) for c in _ops.coords(repeat, role.atom)]
    starts = [
        view.offset((*lead, *r, 0))
        for r in itertools.product(*(range(n) for n in repeat))
    ]
    base = int(root.data_alignment)
    if base % need != 0:
        return TileError(
            opcode,
            "vector atom not provably aligned",
            operand=label,
            expected=f"{need}-byte alignment (tensor {root.name} declared with align>={need})",
            found=f"{root.name} declared align={base}",
        )
    analyzer = facts.analyzer
    for start in sorted({s % need for s in starts}):
        addr = (buf.elem_offset + start) * elem_bytes
        if not analyzer.can_prove(floormod(addr, need) == 0):
            return TileError(
                opcode,
                "vector atom not provably aligned",
                operand=label,
                expected=f"byte offset a multiple of {need}",
                found=f"byte offset {analyzer.simplify(addr)}",
            )
    extent = facts.roots[root]
    lo, hi = _const_bound(analyzer, buf.elem_offset)
    first, last = min(offsets), max(offsets)
    if isinstance(extent, int) or hasattr(extent, "value"):
        extent = int(extent)
        if (lo is not None and lo + first < 0) or (hi is not None and hi + last >= extent):
            found_lo = "?" if lo is None else lo + first
            found_hi = "?" if hi is None else hi + last
            return TileError(
                opcode,
                "view provably out of the tensor's bounds",
                operand=label,
                expected=f"elements within [0, {extent}) of {root.name}",
                found=f"elements [{found_lo}, {found_hi}] for some thread",
            )
    return None


def _element_args(role, op, group_coord, rep):
    """The PTX arguments one operand supplies at repeat coordinate ``rep``."""
    if op.kind == "scalar":
        return [op.value] * role.lanes
    buf = op.value
    if role.kind == "memory":
        ptr = buf.ptr_to([*group_coord, *rep, *(0 for _ in role.atom)])
        if role.ptx.space == "local":
            # A .local address is an offset in the local window, not the
            # generic address C++ takes of a local array (PTX ISA 6.4.1.1).
            return [_generic_to_local(ptr)]
        return [ptr]
    return [buf[tuple([*group_coord, *rep, k])] for k in range(role.atom[0])]


def _target_arch() -> str | None:
    """``arch`` of the current ``tvm.target.Target``, if one is active."""
    from tvm.target import Target  # pylint: disable=import-outside-toplevel

    target = Target.current(allow_none=True)
    if target is None:
        return None
    arch = target.attrs.get("arch")
    return str(arch) if arch else None


def check_arch(contract, arch):
    """The form is available on the target architecture; return a TileError or None."""
    if arch is None or contract.min_arch is None:
        return None
    if arch_number(arch) < arch_number(contract.min_arch):
        return TileError(
            contract.opcode,
            "instruction needs a newer architecture",
            expected=f"{contract.min_arch} or newer",
            found=arch,
        )
    return None


def _generic_to_local(ptr):
    """The ``.local``-window address of generic pointer ``ptr`` (CUDA ``__cvta_generic_to_local``)."""
    from tvm.tirx import call_pure_extern  # pylint: disable=import-outside-toplevel

    return call_pure_extern("uint64", "__cvta_generic_to_local", ptr)


def expand(call, facts, span=None):
    """Check one tile Call and return its expansion (a Stmt).

    Raises
    ------
    TileError
        Any contract violation, pointing at the call's source line when known.
    """
    from tvm import tirx  # pylint: disable=import-outside-toplevel

    tc = decode(call)
    location = _location(span)
    try:
        group = group_shape(tc.opcode, tc.scope)
        contract, ops = select_contract(tc.opcode, tc.operands, group, tc.pred, tc.preserve_dst)
        err = check_arch(contract, _target_arch())
        if err:
            raise err
        repeat = ()
        for role, op in zip(contract.roles, ops):
            if op.kind == "tensor":
                repeat = _ops.repeat_shape(role, op, group)
                break
        for role, op in zip(contract.roles, ops):
            if op.kind == "tensor" and role.kind == "memory":
                err = check_memory(facts, contract.opcode, role, op, group, repeat)
                if err:
                    raise err
    except TileError as err:
        raise err.at(location) from None

    loop_vars = [tirx.Var(f"r{i}", "int32") for i in range(len(repeat))]
    group_coord = ()
    args = []
    for kind, key in contract.ptx_order():
        if kind == "param":
            args.append(tc.params[key])
        else:
            args += _element_args(contract.roles[key], ops[key], group_coord, loop_vars)
    instr = _ptx_namespace()[contract.opcode]
    try:
        ptx_call = instr(*args, pred=tc.pred, preserve_dst=tc.preserve_dst)
    except ValueError as err:
        raise TileError(contract.opcode, "PTX table rejected the expansion", found=str(err)).at(
            location
        ) from None
    body = tirx.Evaluate(ptx_call, span=span) if span is not None else tirx.Evaluate(ptx_call)
    for var, extent in reversed(list(zip(loop_vars, repeat))):
        body = tirx.For(var, 0, extent, tirx.ForKind.UNROLLED, body)
    return body


def lower_tile_apply(func):
    """Expand every tile call of PrimFunc ``func``; return the new PrimFunc."""
    import tvm_ffi  # pylint: disable=import-outside-toplevel
    from tvm import tirx  # pylint: disable=import-outside-toplevel

    found = []

    def probe(node):
        if isinstance(node, tirx.Evaluate) and is_tile_call(node.value):
            found.append(node)

    tvm_ffi.structural_walk(func.body, (tirx.Evaluate, probe))
    if not found:
        return func
    facts = _KernelFacts(func)
    errors = []

    def rewrite(node):
        if not is_tile_call(node.value) or errors:
            return node
        span = node.value.span if node.value.span is not None else node.span
        try:
            return expand(node.value, facts, span)
        except TileError as err:
            # An exception would cross the FFI boundary as a RuntimeError;
            # keep it and raise it from here, as the TileError it is.
            errors.append(err)
            return node

    body = tvm_ffi.structural_map(func.body, (tirx.Evaluate, rewrite))
    if errors:
        raise errors[0]
    return func.with_body(body)


def _make_pass():
    from tvm.tirx.transform import prim_func_pass  # pylint: disable=import-outside-toplevel

    @prim_func_pass(opt_level=0, name="tvm_tirx.LowerTileApply")
    def _pass(func, mod, ctx):  # pylint: disable=unused-argument
        return lower_tile_apply(func)

    return _pass


def LowerTileApply():  # pylint: disable=invalid-name
    """The TIR pass (``tvm.transform.Pass``) that expands ``T.cuda.tile.apply`` calls.

    Returns
    -------
    tvm.transform.Pass
        A PrimFunc pass; functions without tile calls are returned unchanged.

    Raises
    ------
    TileError
        When run, for any contract violation (see :func:`expand`).
    """
    return _make_pass()
