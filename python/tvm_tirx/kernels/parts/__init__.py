"""Parts the shipped kernels are built from: :mod:`.ring` (a TMA pipeline ring of shared
buffers guarded by full / empty mbarriers), :mod:`.epilogue` (a GEMM consumer's
epilogue chain: register stages, a store, and the kernel parameters they read) and
:mod:`.split_k` (the CTAs that share an output tile over parts of K meet in per-split
slabs of a workspace; the last one finishes the tile), with :mod:`.sequence` (macros
run one after another).  A part
is a small object of Python values whose macros a kernel calls; it uses only the public
API (``T.cuda.tile.apply`` calls), so the tile contract checks what it emits like any
user's code."""

from .epilogue import Epilogue
from .ring import Ring
from .split_k import SplitK

__all__ = ["Epilogue", "Ring", "SplitK"]
