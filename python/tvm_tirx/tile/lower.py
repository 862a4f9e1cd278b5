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
from .registry import contracts
from .scope import LaunchFacts, full_group, group_exprs, scope_rank, thread_axis_values

__all__ = ["LowerTileApply", "lower_tile_apply"]


# ScopeIdDef.scope values (apache-tvm's ScopeBinding enum) of the ids we read.
def _binding(parent, cur):
    from tvm.tirx.exec_scope import _SCOPE_BINDING_TO_PARENT_CUR  # pylint: disable=import-outside-toplevel

    return next(k for k, v in _SCOPE_BINDING_TO_PARENT_CUR.items() if v == (parent, cur))


class _KernelFacts:
    """What the proofs need from the enclosing PrimFunc: root tensors, variable
    ranges, the launch, and the guards around each tile call."""

    def __init__(self, func):
        import tvm  # pylint: disable=import-outside-toplevel
        import tvm_ffi  # pylint: disable=import-outside-toplevel
        from tvm import tirx  # pylint: disable=import-outside-toplevel

        self.arch = _target_arch(func)
        self.roots = {}  # root buffer var -> element extent
        self.parent = {}  # view buffer var -> the buffer it views
        self.base_bytes = {}  # root -> byte offset of its first element in its storage (carve-outs)
        self.analyzer = tvm.sym.Analyzer()
        self.ranges = {}  # var -> (lo, hi): constant range [lo, hi) of loop and id vars
        self.loops = []  # (var, min, extent, step) of every For
        self.launch = None
        for p in func.params:
            if tirx.is_buffer_var(p):
                self.roots[p] = _prod(p.shape)
        thread_binding, cluster_binding = _binding("cta", "thread"), _binding("cluster", "cta")
        block = cluster = None
        stores = {}  # buffer -> values stored into it

        def visit(node):
            nonlocal block, cluster
            if isinstance(node, tirx.AllocBuffer):
                buf = node.buffer
                self.roots[buf] = _alloc_extent(buf)
            elif isinstance(node, tirx.DeclBuffer):
                data = node.data
                args = getattr(data, "args", None)
                if args and tirx.is_buffer_var(args[0]):
                    if _is_dyn_pool(args[0]):
                        # A carve-out of dynamic shared memory: a root of its own
                        # (own extent, own align), starting base_bytes into the pool.
                        self.roots[node.buffer] = _alloc_extent(node.buffer)
                        self.base_bytes[node.buffer] = _carve_out_offset(node.buffer)
                    else:
                        self.parent[node.buffer] = args[0]
            elif isinstance(node, tirx.ScopeIdDefStmt):
                d = getattr(node, "def")
                if d.extents is not None:
                    for var, ext in zip(d.def_ids, d.extents):
                        self._bind(var, 0, ext)
                    extents = tuple(_int_or_none(e) for e in d.extents)
                    if d.scope == thread_binding and None not in extents:
                        block = (tuple(d.def_ids), extents)
                    elif d.scope == cluster_binding and None not in extents:
                        cluster = (tuple(d.def_ids), extents)
            elif isinstance(node, tirx.For):
                self._bind(node.loop_var, node.min, node.min + node.extent)
                step = _int_or_none(getattr(node, "step", None)) or 1
                self.loops.append((node.loop_var, node.min, node.extent, step))
            elif isinstance(node, tirx.BufferStore):
                stores.setdefault(node.buffer, []).append(node.value)

        tvm_ffi.structural_walk(func.body, (object, visit))
        # `w = T.cuda.warp_id()` parses to a local scalar stored once; reading
        # it is reading that value, which the proofs need to see.
        self.scalars = {
            buf: values[0]
            for buf, values in stores.items()
            if len(values) == 1 and _prod(buf.shape) == 1 and buf.scope() == "local"
        }
        if block is not None:
            dims = tuple(block[1]) + (1,) * (3 - len(block[1]))
            self.launch = LaunchFacts(
                block=dims,
                thread_vars=block[0],
                cluster=tuple(cluster[1]) if cluster else (),
                cluster_vars=tuple(cluster[0]) if cluster else (),
            )
        self.guards = {}
        _collect_guards(func.body, (), self.guards)
        self._active_cache = {}

    def _bind(self, var, lo, hi):
        import tvm  # pylint: disable=import-outside-toplevel

        try:
            self.analyzer.bind(var, tvm.ir.Range(lo, hi))
        except Exception:  # pylint: disable=broad-except
            return  # a symbolic range the analyzer cannot take: leave the var unbounded
        lo, hi = _int_or_none(lo), _int_or_none(hi)
        if lo is not None and hi is not None:
            self.ranges[var] = (lo, hi)

    def _uniform(self, cond) -> bool:
        """Whether ``cond`` has one value for every thread of a CTA: it reads no
        memory and no thread or cluster-CTA id (loop counters, CTA ids and
        constants only).  Such a guard runs the whole group or none of it."""
        import tvm_ffi  # pylint: disable=import-outside-toplevel
        from tvm.ir import TensorLoad, Var  # pylint: disable=import-outside-toplevel

        launch = self.launch
        per_thread = [*launch.thread_vars, *launch.cluster_vars] if launch is not None else []
        found = []

        def visit(node):
            if isinstance(node, TensorLoad) or (
                isinstance(node, Var) and any(node.same_as(v) for v in per_thread)
            ):
                found.append(node)

        tvm_ffi.structural_walk(cond, ((TensorLoad, Var), visit))
        return not found

    def expand_scalars(self, expr):
        """``expr`` with loads of single-assignment local scalars replaced by their value."""
        import tvm_ffi  # pylint: disable=import-outside-toplevel
        from tvm.ir import TensorLoad  # pylint: disable=import-outside-toplevel

        if not self.scalars:
            return expr

        def sub(load):
            for buf, value in self.scalars.items():
                if load.source.same_as(buf):
                    return self.expand_scalars(value)
            return load

        return tvm_ffi.structural_map(expr, (TensorLoad, sub))

    def root_of(self, buf):
        """The parameter or allocation that ``buf`` views, or None."""
        seen = 0
        while buf not in self.roots and buf in self.parent and seen < 64:
            buf, seen = self.parent[buf], seen + 1
        return buf if buf in self.roots else None

    def active_threads(self, conds, opcode):
        """``[(t, c)]``: linear thread ``t`` in cluster rank ``c`` for which every
        guard in ``conds`` holds.

        Raises
        ------
        TileError
            A guard depends on anything but thread and cluster-CTA ids.
        """
        conds = [c for c in (self.expand_scalars(c) for c in conds) if not self._uniform(c)]
        key = tuple(str(c) for c in conds)
        if key in self._active_cache:
            return self._active_cache[key]
        launch = self.launch
        out = []
        for c in range(launch.cluster_size):
            cvals = launch.cluster_values(c)
            for t in range(launch.threads):
                values = {**launch.thread_values(t), **cvals}
                if all(_eval_guard(cond, values, self.analyzer, opcode) for cond in conds):
                    out.append((t, c))
        self._active_cache[key] = out
        return out


def _int_or_none(x):
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def _fold(analyzer, expr, values):
    """``expr`` with each var of ``values`` (var -> int) replaced by its value and
    simplified: an int, or None when something else remains."""
    import tvm_ffi  # pylint: disable=import-outside-toplevel
    from tvm.ir import Var  # pylint: disable=import-outside-toplevel
    from tvm.tirx import IntImm  # pylint: disable=import-outside-toplevel

    def sub(v):
        for var, value in values.items():
            if v.same_as(var):
                return IntImm(v.ty.dtype, value)
        return v

    folded = analyzer.simplify(tvm_ffi.structural_map(expr, (Var, sub)))
    return int(folded.value) if isinstance(folded, IntImm) else None


def _eval_guard(cond, values, analyzer, opcode) -> bool:
    held = _fold(analyzer, cond, values)
    if held is None:
        raise TileError(
            opcode,
            "guard not understood",
            expected="an if-condition over thread ids (threadIdx, lane_id, warp_id, cluster_ctaid)",
            found=f"if {cond}",
        )
    return bool(held)


def _collect_guards(stmt, conds, out):
    """Record, for each tile-call Evaluate, the if-conditions that enclose it."""
    from tvm import tirx  # pylint: disable=import-outside-toplevel
    from tvm.tirx import Not  # pylint: disable=import-outside-toplevel

    if stmt is None:
        return
    if isinstance(stmt, tirx.Evaluate):
        if is_tile_call(stmt.value):
            out[_key(stmt)] = conds
        return
    if isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _collect_guards(s, conds, out)
        return
    if isinstance(stmt, tirx.IfThenElse):
        _collect_guards(stmt.then_case, conds + (stmt.condition,), out)
        if stmt.else_case is not None:
            _collect_guards(stmt.else_case, conds + (Not(stmt.condition),), out)
        return
    body = getattr(stmt, "body", None)
    if isinstance(body, tirx.Stmt):
        _collect_guards(body, conds, out)


def _key(node):
    """Identity of an IR node across Python wrappers (tvm-ffi hashes by object address)."""
    return hash(node)


def _prod(shape):
    out = 1
    for s in shape:
        out *= s
    return out


def _is_dyn_pool(buf) -> bool:
    """Whether ``buf`` is a dynamic shared memory pool: a zero-extent ``shared.dyn``
    buffer (apache-tvm's convention for ``extern __shared__``; see
    :mod:`tvm_tirx.script.dyn_smem`).  Buffers declared over it are carve-outs."""
    return buf.scope() == "shared.dyn" and _int_or_none(_prod(buf.shape)) == 0


def _carve_out_offset(buf):
    """Byte offset of carve-out ``buf`` in its pool (an expression)."""
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel

    return buf.elem_offset * (DataType(buf.dtype).bits // 8)


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


#: Most points (thread x loop-counter values) the bounds check evaluates one by one.
EXACT_POINTS = 4096
_NOT_ENUMERATED = (
    f"it reads memory or a run-time value, or reaches more than {EXACT_POINTS} "
    "thread and loop points"
)


def _exact_values(facts, expr, conds):
    """``[(value, where)]``: ``expr`` at every point where all of ``conds`` hold, or None.

    A point gives a value to each thread and cluster-CTA id of the launch, each
    loop counter (its own step, and bounds that may depend on outer counters) and
    each CTA id that ``expr`` or ``conds`` read.  None when something else is read
    (memory, a run-time scalar), a loop is not understood, or there are more than
    ``EXACT_POINTS`` points.  ``where`` describes the point as ``name=value`` text.
    """
    import tvm_ffi  # pylint: disable=import-outside-toplevel
    from tvm.ir import TensorLoad, Var  # pylint: disable=import-outside-toplevel

    launch = facts.launch
    per_thread = [*launch.thread_vars, *launch.cluster_vars] if launch is not None else []
    loops = {var: (lo, ext, step) for var, lo, ext, step in facts.loops}

    def free_vars(exprs):
        """The vars ``exprs`` read, or None when they read memory."""
        found, loads = [], []
        for e in exprs:
            tvm_ffi.structural_walk(e, (TensorLoad, loads.append))
            tvm_ffi.structural_walk(e, (Var, lambda v: None if any(v.same_as(f) for f in found) else found.append(v)))
        return None if loads else found

    free = free_vars([expr, *conds])
    if free is None:
        return None
    # the loop counters needed -- those read, and those their bounds read -- with,
    # for each, the counters its bounds read
    deps, todo = {}, [v for v in free if v in loops]
    while todo:
        v = todo.pop()
        if v in deps:
            continue
        more = free_vars(loops[v][:2])
        if more is None:
            return None
        deps[v] = [m for m in more if m in loops]
        todo += deps[v]
        free += [m for m in more if not any(m.same_as(f) for f in free)]
    # outer counters before the counters whose bounds read them
    order, pending = [], list(deps)
    while pending:
        ready = [v for v in pending if not any(any(m.same_as(p) for p in pending) for m in deps[v])]
        if not ready:
            return None
        order += ready
        pending = [v for v in pending if not any(v.same_as(r) for r in ready)]
    for v in free:
        if v in loops or any(v.same_as(t) for t in per_thread):
            continue
        if v not in facts.ranges:
            return None  # a run-time value
        order.insert(0, v)  # a CTA id or another constant-range id: outermost
    threads = [{}]
    if any(any(v.same_as(t) for t in per_thread) for v in free):
        threads = [
            {**launch.thread_values(t), **launch.cluster_values(c)}
            for c in range(launch.cluster_size)
            for t in range(launch.threads)
        ]

    out = []
    budget = EXACT_POINTS

    def visit(env, rest):
        nonlocal budget
        if budget <= 0:
            return False
        if not rest:
            budget -= 1
            for cond in conds:
                held = _fold(facts.analyzer, cond, env)
                if held is None:
                    return False
                if not held:
                    return True
            value = _fold(facts.analyzer, expr, env)
            if value is None:
                return False
            where = ", ".join(f"{v.name}={x}" for v, x in env.items() if any(v.same_as(f) for f in free))
            out.append((value, where))
            return True
        var, rest = rest[0], rest[1:]
        if var in loops:
            lo, ext, step = loops[var]
            lo, ext = _fold(facts.analyzer, lo, env), _fold(facts.analyzer, ext, env)
            if lo is None or ext is None:
                return False
            values = range(lo, lo + ext, step)
        else:
            values = range(*facts.ranges[var])
        return all(visit({**env, var: x}, rest) for x in values)

    for values in threads:
        if not visit(dict(values), order):
            return None
    return out


def _exact_range(facts, expr, conds):
    """``(min, max, argmin, argmax)`` of :func:`_exact_values`; ``()`` when no point
    reaches the call; None when unknown."""
    values = _exact_values(facts, expr, conds)
    if values is None:
        return None
    if not values:
        return ()
    lo = min(values, key=lambda p: p[0])
    hi = max(values, key=lambda p: p[0])
    return lo[0], hi[0], lo[1], hi[1]


def _check_bounds(facts, opcode, label, root, elem_offset, first, last, conds, pred):
    """The bounds rule for one memory view (elements ``first..last`` past ``elem_offset``).

    ``conds`` are the enclosing if-conditions; ``pred`` is the call's predicate when
    a false predicate leaves this operand untouched (else None).  Over the points
    that reach the call with a true predicate (:func:`_exact_values`):

    - provably inside the tensor: accepted (symbolic proofs see the guards and pred);
    - provably outside at some point: rejected, naming the point;
    - neither provable (an index or guard read from memory, a run-time size, too
      many points): accepted under ``pred=`` or an enclosing ``if`` -- the check is
      then the author's -- otherwise rejected, naming the index expression.
    """
    import contextlib  # pylint: disable=import-outside-toplevel

    analyzer = facts.analyzer
    extent = facts.roots[root]
    facts_in = [*conds, *([pred] if pred is not None else [])]
    with contextlib.ExitStack() as stack:
        for cond in facts_in:
            try:
                stack.enter_context(analyzer.constraint_scope(cond))
            except Exception:  # pylint: disable=broad-except
                pass  # a condition the analyzer cannot take as a fact
        proven_lo = analyzer.can_prove(elem_offset + first >= 0)
        proven_hi = analyzer.can_prove(elem_offset + last < extent)
    if proven_lo and proven_hi:
        return None
    exact = _exact_range(facts, elem_offset, tuple(facts_in))
    n = _int_or_none(extent)
    if exact == ():
        return None  # no thread reaches the call
    if exact is not None:
        lo, hi, at_lo, at_hi = exact
        if lo + first < 0 or (n is not None and hi + last >= n):
            where, found = (at_lo, lo + first) if lo + first < 0 else (at_hi, hi + last)
            return TileError(
                opcode,
                "view provably out of the tensor's bounds",
                operand=label,
                expected=f"elements within [0, {extent}) of {root.name}"
                + (" where the predicate holds" if pred is not None else ""),
                found=f"element {found} at {where or 'every thread'}",
            )
        if n is not None:
            return None
    if pred is not None or conds:
        return None
    return TileError(
        opcode,
        "view not provably within the tensor's bounds",
        operand=label,
        expected=(
            f"elements within [0, {extent}) of {root.name} for every thread, or pred= "
            "or an enclosing if (the bounds are then the author's responsibility)"
        ),
        found=f"element offset {analyzer.simplify(elem_offset)} + [{first}, {last}] "
        f"(not checked point by point: {_NOT_ENUMERATED})",
    )


def check_memory(facts, opcode, role, op, group, repeat, pred=None, conds=()):
    """Alignment and bounds of one memory operand; return a TileError or None.

    ``group`` holds the (guarded) group extents: every thread's atom address is
    the view's address at its group coordinate and each repeat coordinate.
    ``conds`` are the if-conditions enclosing the call and ``pred`` the
    predicate that skips this operand's access (or None); the bounds rule is
    :func:`_check_bounds`.
    """
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
    atom = _ops.atom_of(role, op)
    need = atom[-1] * elem_bytes  # one contiguous vector: the atom's last axis
    view = _ops.ViewMap(buf)
    box = [range(n) for n in (*group, *repeat, *atom[:-1])]
    _, _, starts = _ops.offset_summary(view, box + [range(1)], need // elem_bytes or 1)
    first, last, _ = _ops.offset_summary(view, box + [range(atom[-1])], 1)
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
    elem_offset = facts.expand_scalars(buf.elem_offset)
    conds = tuple(facts.expand_scalars(c) for c in conds)
    # A carve-out's views count elements from the pool's start; its bounds are
    # its own, `root_start` elements in.  Alignment is the same either way: the
    # pool is 1024-byte aligned and T.alloc_shared starts each carve-out at a
    # multiple of its align (at most 1024).
    root_start = analyzer.simplify(facts.base_bytes.get(root, 0) // elem_bytes)
    for start in sorted(starts):
        addr = (elem_offset + start) * elem_bytes
        if analyzer.can_prove(floormod(addr, need) == 0):
            continue
        # Not provable for every thread: the threads that reach the call (under
        # their guards) may still all be aligned.
        exact = _exact_values(facts, analyzer.simplify(addr), conds)
        if exact is not None and all(value % need == 0 for value, _ in exact):
            continue
        bad = next((p for p in exact or () if p[0] % need), None)
        found = f"byte offset {analyzer.simplify(addr)}"
        if bad is not None:
            found += f" = {bad[0]} at {bad[1]}"
        elif exact is None:
            found += f" (not checked point by point: {_NOT_ENUMERATED})"
        return TileError(
            opcode,
            "vector atom not provably aligned",
            operand=label,
            expected=f"byte offset a multiple of {need}",
            found=found,
        )
    return _check_bounds(facts, opcode, label, root, elem_offset - root_start, first, last, conds, pred)


def _check_collective_ownership(opcode, role, view, label, members, repeat):
    """Each lane's registers hold the coordinates the ISA gives that lane, in
    one register slot per PTX operand position, the same slot on every lane."""
    reps = list(itertools.product(*(range(n) for n in repeat)))
    for g, (t0, c) in members.items():
        slots = None
        for lane in range(32):
            expect = thread_axis_values(t0 + lane, c)
            mine = []
            for rep in reps:
                for coord in role.lane_coords(lane):
                    axes = view.apply((*g, *rep, *coord))
                    for axis, value in axes.items():
                        if axis != "m" and (axis not in expect or int(value) != expect[axis]):
                            return TileError(
                                opcode,
                                "register value owned by another thread",
                                operand=label,
                                expected=f"{axis} = {expect.get(axis, '?')} (lane {lane} holds {coord} by the ISA's fragment map)",
                                found=f"{axis} = {int(value)} at coordinate {(*g, *rep, *coord)}",
                            )
                    if "laneid" not in axes and "tx" not in axes and "tid_in_wg" not in axes:
                        return TileError(
                            opcode,
                            "warp-collective register operand without a lane axis",
                            operand=label,
                            expected="a layout that places each value on its lane (laneid)",
                            found=f"layout {view.layout}",
                        )
                    mine.append(int(axes["m"]))
            if slots is None:
                slots = mine
            elif mine != slots:
                return TileError(
                    opcode,
                    "register slots differ between lanes",
                    operand=label,
                    expected=f"the same register slot for each fragment register on every lane ({slots[:8]})",
                    found=f"lane {lane}: {mine[:8]}",
                )
    return None


def check_ownership(opcode, role, op, group, origin, members, repeat):
    """Register values at each group coordinate belong to the thread issuing it.

    ``members`` maps each group coordinate (relative to ``origin``) to one
    issuing thread ``(t, c)``.  The layout's thread axes (``laneid``,
    ``warpid`` ...) at that coordinate must equal that thread's ids, and every
    group axis must be carried by some thread axis.
    """
    view = _ops.ViewMap(op.value)
    label = operand_label(role.role, op.index)
    if role.lane_coords is not None:
        return _check_collective_ownership(opcode, role, view, label, members, repeat)
    inner = list(_ops.coords(repeat, role.atom))
    # Strided layouts: the thread axes of (g, r, k) are those of (g, 0, 0)
    # plus those of (0, r, k), so all of (r, k) at the first group coordinate
    # and (0, 0) at the others cover the box.  Otherwise every point is checked.
    first = next(iter(members), None)
    seen = {}
    for g, (t, c) in members.items():
        expect = thread_axis_values(t, c)
        rk_list = inner if (not view.separable or g == first) else inner[:1]
        for rk in rk_list:
            axes = view.apply((*g, *rk))
            for axis, value in axes.items():
                if axis == "m":
                    continue
                if axis not in expect or int(value) != expect[axis]:
                    where = tuple(o + x for o, x in zip(origin, g))
                    return TileError(
                        opcode,
                        "register value owned by another thread",
                        operand=label,
                        expected=f"{axis} = {expect.get(axis, '?')} (the issuing thread at group {where})",
                        found=f"{axis} = {int(value)} at coordinate {(*where, *rk)}",
                    )
        ids = tuple(sorted((a, int(v)) for a, v in view.apply((*g, *inner[0])).items() if a != "m"))
        if group and ids in seen:
            axis = next(i for i, (a, b) in enumerate(zip(seen[ids], g)) if a != b)
            return TileError(
                opcode,
                "group axis not mapped to a thread axis",
                operand=label,
                expected=f"group axis {axis} carried by a layout thread axis (laneid, warpid, ...)",
                found=f"group coordinates {seen[ids]} and {g} held by the same thread",
            )
        seen[ids] = g
    return None


def _group_box(scope, facts, conds, opcode, collective=False):
    """``(extents, origin, members)`` of the group of threads that execute the call.

    Without guards that is the scope's whole group.  Under guards over thread
    ids, the executing threads of every instance (each warp at ``"warp"``,
    ...) must form the same box of group coordinates; the group is that box.
    ``members`` maps each group coordinate (relative to ``origin``) to one
    thread ``(t, c)`` at it.  For a warp-collective instruction the lane stays
    in the atom (PTX ``.aligned``: all 32 lanes issue it), so the group is the
    warps, and every lane of a warp that takes part must be active.
    """
    extents, coord_fn, instance_fn = full_group(scope, facts.launch, opcode)
    if not extents:
        return (), (), {(): (0, 0)}
    launch = facts.launch
    active = facts.active_threads(conds, opcode) if conds else [
        (t, c) for c in range(launch.cluster_size) for t in range(launch.threads)
    ]
    what = "threads"
    if collective:
        warps = {}
        for t, c in active:
            warps.setdefault((c, t // 32), set()).add(t % 32)
        for (_, w), lanes in warps.items():
            if len(lanes) != 32:
                raise TileError(
                    opcode,
                    "warp-collective instruction needs all 32 lanes",
                    expected="a guard that keeps whole warps",
                    found=f"{len(lanes)} lanes of warp {w}",
                )
        active = [(32 * w, c) for (c, w) in warps]
        extents, what = extents[:-1], "warps"
    rank = len(extents)
    by_instance = {}
    for t, c in active:
        by_instance.setdefault(instance_fn(t, c), {})[coord_fn(t, c)[:rank]] = (t, c)
    boxes = []
    for members in by_instance.values():
        coords = list(members)
        lo = tuple(min(x[i] for x in coords) for i in range(rank))
        hi = tuple(max(x[i] for x in coords) for i in range(rank))
        size = 1
        for a, b in zip(lo, hi):
            size *= b - a + 1
        if size != len(coords):
            raise TileError(
                opcode,
                f"guarded {what} do not form a box of the group",
                expected=f"a rectangular range of {scope} group coordinates",
                found=f"{len(coords)} {what} spanning {lo}..{hi}",
            )
        boxes.append((lo, hi, members))
    if not boxes:
        return tuple(0 for _ in range(rank)), tuple(0 for _ in range(rank)), {}
    lo, hi, members = boxes[0]
    for other in boxes[1:]:
        if (other[0], other[1]) != (lo, hi):
            raise TileError(
                opcode,
                f"guarded {what} differ between instances of the scope",
                expected=f"the same {scope} group range in every {scope}",
                found=f"{lo}..{hi} and {other[0]}..{other[1]}",
            )
    extents = tuple(b - a + 1 for a, b in zip(lo, hi))
    rel = {tuple(x - o for x, o in zip(g, lo)): tc for g, tc in members.items()}
    return extents, lo, rel


def _element_args(role, op, group_coord, rep, locals_, lane=None):
    """The PTX arguments one operand supplies at group coordinate ``group_coord``
    and repeat coordinate ``rep`` (``lane``: the lane, for warp-collective roles)."""
    if op.kind == "scalar":
        return [op.value] * role.lanes
    buf = op.value
    if role.kind == "memory":
        if role.lane_coords is not None:
            inner = list(role.lane_coords(lane)[0])
        else:
            inner = [0] * len(role.atom)
        ptr = buf.ptr_to([*group_coord, *rep, *inner])
        if role.ptx.space == "local":
            # A .local address is an offset in the local window, not the
            # generic address C++ takes of a local array (PTX ISA 6.4.1.1).
            return [_generic_to_local(ptr)]
        return [ptr]
    if role.lane_coords is not None:
        # Every lane holds its fragment registers in the same slots (checked),
        # so lane 0's coordinates name them.
        coords = [(*group_coord, *rep, *c) for c in role.lane_coords(0)]
    else:
        coords = [(*group_coord, *rep, k) for k in range(role.atom[0])]
    local = locals_.get(buf)
    if local is None:
        return [buf[c] for c in coords]
    # A layout with thread axes: index the issuing thread's own storage at the
    # slot the layout gives (ownership was proven by check_ownership).
    view = _ops.ViewMap(buf)
    return [local[view.apply(c)["m"]] for c in coords]


def _thread_local_view(buf):
    """``(DeclBuffer, flat view)`` of the calling thread's storage of ``buf``
    (apache-tvm's ``Buffer.local()``, declared outside the parser)."""
    from tvm import tirx  # pylint: disable=import-outside-toplevel
    from tvm.tirx.buffer import buffer_data  # pylint: disable=import-outside-toplevel

    span = int(buf.layout.storage().span())
    flat = tirx.decl_buffer(
        (span,),
        buf.dtype,
        name=f"{buf.name}_local",
        elem_offset=buf.elem_offset,
        scope=buf.scope(),
        data_alignment=int(buf.data_alignment),
        layout="default",
    )
    return tirx.DeclBuffer(flat, data=buffer_data(buf)), flat


def _target_arch(func=None) -> str | None:
    """``arch`` of the PrimFunc's own ``target`` attribute (what ``tvm.compile``
    binds before its TIR pipeline runs), else of the current ``tvm.target.Target``."""
    from tvm.target import Target  # pylint: disable=import-outside-toplevel

    target = None
    if func is not None and func.attrs is not None and "target" in func.attrs:
        target = func.attrs["target"]
    if target is None:
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


def expand(call, facts, span=None, conds=()):
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
        scope_rank(tc.scope, tc.opcode, 0)
        if tc.scope == "thread":
            group, origin, members = (), (), {(): (0, 0)}
        elif facts.launch is None:
            raise TileError(
                tc.opcode,
                f"a {tc.scope}-scope call needs the kernel's launch",
                expected="T.device_entry(launch=T.cuda.LaunchConfig(...)) (or T.thread_id([...]))",
                found="no thread ids in the kernel",
            )
        else:
            collective = contracts(tc.opcode)[0].collective
            group, origin, members = _group_box(tc.scope, facts, conds, tc.opcode, collective)
        contract, ops = select_contract(tc.opcode, tc.operands, group, tc.pred, tc.preserve_dst)
        if contract.collective and tc.scope == "thread":
            raise TileError(
                contract.opcode,
                "warp-collective instruction at thread scope",
                expected='scope="warp" (or wider): all 32 lanes issue it together',
                found='scope="thread"',
            )
        err = check_arch(contract, facts.arch)
        if err:
            raise err
        repeat = _ops.call_repeat(contract, ops, group)
        for role, op in zip(contract.roles, ops):
            if op.kind != "tensor":
                continue
            own_repeat = _ops.repeat_shape(role, op, group)
            if role.kind == "memory":
                # pred= exempts an operand from the bounds rule only when a false
                # predicate leaves it untouched: always for a predicated ld/st, only
                # the source for cp.async (src-size 0 still zero-fills the destination).
                skipped = tc.pred is not None and (contract.pred_operand is None or not role.writes)
                pred = facts.expand_scalars(tc.pred) if skipped else None
                err = check_memory(facts, contract.opcode, role, op, group, own_repeat, pred, conds)
            else:
                err = check_ownership(contract.opcode, role, op, group, origin, members, own_repeat)
            if err:
                raise err
    except TileError as err:
        raise err.at(location) from None

    lane = None
    group_coord = ()
    if group or contract.collective:
        exprs = group_exprs(tc.scope, facts.launch)
        if contract.collective:
            exprs, lane = exprs[:-1], exprs[-1]
        group_coord = tuple(e - o for e, o in zip(exprs, origin))
    loop_vars = [tirx.Var(f"r{i}", "int32") for i in range(len(repeat))]
    decls, locals_ = [], {}
    for role, op in zip(contract.roles, ops):
        if op.kind == "tensor" and role.kind == "register" and op.value not in locals_:
            if _ops.ViewMap(op.value).has_thread_axes():
                decl, flat = _thread_local_view(op.value)
                decls.append(decl)
                locals_[op.value] = flat
    args = []
    for kind, key in contract.ptx_order():
        if kind == "param":
            args.append(tc.params[key])
        elif kind == "derived":
            args.append(contract.derived[key](ops, tc.pred))
        elif kind == "pred":
            if tc.pred is not None:
                args.append(contract.derived[key](ops, tc.pred))
        else:
            role = contract.roles[key]
            axes = role.repeat_axes if role.repeat_axes is not None else range(len(loop_vars))
            has_repeat = ops[key].kind != "tensor" or _ops.repeat_shape(role, ops[key], group)
            rep = [loop_vars[a] for a in axes] if has_repeat else []
            args += _element_args(role, ops[key], group_coord, rep, locals_, lane)
    engine_pred = None if contract.pred_operand else tc.pred
    instr = _ptx_namespace()[contract.opcode]
    try:
        ptx_call = instr(*args, pred=engine_pred, preserve_dst=tc.preserve_dst)
    except (ValueError, AssertionError) as err:  # AssertionError: two table entries match
        raise TileError(contract.opcode, "PTX table rejected the expansion", found=str(err)).at(
            location
        ) from None
    body = tirx.Evaluate(ptx_call, span=span) if span is not None else tirx.Evaluate(ptx_call)
    for var, extent in reversed(list(zip(loop_vars, repeat))):
        body = tirx.For(var, 0, extent, tirx.ForKind.UNROLLED, body)
    return tirx.SeqStmt([*decls, body]) if decls else body


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
            return expand(node.value, facts, span, facts.guards.get(_key(node), ()))
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
