"""The tile kernel's fixed geometry: the CTA tile, the widths a tile may have, the dtypes,
the hardware limits the checks enforce, and the shared memory a ring of a given depth
takes (:func:`gemm_smem_bytes`, :func:`deepest_ring`).  :mod:`.config` re-exports every
name; the options and their checks live there."""

from __future__ import annotations

from ..parts import epilogue as parts_epilogue

__all__ = ["BM", "BN", "BLOCK_MS", "COOP_MAX_BLOCK_N", "BLOCK_NS", "BLOCK_N_STEP", "BLOCK_N_MIN", "TMA_BOX_N", "tma_epilogue", "BK_BYTES", "WG_M",
           "CONSUMERS", "consumers", "INPUTS", "OUTPUTS", "SMEM_LIMIT", "TMA_STRIDE", "MAX_SIZE", "MAX_ELEMENTS",
           "BIAS_DTYPES", "ACTIVATIONS", "GLU_ROWS", "GATED_BLOCK_NS", "MAX_STAGES",
           "gemm_smem_bytes", "deepest_ring"]

BM, BN = 128, 256  # rows of C per CTA tile by default (``block_m``); columns by default (``block_n``)
#: the rows a tile may have (``block_m``): 128, each consumer warpgroup 64 rows (one
#: ``wgmma.m64`` per K step), or 256, the cooperative tile: each consumer warpgroup 128 rows,
#: two ``wgmma.m64`` per K step into two sets of accumulators (cuBLAS's 256 x 128 and
#: 256 x 192 tiles).  A stage then holds 256 rows of A for the same rows of B, so the tile
#: does twice the products per byte of B loaded.  Or 64, one consumer warpgroup: decode's
#: tile (cuBLAS's 64 x 32 at m = 64), whose A box has no rows past C's when m is 64 (rows
#: past the edge of a tensor cost the TMA: on an H100, 2026-12-06, 128 x 32 tiles took 30 us
#: at 64 x 4096 x 4096 against 17 us at 128 x 4096 x 4096, the same boxes, half of them past m)
BLOCK_MS = (64, 128, 256)
#: the widest 256-row tile: a consumer thread holds ``2 * block_n / 2`` fp32 accumulators
#: (two 64-row blocks), 192 at ``block_n=192``, which leaves 40 of the consumers' 232
#: registers (``setmaxnreg``) for addresses and the epilogue; ``block_n=256`` would take all
#: 256 registers a thread may have
COOP_MAX_BLOCK_N = 192
#: the columns a tile may have (``block_n``): wgmma's N, a multiple of 8 up to 256 (PTX ISA
#: 9.7.15.5), from 16: the widths below 64 are decode's (C of one row tile, many narrow
#: column tiles over the whole K, cuBLAS's 64 x 32 tile at m = 64).  Widths in steps of 8
#: let the tile count fit the SMs (DeepGEMM's 112 and 160, cuBLAS's 152): 3072^2 makes
#: 288 tiles of 128 x 256 on 132 SMs (the last wave 18% full), 384 of 128 x 192.  The
#: bf16 epilogue stores whole 64-column boxes by TMA (:data:`TMA_BOX_N`); other widths
#: store per thread (the epilogue chain's ``GuardedStore``)
BLOCK_N_STEP, BLOCK_N_MIN = 8, 16
BLOCK_NS = tuple(range(BLOCK_N_MIN, 257, BLOCK_N_STEP))
#: the columns of one TMA store box of the bf16 epilogue (64 bf16: one 128-byte swizzle row)
TMA_BOX_N = 64
BK_BYTES = 128  # bytes of K per row of a stage: one 128-byte swizzle row (64 bf16, 128 fp8)
#: input dtype -> (wgmma opcode with ``{n}`` for the tile's columns, K per instruction) (PTX ISA 9.7.15.5)
INPUTS = {
    "bfloat16": ("wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16", 16),
    "float8_e4m3fn": ("wgmma.mma_async.sync.aligned.m64n{n}k32.f32.e4m3.e4m3", 32),
}
OUTPUTS = ("bfloat16", "float32")
WG_M = 64  # rows of C per consumer warpgroup
CONSUMERS = 2  # consumer warpgroups of a 128- or 256-row tile (one in a 64-row tile: :func:`consumers`)
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


def consumers(block_m: int) -> int:
    """Consumer warpgroups of a ``block_m``-row tile: 1 for 64 rows, else :data:`CONSUMERS`."""
    return 1 if block_m == WG_M else CONSUMERS


def tma_epilogue(out_dtype: str, block_n: int, gated: bool = False) -> bool:
    """Whether a tile's output goes through shared memory and TMA stores: bf16 output whose
    tile is whole :data:`TMA_BOX_N`-column boxes (``block_n``, or ``block_n / 2`` gated)."""
    return out_dtype == "bfloat16" and (block_n // 2 if gated else block_n) % TMA_BOX_N == 0


def gemm_smem_bytes(stages: int, out_dtype: str, block_n: int = BN, gated: bool = False, block_m: int = BM,
                    splits: int = 1) -> int:
    """Dynamic shared memory of :func:`~tvm_tirx.kernels.gemm.make_gemm`, in bytes.

    ``stages`` rings of A (``block_m`` rows) and B (``block_n`` rows) of 128 bytes each,
    the bf16 epilogue tiles of :func:`tma_epilogue` (``128 * out_columns * 2`` bytes,
    ``out_columns`` = ``block_n``, or ``block_n / 2`` when ``gated``: 64 KiB for 256
    columns; a token 1 KiB for the per-thread stores), the mbarriers and 1 KiB for
    aligning the swizzled tiles.  The epilogue tiles are one 64-row slot per consumer
    warpgroup whatever ``block_m``: a warpgroup of a 256-row tile stores its two 64-row
    blocks through its slot one after the other (256 x 128 bf16 fits 4 stages:
    ``4 * 384 * 128 + 32768 + 64 + 1024`` = 230464 bytes).  With ``splits`` above 1, 16
    bytes more: the split-K count's shared word.
    """
    ring = stages * (block_m + block_n) * BK_BYTES
    out_columns = block_n // 2 if gated else block_n
    epilogue = consumers(block_m) * WG_M * out_columns * 2 if tma_epilogue(out_dtype, block_n, gated) else 1024
    return ring + epilogue + 16 * stages + 1024 + (16 if splits > 1 else 0)


#: the deepest ring worth having (deeper measured no faster on the H200: 128 x 64 with 8 stages)
MAX_STAGES = 8


def deepest_ring(block_n: int, out_dtype: str, gated: bool = False, block_m: int = BM) -> int:
    """The most stages (at most :data:`MAX_STAGES`) whose ring and epilogue fit in the
    227 KiB of shared memory a CTA may take (:func:`gemm_smem_bytes`): 3 for ``block_n``
    256 with bf16 output, 4 for 192, 6 for 128, 8 for 64 (4, 5, 7, 8 with float32
    output); a gated GEMM's half-width epilogue tiles leave room for 4 at 256 with bf16
    output.  A 256-row tile (``block_m=256``) fits 4 at ``block_n`` 128 and 160, 3 at
    192 (bf16 output; 4 at each with float32)."""
    stages = MAX_STAGES
    while stages > 1 and gemm_smem_bytes(stages, out_dtype, block_n, gated, block_m) > SMEM_LIMIT:
        stages -= 1
    return stages
