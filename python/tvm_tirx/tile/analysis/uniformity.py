"""Which values are uniform over a warp, a warpgroup, a CTA or a cluster, and why.

A collective instruction (a warp's ``ldmatrix``, a warpgroup's ``wgmma``, a
CTA barrier) must be reached by all the threads of its collective together:
every guard around it and its ``pred=`` must have one value over the
collective.  This module decides, for an expression, the widest scope over
which it provably has one value (:data:`LEVELS`, narrowest first) and, when
that is too narrow, says why in words that name the value.

Uniform by construction:

* constants, the kernel's scalar parameters and symbolic tensor extents
  (``"grid"``); CTA ids (``blockIdx``, ``%cluster_ctaid``: ``"cta"``);
* an expression of the thread ids that does not change within the scope
  (``warp_id()`` over a warp, ``tid // 128`` over a warpgroup), proven
  symbolically by comparing it with its value at the scope's first thread;
* the counter of a loop whose bounds and enclosing guards are uniform;
* a local scalar every write of which stores a uniform value under uniform
  guards (``w = T.cuda.warp_id()``);
* a load, at a uniform address, of a tensor parameter the kernel never
  writes (read-only memory has one value for every reader);
* a load, at a CTA-uniform address, of a shared-memory buffer, stored into a
  local scalar right after a CTA barrier (``T.cuda.cta_sync()``), when every
  write of that buffer is a plain store in the same statement sequence,
  before the barrier, and a CTA barrier also separates this read from the
  next iteration's writes (the broadcast through shared memory of a tile
  scheduler: one thread writes, the barrier publishes, everyone reads).  The
  read may be spelt ``t = slot[0]``, ``t = T.cast(slot[0], "int64") + 1``, an
  ``ld.shared`` tile call or a raw ``T.ptx["ld.shared..."]`` call
  (:mod:`.uniform_sources`; a load from the buffer is not a write of it);
* a register instruction (``mov``, ``cvt``, ``add`` ...) writing a local scalar
  from uniform scalars under a uniform predicate (:mod:`.uniform_sources`);
* a register written only by tile calls whose family says their result is
  uniform (a ``shfl.sync.idx`` from one source lane, ``elect.sync``'s lane):
  families declare it with :attr:`~..ir.contract.Contract.uniform_result`; the
  raw ``T.ptx`` calls a family checks (:mod:`..rules.raw_calls`) are read as their
  tile form.

Anything else -- a value loaded per thread from global memory, a shared
load with no barrier before it -- is uniform over nothing wider than a
thread, and the reason says which load or variable made it so.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad, Var
from tvm.tirx import is_buffer_var

from .prover import proves
from .uniform_sources import DECLARATIONS, SHARED_SCOPES, clear_after, is_cta_barrier, register_sources, shared_read
from .writes import KernelWrites, is_scalar

__all__ = ["LEVELS", "NOT_WRITTEN", "Uniform", "Uniformity", "level_of_scope", "wider_or_equal"]

#: Scopes over which a value may be uniform, narrowest first.
LEVELS = ("thread", "warp", "warpgroup", "cta", "cluster", "grid")
#: What a call's ``result_level`` says of an operand it only reads (a shuffle's source).
NOT_WRITTEN = "not written"
#: Threads in one instance of the scopes below the CTA.
_WIDTH = {"warp": 32, "warpgroup": 128}


def wider_or_equal(level: str, than: str) -> bool:
    """Whether scope ``level`` contains scope ``than`` (``"cta"`` contains ``"warp"``)."""
    return LEVELS.index(level) >= LEVELS.index(than)


def level_of_scope(scope: str) -> str:
    """The uniformity level a tile-call scope or collective name needs."""
    return scope if scope in LEVELS else "thread"


@dataclass(frozen=True)
class Uniform:
    """The widest scope over which a value provably has one value.

    Attributes
    ----------
    level : str
        One of :data:`LEVELS`.
    why : str
        Why it is not uniform over the next wider scope (``""`` at ``"grid"``),
        naming the variable or load responsible.
    """

    level: str
    why: str = ""

    def narrowed(self, other: "Uniform") -> "Uniform":
        """The narrower of two verdicts (the one whose reason explains the result)."""
        return other if LEVELS.index(other.level) < LEVELS.index(self.level) else self


GRID = Uniform("grid")


class Uniformity:
    """The uniformity of expressions in one kernel (:class:`~..kernel.kernel_facts.KernelFacts`).

    Parameters
    ----------
    facts : KernelFacts
        The kernel's facts (launch, roots, analyzer).
    body : tvm.tirx.Stmt
        The kernel's body (before lowering).
    result_level : callable | None
        ``fn(Evaluate, buffer) -> str | None``: the level a statement-level
        call makes the registers of ``buffer`` (one of its operands) uniform at
        (a tile call whose family declares it), :data:`NOT_WRITTEN` when the
        call only reads that operand, or None.
    """

    def __init__(self, facts, body, result_level=None):
        self.facts = facts
        self.program = KernelWrites(body, facts.root_of, facts.calls.targets)
        self.result_level = result_level or (lambda stmt, buf: None)
        self._memo = {}
        self._busy = set()

    # -- the public queries ------------------------------------------------------------------

    def of(self, expr) -> Uniform:
        """The widest scope over which ``expr`` provably has one value."""
        leaves = GRID
        for leaf in _leaves(expr):
            leaves = leaves.narrowed(self._leaf(leaf))
        return leaves.narrowed(self._thread_ids(expr, leaves.level))

    def why_not(self, expr, level: str) -> str | None:
        """None when ``expr`` is uniform over ``level``; else why not, in words."""
        verdict = self.of(expr)
        if wider_or_equal(verdict.level, level):
            return None
        return verdict.why or f"it is uniform over a {verdict.level} only"

    # -- leaves --------------------------------------------------------------------------------

    def _leaf(self, leaf) -> Uniform:
        key = hash(leaf) if isinstance(leaf, Var) else None
        if key is not None and key in self._memo:
            return self._memo[key]
        if isinstance(leaf, TensorLoad):
            return self._load(leaf)
        if key in self._busy:  # a loop counter whose bounds read itself: no proof
            return Uniform("thread", f"{self.facts.name_of(leaf)} depends on itself")
        self._busy.add(key)
        try:
            verdict = self._var(leaf)
        finally:
            self._busy.discard(key)
        self._memo[key] = verdict
        return verdict

    def _var(self, var) -> Uniform:
        facts = self.facts
        name = facts.name_of(var)
        if any(var.same_as(v) for v in facts.per_thread_vars()):
            if any(var.same_as(v) for v in (facts.launch.cluster_vars if facts.launch else ())):
                return Uniform("cta", f"{name} (the CTA's rank in its cluster) differs between the CTAs of a cluster")
            return GRID  # thread ids: judged on the whole expression (_thread_ids)
        if var in self.program.loops:
            lo, extent, guards = self.program.loops[var]
            verdict = Uniform("grid")
            for part in (lo, extent, *guards):
                verdict = verdict.narrowed(self.of(part))
            if verdict.level != "grid":
                return Uniform(verdict.level, f"loop counter {name}: {verdict.why}")
            return verdict
        if var in facts.ranges or _is_cta_id(facts, var):
            return Uniform("cta", f"{name} differs between CTAs")
        return GRID  # a scalar parameter or a symbolic extent of the kernel

    def _load(self, load) -> Uniform:
        buf = load.source
        if is_scalar(buf):
            return self._scalar(buf)
        address = GRID
        for index in load.indices:
            address = address.narrowed(self.of(index))
        root = self.facts.root_of(buf)
        scope = buf.scope()
        if scope == "global" and root is not None and root not in self.program.writes:
            if address.level == "grid":
                return GRID
            return Uniform(address.level, f"{buf.name}[{_indices(self.facts, load)}]: the address {address.why}")
        return Uniform(
            "thread",
            f"{buf.name}[{_indices(self.facts, load)}] is loaded from {scope} memory that the kernel writes "
            "(each thread may read it at a different time; publish it through shared memory after a CTA "
            "barrier, or broadcast it with shfl.sync.idx)",
        )

    def _scalar(self, buf) -> Uniform:
        """A local scalar: the narrowest of what each of its writes stores, and where."""
        key = hash(buf)
        if key in self._memo:
            return self._memo[key]
        if key in self._busy:
            return GRID  # a scalar updated from itself (u = u + 1): judged by its other parts
        self._busy.add(key)
        try:
            verdict = GRID
            for write in self.program.stores.get(buf, ()):
                verdict = verdict.narrowed(self._write(buf, write))
        finally:
            self._busy.discard(key)
        self._memo[key] = verdict
        return verdict

    def _write(self, buf, write) -> Uniform:
        value, guards, path = write[:3]
        where = GRID
        for guard in guards:
            where = where.narrowed(self.of(guard))
        if where.level != "grid":
            where = Uniform(where.level, f"{buf.name} is written under a guard that {where.why}")
        if value is None:
            return where.narrowed(self._call_result(buf, write[3], path))
        published = self._published_in(buf, value, path)
        if published is not None:  # `t = slot[0]`, `t = T.cast(slot[0], "int64") + 1`
            return where.narrowed(published)
        verdict = self.of(value)
        if verdict.level != "grid" and not verdict.why.startswith(buf.name):
            verdict = Uniform(verdict.level, f"{buf.name} = {self.facts.display(value)}: {verdict.why}")
        return where.narrowed(verdict)

    # -- the shared-memory broadcast -----------------------------------------------------------

    def _call_result(self, buf, stmt, path) -> Uniform:
        """What the call ``stmt`` (at ``path``) makes the scalar ``buf`` it writes:
        an operand it only reads keeps its value; a published shared slot read by
        ``ld.shared`` or a register instruction on uniform sources
        (:mod:`.uniform_sources`) stays uniform; else the family's ``uniform_result``."""
        level = self.result_level(stmt, buf)
        if level == NOT_WRITTEN:
            return GRID
        read = shared_read(self.facts.calls, stmt)
        if read is not None and any(buf.same_as(d) for d in read.dests):
            return self._published(buf, read.source, read.where, path) or self._unpublished(buf, read)
        copy = register_sources(self.facts.calls, stmt, self.program.root)
        if copy is not None and buf.same_as(copy[0]):
            return self._copied(buf, stmt, *copy)
        if level is None:
            return Uniform("thread", f"{buf.name} is written by a call whose result is per thread")
        return Uniform(level, f"{buf.name} is the result of a call uniform over a {level}")

    def _unpublished(self, buf, read) -> Uniform:
        """Why an ``ld.shared`` into ``buf`` that :meth:`_published` refused is per thread."""
        address = GRID
        for expr in read.where:
            address = address.narrowed(self.of(expr))
        name = self.program.root(read.source).name
        if not wider_or_equal(address.level, "cta"):
            return Uniform("thread", f"{buf.name} is loaded from shared memory {name} at an address that {address.why}")
        return Uniform("thread", f"{buf.name} is loaded from shared memory {name} that no CTA barrier publishes to it "
                       "(expected only plain stores into it, then T.cuda.cta_sync() before this read, and again "
                       "before its next write)")

    def _copied(self, buf, stmt, _dst, sources, pred) -> Uniform:
        """A register instruction's result: as uniform as its sources and predicate."""
        verdict = GRID
        for src in (*sources, *((pred,) if pred is not None else ())):
            verdict = verdict.narrowed(self._scalar(src) if is_buffer_var(src) else self.of(src))
        if verdict.level == "grid" or verdict.why.startswith(f"{buf.name} "):
            return verdict
        return Uniform(verdict.level, f"{buf.name} = {self.facts.calls.tile_call(stmt).opcode}(...): {verdict.why}")

    def _published_in(self, buf, value, path) -> Uniform | None:
        """``cta`` (or narrower, from the rest of ``value``) when every shared-memory
        load of ``value`` reads a published slot; None when ``value`` has none or
        one is not published."""
        loads = []
        tvm_ffi.structural_walk(value, (TensorLoad, lambda l: loads.append(l) if l.source.scope() in SHARED_SCOPES else None))
        verdict = GRID
        for load in loads:
            published = self._published(buf, load.source, tuple(load.indices), path)
            if published is None:
                return None
            verdict = verdict.narrowed(published)
        if not loads:
            return None
        rest = tvm_ffi.structural_map(value, (TensorLoad, lambda l: tirx.const(0, l.ty.dtype) if any(l.same_as(m) for m in loads) else l))
        return self.of(rest).narrowed(verdict)

    def _published(self, buf, source, where, path) -> Uniform | None:
        """``cta`` when ``buf = S[a]`` (or an ``ld.shared`` of ``S``) reads a value
        published by a CTA barrier (the module docstring's rule); None when the
        rule does not apply.  ``where`` are the address expressions (and predicate).

        The store must follow a CTA barrier in its statement sequence, and no
        write of ``S`` may run after it before the next CTA barrier on any path
        (the rest of its sequence, the next iteration of each enclosing loop up
        to the read, what follows each loop).  Every write of ``S`` must be a
        plain store (an asynchronous copy completes at a time no barrier orders).
        """
        seq, j = path[-1] if path else (None, 0)
        if not isinstance(seq, tirx.SeqStmt):
            return None
        before = j - 1
        while before >= 0 and isinstance(seq.seq[before], DECLARATIONS):
            before -= 1  # `t = S[0]` declares t right before storing into it
        if before < 0 or not is_cta_barrier(seq.seq[before]):
            return None
        address = GRID
        for index in where:
            address = address.narrowed(self.of(index))
        root = self.program.root(source)
        writes = [w for w in self.program.writes.get(root, ()) if not self._reads_only(w, root)]
        if not wider_or_equal(address.level, "cta") or any(kind != "store" for kind, _, _ in writes):
            return None
        inside = [{hash(node) for node, _ in wpath} | {hash(stmt)} for _, wpath, stmt in writes]
        if not clear_after(path, inside):
            return None
        return Uniform("cta", f"{buf.name} is published through shared memory {root.name} to one CTA")

    def _reads_only(self, write, root) -> bool:
        """Whether the call recorded as a write of ``root`` is a load from it (``ld.shared``)."""
        kind, _, stmt = write
        read = shared_read(self.facts.calls, stmt) if kind == "call" else None
        return read is not None and self.program.root(read.source).same_as(root) and not any(
            self.program.root(d).same_as(root) for d in read.dests)

    # -- thread ids ----------------------------------------------------------------------------

    def _thread_ids(self, expr, bound: str) -> Uniform:
        """How far an expression of the thread ids stays constant (up to ``bound``)."""
        facts = self.facts
        launch = facts.launch
        if launch is None or not _reads_any(expr, launch.thread_vars):
            return GRID
        shown = facts.display(expr)
        verdict = Uniform("thread", f"{shown} differs between the lanes of a warp")
        for level in ("warp", "warpgroup", "cta"):
            if not wider_or_equal(bound, level):
                break
            width = _WIDTH.get(level, launch.threads)
            if launch.threads % width or not self._same_over(expr, width):
                return verdict
            nxt = {"warp": "warpgroup", "warpgroup": "CTA", "cta": "cluster"}[level]
            verdict = Uniform(level, f"{shown} differs between the {level}s of a {nxt}")
        return verdict if launch.threads > 0 else GRID

    def _same_over(self, expr, width: int) -> bool:
        """Whether ``expr`` equals itself at the first thread of each ``width`` threads."""
        at_first = at_first_member(self.facts, expr, width)
        return proves(self.facts.analyzer, expr == at_first, self.facts.known())


def at_first_member(facts, expr, width):
    """``expr`` with the thread ids replaced by those of the first thread of the
    issuing thread's group of ``width`` consecutive linear thread ids."""
    from tvm.tirx import floordiv, floormod  # pylint: disable=import-outside-toplevel

    launch = facts.launch
    bx, by, _ = launch.block
    linear = launch.linear_thread()
    first = linear - floormod(linear, width)
    ids = (floormod(first, bx), floormod(floordiv(first, bx), by), floordiv(first, bx * by))
    subst = dict(zip(launch.thread_vars, ids))

    def sub(v):
        return next((value for var, value in subst.items() if v.same_as(var)), v)

    return tvm_ffi.structural_map(expr, (Var, sub))


def _leaves(expr) -> list:
    """The loads ``expr`` reads (nested ones too) and the Vars it reads outside loads
    (a load's indices are judged with the load)."""
    loads = []
    tvm_ffi.structural_walk(expr, (TensorLoad, loads.append))
    stripped = tvm_ffi.structural_map(expr, (TensorLoad, lambda load: tirx.const(0, load.ty.dtype)))
    found = []
    tvm_ffi.structural_walk(stripped, (Var, lambda v: None if any(v.same_as(f) for f in found) else found.append(v)))
    return loads + found


def _reads_any(expr, vars_) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, (Var, lambda v: found.append(v) if any(v.same_as(u) for u in vars_) else None))
    return bool(found)


def _is_cta_id(facts, var) -> bool:
    return facts.cuda_names.get(var, "").startswith("blockIdx")


def _indices(facts, load) -> str:
    return ", ".join(facts.display(i) for i in load.indices)
