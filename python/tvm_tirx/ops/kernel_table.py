"""A process-wide table of compiled kernels, one per key, compiled on first use.

The torch operators keep one such table per kernel generator (:mod:`.gemm_kernels`,
:mod:`.attention_kernels`): the first lookup of a key compiles its kernel (which the
on-disk compile cache of :mod:`tvm_tirx.build.cache` may serve), later lookups return
the same :class:`~tvm_tirx.Kernel`.  This module does not import torch.

A debug build (:mod:`tvm_tirx.build.debug`: ``TVM_TIRX_DETECT_HANGS``,
``TVM_TIRX_CHECK_ASSUMPTIONS`` or a ``tvm_tirx.debug_build`` block around the lookup)
is a kernel of its own: it is kept under ``(key, DebugOptions)``, beside the plain one.
"""

from __future__ import annotations

import threading
from typing import Callable

from ..build.debug import current_debug
from .check_mode import collected

__all__ = ["KernelTable"]


class _Unlaunched:
    """The kernel of ``key`` inside :func:`~.check_mode.checking`: its launcher records the
    key and launches nothing."""

    def __init__(self, key, checked: list):
        self.key, self._checked = key, checked

    def launcher(self, *args):
        self._checked.append(self.key)
        return _no_launch

    def __call__(self, *args):
        self.launcher(*args)


def _no_launch(*args) -> None:
    return None


class KernelTable:
    """``{key: compiled kernel}``, filled by ``compile(key)`` on a key's first lookup.

    Parameters
    ----------
    compile : Callable[[key], tvm_tirx.Kernel]
        Makes the kernel of a key (called once per key, under a lock, so several threads
        asking for one key at once compile it once).
    """

    def __init__(self, compile: Callable):  # pylint: disable=redefined-builtin
        self._compile = compile
        self._kernels: dict = {}
        self._lock = threading.Lock()
        self._on_clear: list = []

    def get(self, key):
        """The kernel of ``key``: compiled on the first call for it, the same object after.

        Raises
        ------
        Exception
            Whatever ``compile(key)`` raises (nothing is stored then); ``ValueError`` for a
            ``TVM_TIRX_*`` debug variable that holds something else than documented.
        """
        checked = collected()
        if checked is not None:  # ops.check: nothing compiled, nothing launched
            return _Unlaunched(key, checked)
        debug = current_debug()
        slot = (key, debug) if debug else key
        kernel = self._kernels.get(slot)
        if kernel is not None:
            return kernel
        with self._lock:
            kernel = self._kernels.get(slot)
            if kernel is None:
                kernel = self._compile(key)  # tvm_tirx.compile reads the same debug setting
                self._kernels[slot] = kernel
        return kernel

    def cached(self) -> dict:
        """A copy of the table."""
        return dict(self._kernels)

    def on_clear(self, forget: Callable[[], None]) -> None:
        """Call ``forget()`` whenever the table is cleared (what was made from its kernels,
        such as launch plans, is forgotten with them)."""
        self._on_clear.append(forget)

    def clear(self) -> None:
        """Forget the compiled kernels (the on-disk compile cache is kept), and whatever
        :meth:`on_clear` asked to forget with them."""
        with self._lock:
            self._kernels.clear()
        for forget in self._on_clear:
            forget()
