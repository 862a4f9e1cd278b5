"""Call sites: what encloses each tile call in its kernel.

A tile call sits under if- and while-conditions (its *guards*: they decide
which threads reach it), inside loops (whose ranges are facts about their
counters) and after ``T.assume(cond)`` statements (facts the author states and
the prover cannot derive; see :mod:`.assumptions`).  :func:`collect_sites`
records all three for every tile call of a PrimFunc in one walk.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import tirx
import tvm_ffi
from tvm.ir import TensorLoad
from tvm.s_tir import SBlockRealize

from ..rules.op import is_tile_call

__all__ = ["CallSite", "collect_sites", "call_key", "location_of", "expansion_of", "is_assume", "EMPTY_SITE"]


@dataclass(frozen=True)
class CallSite:
    """What encloses one tile call.

    Attributes
    ----------
    guards : tuple[PrimExpr, ...]
        if/while conditions around the call, outermost first (``Not(c)`` in
        an else branch; an s_tir block's ``T.where`` predicate).  A thread
        reaches the call only where every guard holds.
    facts : tuple[PrimExpr, ...]
        Conditions known to hold when the call runs: the guards and the
        ``T.assume(cond)`` statements before it in its enclosing statement
        sequences, minus those reading memory that a statement in between
        (or the body of an enclosing loop) may write.  Facts do not change
        which threads reach the call.
    loops : tuple[tuple, ...]
        ``(var, min, extent, step)`` of each enclosing ``for``, outermost first.
    span : tvm.ir.Span | None
        The call's source span.
    stmt : tvm.tirx.Evaluate | None
        The statement itself.
    """

    guards: tuple = ()
    facts: tuple = ()
    loops: tuple = ()
    span: object = None
    stmt: object = None

    @property
    def location(self) -> str | None:
        """``file:line`` of the call, or None."""
        return location_of(self.span)


#: The site of a call nothing encloses.
EMPTY_SITE = CallSite()


def is_assume(stmt) -> bool:
    """Whether ``stmt`` is ``T.assume(cond)`` (an ``Evaluate`` of ``tirx.assume``)."""
    value = getattr(stmt, "value", None) if isinstance(stmt, tirx.Evaluate) else None
    return getattr(getattr(value, "op", None), "name", None) == "tirx.assume"


def _buffers_loaded(expr) -> list:
    """The buffers ``expr`` loads from (``TensorLoad`` sources)."""
    found = []
    tvm_ffi.structural_walk(expr, (TensorLoad, lambda load: found.append(load.source)))
    return found


def _buffers_written(stmt, targets) -> list:
    """The buffers ``stmt`` may write, conservatively: every ``BufferStore``
    target and every ``targets(Evaluate)`` of its statement-level calls."""
    found = []

    def visit(node):
        if isinstance(node, tirx.BufferStore):
            found.append(node.buffer)
        elif isinstance(node, tirx.Evaluate):
            found.extend(targets(node))

    tvm_ffi.structural_walk(stmt, ((tirx.BufferStore, tirx.Evaluate), visit))
    return found


class _Collector:  # pylint: disable=too-few-public-methods
    """One walk of a body, with the enclosing guards, facts and loops.

    ``facts`` are the guards and ``T.assume`` conditions that still hold: a
    condition that loads from a buffer stops being a fact after a statement
    that may write that buffer, and at the top of a loop whose body may.
    """

    def __init__(self, root_of, want, targets):
        self.out, self.root_of, self.want, self.targets = {}, root_of, want, targets

    def _roots(self, bufs) -> set:
        roots = set()
        for buf in bufs:
            root = self.root_of(buf)
            roots.add(hash(buf if root is None else root))
        return roots

    def _still_true(self, facts, written) -> tuple:
        """``facts`` minus those reading a buffer in ``written`` (statements' buffers)."""
        roots = self._roots(written)
        return tuple(f for f in facts if not self._roots(_buffers_loaded(f)) & roots) if roots else facts

    def visit(self, stmt, guards, facts, loops):
        """Record the sites under ``stmt``; returns nothing."""
        if isinstance(stmt, tirx.Evaluate):
            if self.want(stmt):
                span = stmt.value.span if stmt.value.span is not None else stmt.span
                self.out[call_key(stmt)] = CallSite(guards, facts, loops, span, stmt)
        elif isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self.visit(s, guards, facts, loops)
                facts = self._still_true(facts, _buffers_written(s, self.targets))
                if is_assume(s):  # a fact for the statements after it
                    facts = facts + (s.value.args[0],)
        elif isinstance(stmt, (tirx.IfThenElse, SBlockRealize)):
            self._branches(stmt, guards, facts, loops)
        elif isinstance(stmt, (tirx.While, tirx.For)):
            # a loop's body runs again after its own writes
            facts = self._still_true(facts, _buffers_written(stmt.body, self.targets))
            if isinstance(stmt, tirx.While):
                # the body runs while the condition holds: a thread-dependent
                # condition splits the threads of a collective as an if does
                cond = stmt.condition
                # the condition holds again at the top of every iteration (the body's
                # statements drop it after one that may write what it reads)
                self.visit(stmt.body, guards + (cond,), facts + (cond,), loops)
            else:
                step = getattr(stmt, "step", None)
                step = int(step.value) if isinstance(step, tirx.IntImm) else 1
                self.visit(stmt.body, guards, facts, loops + ((stmt.loop_var, stmt.min, stmt.extent, step),))
        elif isinstance(getattr(stmt, "body", None), tirx.Stmt):
            self.visit(stmt.body, guards, facts, loops)

    def _branches(self, stmt, guards, facts, loops):
        if isinstance(stmt, SBlockRealize):  # an s_tir block's predicate (``T.where``)
            pred = stmt.predicate
            if isinstance(pred, tirx.IntImm) and bool(pred.value):
                self.visit(stmt.block, guards, facts, loops)
            else:
                self.visit(stmt.block, guards + (pred,), facts + (pred,), loops)
            return
        cond = stmt.condition
        self.visit(stmt.then_case, guards + (cond,), facts + (cond,), loops)
        if stmt.else_case is not None:
            self.visit(stmt.else_case, guards + (tirx.Not(cond),), facts + (tirx.Not(cond),), loops)


def collect_sites(body, targets, root_of=lambda buf: None, want=None) -> dict:
    """``{call_key(Evaluate): CallSite}`` for every tile call in ``body`` (or
    every ``Evaluate`` statement for which ``want(stmt)`` holds).

    ``targets(Evaluate)`` gives the buffers a statement-level call may write (the
    kernel's :meth:`.kernel_calls.KernelCalls.targets`): a guard that loads from
    one of them stops being a fact after the call.  ``root_of(buffer)`` names the
    allocation a view belongs to (a write to a view is a write to every view of
    its allocation); None: the buffer itself.
    """
    collector = _Collector(root_of, want or (lambda stmt: is_tile_call(stmt.value)), targets)
    collector.visit(body, (), (), ())
    return collector.out


def call_key(node):
    """Identity of an IR node across Python wrappers (tvm-ffi hashes by object address)."""
    return hash(node)


def _places(span) -> list:
    """``file:line`` of each range of ``span``, outermost first: one for a plain
    ``Span``; for the ``SequentialSpan`` apache-tvm's parser gives a statement built
    by a ``@T.macro``, the call site(s) first and the statement in the macro's body last."""
    if span is None:
        return []
    nested = getattr(span, "spans", None)
    if nested is not None:
        return [place for part in nested for place in _places(part)]
    name = getattr(getattr(span, "source_name", None), "name", None)
    line = getattr(span, "line", None)
    return [f"{name}:{line}"] if name and line else []


def location_of(span) -> str | None:
    """``file:line`` of a source span, or None; inside a macro expansion, the line of
    the statement in the macro's body (where its operands are written)."""
    places = _places(span)
    return places[-1] if places else None


def expansion_of(span) -> str | None:
    """``" (expanded from A > B)"``: the call sites of the macros a statement was
    expanded from, outermost first, or None for a statement written in the kernel."""
    places = _places(span)
    return f" (expanded from {' > '.join(places[:-1])})" if len(places) > 1 else None
