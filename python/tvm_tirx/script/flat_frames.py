"""Flat exits of the IRBuilder frames that a kernel leaves open while ``T.function`` parses it.

Why: every buffer view (``A.sub[i, :]``, ``.view``, ``.permute``, a carve-out,
an allocation) is built by apache-tvm 0.27's ``decl_buffer``/``alloc_buffer``
(``tvm/tirx/script/builder/ir.py``) as a frame that stays open until the block
around it ends::

    frame.add_callback(partial(frame.__exit__, None, None, None))
    frame.__enter__()

``add_callback`` registers on the frame on top of the builder's stack, which is
the previous view (C++ ``IRBuilderFrameNode::AddCallback``,
``src/script/ir_builder/base.cc``).  So the N views of one block form a chain,
and when the block ends ``IRBuilderFrameNode::ExitWithScope`` exits them
recursively: view k's exit runs view k+1's exit, each level a few Python and
C++ calls.  At about 250 views (Python 3.11) Python's recursion limit is hit
inside a C++ callback, and tvm-ffi then crashes the process; on Python 3.12 the
fixed C recursion limit (1500) is hit at about 450 views whatever
``sys.setrecursionlimit`` says.  The IR built is flat all the same: a view's
frame adds ``DeclBuffer`` and the statements after it to its parent as one
flattened sequence (``DeclBufferFrameNode::ExitWithScope``).

What :func:`flat_frame_exits` does: while it is active (in the parsing thread
only), a callback of that form registered while the top frame is itself a
frame that such a callback will exit, is not chained onto that frame.  It joins
a list kept for the run of such frames, and the first frame of the run gets
one callback that exits the run's frames from the top down, in a loop.  The
frames exit in the same order, each while it is on top of the stack, so the
IR is the same as apache-tvm's; only the recursion is gone: any number of views
parses in constant stack depth.  Every other callback, and everything outside
an active :func:`flat_frame_exits`, goes to apache-tvm's ``add_callback``
unchanged.  The method is replaced on apache-tvm's ``IRBuilderFrame`` only
while at least one parse is active, and put back after the last one.
"""

from __future__ import annotations

import contextlib
import functools
import threading

__all__ = ["flat_frame_exits"]

_LOCAL = threading.local()
_LOCK = threading.Lock()
_INSTALLED = {"users": 0, "stock": None}


class _Run:
    """Consecutive frames exited by callbacks: the first one (registered with
    apache-tvm on the frame below it) and the exits of the ones above it."""

    __slots__ = ("first", "exits", "flush_registered")

    def __init__(self, first):
        self.first = first
        self.exits: list = []  # (frame, exit callback), bottom to top
        self.flush_registered = False


def _exits_itself(frame, callback) -> bool:
    """Whether ``callback`` is apache-tvm's ``partial(frame.__exit__, None, None, None)``."""
    if not isinstance(callback, functools.partial) or callback.args != (None, None, None) or callback.keywords:
        return False
    func = callback.func
    return getattr(func, "__name__", None) == "__exit__" and getattr(func, "__self__", None) is frame


def _top_frame():
    from tvm.script.ir_builder import IRBuilder  # pylint: disable=import-outside-toplevel

    if not IRBuilder.is_in_scope():
        return None
    frames = IRBuilder.current().frames
    return frames[len(frames) - 1] if len(frames) else None


def _add_callback(self, callback):
    """``IRBuilderFrame.add_callback`` while :func:`flat_frame_exits` is active."""
    runs = getattr(_LOCAL, "runs", None)
    stock = _INSTALLED["stock"]
    if runs is None or not _exits_itself(self, callback):
        return stock(self, callback)
    top = _top_frame()
    run = runs.get(top.__chandle__()) if top is not None else None
    if run is None:
        # the first of a run: chained onto the frame below it, as apache-tvm does
        stock(self, callback)
        runs[self.__chandle__()] = _Run(self)
        return None
    if not run.flush_registered:
        # the run's first frame is on top (nothing above it yet): it exits the others
        stock(top, functools.partial(_flush, run, runs))
        run.flush_registered = True
    run.exits.append((self, callback))
    runs[self.__chandle__()] = run
    return None


def _flush(run, runs) -> None:
    """Exit the frames above ``run.first``, the top one first (each on top when it exits)."""
    while run.exits:
        frame, exit_frame = run.exits.pop()
        runs.pop(frame.__chandle__(), None)
        exit_frame()
    runs.pop(run.first.__chandle__(), None)


@contextlib.contextmanager
def flat_frame_exits():
    """Context manager: frames left open by the code it runs exit in a loop, not recursively.

    Used by ``T.function`` around apache-tvm's parser.  Re-entrant (a parse
    inside a parse shares the outer one's state) and thread-safe (the state is
    per thread; the method on apache-tvm's ``IRBuilderFrame`` is swapped under
    a lock, and behaves as apache-tvm's in any thread without an active parse).

    Facts relied on (apache-tvm 0.27): ``IRBuilderFrame.add_callback`` registers
    on the top frame of the current builder and ``ExitWithScope`` runs a
    frame's callbacks in reverse order before popping it
    (``src/script/ir_builder/base.cc``); ``tests/python/test_many_views.py``
    checks the IR against apache-tvm's own exits.
    """
    if getattr(_LOCAL, "runs", None) is not None:
        yield
        return
    _install()
    _LOCAL.runs = {}
    try:
        yield
    finally:
        _LOCAL.runs = None
        _uninstall()


def _install() -> None:
    from tvm.script.ir_builder.base import IRBuilderFrame  # pylint: disable=import-outside-toplevel

    with _LOCK:
        if _INSTALLED["users"] == 0:
            _INSTALLED["stock"] = IRBuilderFrame.add_callback
            IRBuilderFrame.add_callback = _add_callback
        _INSTALLED["users"] += 1


def _uninstall() -> None:
    from tvm.script.ir_builder.base import IRBuilderFrame  # pylint: disable=import-outside-toplevel

    with _LOCK:
        _INSTALLED["users"] -= 1
        if _INSTALLED["users"] == 0:
            IRBuilderFrame.add_callback = _INSTALLED["stock"]
