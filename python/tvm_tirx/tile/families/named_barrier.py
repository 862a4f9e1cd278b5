"""``bar``, ``barrier``: the named barriers of a CTA (``bar.sync``, ``bar.arrive``) and the cluster barrier.

``T.cuda.tile.apply(T.ptx["bar.sync"], id=T.uint32(1), count=T.uint32(256))``

Every thread that reaches the call issues the instruction; the barrier
completes when ``count`` threads (whole warps) have arrived.  The rules
that make a named barrier safe are about *which* threads reach it: each
call checks its own (an id the CTA has, a count the hardware can count,
whole warps), and one kernel rule (:func:`named_barrier_counts`) counts,
for every barrier id, the threads that use it across the kernel's call
sites against the count they state.

PTX ISA
    9.7.13.1 (``bar`` / ``barrier``: sixteen barriers per CTA, numbered 0..15;
    a thread count is a multiple of the warp size; ``bar`` is
    ``barrier.aligned``), 9.7.13.3 (``barrier.cluster``); 9.7.15.1 and
    9.7.15.3 in the numbering of apache-tvm 0.27's table.
Forms
    ``bar{.cta}.sync`` and ``barrier{.cta}.sync{.aligned}`` with ``id=`` alone
    (every thread of the CTA takes part) or with ``id=`` and ``count=``;
    ``bar{.cta}.arrive`` and ``barrier{.cta}.arrive{.aligned}`` (``id=`` and
    ``count=``: the ISA requires a count);
    ``barrier.cluster.arrive{.release,.relaxed}{.aligned}`` and
    ``barrier.cluster.wait{.acquire}{.aligned}`` (no parameters).  Not tile
    forms (no family claims them): ``bar.warp.sync`` (a lane mask, not a
    barrier) and the reductions ``bar{.cta}.red`` / ``barrier{.cta}.red``,
    which return a value.
Operand roles and atoms
    No tensor operands.  Parameters (``uint32`` expressions): ``id``, the
    barrier (PTX operand ``a``), and ``count``, the threads taking part
    (operand ``b``).  Either may depend on the thread ids
    (``id=T.uint32(1 + tid // 128)``: one barrier per warpgroup), loop
    counters and CTA ids, as long as it has one value over each warp.
Legality
    Per call: ``id`` in 0..15; ``count`` a positive multiple of 32 and at most
    the CTA's threads; both uniform over each warp (the hardware counts a
    warp's arrival once, for its 32 threads); no ``pred=`` (the threads that
    reach a barrier are counted from its guards).  The ``.aligned`` forms
    (``bar.*`` included) are reached by whole warps: a guard over thread ids
    keeps whole warps, any other guard is uniform over the warp.  The ISA
    asks every thread of the CTA to execute an aligned barrier alike; with a
    thread count that is read for the warps taking part, as CUTLASS's and
    FlashAttention-3's named barriers do.  Per kernel, for each barrier id:
    the threads that use it -- at any call site, sync or arrive -- are whole
    warps and number exactly its count, and every call states the same count
    (a sync without one counts the CTA).  Barrier 0 is ``T.cuda.cta_sync()``'s
    (``__syncthreads``): a named barrier 0 counts the whole CTA.  An id used by
    different threads in different phases of the kernel is refused: give each
    group its own id.  ``id`` and ``count`` must be computable when compiling.
    ``barrier.cluster``: a cluster launch, every thread of the cluster reaches
    the call.  That arrivals and waits alternate is the author's.
Lowering emits
    One instruction per thread that reaches the call, ``id`` and ``count`` as written;
    a raw ``T.ptx["bar.sync"](id, count)`` is checked by the same rules, left as written.
Architectures
    ``bar`` / ``barrier``: sm_75, every target of ptxas 13.0;
    ``barrier.cluster``: sm_90 (measured with ptxas 13.0
    (``tools/probe_arch_floors.py``, ``arch_floors.json``)).
"""

from __future__ import annotations

import tvm_ffi
from tvm.ir import Var
from tvm.tirx import IntImm

from .. import (
    Contract,
    Event,
    Instruction,
    RawSpelling,
    TileError,
    exact_values,
    fold,
    raw_operands,
    reaching,
    register_family,
)
from ._cluster import needs_cluster

#: Table entries of the CTA's named barriers (PTX ISA 9.7.13.1).
NAMED = ("bar_sync", "bar_sync_count", "barrier_sync", "barrier_sync_count", "bar_arrive", "barrier_arrive")
#: Table entries of the cluster barrier (PTX ISA 9.7.13.3).
CLUSTER = ("barrier_cluster_arrive", "barrier_cluster_wait")
#: PTX operand -> keyword of the call.
KEYWORDS = {"a": "id", "b": "count"}
#: The barriers of a CTA (PTX ISA 9.7.13.1: "sixteen barriers numbered 0..15").
BARRIER_IDS = range(16)
#: Threads per warp: a count is a multiple of it, and a warp arrives as a whole.
WARP_SIZE = 32
#: The barrier ``T.cuda.cta_sync()`` uses (``__syncthreads()`` is ``bar.sync 0``).
CTA_BARRIER = 0


def _aligned(instr: Instruction) -> bool:
    """Whether the form is ``.aligned`` (``bar.*`` is ``barrier.*.aligned``, PTX ISA 9.7.13.1)."""
    return instr.mnemonic == "bar" or instr.modifiers.get("aligned") == "aligned"


def _const(value):
    """The int of a constant parameter, or None."""
    return int(value.value) if isinstance(value, IntImm) else None


def rule_value(opcode: str, name: str, value: int, threads: int | None, where: str = ""):
    """The rule a value of parameter ``name`` breaks, or None (PTX ISA 9.7.13.1).

    Parameters
    ----------
    opcode : str
        The call's opcode, for the message.
    name : str
        ``"id"`` (a barrier, 0..15) or ``"count"`` (threads: a positive
        multiple of 32, at most ``threads``).
    value : int
        The parameter's value (a constant, or its value at one warp).
    threads : int | None
        Threads per CTA; None at parse time (the upper bound is not checked).
    where : str
        The point the value was computed at (``" (warp 4)"``), for the message.

    Returns
    -------
    TileError | None
        ``barrier id outside 0..15``, ``thread count not a positive multiple of
        32`` or ``thread count above the CTA's threads``.
    """
    found = f"{value}{where}"
    if name == "id":
        if value in BARRIER_IDS:
            return None
        return TileError(opcode, "barrier id outside 0..15", operand="parameter id",
                         expected="an id in 0..15 (a CTA has 16 named barriers)", found=found)  # fmt: skip
    if value <= 0 or value % WARP_SIZE:
        return TileError(opcode, "thread count not a positive multiple of 32", operand="parameter count",
                         expected="a multiple of the warp size (the barrier counts arriving warps)",
                         found=found)  # fmt: skip
    if threads is not None and value > threads:
        return TileError(opcode, "thread count above the CTA's threads", operand="parameter count",
                         expected=f"at most {threads} (the CTA's threads)", found=found)  # fmt: skip
    return None


def _bind(call):
    """Parse- and lower-time rules: no ``pred``; constant ``id`` / ``count`` legal."""
    if call.pred is not None:
        return TileError(call.opcode, "pred on a barrier", operand="pred",
                         expected="a guard (if ...) around the call (the threads that reach a barrier are "
                         "counted from its guards)", found=f"pred={call.pred}")  # fmt: skip
    launch = call.facts.launch if call.facts is not None else None
    for name in ("id", "count"):
        value = _const(call.params.get(name))
        err = None if value is None else rule_value(call.opcode, name, value, launch and launch.threads)
        if err:
            return err
    return None


def _reached(call, scope):
    """``(threads, None)`` reaching ``call``, or ``(None, the TileError)``."""
    try:
        return reaching(call, scope), None
    except TileError as err:
        return None, err


def _warp_sizes(threads, cta: int) -> dict:
    """``{(rank, warp): threads of it in threads}``, with the warp's size in the CTA."""
    out = {}
    for t, c in threads:
        key = (c, t // WARP_SIZE)
        out[key] = out.get(key, 0) + 1
    return {key: (n, min(WARP_SIZE, cta - key[1] * WARP_SIZE)) for key, n in out.items()}


def _part_of_a_warp(opcode, threads, cta, what):
    """A TileError when ``threads`` hold part of a warp (``what`` names them), else None."""
    for (_, warp), (n, size) in _warp_sizes(threads, cta).items():
        if n != size:
            return TileError(opcode, "barrier reached by part of a warp",
                             expected="whole warps (a barrier counts a warp's arrival once, for all its "
                             "threads; an .aligned one is executed by every thread of the warp together)",
                             found=f"{n} of the {size} threads of warp {warp} {what}")  # fmt: skip
    return None


def _named_check(call):
    """``kernel_check`` of a named barrier: ``id`` / ``count`` uniform over the warp,
    and an ``.aligned`` form reached by whole warps."""
    facts = call.facts
    if facts.launch is None:
        return None
    for name in ("id", "count"):
        value = call.params.get(name)
        why = None if value is None or _const(value) is not None else facts.uniformity.why_not(value, "warp")
        if why:
            return TileError(call.opcode, f"barrier {name} not uniform over the warp", operand=f"parameter {name}",
                             expected="one value for the 32 threads of each warp (the barrier counts a warp "
                             "once)", found=f"{name}={facts.display(value)}: {why}")  # fmt: skip
    if not _aligned(call.contract.instruction):
        return None  # the kernel rule checks the warps of all its calls together
    threads, err = _reached(call, "warp")
    return err or _part_of_a_warp(call.opcode, threads, facts.launch.threads, "reach it")


def _cluster_check(call):
    """``kernel_check`` of ``barrier.cluster``: a cluster launch, reached by the whole cluster."""
    facts = call.facts
    err = needs_cluster(call.opcode, facts.launch, "barrier.cluster")
    if err:
        return err
    threads, err = _reached(call, "cluster")
    total = len(facts.all_threads())
    if err or len(threads) == total:
        return err
    guards = " and ".join(facts.display(g) for g in call.site.guards)
    return TileError(call.opcode, "barrier.cluster reached by part of the cluster",
                     expected=f"all {total} threads of the cluster ({facts.launch.cluster_size} CTAs of "
                     f"{facts.launch.threads}; every thread arrives and waits)",
                     found=f"{len(threads)} threads under if {guards}")  # fmt: skip


def contract(instr: Instruction) -> Contract:
    """The tile contract of a named-barrier or cluster-barrier form (every claimed form is one)."""
    return Contract(
        instruction=instr,
        roles=(),
        params={KEYWORDS[op.name]: op for op in instr.operands},
        bind=_bind,
        kernel_check=_cluster_check if instr.entry_name in CLUSTER else _named_check,
    )


# -- the kernel rule: the threads of each barrier id against its count ---------------------------


def _at(expr, env):
    """``expr`` with each var of ``env`` (var -> int) replaced by its value."""

    def sub(v):
        return next((IntImm(v.ty.dtype, x) for var, x in env.items() if v.same_as(var)), v)

    return tvm_ffi.structural_map(expr, (Var, sub))


def _values(call, name, env, where):
    """The values parameter ``name`` of ``call`` takes at the thread of ``env``
    (over every loop and CTA-id value when it reads them).

    Raises
    ------
    TileError
        The values cannot be computed, or one breaks :func:`rule_value`.
    """
    facts = call.facts
    if name not in call.params:  # a sync without a count: the whole CTA
        return {facts.launch.threads}
    expr = facts.expand_scalars(call.params[name])
    value = fold(facts.analyzer, expr, env)
    found = [(value, "")] if value is not None else exact_values(facts, _at(expr, env), ())
    if found is None:
        raise TileError(call.opcode, f"barrier {name} not known when compiling", operand=f"parameter {name}",
                        expected="a constant, or an expression of thread ids, loop counters and CTA ids (the "
                        "threads of each barrier are counted when the kernel is compiled)",
                        found=f"{name}={facts.display(call.params[name])}")  # fmt: skip
    for x, point in found:
        err = rule_value(call.opcode, name, x, facts.launch.threads, f" ({where}{', ' + point if point else ''})")
        if err:
            raise err
    return {x for x, _ in found}


def _call_uses(call) -> dict:
    """``{(id, count): [(t, c), ...]}``: the threads reaching ``call`` by the barrier
    and count they use (``id`` and ``count`` are uniform over a warp: evaluated
    once per warp)."""
    facts = call.facts
    by_warp = {}
    for t, c in reaching(call, "warp"):
        by_warp.setdefault((c, t // WARP_SIZE), []).append((t, c))
    out = {}
    for (_, warp), members in by_warp.items():
        t, c = members[0]
        env = {**facts.launch.thread_values(t), **facts.launch.cluster_values(c)}
        where = f"warp {warp}"
        for x in _values(call, "id", env, where):
            for n in _values(call, "count", env, where):
                out.setdefault((x, n), []).extend(members)
    return out


def _who(threads) -> str:
    """``threads`` (linear ids) in words: ``warpgroup 1``, ``warps 4..7``, ``threads 0..47``."""
    ts = sorted(set(threads))
    lo, hi, n = ts[0], ts[-1], len(ts)
    if hi - lo + 1 != n:
        return f"{n} threads in {lo}..{hi}"
    for size, unit in ((128, "warpgroup"), (WARP_SIZE, "warp")):
        if lo % size == 0 and n % size == 0:
            return f"{unit} {lo // size}" if n == size else f"{unit}s {lo // size}..{hi // size}"
    return f"threads {lo}..{hi}"


class _Barrier:
    """The uses of one barrier id in a kernel: ``(call, count, threads)`` per call site."""

    def __init__(self, ident):
        self.ident, self.uses = ident, []

    def site(self, call, threads) -> str:
        """One use in words: ``sync at k.py:12 by warpgroup 1``."""
        action = call.contract.instruction.modifiers.get("action", "")
        return f"{action} at {call.site.location or '?'} by {_who(t for t, _ in threads)}"

    def sites(self, uses=None) -> str:
        """Every use in words, ``; ``-separated."""
        return "; ".join(self.site(call, threads) for call, _, threads in (uses or self.uses))

    def errors(self, cta: int) -> list:
        """The rules the uses break together (one TileError at most)."""
        first = self.uses[0][0]
        counts = sorted({n for _, n, _ in self.uses})
        x = self.ident
        if len(counts) > 1:
            found = "; ".join(f"count {n} ({self.sites([u for u in self.uses if u[1] == n])})" for n in counts)
            return [TileError(first.opcode, f"barrier {x}: calls state different counts", operand="parameter count",
                              expected=f"one count at every call using barrier {x}", found=found)]  # fmt: skip
        n = counts[0]
        if x == CTA_BARRIER and n != cta:
            return [TileError(first.opcode, "barrier 0 with a count other than the CTA's threads",
                              operand="parameter count", expected=f"count={cta} or no count (barrier 0 is "
                              "T.cuda.cta_sync()'s, over the whole CTA), or another id in 1..15",
                              found=f"count {n} ({self.sites()})")]  # fmt: skip
        by_rank = {}
        for _, _, threads in self.uses:
            for t, c in threads:
                by_rank.setdefault(c, set()).add(t)
        for rank, ts in sorted(by_rank.items()):
            err = _part_of_a_warp(first.opcode, [(t, rank) for t in ts], cta, f"use barrier {x} ({self.sites()})")
            if err:
                return [err]
            if len(ts) != n:
                return [TileError(first.opcode, f"barrier {x}: count {n} but {len(ts)} threads use it",
                                  operand="parameter count", expected=f"count={len(ts)}, or {n} threads at the "
                                  f"calls using barrier {x} (sync and arrive, every call site of the kernel)",
                                  found=self.sites())]  # fmt: skip
        return []


def named_barrier_counts(view):
    """For each named barrier id of the kernel: its threads (every call site, sync or
    arrive) are whole warps and number its count, one count at every call, and barrier
    0 counts the CTA.

    Returns
    -------
    list[TileError]
        One per barrier that breaks a rule, at its first call site (the message
        names every site), and one per call whose ``id`` / ``count`` cannot be computed.
    """
    facts = view.facts
    calls = [c for c in view.calls.values() if c.contract.instruction.entry_name in NAMED]
    if not calls or facts.launch is None:
        return []
    barriers, errors = {}, []
    for call in calls:
        try:
            uses = _call_uses(call)
        except TileError as err:
            errors.append(err.at(call.site.location))
            continue
        for (x, n), threads in uses.items():
            barriers.setdefault(x, _Barrier(x)).uses.append((call, n, threads))
    for x in sorted(barriers):
        barrier = barriers[x]
        errors += [err.at(barrier.uses[0][0].site.location) for err in barrier.errors(facts.launch.threads)]
    return errors


def protocol_events(leaf, call, protocol, derived):  # pylint: disable=unused-argument
    """A named barrier (tile or raw ``T.ptx`` call) as the protocol rules see it: a
    barrier that may synchronise the threads it names (``scope="named"``; which
    threads is this family's kernel rule, not the protocol rules' concern), a
    cluster barrier for ``barrier.cluster.wait``; None for other statements."""
    if call is not None:
        entry = call.contract.instruction.entry_name
    else:
        raw = raw_operands(leaf.stmt.value)
        entry = raw[0].entry_name if raw is not None else None
    if entry in NAMED:
        return [Event("barrier", leaf, entry.replace("_", "."), scope="named")]
    if entry == "barrier_cluster_wait":
        return [Event("barrier", leaf, "barrier.cluster.wait", scope="cluster")]
    return None if entry not in CLUSTER else []


# The family: its contract and every role it plays (one registry.Family).
register_family(entries=NAMED + CLUSTER, raw=RawSpelling(NAMED + CLUSTER),
                isa={"bar": "9.7.13.1", "barrier": "9.7.13.1, 9.7.13.3"},
                kernel_rules=(named_barrier_counts,), events=protocol_events)(contract)  # fmt: skip
