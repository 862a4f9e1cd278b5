"""The tile table: which tile (``block_n``, ``block_m``) and ring depth a GEMM of a given shape gets.

A 128 x 256 tile is the fastest per tile, but a shape with few tiles leaves SMs idle
(``128 x 8192``: 32 tiles on 132 SMs).  Narrower tiles make more of them at a lower
rate each; cooperative 256-row tiles (:data:`COOPERATIVE_RATE`) fewer.
:func:`choose_tile` weighs the two: for each tile of :data:`TILE_RATE` (128 rows),
:data:`COOPERATIVE_RATE` (256 rows) and :data:`ROW64_RATE` (64 rows) it takes the share of the launched waves' CTA slots
that hold a tile, ``tiles / (ceil(tiles / sms) * sms)``, times the tile's relative rate
and the share of the tiles' elements inside C (``n = 40`` fills 40 of 64 columns, or of
256; ``m = 200`` 200 of 256 rows), and keeps the best.  The rates and the depths come
from ``python bench/gemm.py --tiles`` on the H200
(every tile variant on every shape of the suite, compiled in parallel by
:func:`tvm_tirx.testing.sweep`): rerun it on another GPU and update the table.

Measured on the H200 (December 2026, bf16 -> bf16, TFLOP/s): a 128 x 256 tile runs at
~790 on large shapes, 128 x 128 at ~720 (0.91), 128 x 64 at ~430 (0.55); at ``m = 128``
the narrow tiles win (``128 x 8192 x 8192``: 161 / 361 / 427), at ``128 x 57344`` the
wide one does (491 / 481 / 432).
"""

from __future__ import annotations

from .config import BM, GATED_BLOCK_NS, MAX_STAGES, OUTPUTS, deepest_ring

__all__ = ["TILE_RATE", "COOPERATIVE_RATE", "ROW64_RATE", "FUSED_COOPERATIVE_N", "MAX_STAGES", "SMS", "choose_tile",
           "deepest_ring", "tile_rate", "wave_score"]

#: block_n -> the tile's rate relative to 128 x 256 when every SM is busy (H200, bench/gemm.py
#: --tiles).  :func:`choose_tile` picks among these widths only: a width of
#: :data:`~.config.BLOCK_NS` joins the table once it has been measured (``make_gemm`` and
#: :func:`~.planner.override` take every width of ``BLOCK_NS``).
#: 192 measured 2026-12-05 (``bench/gemm.py --tiles --runs 20``: 0.94 of 128 x 256 on
#: 5000^3 and 8192 x 8192 x 4096; it was the fastest tile at 3072^3, 686 against 535 TFLOP/s,
#: and 1536^3, 438 against 356).  176, 160 and 144 measured 0.86, 0.84 and 0.83 there and
#: lost to 192 on every shape of the run (their epilogue stores per thread): not taken.
TILE_RATE = {256: 1.0, 192: 0.94, 128: 0.91, 64: 0.55}
#: block_n -> the rate of the cooperative 256 x block_n tile (``block_m=256``) relative to
#: 128 x 256, measured on an H100 (2026-12-05, ``bench/gemm.py --tiles --only 256x``): 256 x 128
#: 0.95 and 256 x 160 0.92 (bench's rates over shapes of >= 4 full waves); 256 x 192 ran at
#: 1.004 and 0.988 of 128 x 256 on 6144^3 and 8192 x 8192 x 4096, taken as 0.98, below both, so
#: that it wins on wave fill only (its 1.22 on
#: 5000^3 is not a rate: every tile there runs at about half its speed, 256 x 192 least
#: badly, because rows of 10000 bytes are not a multiple of 64: the operators pad such K,
#: :func:`~.planner.k_padding`).  Where they win: few waves of 128-row tiles (1024 x 10240 x 8192:
#: 256 x 160 at 712 TFLOP/s against 652 for 128 x 256).
COOPERATIVE_RATE = {192: 0.98, 160: 0.92, 128: 0.95}
#: block_n -> the rate of the 64-row tile (``block_m=64``, one consumer warpgroup) relative to
#: 128 x 256, fitted to where it won and lost on an H100 (2026-12-06, ``bench/gemm.py --tiles
#: --runs 30``, TFLOP/s, 64 x 64 in 8 stages against 128 x 64): 2048 x 256 x 8192 332 against
#: 263, 300 x 1024 x 8192 203 against 151, 512^3 50 against 45 (more CTAs where 128-row tiles
#: leave SMs idle: a rate above 0.28 takes them), 1000^3 113 against 141 (a rate below 0.44
#: leaves it).  Not scored where C is one 128-row tile (m <= 128), where it lost on the same
#: run although the model scores it higher: 100 x 4096 x 4096 141 against 152, 128 x 4096 x
#: 4096 240 against 268 (each W tile read by two CTAs instead of one); where C has at most 64
#: rows the planner takes it outright (:data:`~.planner.DECODE_TILE`)
ROW64_RATE = {64: 0.40}
#: the widest cooperative tile a fused epilogue (bias, activation, residual) takes: ptxas
#: reports no spills for 256 x 128 with bias, GELU and residual, 148 to 408 bytes at 160 and 192
FUSED_COOPERATIVE_N = 128
#: SMs of an H100 SXM / H200 (the CTA slots of one wave: one CTA per SM)
SMS = 132


def tile_rate(block_m: int, block_n: int) -> float:
    """The rate relative to 128 x 256 of a ``block_m`` x ``block_n`` tile of the tables
    (:data:`TILE_RATE`, :data:`COOPERATIVE_RATE`, :data:`ROW64_RATE`).

    Raises
    ------
    KeyError
        A tile the tables do not have."""
    return {BM: TILE_RATE, 256: COOPERATIVE_RATE, 64: ROW64_RATE}[block_m][block_n]


def wave_score(m: int, n: int, block_m: int, block_n: int, rate: float, sms: int, splits: int = 1) -> float:
    """The model's worth of ``block_m x block_n`` tiles of relative ``rate`` on ``C (m,
    n)`` with ``splits`` CTAs per tile: the share of the launched waves' CTA slots that hold
    a CTA, ``ctas / (ceil(ctas / sms) * sms)``, times ``rate`` and the share of the tiles'
    elements inside C (module docstring)."""
    tiles_m, tiles_n = -(-m // block_m), -(-n // block_n)
    ctas = tiles_m * tiles_n * splits
    inside = m / (tiles_m * block_m) * n / (tiles_n * block_n)
    return ctas / (-(-ctas // sms) * sms) * rate * inside


def choose_tile(m: int, n: int, out_dtype: str = "bfloat16", sms: int = SMS, gated: bool = False,
                fused: bool = False) -> dict:
    """``make_gemm`` options ``{"block_n", "stages"}`` for ``C (m, n)``.

    Parameters
    ----------
    m, n : int
        Rows and columns of C (elements, positive).  For a gated GEMM, ``n`` is the
        output's columns; the tiles are scored on B's ``2 n`` rows, among the widths of
        :data:`~tvm_tirx.kernels.gemm.config.GATED_BLOCK_NS`.
    out_dtype : str
        C's dtype, ``"bfloat16"`` or ``"float32"`` (sets how many stages fit).
    sms : int
        SMs of the GPU (one CTA per SM per wave).
    gated : bool
        Whether the GEMM is gated (``make_gemm(gated=True)``).
    fused : bool
        Whether the kernel fuses an epilogue stage (bias, activation, residual): its
        cooperative tiles are then at most :data:`FUSED_COOPERATIVE_N` wide (wider ones
        spill their epilogue's scratch registers, ptxas ``-v``).

    Returns
    -------
    dict
        ``block_n`` from :data:`TILE_RATE`, :data:`COOPERATIVE_RATE` or :data:`ROW64_RATE`
        (ties go to the 128-row tiles, then to the wider), ``stages`` from
        :func:`deepest_ring`, and ``block_m`` 256 or 64 where the cooperative or the
        64-row tile scores best (never for a gated GEMM).

    Raises
    ------
    ValueError
        ``m``, ``n`` or ``sms`` not a positive int; ``out_dtype`` not one of the above.
    """
    for name, value in (("m", m), ("n", n), ("sms", sms)):
        if type(value) is not int or value < 1:  # noqa: E721  (not bool)
            raise ValueError(f"choose_tile: {name} must be a positive int, found {value!r}")
    if out_dtype not in OUTPUTS:
        raise ValueError(f"choose_tile: out_dtype must be one of {list(OUTPUTS)}, found {out_dtype!r}")

    def score(tile) -> float:
        return wave_score(m, n, *tile, sms)

    if gated:  # the accumulator columns: a gate and an up column per output column; 128-row tiles only
        n *= 2
        tiles = [(BM, block_n, TILE_RATE[block_n]) for block_n in sorted(GATED_BLOCK_NS, reverse=True)]
    else:  # ties go to the 128-row tiles, then to the wider, then to the 256- and 64-row ones
        tiles = [(BM, block_n, TILE_RATE[block_n]) for block_n in sorted(TILE_RATE, reverse=True)]
        tiles += [(256, block_n, COOPERATIVE_RATE[block_n]) for block_n in sorted(COOPERATIVE_RATE, reverse=True)
                  if not fused or block_n <= FUSED_COOPERATIVE_N]
        if m > BM:
            tiles += [(64, block_n, ROW64_RATE[block_n]) for block_n in sorted(ROW64_RATE, reverse=True)]
    block_m, block_n, _ = max(tiles, key=score)
    plan = {"block_n": block_n, "stages": deepest_ring(block_n, out_dtype, gated, block_m=block_m)}
    return {**plan, "block_m": block_m} if block_m != BM else plan
