"""The tile kernel's fixed geometry: the CTA tile, the widths a tile may have, the dtypes,
the hardware limits the checks enforce, and the shared memory a ring of a given depth
takes (:func:`gemm_smem_bytes`, :func:`deepest_ring`).  :mod:`.config` re-exports every
name; the options and their checks live there."""

from __future__ import annotations

from ..parts import epilogue as parts_epilogue

__all__ = ["BM", "BN", "BLOCK_NS", "BK_BYTES", "WG_M", "CONSUMERS", "INPUTS", "OUTPUTS", "SMEM_LIMIT", "TMA_STRIDE",
           "MAX_SIZE", "MAX_ELEMENTS", "BIAS_DTYPES", "ACTIVATIONS", "GLU_ROWS", "GATED_BLOCK_NS", "MAX_STAGES",
           "gemm_smem_bytes", "deepest_ring"]

BM, BN = 128, 256  # rows of C per CTA tile; columns by default (``block_n``)
#: the columns a tile may have (``block_n``): wgmma's N, and a whole number of the bf16
#: epilogue's 64-column TMA boxes (PTX ISA 9.7.15.5: N is a multiple of 8 up to 256).
#: 192 (three boxes) fills the SMs of shapes whose 256-column tiles leave a short last
#: wave (3072^2: 288 tiles of 128 x 256 on 132 SMs, 384 of 128 x 192)
BLOCK_NS = (64, 128, 192, 256)
BK_BYTES = 128  # bytes of K per row of a stage: one 128-byte swizzle row (64 bf16, 128 fp8)
#: input dtype -> (wgmma opcode with ``{n}`` for the tile's columns, K per instruction) (PTX ISA 9.7.15.5)
INPUTS = {
    "bfloat16": ("wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16", 16),
    "float8_e4m3fn": ("wgmma.mma_async.sync.aligned.m64n{n}k32.f32.e4m3.e4m3", 32),
}
OUTPUTS = ("bfloat16", "float32")
WG_M = 64  # rows of C per consumer warpgroup
CONSUMERS = 2
SMEM_LIMIT = 227 * 1024  # dynamic shared memory one sm_90 CTA may take, bytes
TMA_STRIDE = 16  # TMA: every global stride but the innermost is a multiple of 16 bytes (PTX ISA 5.5.5)
#: The largest ``m`` (and ``n``, ``k``): row indices and TMA coordinates are int32, and a
#: tile's first row ``128 * t`` must not wrap past it.
MAX_SIZE = 2**31 - 129
#: Elements a static A, B or C may hold: apache-tvm computes a static buffer's size in int32.
MAX_ELEMENTS = 2**31 - 1
#: the Bias vector's dtypes (None: no bias) and the fused activations (the epilogue chain's
#: stages, :mod:`tvm_tirx.kernels.parts.epilogue`)
BIAS_DTYPES = (None, *parts_epilogue.BIAS_DTYPES)
ACTIVATIONS = (None, *parts_epilogue.ACTIVATIONS)
#: A gated GEMM's B interleaves gate and up rows in groups of this many (one wgmma
#: fragment column group, ``n8``): rows ``16 q .. 16 q + 7`` are gate rows ``8 q ..`` and
#: rows ``16 q + 8 .. 16 q + 15`` the matching up rows (the epilogue's ``Gate`` stage,
#: :mod:`tvm_tirx.kernels.parts.epilogue`)
GLU_ROWS = 8
#: the tile widths a gated GEMM may take: whole 64-column output boxes (block_n / 2)
GATED_BLOCK_NS = (128, 256)


def gemm_smem_bytes(stages: int, out_dtype: str, block_n: int = BN, gated: bool = False) -> int:
    """Dynamic shared memory of :func:`~tvm_tirx.kernels.gemm.make_gemm`, in bytes.

    ``stages`` rings of A (128 rows) and B (``block_n`` rows) of 128 bytes each, the bf16
    epilogue tiles (``128 * out_columns * 2`` bytes, ``out_columns`` = ``block_n``, or
    ``block_n / 2`` when ``gated``: 64 KiB for 256 columns; a token 1 KiB for float32
    output), the mbarriers and 1 KiB for aligning the swizzled tiles.
    """
    ring = stages * (BM + block_n) * BK_BYTES
    out_columns = block_n // 2 if gated else block_n
    epilogue = CONSUMERS * WG_M * out_columns * 2 if out_dtype == "bfloat16" else 1024
    return ring + epilogue + 16 * stages + 1024


#: the deepest ring worth having (deeper measured no faster on the H200: 128 x 64 with 8 stages)
MAX_STAGES = 8


def deepest_ring(block_n: int, out_dtype: str, gated: bool = False) -> int:
    """The most stages (at most :data:`MAX_STAGES`) whose ring and epilogue fit in the
    227 KiB of shared memory a CTA may take (:func:`gemm_smem_bytes`): 3 for ``block_n``
    256 with bf16 output, 4 for 192, 6 for 128, 8 for 64 (4, 5, 7, 8 with float32
    output); a gated GEMM's half-width epilogue tiles leave room for 4 at 256 with bf16
    output."""
    stages = MAX_STAGES
    while stages > 1 and gemm_smem_bytes(stages, out_dtype, block_n, gated) > SMEM_LIMIT:
        stages -= 1
    return stages
