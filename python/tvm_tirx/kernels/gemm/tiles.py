"""The tile table: which ``block_n`` (and ring depth) a GEMM of a given shape gets.

A 128 x 256 tile is the fastest per tile, but a shape with few tiles leaves SMs idle
(``128 x 8192``: 32 tiles on 132 SMs).  Narrower tiles make more of them at a lower
rate each.  :func:`choose_tile` weighs the two: for each ``block_n`` of
:data:`TILE_RATE` it takes the share of the launched waves' CTA slots that hold a tile,
``tiles / (ceil(tiles / sms) * sms)``, times the tile's relative rate and the share of
the tiles' columns inside C (``n = 40`` fills 40 of 64 columns, or of 256), and keeps the
best.  The rates and the depths come from ``python bench/gemm.py --tiles`` on the H200
(every tile variant on every shape of the suite, compiled in parallel by
:func:`tvm_tirx.testing.sweep`): rerun it on another GPU and update the table.

Measured on the H200 (December 2026, bf16 -> bf16, TFLOP/s): a 128 x 256 tile runs at
~790 on large shapes, 128 x 128 at ~720 (0.91), 128 x 64 at ~430 (0.55); at ``m = 128``
the narrow tiles win (``128 x 8192 x 8192``: 161 / 361 / 427), at ``128 x 57344`` the
wide one does (491 / 481 / 432).
"""

from __future__ import annotations

from .config import BM, GATED_BLOCK_NS, MAX_STAGES, OUTPUTS, deepest_ring

__all__ = ["TILE_RATE", "MAX_STAGES", "SMS", "choose_tile", "deepest_ring"]

#: block_n -> the tile's rate relative to 128 x 256 when every SM is busy (H200, bench/gemm.py
#: --tiles).  :func:`choose_tile` picks among these widths only: a width of
#: :data:`~.config.BLOCK_NS` joins the table once it has been measured (``make_gemm`` and
#: :func:`~.planner.override` take every width of ``BLOCK_NS``).
#: 192 measured 2026-12-05 (``bench/gemm.py --tiles --runs 20``: 0.94 of 128 x 256 on
#: 5000^3 and 8192 x 8192 x 4096; it was the fastest tile at 3072^3, 686 against 535 TFLOP/s,
#: and 1536^3, 438 against 356).  176, 160 and 144 measured 0.86, 0.84 and 0.83 there and
#: lost to 192 on every shape of the run (their epilogue stores per thread): not taken.
TILE_RATE = {256: 1.0, 192: 0.94, 128: 0.91, 64: 0.55}
#: SMs of an H100 SXM / H200 (the CTA slots of one wave: one CTA per SM)
SMS = 132


def choose_tile(m: int, n: int, out_dtype: str = "bfloat16", sms: int = SMS, gated: bool = False) -> dict:
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

    Returns
    -------
    dict
        ``block_n`` from :data:`TILE_RATE` (ties go to the wider tile) and ``stages``
        from :func:`deepest_ring`.

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

    def score(block_n: int) -> float:
        tiles_n = -(-n // block_n)
        tiles = -(-m // BM) * tiles_n
        return tiles / (-(-tiles // sms) * sms) * TILE_RATE[block_n] * n / (tiles_n * block_n)

    if gated:
        n *= 2  # the accumulator columns: a gate and an up column per output column
    block_n = max(sorted(GATED_BLOCK_NS if gated else TILE_RATE, reverse=True), key=score)
    return {"block_n": block_n, "stages": deepest_ring(block_n, out_dtype, gated)}
