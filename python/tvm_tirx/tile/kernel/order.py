"""Program order over a kernel body: which statements run after (or before) a
given one, loops wrapping around, and which views name the same memory.

Kernel rules that pair statements (a copy with the wait that guards its
data, a write with the fence before an asynchronous read of it) ask two
questions this module answers generically, without knowing any instruction:

* :meth:`Program.forward` / :meth:`Program.backward`: the statements that may
  run after (before) a statement, up to the first one a predicate stops at.
  The body is a tree of sequences, branches and loops; a branch contributes
  both arms in order (then, else), a loop its body once per pass, and at the
  end (start) of a loop body the walk both wraps into the next (previous)
  iteration and leaves the loop.  Each path reports the loops it wrapped, so
  a rule can tell "the same expression" from "the same memory".
* :func:`element_of` / :func:`same_element`: two views of one root at
  structurally equal byte offsets (after ``facts.expand_scalars``) are one
  element; :func:`byte_range` and :func:`overlaps` compare regions.

Walking both arms and every loop body once over-approximates what runs in
between: a rule that refuses only when *nothing* in between protects stays
sound (it may miss a hazard hidden in a branch, never invent one).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import tirx
from tvm.ir import Call, TensorLoad, Var, is_prim_expr
from tvm.s_tir import SBlockRealize

from ..analysis.prover import proves
from .sites import location_of
from ..ir.views import ViewMap, dtype_bytes, int_or_none, layout_of

__all__ = [
    "Leaf", "Loop", "Seq", "Branch", "Program", "Path", "element_of", "same_element", "byte_range", "overlaps",
    "address_target", "loads_of",
]  # fmt: skip


@dataclass(eq=False)
class Leaf:
    """One statement that does something: an ``Evaluate`` or a ``BufferStore``.

    Attributes
    ----------
    stmt : tvm.tirx.Stmt
        The statement.
    guards : tuple
        The if/while conditions around it, outermost first (``Not(c)`` in an
        else arm), as :class:`~.sites.CallSite` has them.
    loops : tuple[Loop, ...]
        The loops around it, outermost first.
    index : int
        Its position in the program's leaves (program order, then-arm first).
    """

    stmt: object
    guards: tuple
    loops: tuple
    index: int = 0

    @property
    def span(self):
        """The statement's source span (its call's, for an ``Evaluate``)."""
        value = getattr(self.stmt, "value", None)
        span = getattr(value, "span", None)
        return span if span is not None else getattr(self.stmt, "span", None)

    @property
    def location(self) -> str | None:
        """``file:line`` of the statement, or None."""
        return location_of(self.span)


@dataclass(eq=False)
class Loop:
    """A ``for`` (``var`` over ``[min, min + extent)`` by ``step``) or a
    ``while`` (``var`` None, ``cond``); ``body`` its node."""

    var: object
    min: object
    extent: object
    cond: object = None
    body: object = None
    step: int | None = 1

    def may_repeat(self) -> bool:
        """Whether the body may run more than once (a ``for`` of constant extent 1 does not)."""
        return self.var is None or int_or_none(self.extent) != 1


@dataclass(eq=False)
class Seq:
    """Statements run one after the other (``items``: the nodes, in order)."""

    items: list


@dataclass(eq=False)
class Branch:
    """An if: ``then`` where ``cond`` holds, ``other`` (or None) where it does not."""

    cond: object
    then: object
    other: object


@dataclass(frozen=True)
class Path:
    """One way the program may go from a statement to the first stopping one.

    Attributes
    ----------
    between : tuple[Leaf, ...]
        The leaves passed on the way, in walking order (backward walks: nearest first).
    stop : Leaf | None
        The leaf the predicate stopped at; None when the walk reached the
        kernel's end (start).
    wrapped : tuple
        The loop variables of the loops whose next (previous) iteration the path entered.
    """

    between: tuple
    stop: object
    wrapped: tuple


class Program:
    """A kernel body as a tree of sequences, branches and loops over its :class:`Leaf`\\ s.

    Parameters
    ----------
    body : tvm.tirx.Stmt
        The kernel's body (tile calls not expanded).
    """

    def __init__(self, body):
        self.leaves = []
        self._up = {}
        self._flat = {}
        self.root = self._build(body, (), ())

    # -- building ------------------------------------------------------------------------------

    def _child(self, node, parent, index):
        if node is not None:
            self._up[id(node)] = (parent, index)
        return node

    def _build(self, stmt, guards, loops):
        if isinstance(stmt, tirx.SeqStmt):
            seq = Seq([])
            for s in stmt.seq:
                node = self._build(s, guards, loops)
                if node is not None:
                    seq.items.append(self._child(node, seq, len(seq.items)))
            return seq
        if isinstance(stmt, tirx.IfThenElse | SBlockRealize):
            return self._branch(stmt, guards, loops)
        if isinstance(stmt, tirx.For | tirx.While):
            is_for = isinstance(stmt, tirx.For)
            if is_for:
                loop = Loop(stmt.loop_var, stmt.min, stmt.extent, step=_step(stmt))
            else:
                loop = Loop(None, None, None, stmt.condition)
            inner = guards if is_for else guards + (stmt.condition,)
            loop.body = self._child(self._build(stmt.body, inner, loops + (loop,)), loop, 0)
            return loop
        if isinstance(stmt, tirx.BufferStore) or (isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, Call)):
            leaf = Leaf(stmt, guards, loops, len(self.leaves))
            self.leaves.append(leaf)
            return leaf
        body = getattr(stmt, "body", None)
        return self._build(body, guards, loops) if isinstance(body, tirx.Stmt) else None

    def _branch(self, stmt, guards, loops):
        if isinstance(stmt, SBlockRealize):
            cond, then, other = stmt.predicate, stmt.block.body, None
        else:
            cond, then, other = stmt.condition, stmt.then_case, stmt.else_case
        node = Branch(cond, None, None)
        node.then = self._child(self._build(then, guards + (cond,), loops), node, 0)
        if other is not None:
            node.other = self._child(self._build(other, guards + (tirx.Not(cond),), loops), node, 1)
        return node

    # -- walking -------------------------------------------------------------------------------

    def flat(self, node) -> tuple:
        """The leaves under ``node`` in program order (both arms, loop bodies once)."""
        key = id(node)
        if key not in self._flat:
            if isinstance(node, Leaf):
                out = (node,)
            elif isinstance(node, Seq):
                out = tuple(leaf for item in node.items for leaf in self.flat(item))
            elif isinstance(node, Branch):
                out = self.flat(node.then) + (self.flat(node.other) if node.other is not None else ())
            elif isinstance(node, Loop):
                out = self.flat(node.body) if node.body is not None else ()
            else:
                out = ()
            self._flat[key] = out
        return self._flat[key]

    def order_key(self, leaf, iteration=()) -> tuple:
        """A key sorting one thread's executions in program order: ``leaf`` run at the
        ``for`` counter values ``iteration`` (outermost first, as
        :meth:`~..analysis.instances.Executions.of` gives them); a ``while`` counts as one pass."""
        parts, node = [], leaf
        while id(node) in self._up:
            up, index = self._up[id(node)]
            parts.append(up if isinstance(up, Loop) else index)
            node = up
        values, out = iter(iteration), []
        for part in reversed(parts):
            out.append((next(values, 0) if part.var is not None else 0) if isinstance(part, Loop) else part)
        return tuple(out)

    def forward(self, leaf, stop) -> list:
        """:class:`Path`\\ s from just after ``leaf`` to the first leaf ``stop(leaf)``
        holds for (or the kernel's end), in program order."""
        return self._walk(leaf, stop, backward=False)

    def backward(self, leaf, stop) -> list:
        """:class:`Path`\\ s from just before ``leaf`` back to the first leaf ``stop(leaf)``
        holds for (or the kernel's start), nearest first."""
        return self._walk(leaf, stop, backward=True)

    def _walk(self, leaf, stop, backward):
        out = []

        def scan(leaves, acc, wrapped):
            for i, candidate in enumerate(leaves):
                if stop(candidate):
                    out.append(Path(acc + tuple(leaves[:i]), candidate, wrapped))
                    return None
            return acc + tuple(leaves)

        def climb(node, acc, wrapped):
            parent = self._up.get(id(node))
            if parent is None:
                out.append(Path(acc, None, wrapped))
                return
            up, index = parent
            if isinstance(up, Seq):
                part = up.items[:index] if backward else up.items[index + 1 :]
                leaves = tuple(x for item in part for x in self.flat(item))
                acc = scan(leaves[::-1] if backward else leaves, acc, wrapped)
                if acc is None:
                    return
            elif isinstance(up, Loop) and up.may_repeat():
                body = self.flat(up.body)
                again = scan(body[::-1] if backward else body, acc, wrapped + (up.var,))
                if again is not None:
                    climb(up, again, wrapped + (up.var,))
            climb(up, acc, wrapped)

        climb(leaf, (), ())
        return out


def _step(loop) -> int | None:
    """The constant step of a ``for`` (1 when it has none), or None."""
    step = getattr(loop, "step", None)
    return 1 if step is None else int_or_none(step)


# -- memory --------------------------------------------------------------------------------------


def element_of(facts, buf, coord=None):
    """``(root, byte offset)`` of element ``coord`` (default: the first) of view ``buf``:
    the allocation or parameter it views and its byte offset from the storage
    start shared by every view of that root, scalars expanded and simplified;
    None when the root is unknown."""
    root = facts.root_of(buf)
    if root is None:
        return None
    coord = tuple(coord) if coord is not None else tuple(0 for _ in buf.shape)
    try:
        inner = ViewMap(buf).apply(coord)["m"]
    except Exception:  # pylint: disable=broad-except
        return None
    offset = facts.expand_scalars((buf.elem_offset + inner) * dtype_bytes(buf.dtype))
    return root, facts.analyzer.simplify(offset)


def same_element(facts, a, b) -> bool | None:
    """Whether elements ``a`` and ``b`` (each :func:`element_of`'s pair) are one:
    True for one root at structurally equal offsets, False for different roots
    or offsets provably different, None when it cannot be told."""
    if a is None or b is None:
        return None
    if not a[0].same_as(b[0]):
        return False
    if tvm_ffi.structural_equal(a[1], b[1]):
        return True
    difference = int_or_none(facts.analyzer.simplify(a[1] - b[1]))
    if difference is None:
        return None
    return difference == 0


def byte_range(facts, buf, coord=None):
    """``(root, first, end)``: the bytes of view ``buf`` (of element ``coord`` only,
    when given) relative to its root's storage, as expressions; None when unknown."""
    first = element_of(facts, buf, coord)
    if first is None:
        return None
    if coord is not None:
        return first[0], first[1], first[1] + dtype_bytes(buf.dtype)
    try:
        span = int_or_none(layout_of(buf).span())
    except Exception:  # pylint: disable=broad-except
        span = None  # a layout over run-time extents
    if span is None:
        return None
    return first[0], first[1], first[1] + span * dtype_bytes(buf.dtype)


def overlaps(facts, a, b, conds=()) -> bool:
    """Whether byte ranges ``a`` and ``b`` (:func:`byte_range`) provably share a byte.

    A range that covers its whole root overlaps any other of that root.  Ranges
    with calls in their bounds (a swizzle's XOR) are not compared: the prover is
    slow on them and seldom succeeds, so they count as not shown to overlap."""
    if a is None or b is None or not a[0].same_as(b[0]):
        return False
    if _whole_root(facts, a) or _whole_root(facts, b):
        return True
    cond = tirx.all(a[1] < b[2], b[1] < a[2])
    return _plain(cond) and proves(facts.analyzer, cond, facts.known(conds))


#: Expression nodes the prover handles quickly (no bit operations, no calls).
_PLAIN = (
    tirx.Add, tirx.Sub, tirx.Mul, tirx.FloorDiv, tirx.FloorMod, tirx.Min, tirx.Max, tirx.LT, tirx.LE, tirx.GT,
    tirx.GE, tirx.EQ, tirx.NE, tirx.And, tirx.Or, tirx.Not, tirx.IntImm, tirx.Cast, Var,
)  # fmt: skip


def _plain(expr) -> bool:
    """Whether ``expr`` is built from :data:`_PLAIN` nodes only (a swizzle's XOR is not)."""
    other = []

    def visit(node):
        if is_prim_expr(node) and not isinstance(node, _PLAIN):
            other.append(node)

    tvm_ffi.structural_walk(expr, (object, visit))
    return not other


def _whole_root(facts, rng) -> bool:
    """Whether byte range ``rng`` starts at its root's first byte and ends at or after its last."""
    root = rng[0]
    if root not in facts.roots:
        return False
    start = facts.expand_scalars(root.elem_offset * dtype_bytes(root.dtype))
    first, end = facts.analyzer.simplify(rng[1] - start), facts.analyzer.simplify(rng[2] - start)
    size = int_or_none(facts.root_bytes(root))
    return int_or_none(first) == 0 and size is not None and (int_or_none(end) or -1) >= size


def address_target(arg):
    """``(buffer, indices)`` an address argument of a raw call points at
    (``T.address_of(buf[i])``, possibly converted), or None."""
    if isinstance(arg, Call):
        if getattr(arg.op, "name", "") == "tirx.address_of" and arg.args and isinstance(arg.args[0], TensorLoad):
            load = arg.args[0]
            return load.source, tuple(load.indices)
        for inner in arg.args:
            found = address_target(inner)
            if found is not None:
                return found
    return None


def loads_of(node) -> list:
    """The ``TensorLoad``\\ s a statement or expression reads as values (not
    those under ``T.address_of``, which name an address)."""
    loads, named = [], set()

    def address(call):
        if getattr(call.op, "name", "") == "tirx.address_of":
            named.update(hash(a) for a in call.args if isinstance(a, TensorLoad))

    tvm_ffi.structural_walk(node, (Call, address))
    tvm_ffi.structural_walk(node, (TensorLoad, lambda load: None if hash(load) in named else loads.append(load)))
    return loads
