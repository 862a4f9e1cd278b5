"""Building the intrinsics' ``s_tir`` PrimFuncs with apache-tvm's IRBuilder, without the parser.

Each ``desc`` / ``impl`` pair is a few blocks around a loop nest or one call.
Writing them as ``@T.prim_func`` functions made the import parse 186 of them
(``inspect.stack()`` and the TVMScript evaluator for each: 10 s and more).
The builder calls below are the ones the parser makes for the same source,
so the functions are the same (``tests/python/test_tensor_intrin.py`` compares
them with parsed ones, structurally) and the import takes a fraction of a second.
"""

from __future__ import annotations

import contextlib

from tvm.script.ir_builder import IRBuilder
from tvm.tirx import Var
from tvm.tirx.script.builder import ir as B

__all__ = ["build", "match", "block", "copy_loops", "marker"]


@contextlib.contextmanager
def build(name: str, *params: str):
    """Build one ``s_tir`` PrimFunc named ``name`` with ``handle`` parameters ``params``.

    Yields ``(handles, result)``: the parameter vars, and a list that holds the
    PrimFunc once the ``with`` block has ended.
    """
    result: list = []
    with IRBuilder() as ib:
        with B.prim_func(s_tir=True):
            B.func_name(name)
            handles = [B.arg(p, B.handle()) for p in params]
            yield handles, result
    result.append(ib.get())


def match(handle, name: str, shape, dtype: str, scope: str):
    """``name = T.match_buffer(handle, shape, dtype, offset_factor=1, scope=scope)``."""
    buf = B.match_buffer(handle, shape, dtype, offset_factor=1, scope=scope, layout=None)
    return IRBuilder.name(name, buf)


def block(name: str, reads=(), writes=()):
    """``with T.sblock(name): T.reads(*reads); T.writes(*writes)`` -- entered by the caller.

    Returns a context manager; the reads and writes are declared on entry.
    """

    @contextlib.contextmanager
    def frame():
        with B.sblock(name):
            B.reads(*reads)
            B.writes(*writes)
            yield

    return frame()


def copy_loops(extents, names, kinds, store):
    """``for names in T.grid(*extents): with T.sblock(...)``: one block per point,
    its axes bound with ``T.axis.remap(kinds, loop vars)``; ``store(*axes)`` writes the body.

    ``names`` are ``(block name, loop var names, axis names)``.
    """
    block_name, loop_names, axis_names = names
    with B.grid(*extents) as loop_vars:
        loop_vars = _as_list(loop_vars)
        for var, n in zip(loop_vars, loop_names):
            IRBuilder.name(n, var)
        with B.sblock(block_name):
            axes = B.axis.remap(kinds, list(loop_vars))
            axes = _as_list(axes)
            for var, n in zip(axes, axis_names):
                IRBuilder.name(n, var)
            store(*axes)


def _as_list(value) -> list:
    """One Var, or an array of them, as a list."""
    return [value] if isinstance(value, Var) else list(value)


def marker(key: str, name: str):
    """``with T.attr(0, key, name)``: the AttrStmt that names an intrinsic around its call."""
    return B.attr(0, key, name)
