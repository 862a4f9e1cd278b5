"""The values an epilogue chain's stages share: the tile's geometry, the kernel parameters a
stage declares, and the named tuples its macros take (registers, tensors, the thread's place).

A consumer warpgroup holds ``blocks`` (1, or 2 in a 256-row tile) blocks of ``rows`` (64)
rows of a ``tile_m`` (128 or 256) x ``block_n`` tile of the product, each block in its
own fp32 accumulators laid out by the wgmma fragment map (PTX ISA 9.7.15.5.1.1): thread
``32 w + 4 g + t`` holds register ``r = 4 j + 2 h + e`` at row ``16 w + 8 h + g`` and
column ``8 j + 2 t + e`` of the block's 64 rows
(:func:`tvm_tirx.tile.fragments.accumulator_row` / ``accumulator_col``).  The chain runs
once per block (:class:`TilePlace` ``sub`` says which).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tvm.script import tirx as T

__all__ = ["Geometry", "Param", "Registers", "Stage", "Store", "Tensors", "TilePlace"]


class Param(NamedTuple):
    """A kernel parameter (a global tensor) that an epilogue stage reads.

    Attributes
    ----------
    name : str
        The parameter's name in the kernel's signature (``"Bias"``, ``"Residual"``,
        ``"Scales"``); its lower-case form is the :class:`Tensors` field the stage reads.
    shape : tuple
        Its shape: Python ints or int32 run-time extents (``T.dynamic``).
    dtype : str
        Its element type.
    align : int
        Bytes the base pointer is promised to be aligned to (0: none; checked at each call).
    after_output : bool
        Whether the kernel takes it after its output ``C`` (fp8's ``Scales``) instead of
        before it (inputs first, as Relax's ``call_tir`` passes them).
    """

    name: str
    shape: tuple
    dtype: str
    align: int = 0
    after_output: bool = False

    def spec(self):
        """The parameter's annotation, ``T.Tensor(shape, dtype, align=align)``."""
        return T.Tensor(self.shape, self.dtype, align=self.align)


class Registers(NamedTuple):
    """A consumer thread's registers that the epilogue reads and writes (``T.alloc_local``).

    Attributes
    ----------
    acc : Buffer
        ``(rows, block_n)`` float32 accumulators (the wgmma fragment layout).
    out : Buffer
        ``(rows, out_block_n)`` float32: what the store stage stores (``acc`` itself unless
        gated, where it receives ``activation(gate) * up``).
    words : Buffer
        ``(rows, out_block_n / 2)`` uint32, packed bf16 pairs (the residual's prefetched
        pairs, then the rounded output).
    tmp : Buffer
        ``(out_block_n / 2,)`` float32 scratch registers (activations, the residual).
    factor : Buffer
        ``(1,)`` float32 (fp8's ``Scales[0] * Scales[1]``).
    """

    acc: object
    out: object
    words: object
    tmp: object
    factor: object


class Tensors(NamedTuple):
    """The kernel parameters the stages read, by :attr:`Param.name` in lower case (None:
    the chain has no stage that reads it): ``bias`` ``Bias``, ``residual`` ``Residual``,
    ``scales`` ``Scales``."""

    bias: object = None
    residual: object = None
    scales: object = None


class TilePlace(NamedTuple):
    """Where a consumer thread works: output tile ``(bm, bn)`` (row and column tile of C,
    int32 expressions), its thread index ``tid`` (0 .. 383), its consumer warpgroup ``c``
    (0 or 1) and ``sub``, which of the warpgroup's :attr:`Geometry.blocks` 64-row blocks
    (0, or 1 in a 256-row tile; a Python int): rows ``64 (c * blocks + sub) ..`` of the
    tile (:meth:`Geometry.row0`); ``split``, the CTA's split of K where the kernel splits
    it (:mod:`~tvm_tirx.kernels.parts.split_k`), else 0."""

    bm: object
    bn: object
    tid: object
    c: object
    sub: int = 0
    split: object = 0


@dataclass(frozen=True)
class Geometry:
    """The output C and the tile an epilogue works on.

    Attributes
    ----------
    m : int or tvm.tirx.Var
        Rows of C (an int32 run-time extent allowed).
    n : int
        Columns of C.
    out_dtype : str
        C's dtype, ``"bfloat16"`` or ``"float32"``.
    block_n : int
        Accumulator columns per tile (wgmma's N).
    out_block_n : int
        Columns of C per tile: ``block_n``, or ``block_n / 2`` for a gated product.
    product_n : int
        Columns of the whole product ``A B^T`` (rows of B): ``n``, or more when gated.
    tile_m : int
        Rows of C per CTA tile (128; 256, the cooperative tile; 64, one consumer warpgroup).
    rows : int
        Rows of one block of a consumer warpgroup's accumulators (64, wgmma's M).
    blocks : int
        Blocks of ``rows`` rows per consumer warpgroup: 1, or 2 when two consumers share
        a 256-row tile (each then holds two accumulator sets, one per wgmma of a K step).
    """

    m: object
    n: int
    out_dtype: str
    block_n: int
    out_block_n: int
    product_n: int
    tile_m: int = 128
    rows: int = 64
    blocks: int = 1

    @property
    def gated(self) -> bool:
        """Whether a tile's accumulators hold two columns (gate, up) per output column."""
        return self.out_block_n != self.block_n

    def block(self, at: TilePlace):
        """The 64-row block of its tile that ``at`` works on: ``c * blocks + sub`` (``c``
        for one block per warpgroup: the expression of the 128-row tile, unchanged)."""
        return at.c if self.blocks == 1 else at.c * self.blocks + at.sub

    def row0(self, at: TilePlace):
        """The first row of C that consumer ``at.c`` stores of block ``at.sub`` of tile
        ``at.bm``: ``bm * tile_m + (c * blocks + sub) * rows`` (an int32 expression)."""
        return at.bm * self.tile_m + self.block(at) * self.rows


class Stage:
    """An epilogue stage: what every stage answers (the register stages of :mod:`.stages`
    and :mod:`.activation`; the store stages of :mod:`.stores` are :class:`Store`)."""

    #: whether the stage stores C (the chain's last stage) rather than changing registers
    stores = False

    def params(self, geometry: Geometry) -> tuple:  # pylint: disable=unused-argument
        """The kernel parameters (:class:`~.base.Param`) the stage reads, in order (none)."""
        return ()

    def prefetch(self, geometry: Geometry):  # pylint: disable=unused-argument
        """The macro ``prefetch(regs, ext, at)`` that loads what the stage reads ahead of
        the last products (the kernel issues it before its last ``wgmma.wait_group``), or
        None (nothing to load ahead)."""
        return None

    def make(self, geometry: Geometry):
        """The stage's macro for ``geometry``: ``apply(regs, ext, at)`` (``regs`` the
        :class:`Registers`, ``ext`` the kernel's :class:`Tensors`, ``at`` the thread's
        :class:`TilePlace`), or for a :class:`Store` ``store(C, regs, so, at)``.

        Raises
        ------
        NotImplementedError
            Always: each stage defines its own.
        ValueError
            (in the stages) ``geometry`` does not suit the stage.
        """
        raise NotImplementedError


class Store(Stage):
    """A store stage: the last of a chain, it writes ``regs.out`` into C."""

    stores = True

    def drain(self, geometry: Geometry):  # pylint: disable=unused-argument
        """The macro ``drain(tid)`` the kernel runs once after its last tile (the TMA
        store's wait for its last read of shared memory), or None (nothing to wait for)."""
        return None
