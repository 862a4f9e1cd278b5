"""Where a kernel writes: every store into each local scalar (with the guards
around it and its statement path), every statement that may write each
allocation or parameter, and each loop's bounds -- what the uniformity rules
(:mod:`.uniformity`) read."""

from __future__ import annotations

from tvm import tirx

__all__ = ["KernelWrites", "is_scalar"]


class KernelWrites:  # pylint: disable=too-few-public-methods
    """What the rules need from the kernel body: every write of each local
    scalar and shared buffer (with the guards around it and its statement
    path), loop bounds, and which roots the kernel writes."""

    def __init__(self, body, root_of, targets):
        self.root_of, self.targets = root_of, targets
        self.stores = {}  # local scalar buffer -> [(value | None, guards, path)]
        self.writes = {}  # root -> [(kind, path, stmt)], kind "store" or "call"
        self.loops = {}  # loop var -> (min, extent, guards)
        self._visit(body, (), ())

    def root(self, buf):
        """The allocation or parameter ``buf`` views (``buf`` itself when unknown)."""
        root = self.root_of(buf)
        return buf if root is None else root

    def _visit(self, stmt, guards, path):
        if isinstance(stmt, tirx.SeqStmt):
            for i, s in enumerate(stmt.seq):
                self._visit(s, guards, path + ((stmt, i),))
        elif isinstance(stmt, tirx.IfThenElse):
            self._visit(stmt.then_case, guards + (stmt.condition,), path + ((stmt, 0),))
            if stmt.else_case is not None:
                self._visit(stmt.else_case, guards + (tirx.Not(stmt.condition),), path + ((stmt, 1),))
        elif isinstance(stmt, tirx.While):
            self._visit(stmt.body, guards + (stmt.condition,), path + ((stmt, 0),))
        elif isinstance(stmt, tirx.For):
            self.loops[stmt.loop_var] = (stmt.min, stmt.extent, guards)
            self._visit(stmt.body, guards, path + ((stmt, 0),))
        elif isinstance(stmt, tirx.BufferStore):
            self._store(stmt, guards, path)
        elif isinstance(stmt, tirx.Evaluate):
            self._call(stmt, guards, path)
        elif isinstance(getattr(stmt, "body", None), tirx.Stmt):
            self._visit(stmt.body, guards, path + ((stmt, 0),))

    def _store(self, stmt, guards, path):
        buf = stmt.buffer
        if is_scalar(buf):
            self.stores.setdefault(buf, []).append((stmt.value, guards, path))
        self.writes.setdefault(self.root(buf), []).append(("store", path, stmt))

    def _call(self, stmt, guards, path):
        """Every buffer a statement-level call takes may be written by it: a tile
        call's tensor operands; any buffer a raw call loads from or takes the
        address of (its destinations are written as element loads)."""
        for buf in self.targets(stmt):
            if is_scalar(buf):
                self.stores.setdefault(buf, []).append((None, guards, path, stmt))
            self.writes.setdefault(self.root(buf), []).append(("call", path, stmt))


def is_scalar(buf) -> bool:
    """A one-element local buffer (``t = expr`` in TVMScript, ``T.alloc_local((1,))``)."""
    shape = [getattr(n, "value", None) for n in buf.shape]
    return buf.scope() == "local" and all(n == 1 for n in shape)
