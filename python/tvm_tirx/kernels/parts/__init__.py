"""Parts the shipped kernels are built from: :mod:`.ring` (a TMA pipeline ring of shared
buffers guarded by full / empty mbarriers) and :mod:`.epilogue` (a GEMM consumer's
epilogue chain: register stages, a store, and the kernel parameters they read).  A part
is a small object of Python values whose macros a kernel calls; it uses only the public
API (``T.cuda.tile.apply`` calls), so the tile contract checks what it emits like any
user's code."""

from .epilogue import Epilogue
from .ring import Ring

__all__ = ["Epilogue", "Ring"]
