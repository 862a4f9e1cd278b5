"""The register stages of an epilogue chain: ``C = activation(scale * A B^T + bias) + residual``
(or, gated, ``activation(gate) * up``) in a consumer's fp32 accumulators, before the store.

Each stage is a frozen dataclass; :meth:`Stage.params` declares the kernel parameters it
reads and :meth:`Stage.make` gives its macro ``apply(regs, ext, at)`` (a
:class:`~.base.Registers`, the kernel's :class:`~.base.Tensors` and the thread's
:class:`~.base.TilePlace`).  The bias of register ``r`` is ``Bias[bn * block_n + 8 j + 2 t +
e]``, read clamped to the product's last column: a column past C's edge reads the last
bias, and its result is never stored.

A **gated** product (GLU, SwiGLU with ``"silu"``, GeGLU with ``"gelu_tanh"``) multiplies
by B rows that interleave gate and up rows in groups of eight, so a thread's registers ``4
j + q`` (``q < 4``) hold a gate column for even ``j`` and its up column for ``j + 1``;
output register ``4 i + q`` of the ``(64, block_n / 2)`` result is ``activation(gate) *
up`` of registers ``8 i + q`` and ``8 i + 4 + q`` -- the standard fragment map of a
``block_n / 2``-column accumulator, which every store stage stores as is.

A **residual** (``Residual``, ``(m, n)`` of C's dtype) is added last, in float32: output
register ``4 i + 2 h + e`` reads ``Residual[row, col]`` at the fragment's row ``16 w + 8 h
+ g`` and column ``8 i + 2 t + e``, clamped to ``(m - 1, n - 1)`` like the bias.  With
bf16 output and an even ``n`` the pairs ``(row, 8 i + 2 t + {0, 1})`` are read as one b32
word each into the packed registers (:meth:`Residual.prefetch`, which the kernel issues
before its last ``wgmma.wait_group`` so that the loads hide under the last products) and
widened exactly when added; otherwise each element is read as it is added.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm.script import tirx as T

from ....tile.fragments import accumulator_col, accumulator_row
from ...pairs import make_unpack_pairs
from .activation import Activation
from .base import Geometry, Param, Stage

__all__ = ["Scale", "Bias", "Gate", "Residual", "Activation", "BIAS_DTYPES"]

#: the dtypes a Bias vector may have (converted to fp32 when added)
BIAS_DTYPES = ("bfloat16", "float32")


@dataclass(frozen=True)
class Scale(Stage):
    """Multiply the accumulators by ``Scales[0] * Scales[1]`` (fp8 inputs' per-tensor scales of
    A and B), ``mul.rn.f32``; reads ``Scales`` ``(2,)`` float32, 8-byte aligned, which the
    kernel takes after C."""

    def params(self, geometry: Geometry) -> tuple:
        return (Param("Scales", (2,), "float32", 8, after_output=True),)

    def make(self, geometry: Geometry):
        count = geometry.block_n // 2

        @T.macro
        def scale(regs, ext, at):  # pylint: disable=unused-argument
            regs.factor[0] = ext.scales[0] * ext.scales[1]
            T.cuda.tile.apply(T.ptx["mul.rn.f32"], regs.acc.local().view(count, 1), regs.acc.local().view(count, 1),
                              regs.factor[0])

        return scale


@dataclass(frozen=True)
class Bias(Stage):
    """Add ``Bias[col]`` (converted to fp32) to every row of the accumulators.

    Parameters
    ----------
    dtype : str
        The ``Bias`` vector's dtype, one of :data:`BIAS_DTYPES`; it is ``(product_n,)``
        (indexed like B's rows: interleaved like them when gated), before C.

    Raises
    ------
    ValueError
        ``dtype`` not in :data:`BIAS_DTYPES`.
    """

    dtype: str

    def __post_init__(self):
        if self.dtype not in BIAS_DTYPES:
            raise ValueError(f"Bias: dtype must be one of {list(BIAS_DTYPES)}, found {self.dtype!r}")

    def params(self, geometry: Geometry) -> tuple:
        return (Param("Bias", (geometry.product_n,), self.dtype, 0),)

    def make(self, geometry: Geometry):
        count, block_n, rows = geometry.block_n // 2, geometry.block_n, geometry.product_n

        @T.macro
        def add_bias(regs, ext, at):
            x = regs.acc.local()
            for r in T.unroll(count):
                col = accumulator_col(at.bn * block_n, at.tid, r // 4, r % 2)
                x[r] = x[r] + T.Cast("float32", ext.bias[T.min(col, rows - 1)])

        return add_bias


@dataclass(frozen=True)
class Gate(Stage):
    """A gated linear unit: ``out = activation(gate) * up`` (the module docstring's column
    pairs; ``gate * up`` without an activation).

    Parameters
    ----------
    activation : Activation or None
        Applied to the gate columns.

    Raises
    ------
    ValueError
        (from :meth:`make`) the geometry is not gated (``out_block_n != block_n / 2``).
    """

    activation: Activation | None = None

    def make(self, geometry: Geometry):
        if not geometry.gated:
            raise ValueError(f"Gate: the tile's accumulators must hold two columns per output column "
                             f"(out_block_n = block_n / 2), found block_n={geometry.block_n}, "
                             f"out_block_n={geometry.out_block_n}")
        count = geometry.block_n // 2
        activate = self.activation.macro(geometry.out_block_n // 2) if self.activation else None

        @T.macro
        def gate(regs, ext, at):  # pylint: disable=unused-argument
            x, y = regs.acc.local(), regs.out.local()
            for r in T.unroll(count // 2):  # output register 4 i + q <- gate 8 i + q; its up register is 8 i + 4 + q
                y[r] = x[r // 4 * 8 + r % 4]
            if activate is not None:
                activate(y, regs.tmp)
            for r in T.unroll(count // 2):
                y[r] = y[r] * x[r // 4 * 8 + 4 + r % 4]

        return gate


@dataclass(frozen=True)
class Residual(Stage):
    """Add ``Residual[row, col]`` (``(m, n)`` of C's dtype, before C) in float32 (module
    docstring); 4-byte aligned when read as pairs (:meth:`as_pairs`)."""

    @staticmethod
    def as_pairs(geometry: Geometry) -> bool:
        """Whether the residual is read as b32 pairs: bf16 output with a static even ``n``."""
        return geometry.out_dtype == "bfloat16" and isinstance(geometry.n, int) and geometry.n % 2 == 0

    def params(self, geometry: Geometry) -> tuple:
        align = 4 if self.as_pairs(geometry) else 0
        return (Param("Residual", (geometry.m, geometry.n), geometry.out_dtype, align),)

    def prefetch(self, geometry: Geometry):
        """The macro ``prefetch(regs, ext, at)``: the thread's residual pairs of tile ``(bm,
        bn)`` into ``regs.words`` (word ``2 i + h``: row ``16 w + 8 h + g``, columns ``8 i + 2
        t`` and ``+ 1``; one ``ld.global.b32`` each, the row clamped to ``m - 1`` and the word
        to ``n / 2 - 1``); None unless :meth:`as_pairs`."""
        if not self.as_pairs(geometry):
            return None
        g = geometry
        nwords, half_bn, m, half_n = g.out_block_n // 4, g.out_block_n // 2, g.m, g.n // 2

        @T.macro
        def prefetch(regs, ext, at):
            rw = ext.residual.view("uint32")
            for r in T.unroll(nwords):
                row = T.min(accumulator_row(g.row0(at), at.tid, r % 2), m - 1)
                col = T.min(at.bn * half_bn + r // 2 * 4 + at.tid % 4, half_n - 1)
                T.cuda.tile.apply(T.ptx["ld.global.b32"], regs.words.local().view(nwords, 1).sub[r, :],
                                  rw.sub[T.Cast("int64", row), col : col + 1])

        return prefetch

    def make(self, geometry: Geometry):
        g = geometry
        count, out_bn, m, n = g.out_block_n // 2, g.out_block_n, g.m, g.n
        unpack = make_unpack_pairs("bfloat16", count)

        @T.macro
        def add_prefetched(regs, ext, at):  # pylint: disable=unused-argument
            y = regs.out.local()
            unpack(regs.tmp, regs.words.local().view(count // 2, 1))
            for r in T.unroll(count):
                y[r] = y[r] + regs.tmp[r]

        @T.macro
        def add_residual(regs, ext, at):
            y = regs.out.local()
            for r in T.unroll(count):
                row = T.min(accumulator_row(g.row0(at), at.tid, r // 2 % 2), m - 1)
                col = T.min(accumulator_col(at.bn * out_bn, at.tid, r // 4, r % 2), n - 1)
                y[r] = y[r] + T.Cast("float32", ext.residual[T.Cast("int64", row), col])

        return add_prefetched if self.as_pairs(geometry) else add_residual
