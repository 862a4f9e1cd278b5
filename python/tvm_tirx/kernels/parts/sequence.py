"""Macros run one after another: :func:`then`, how a part turns a list of macros it built
(an epilogue's register stages, a split-K gather's groups) into one."""

from __future__ import annotations

from tvm.script import tirx as T

__all__ = ["then"]


def then(first, second):
    """The macro ``both(a, b, c)`` that runs ``first(a, b, c)`` and then ``second(a, b, c)``:
    two macros of three positional arguments (``functools.reduce(then, macros)`` chains a
    list of them in order)."""

    @T.macro
    def both(a, b, c):
        first(a, b, c)
        second(a, b, c)

    return both
