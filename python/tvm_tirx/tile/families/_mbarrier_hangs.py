"""The hang detector of the mbarrier family (``tvm_tirx.compile(..., options={"detect_hangs": True})``):
its ``instrument`` hook, :func:`detect_hangs` (``register_family(..., instrument=)``;
``tvm_tirx.build.debug.instrument`` runs every family's).

A wrong protocol -- an ``expect_tx`` byte count the copies never bring, an
init count the arrivals never reach, a wait on the wrong parity -- makes an
``mbarrier`` wait spin forever.  Built with the detector, every wait of the
kernel is bounded: each ``T.cuda.mbarrier_wait_phase`` becomes a loop of
``mbarrier.try_wait.parity`` (PTX ISA 9.7.15.16) that, after the timeout,
prints the wait's source line, the barrier (its tensor, its element), the
parity it waits for and what the kernel's own calls say it should see (its
init count and ``expect_tx`` bytes, when constant), then traps; a loop the
kernel writes itself around a ``try_wait`` / ``test_wait`` tile call gets
the same check.  The launch then fails with ``cudaErrorLaunchFailure``
instead of hanging.

Time is measured with ``clock64()`` (SM cycles), converted at
:data:`~tvm_tirx.tile.ir.hooks.CYCLES_PER_MS` (the H100/H200 boost clock, about 2 GHz): the timeout
is approximate.  ``bar.sync`` and ``barrier.cluster.wait`` block in hardware
and cannot be bounded; the detector does not cover them.
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad

from .. import device_trap, ptx_call
from ..ir.hooks import CYCLES_PER_MS
from ..kernel.kernel_facts import KernelFacts
from ..kernel.sites import expansion_of, location_of

__all__ = ["detect_hangs", "bound_waits", "CYCLES_PER_MS"]

#: apache-tvm's spin-wait intrinsics (``T.cuda.mbarrier_wait_phase``) -> the instruction they loop on.
_SPIN_WAITS = {
    "tirx.cuda.mbarrier_wait": "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64",
    "tirx.cuda.mbarrier_wait_acquire_cluster": "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64",
}
#: Op-name prefixes of the expanded polls a kernel's own loop may spin on.
_POLLS = ("tirx.ptx.mbarrier_try_wait", "tirx.ptx.mbarrier_test_wait")


def _op(stmt):
    return getattr(getattr(getattr(stmt, "value", None), "op", None), "name", "") or ""


def _barrier_facts(func) -> dict:
    """``{root name: (init counts, expect_tx bytes)}`` that the kernel's mbarrier
    tile calls state with constants (PrimFunc ``func`` before lowering)."""
    facts = KernelFacts(func)
    out = {}

    def visit(stmt):
        tc = facts.calls.tile_call(stmt)
        if tc is None or not tc.opcode.startswith("mbarrier.") or not tc.operands or not tirx.is_buffer_var(tc.operands[0]):
            return
        root = facts.root_of(tc.operands[0])
        counts, txs = out.setdefault(getattr(root, "name", "?"), (set(), set()))
        for name, into in (("count", counts), ("tx", txs)):
            value = getattr(tc.params.get(name), "value", None)
            if isinstance(value, int) and (name == "tx" or "init" in tc.opcode):
                into.add(value)

    tvm_ffi.structural_walk(func.body, (tirx.Evaluate, visit))
    return out


def _describe(addr, known, facts) -> tuple:
    """``(text, values)`` naming the barrier at address ``addr`` (``address_of(view[0])``)."""
    found = []  # the view under address_of, also inside a window conversion (cvta)
    tvm_ffi.structural_walk(addr, (TensorLoad, found.append))
    buf = found[0].source if found else None
    if buf is None:
        return "an mbarrier", []
    root = facts.root_of(buf)
    name = root.name if root is not None else buf.name
    counts, txs = known.get(name, (set(), set()))
    said = []
    if len(counts) == 1:
        said.append(f"init count {next(iter(counts))}")
    if len(txs) == 1:
        said.append(f"expect_tx {next(iter(txs))} bytes")
    text = f"mbarrier {name}" + (f" ({', '.join(said)})" if said else "")
    return text, [("element", buf.elem_offset)]


def _check(stmt, done, t0, ctx, addr, parity):
    """``if done == 0 and clock64() - t0 > timeout: print and trap``."""
    timeout_ms, known, facts = ctx
    span = stmt.span if location_of(stmt.span) else getattr(stmt.value, "span", None)
    where = (location_of(span) or "<unknown line>") + (expansion_of(span) or "")
    text, values = _describe(addr, known, facts)
    message = f"{where}: mbarrier wait timed out after {timeout_ms} ms on {text}"
    elapsed = tirx.call_extern("int64", "clock64") - t0[0]
    late = tirx.all(done == tirx.const(0, done.ty.dtype), elapsed > tirx.IntImm("int64", timeout_ms * CYCLES_PER_MS))
    return tirx.IfThenElse(late, device_trap(message, [("parity", parity), *values]), None)


def _bounded_spin(stmt, ctx):
    """The loop replacing one ``T.cuda.mbarrier_wait_phase`` (``stmt``)."""
    addr, parity = stmt.value.args[0], tirx.Cast("uint32", stmt.value.args[1])
    done = tirx.decl_buffer((1,), "uint32", name="hang_done", scope="local")
    t0 = tirx.decl_buffer((1,), "int64", name="hang_t0", scope="local")
    poll = tirx.Evaluate(ptx_call(_SPIN_WAITS[_op(stmt)], [done[0], addr, parity]))
    body = tirx.SeqStmt([poll, _check(stmt, done[0], t0, ctx, addr, parity)])
    return tirx.SeqStmt([
        tirx.AllocBuffer(done), tirx.AllocBuffer(t0),
        tirx.BufferStore(done, tirx.const(0, "uint32"), [0]),
        tirx.BufferStore(t0, tirx.call_extern("int64", "clock64"), [0]),
        tirx.While(done[0] == tirx.const(0, "uint32"), body),
    ])  # fmt: skip


def _instrumented(loop, ctx):
    """A kernel's own ``while`` around a poll, with the timeout check after the poll."""
    seq = list(loop.body.seq) if isinstance(loop.body, tirx.SeqStmt) else [loop.body]
    at = next((i for i, s in enumerate(seq) if isinstance(s, tirx.Evaluate) and _op(s).startswith(_POLLS)), None)
    if at is None:
        return loop
    poll = seq[at]
    done, addr, parity = poll.value.args[0], poll.value.args[1], poll.value.args[2]
    t0 = tirx.decl_buffer((1,), "int64", name="hang_t0", scope="local")
    seq.insert(at + 1, _check(poll, done, t0, ctx, addr, parity))
    start = tirx.BufferStore(t0, tirx.call_extern("int64", "clock64"), [0])
    return tirx.SeqStmt([tirx.AllocBuffer(t0), start, tirx.While(loop.condition, tirx.SeqStmt(seq))])


def bound_waits(lowered, timeout_ms: int, source=None):
    """PrimFunc ``lowered`` (after ``LowerTileApply``) with every mbarrier wait
    bounded by ``timeout_ms`` milliseconds (see the module docstring).

    Parameters
    ----------
    lowered : PrimFunc
        The kernel after lowering.
    timeout_ms : int
        Milliseconds (approximate: :data:`~tvm_tirx.tile.ir.hooks.CYCLES_PER_MS`) a wait may spin.
    source : PrimFunc | None
        The kernel before lowering, whose mbarrier tile calls give the counts
        and bytes the messages quote.
    """
    ctx = (timeout_ms, _barrier_facts(source) if source is not None else {}, KernelFacts(lowered))

    def loop(node):
        polls = []
        tvm_ffi.structural_walk(node.body, (tirx.Evaluate, lambda s: polls.append(s) if _op(s).startswith(_POLLS) else None))
        return _instrumented(node, ctx) if polls else node

    def spin(node):
        return _bounded_spin(node, ctx) if _op(node) in _SPIN_WAITS else node

    body = tvm_ffi.structural_map(lowered.body, (tirx.While, loop))
    body = tvm_ffi.structural_map(body, (tirx.Evaluate, spin))
    return lowered.with_body(body)


def detect_hangs(lowered, source, options):
    """The mbarrier family's ``instrument`` hook (:data:`~tvm_tirx.tile.ir.hooks.Instrument`):
    :func:`bound_waits` when ``options.detect_hangs`` asks for it.

    Parameters
    ----------
    lowered : PrimFunc
        The kernel after ``LowerTileApply``.
    source : PrimFunc
        The same kernel before lowering (the messages quote its barrier counts).
    options : DebugOptions
        The build's debug options; ``detect_hangs``: milliseconds a wait may
        spin (0: off, ``lowered`` is returned as is).

    Returns
    -------
    PrimFunc
        ``lowered``, with every mbarrier wait bounded when asked.
    """
    if not options.detect_hangs:
        return lowered
    return bound_waits(lowered, options.detect_hangs, source=source)
