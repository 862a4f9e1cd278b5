"""Where A and B lie: K-major or MN-major, in global memory and in the shared ring.

An operand of the GEMM is K-major when K is its innermost (contiguous) axis: A ``(m, k)``
and B ``(n, k)`` row-major, the "TN" GEMM ``A @ B^T``.  It is MN-major when M (for A) or N
(for B) is innermost: A stored ``(k, m)``, B stored ``(k, n)`` (``torch.matmul(a, b)`` with
a row-major ``b`` is K-major A and N-major B, the "NN" GEMM).

Each stage of the ring holds an operand's ``rows`` (M or N) by ``bk`` (K) tile:

* K-major: ``(rows, bk)``, rows of 128 bytes, one TMA box per stage;
* MN-major: ``(rows / 64, bk, 64)``, 64-element (128-byte) column chunks of ``bk``
  K-rows each, one TMA box per chunk.

Both take the 128-byte swizzle, so ``wgmma`` reads them through its K-major or MN-major
canonical layout (PTX ISA 9.7.15.5.1.2; MN-major with the transpose immediates, which exist
for f16/bf16 only: 8-bit inputs must be K-major).  The wgmma family derives both
descriptors from the views this module gives (LBO 8192 bytes between MN chunks, SBO 1024
between 8-row K groups for the MN-major form).
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm.script import tirx as T

from ...tile.families.tma import swizzled_layout

__all__ = ["MAJORS", "CHUNK", "Operand", "check_major"]

#: each operand's accepted ``*_major`` values: K innermost, or its M / N innermost
MAJORS = {"A": ("k", "m"), "B": ("k", "n")}
#: MN elements per 128-byte swizzle row of an MN-major stage (16-bit types)
CHUNK = 64


@dataclass(frozen=True)
class Operand:
    """One operand's place: ``name`` ``"A"`` or ``"B"``, ``major`` ``"k"`` or its MN
    axis (``"m"``/``"n"``), ``rows`` of M or N per stage, ``bk`` K elements per stage,
    ``dtype`` the input dtype."""

    name: str
    major: str
    rows: int
    bk: int
    dtype: str

    @property
    def k_major(self) -> bool:
        """Whether K is innermost."""
        return self.major == "k"

    def global_shape(self, mn, k) -> tuple:
        """The tensor's shape in global memory: ``(mn, k)`` K-major, else ``(k, mn)``."""
        return (mn, k) if self.k_major else (k, mn)

    def stage_shape(self, stages: int) -> tuple:
        """The ring's shape: ``(stages, rows, bk)`` or ``(stages, rows / 64, bk, 64)``."""
        return (stages, self.rows, self.bk) if self.k_major else (stages, self.rows // CHUNK, self.bk, CHUNK)

    def ring_layout(self, stages: int):
        """The ring's layout: the 128-byte swizzled image the TMA writes."""
        return swizzled_layout(self.stage_shape(stages), self.dtype, 3)

    def boxes(self, rows: int) -> int:
        """TMA boxes that load ``rows`` MN-rows of one stage: 1 K-major, else ``rows / 64``."""
        return 1 if self.k_major else rows // CHUNK

    def box(self, ring, s, row0, rows: int, j):
        """Box ``j`` of the ``rows`` MN-rows from ``row0`` of stage ``s``: its shared view."""
        if self.k_major:
            return ring.sub[s, row0 : row0 + rows, :]
        return ring.sub[s, row0 // CHUNK + j]

    def coords(self, mn0, row0, kt, j) -> tuple:
        """Box ``j``'s global coordinates: tile origin ``mn0`` (M or N), ``row0`` MN-rows
        into the tile, K tile ``kt``."""
        if self.k_major:
            return (mn0 + row0, kt * self.bk)
        return (kt * self.bk, mn0 + row0 + j * CHUNK)

    def mma_view(self, ring, s, row0, rows: int, kstep: int):
        """Rows ``row0 .. row0 + rows`` of stage ``s`` as wgmma's operand: ``(bk / kstep,
        rows, kstep)`` for B (repeat over the instruction's K steps, MN, K), ``(1, bk /
        kstep, rows, kstep)`` for A (one group)."""
        ksteps = self.bk // kstep
        lead = (1,) if self.name == "A" else ()
        if self.k_major:
            order = (0, 2, 1, 3) if lead else (1, 0, 2)
            return ring.sub[s, row0 : row0 + rows, :].view(*lead, rows, ksteps, kstep).permute(*order)
        chunks, first = rows // CHUNK, row0 // CHUNK
        view = ring.sub[s, first : first + chunks].view(chunks, ksteps, kstep, CHUNK).permute(1, 0, 3, 2)
        return view.view(*lead, ksteps, rows, kstep)


def check_major(name: str, major, in_dtype: str):
    """``major`` is one of :data:`MAJORS` ``[name]``; MN-major needs 16-bit inputs.

    Raises
    ------
    ValueError
        Anything else, naming the option and what was found.
    """
    option = f"{name.lower()}_major"
    if major not in MAJORS[name]:
        raise ValueError(f"make_gemm: {option} must be one of {list(MAJORS[name])} (the innermost axis of "
                         f"{name}), found {major!r}")
    if major != "k" and in_dtype != "bfloat16":
        raise ValueError(f"make_gemm: {option}={major!r} needs in_dtype='bfloat16': wgmma reads MN-major tiles "
                         f"through its transpose immediates, which exist for 16-bit types only (PTX ISA "
                         f"9.7.15.5.1.2), found {in_dtype!r}")
