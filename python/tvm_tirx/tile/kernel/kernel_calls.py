"""The checked calls of one kernel as written, each decoded once.

A tile call carries its operands, parameters, scope and predicate in the IR
(:mod:`..rules.op`: the Call's arguments and one flags string, because a TIR Call's
arguments are expressions); a raw ``T.ptx[...]`` call that a family checks carries
its PTX operands (:mod:`..rules.raw_calls`).  :class:`KernelCalls` decodes each of them
the first time a reader asks and keeps the result for the kernel's lifetime, so
every reader -- the lowering, the uniformity rules, the write sets, the family
rules -- sees the same :class:`~..rules.op.TileCall` and the same as-written
:class:`~..ir.call_view.CallView`, and none of them parses the IR again.
"""

from __future__ import annotations

from tvm.ir import Call, TensorLoad
from tvm.tirx import is_buffer_var

from ...errors import TileError
from ..ir.call_view import CallView
from ..rules.op import decode, is_tile_call
from ..rules.raw_calls import decode_raw
from ..ir.registry import candidates
from .sites import EMPTY_SITE, call_key, is_assume

__all__ = ["KernelCalls", "raw_call_targets"]

#: Cache marker of a statement that is neither a tile call nor a readable raw call.
_NONE = object()


class KernelCalls:
    """The tile calls and checked raw calls of one kernel, decoded once each.

    Parameters
    ----------
    facts : KernelFacts | None
        The kernel's facts (their ``sites`` give each call's
        :class:`~.sites.CallSite`); None for a reader that has no kernel (a
        statement outside one): the views then have :data:`~.sites.EMPTY_SITE`.

    Statements are keyed by :func:`.sites.call_key` (the ``Evaluate``'s identity),
    so a statement of another kernel, or one the lowering built, is decoded on
    its own the first time it is asked about.
    """

    def __init__(self, facts=None):
        self.facts = facts
        self._tile: dict = {}
        self._views: dict = {}
        self._targets: dict = {}

    def tile_call(self, stmt):
        """The :class:`~..rules.op.TileCall` of ``stmt`` (an ``Evaluate`` of a tile call),
        or None for any other statement."""
        key = call_key(stmt)
        if key not in self._tile:
            value = getattr(stmt, "value", None)
            self._tile[key] = (stmt, decode(value) if value is not None and is_tile_call(value) else None)
        return self._tile[key][1]

    def view(self, stmt):
        """The as-written :class:`~..ir.call_view.CallView` of call statement ``stmt``, or None.

        A tile call's view holds its operands as written (buffers and scalars,
        not classified), its parameters, scope and predicate, and the form its
        operand count names (``shfl.sync`` with or without its ``p`` result); a
        raw call's is its tile form's (:func:`..rules.raw_calls.decode_raw`, ``raw``
        true).  None for a statement that is neither, and for a raw call whose
        operands cannot be read (that call is refused where it is checked).
        """
        key = call_key(stmt)
        if key in self._views:
            found = self._views[key][1]
        else:
            found = self._decode_view(stmt)
            if self.facts is None or hasattr(self.facts, "sites"):  # else: asked before the sites exist
                self._views[key] = (stmt, found)
        return None if found is _NONE else found

    def targets(self, stmt) -> list:
        """The buffers statement-level call ``stmt`` (an ``Evaluate``) may write: a
        tile call's tensor operands; for a raw call a family checks, the registers
        its form writes; for another raw call (or one whose operands cannot be read)
        every buffer an argument names as a destination (:func:`raw_call_targets`)."""
        key = call_key(stmt)
        if key not in self._targets:
            self._targets[key] = (stmt, self._find_targets(stmt))
        return self._targets[key][1]

    def _find_targets(self, stmt) -> list:
        if is_assume(stmt):
            return []
        tc = self.tile_call(stmt)
        if tc is not None:
            return [op for op in tc.operands if is_buffer_var(op)]
        try:
            view = decode_raw(stmt.value)  # site-free: what it writes does not depend on where it is
        except TileError:
            view = None
        if view is None:
            return [b for arg in getattr(stmt.value, "args", ()) for b in raw_call_targets(arg)]
        return [load.source for role, op in zip(view.contract.roles, view.operands) if role.writes
                and op.kind == "element" for load in (op.value if isinstance(op.value, tuple) else (op.value,))]

    def _site(self, stmt):
        sites = getattr(self.facts, "sites", None) or {}
        return sites.get(call_key(stmt), EMPTY_SITE)

    def _decode_view(self, stmt):
        value = getattr(stmt, "value", None)
        if value is None:
            return _NONE
        site = self._site(stmt)
        tc = self.tile_call(stmt)
        if tc is None:
            try:
                return decode_raw(value, self.facts, site) or _NONE
            except TileError:  # unreadable: refused where the call is checked
                return _NONE
        try:
            forms = candidates(tc.opcode)
        except TileError:  # an unknown opcode: refused where the call is lowered
            return _NONE
        form = next((f for f in forms if sum(r.keyword is None for r in f.roles) == len(tc.operands)), forms[0])
        return CallView(tc.operands, tc.pred, dict(tc.params), form, tc.scope, site, facts=self.facts)


def raw_call_targets(arg) -> list:
    """The buffers a raw call argument may write: a destination passed as an
    element load (``j[0]``) or an address (``T.address_of(buf[i])``, possibly
    converted, ``tvm_access_ptr``); loads inside index arithmetic are reads."""
    if isinstance(arg, TensorLoad):
        return [arg.source]
    if isinstance(arg, Call):
        return [b for a in arg.args for b in raw_call_targets(a)]
    return []
