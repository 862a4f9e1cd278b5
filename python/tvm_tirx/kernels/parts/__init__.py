"""Parts the shipped kernels are built from: :mod:`.ring` (a TMA pipeline ring of shared
buffers guarded by full / empty mbarriers).  A part is a small object of Python values
whose macros a kernel calls; it uses only the public API (``T.cuda.tile.apply`` calls),
so the tile contract checks what it emits like any user's code."""

from .ring import Ring

__all__ = ["Ring"]
