"""The kernel's dynamic shared memory: one pool and named, aligned carve-outs.

``T.device_entry(launch=T.cuda.LaunchConfig(..., dynamic_smem_bytes=N))``
allocates the pool, apache-tvm's convention for CUDA's ``extern __shared__``
window: ``dyn_smem = T.alloc_buffer((0,), "uint8", scope="shared.dyn", align=1024)``
(for a run-time size, an expression of the kernel's parameters, the extent is
that size, from which apache-tvm computes the launch's size).
``T.alloc_shared(shape, dtype, scope="shared.dyn", align=, offset=, alias=)``
then declares a tensor over it at a byte offset (``T.decl_buffer(...,
data=dyn_smem.data, byte_offset=offset, align=align)``, as apache-tvm's
``SMEMPool`` does), after checking at parse time that

* the carve-out lies within the declared ``N`` bytes,
* its offset is a multiple of its alignment,
* it overlaps no earlier carve-out, unless ``alias=True`` asks for that.

The tile layer (``LowerTileApply``) takes each carve-out -- a buffer declared
directly over a zero-extent ``shared.dyn`` buffer -- as a root tensor of its
own: alignment proofs start from the carve-out's ``align`` and bounds proofs
use its extent.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import tvm
from tvm.runtime import DataType
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.layout import Layout
from tvm.tirx.script.builder import ir as _ir

from ..errors import TileError

__all__ = ["DynamicSharedPool", "POOL_ALIGN", "POOL_NAME"]

#: Alignment of the pool's base in bytes (``extern __shared__ __align__(1024)``),
#: the largest a carve-out may ask for: the 128-byte swizzle pattern of TMA and
#: wgmma repeats every 1024 bytes, so such a tile starts on a 1024-byte boundary
#: (PTX ISA, wgmma "Matrix Descriptor": its base offset is 0 only then).
POOL_ALIGN = 1024

#: Name of the pool buffer in the IR.
POOL_NAME = "dyn_smem"


@dataclass(frozen=True)
class _CarveOut:
    """One carve-out: bytes ``[start, end)`` of the pool, described for messages."""

    buffer: object
    start: int
    end: int
    what: str

    def describe(self) -> str:
        name = self.buffer.name or "an unnamed carve-out"
        return f"{name} ({self.what}) at bytes [{self.start}, {self.end})"


def _byte_size(shape, dtype, layout) -> tuple[int, int]:
    """``(elements, bytes)`` of storage for ``shape``: the layout's span when it
    is a Layout (gapped layouts need more than ``prod(shape)``)."""
    count = functools.reduce(lambda a, b: a * b, shape, 1)
    if isinstance(layout, Layout):
        count = int(layout.span())
    bits = DataType(dtype).bits * DataType(dtype).lanes
    return count, (count * bits + 7) // 8


def _past(end: int, size) -> bool:
    """Whether byte ``end`` is provably past a pool of ``size`` bytes (an int, or a
    run-time expression: then only when every value it can take is smaller)."""
    if isinstance(size, int):
        return end > size

    return tvm.sym.Analyzer().can_prove(size < end)


class DynamicSharedPool:
    """The dynamic shared memory of one kernel and the tensors carved out of it.

    Created by ``T.device_entry`` for a launch with ``dynamic_smem_bytes > 0``;
    it emits the pool allocation into the current IRBuilder frame.

    Parameters
    ----------
    size : int | PrimExpr
        The declared ``dynamic_smem_bytes``, in bytes.  A run-time size (an
        integer expression of the kernel's parameters) is the pool's extent:
        apache-tvm then computes the launch's size from it.  Carve-outs are
        checked against it where it is provable; the rest (the size is at
        least :attr:`high_water`) is checked by :class:`tvm_tirx.Kernel`
        before each launch (:mod:`tvm_tirx.build.launch_sizes`).
    """

    def __init__(self, size):
        self.size = size
        extent = 0 if isinstance(size, int) else size
        self.buffer = _ir.alloc_buffer((extent,), "uint8", scope="shared.dyn", align=POOL_ALIGN)
        IRBuilder.name(POOL_NAME, self.buffer)
        self.carve_outs: list[_CarveOut] = []
        self.high_water = 0  # first byte after every carve-out so far

    def carve(self, shape, dtype="float32", *, align=0, layout="default", offset=None, alias=False):
        """Declare a ``shared.dyn`` tensor at a byte offset of the pool.

        Parameters
        ----------
        shape : int | tuple[int, ...]
            Logical extents, in elements (static ints).
        dtype : str
            Element dtype.
        align : int
            Alignment of the carve-out's first byte, a power of two in bytes,
            at most :data:`POOL_ALIGN`; ``0`` means the element size.
        layout : "default" | Layout
            Layout of the elements; storage is its span.
        offset : int | None
            Byte offset in the pool.  None: the first byte after every earlier
            carve-out, rounded up to ``align``.  Explicit: a multiple of ``align``.
        alias : bool
            Allow this carve-out to overlap earlier ones (deliberate reuse of
            the same bytes).

        Returns
        -------
        Buffer
            The carve-out (a view of span-sized storage for gapped layouts).

        Raises
        ------
        TileError
            ``align`` not a power of two, below the element size or above
            :data:`POOL_ALIGN`; ``offset`` negative or not a multiple of
            ``align``; bytes past the declared ``dynamic_smem_bytes`` (for a
            run-time size: provably past every size it can take); an
            overlap with an earlier carve-out (both named) without ``alias=True``.
        """
        shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
        elem_bytes = max(DataType(dtype).bits * DataType(dtype).lanes // 8, 1)
        align = align or elem_bytes
        count, nbytes = _byte_size(shape, dtype, layout)
        what = f"{shape} {dtype}"
        self._require_align(align, elem_bytes, what)
        start = self._start(offset, align, what)
        end = start + nbytes
        if _past(end, self.size):
            raise TileError(
                "",
                "carve-out past the declared dynamic shared memory",
                expected=f"bytes within [0, {self.size}) (LaunchConfig(dynamic_smem_bytes={self.size}))",
                found=f"{what} of {nbytes} bytes at bytes [{start}, {end})",
            )
        if not alias:
            self._require_disjoint(start, end, what)
        buf = self._declare(shape, dtype, count, layout, start, align)
        self.carve_outs.append(_CarveOut(buf, start, end, what))
        self.high_water = max(self.high_water, end)
        return buf

    def _require_disjoint(self, start, end, what):
        for other in self.carve_outs:
            if start < other.end and other.start < end:
                raise TileError(
                    "",
                    "overlapping dynamic shared memory carve-outs",
                    expected="disjoint byte ranges, or alias=True to reuse the bytes on purpose",
                    found=f"{what} at bytes [{start}, {end}) overlaps {other.describe()}",
                )

    @staticmethod
    def _require_align(align, elem_bytes, what):
        if not isinstance(align, int) or align < elem_bytes or align > POOL_ALIGN or align & (align - 1):
            raise TileError(
                "",
                "carve-out alignment",
                expected=f"a power of two in bytes within [{elem_bytes}, {POOL_ALIGN}] (element size .. pool alignment)",
                found=f"align={align!r} for {what}",
            )

    def _start(self, offset, align, what) -> int:
        if offset is None:
            return -(-self.high_water // align) * align
        if not isinstance(offset, int) or offset < 0 or offset % align:
            raise TileError(
                "",
                "carve-out offset",
                expected=f"a byte offset >= 0 and a multiple of align={align}",
                found=f"offset={offset!r} for {what}",
            )
        return offset

    def _declare(self, shape, dtype, count, layout, start, align):
        kwargs = {"data": self.buffer.data, "byte_offset": start, "scope": "shared.dyn", "align": align}
        if count != functools.reduce(lambda a, b: a * b, shape, 1):
            # apache-tvm sizes a buffer by prod(shape); a gapped layout needs its span.
            storage = _ir.decl_buffer((count,), dtype, **kwargs)
            return storage.view(*shape, layout=layout)
        return _ir.decl_buffer(shape, dtype, layout=layout, **kwargs)
