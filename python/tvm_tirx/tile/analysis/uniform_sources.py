"""The calls through which a value keeps its uniformity (:mod:`.uniformity`).

A statement-level call that writes a local scalar makes it uniform when what
it computes from is:

* a load from shared memory -- the ``ld.shared`` tile call
  (``T.cuda.tile.apply(T.ptx["ld.shared.b32"], t, slot.sub[0:1])``) or the raw
  call (``T.ptx["ld.shared.b32"](t[0], slot.ptr_to([0]))``) -- at a CTA-uniform
  address, of a slot published by a CTA barrier (:func:`shared_read`; the rule
  is :meth:`.uniformity.Uniformity._published`, as for ``t = slot[0]``);
* a register instruction (a form whose contract says ``register_function``:
  ``mov``, ``cvt``, the arithmetic of :mod:`..families.register_ops`) on uniform scalar sources, unpredicated or
  under a uniform predicate (:func:`register_sources`): its result is a
  function of its sources only.
"""

from __future__ import annotations

from typing import NamedTuple

import tvm_ffi
from tvm import tirx
from tvm.ir import Call, TensorLoad

from ..ir.views import ViewMap, int_or_none

__all__ = ["SharedRead", "shared_read", "register_sources", "SHARED_SCOPES", "CTA_BARRIER_OPS", "DECLARATIONS",
           "clear_after", "is_cta_barrier"]

#: Storage scopes of shared memory.
SHARED_SCOPES = ("shared", "shared.dyn")
#: Statement-level ops that are CTA-wide barriers (every thread of the CTA takes part).
CTA_BARRIER_OPS = ("tirx.cuda.cta_sync",)
#: apache-tvm's raw PTX load intrinsics (``T.ptx["ld..."](...)``).
_RAW_LOADS = ("tirx.ptx.ld", "tirx.ptx.ld_vec")


class SharedRead(NamedTuple):
    """A call that loads registers from shared memory.

    Attributes
    ----------
    source : Buffer
        The shared buffer (or view) read.
    where : tuple
        Expressions the value read depends on besides the memory: the element
        offsets read and the call's predicate, if any.
    dests : tuple
        The local buffers written.
    """

    source: object
    where: tuple
    dests: tuple


def shared_read(calls, stmt) -> SharedRead | None:
    """``stmt`` (an ``Evaluate``) as a :class:`SharedRead`, or None when it is not a
    load from shared memory whose address can be read.  ``calls`` is the kernel's
    :class:`~..kernel.kernel_calls.KernelCalls` (the tile call, decoded once)."""
    view = calls.view(stmt)
    if view is not None and not view.raw:
        return _tile_read(view)
    if getattr(getattr(stmt.value, "op", None), "name", None) in _RAW_LOADS:
        return _raw_read(stmt.value)
    return None


def _loads_shared(form) -> bool:
    """Whether ``form`` loads registers from shared memory through the generic proxy and
    does nothing else: a written register operand, then a read shared-memory operand."""
    if len(form.roles) != 2:
        return False
    dst, src = form.roles
    return (dst.kind == "register" and dst.writes and src.kind == "memory" and not src.writes
            and not src.async_proxy and set(src.scopes) <= set(SHARED_SCOPES))


def _tile_read(view) -> SharedRead | None:
    if not _loads_shared(view.contract) or len(view.operands) != 2:
        return None
    dst, src = view.operands
    if not (tirx.is_buffer_var(dst) and tirx.is_buffer_var(src)) or src.scope() not in SHARED_SCOPES:
        return None
    layout = ViewMap(src)
    shape = [int_or_none(n) for n in src.shape]
    if None in shape or 0 in shape or layout.has_thread_axes():
        return None  # a per-thread address (thread axes) or one the proofs cannot name
    corners = {tuple(0 for _ in shape), tuple(n - 1 for n in shape)}
    where = tuple(src.elem_offset + layout.apply(c)["m"] for c in sorted(corners))
    return SharedRead(src, where + ((view.pred,) if view.pred is not None else ()), (dst,))


def _raw_read(call) -> SharedRead | None:
    args = list(call.args)
    if not any(isinstance(getattr(a, "value", None), str) and a.value in ("shared", "shared::cta") for a in args):
        return None
    dests = tuple(a.source for a in args if isinstance(a, TensorLoad))
    addresses = [a for a in args if isinstance(a, Call)]
    loads = []
    for address in addresses:
        tvm_ffi.structural_walk(address, (TensorLoad, loads.append))
    if len(addresses) != 1 or len(loads) != 1 or loads[0].source.scope() not in SHARED_SCOPES:
        return None
    return SharedRead(loads[0].source, tuple(loads[0].indices), dests)


def register_sources(calls, stmt, root) -> tuple | None:
    """``(dst, sources, pred)`` of a register-instruction tile call that writes one
    local scalar ``dst`` from ``sources`` (scalar buffers or expressions), else None.

    ``calls`` is the kernel's :class:`~..kernel.kernel_calls.KernelCalls`; the call's form
    must compute its result from its sources only (``Contract.register_function``).
    ``root(buf)`` gives the allocation a buffer views: a source must be a scalar
    allocation itself (whose writes the rules see), not a view of a register array."""
    view = calls.view(stmt)
    if view is None or view.raw or not view.contract.register_function or not view.operands:
        return None
    dst, *sources = view.operands
    if not tirx.is_buffer_var(dst) or any(
            tirx.is_buffer_var(s) and not (_one_element(s) and root(s).same_as(s)) for s in sources):
        return None
    return dst, tuple(sources), view.pred


def _one_element(buf) -> bool:
    return buf.scope() == "local" and all(int_or_none(n) == 1 for n in buf.shape)


#: Statements that declare storage and run no code.
DECLARATIONS = (tirx.AllocBuffer, tirx.DeclBuffer)


def is_cta_barrier(stmt) -> bool:
    """Whether ``stmt`` is a CTA-wide barrier (``T.cuda.cta_sync()``)."""
    op = getattr(getattr(stmt, "value", None), "op", None) if isinstance(stmt, tirx.Evaluate) else None
    return getattr(op, "name", None) in CTA_BARRIER_OPS


def clear_after(path, inside) -> bool:
    """Whether a CTA barrier runs after the read at ``path`` before any write
    whose enclosing statements are one of the sets in ``inside``."""

    def scan(stmts):
        for stmt in stmts:
            if is_cta_barrier(stmt):
                return True
            if any(hash(stmt) in ancestors for ancestors in inside):
                return False
        return None

    for level in range(len(path) - 1, -1, -1):
        node, idx = path[level]
        if isinstance(node, tirx.SeqStmt):
            verdict = scan(node.seq[idx + 1 :])
            if verdict is not None:
                return verdict
        elif isinstance(node, tirx.For | tirx.While) and level + 1 < len(path):
            body, upto = path[level + 1]  # the next iteration, up to the read
            if isinstance(body, tirx.SeqStmt) and scan(body.seq[:upto]) is False:
                return False
    return True
