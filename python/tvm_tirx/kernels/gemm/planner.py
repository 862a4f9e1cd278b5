"""Which GEMM kernel a shape gets: the tile kernel or the small-M (decode) kernel.

:func:`choose_gemm` is the one decision the torch operators take (:mod:`tvm_tirx.ops`):
for up to 32 rows (``m < SMALL_M_TILE_FROM``) the small-M kernel (:mod:`.small_m`: the
weight on wgmma's M side, split-K over the SMs), for up to 64 rows the tile kernel's
64-row tile (:data:`DECODE_TILE`), else the tile kernel with :func:`~.tiles.choose_tile`'s
width.  The small-M kernel's split count is a wave model: with ``tiles`` output tiles of
128 columns and ``t`` K tiles, ``s`` splits take ``ceil(tiles * s / sms)`` waves of
``ceil(t / s)`` K tiles each, plus :data:`CTA_OVERHEAD_TILES` per CTA (filling the ring, the reduction); the
fewest splits among those of least cost, keeping at least :data:`MIN_SPLIT_TILES` K tiles
per split.  The model is not yet calibrated on the H200 (``bench/gemm_decode.py --sweep``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .config import BLOCK_MS as TILE_BLOCK_MS, BLOCK_NS, BM, SMEM_LIMIT
from .small_m import BLOCK_MS, ROWS_W, small_m_smem_bytes
from ..parts.split_k import no_empty_split
from .tiles import SMS, TILE_RATE, choose_tile, deepest_ring, tile_rate, wave_score

__all__ = ["SMALL_M", "SMALL_M_ROUTE", "SPLIT_K_ROUTE", "MIN_SPLIT_TILES", "MAX_SPLITS", "SmallMPlan",
           "SMALL_M_TILE_FROM", "DECODE_TILE", "choose_small_m", "small_m_stages", "choose_split", "choose_gemm",
           "override", "clear_overrides", "ROW_PITCH_BYTES", "PAD_MIN_ROWS", "k_padding"]

#: Whether :func:`choose_gemm` gives shapes of fewer than :data:`SMALL_M_TILE_FROM` rows to
#: the small-M kernel by default.  On: its GPU tests passed on the H200 and through
#: ``ops.linear`` it ran at 0.92-1.42x ``F.linear`` for m <= 16 (``bench/gemm.py --ops
#: --classes decode``, 2026-12-05; 0.43x at m = 64, where the 64-row tile now serves).
#: ``TVM_TIRX_SMALL_M=0`` in the environment (read at import) turns it off.
SMALL_M_ROUTE = os.environ.get("TVM_TIRX_SMALL_M", "1") != "0"

#: Whether :func:`choose_gemm` may split K in the tile kernel (:func:`choose_split`).  Off:
#: on an H100 (2026-12-06) a split beat the best unsplit tile only where K is long and C
#: small (300 x 1024 x 8192: 162 TFLOP/s against 139), not at 1000^3 (93 against 148), and
#: :data:`FILL_TILES` / :data:`REDUCE_TILES` are not fitted to that yet (docs/kernels.rst,
#: split-K).  ``TVM_TIRX_SPLIT_K=1`` in the environment (read at import) turns it on;
#: :func:`override` takes a ``splits`` either way.
SPLIT_K_ROUTE = os.environ.get("TVM_TIRX_SPLIT_K", "0") == "1"
#: the tile kernel's fixed cost per CTA in K tiles' time: the ring's filling
FILL_TILES = 2
#: the split-K reduction's cost per CTA in K tiles' time (the slab's stores; the last CTA's
#: reads): a guess until measured (``bench/gemm.py --tiles`` with split variants)
REDUCE_TILES = 3
#: the tile widths split-K is planned with, and the most splits it plans: ``ptxas -v`` on
#: the run-time-m kernels (n = 4096) reports spills that grow with the splits (the
#: reduction's addresses next to the accumulators): 128 x 128 24 / 264 / 280 / 352 bytes at
#: 2 / 4 / 8 / 16 splits, 128 x 64 0 / 12 / 184 / 124, 128 x 256 928 at 2 (not planned)
SPLIT_BLOCK_NS = (128, 64)
MAX_TILE_SPLITS = 4

#: rows of C up to which the small-M kernel may be taken (its widest tile, wgmma's N = 64)
SMALL_M = max(BLOCK_MS)
#: rows of C from which the tile kernel's 64-row tile (:data:`DECODE_TILE`) is taken instead
#: of the small-M kernel.  On an H100 (2026-12-06, ``bench/gemm.py --tiles`` and ``--ops``
#: in one run) 64 x 64 tiles in 8 stages ran 64 x 4096 x 4096 at 168 TFLOP/s against
#: cuBLAS's 185 (12.8 against 11.6 us), where the small-M kernel took 14.9 us under a CUDA
#: graph against F.linear's 9.1 (0.61x); at m = 32 the tile ran at 60 against 99 (its A
#: boxes half past m), at m = 16 at 31 against 49, where the small-M kernel is at 0.84x
SMALL_M_TILE_FROM = 33
#: the tile of ``m <= 64`` rows in the tile kernel: 64 rows (one consumer warpgroup, no A rows
#: past m = 64 for the TMA to fill) by 64 columns, the fastest of widths 16 / 32 / 64 alone
#: or in 2-CTA clusters at m = 32 and 64 (same run); 64 x 14336 x 4096 at 161 against 162
DECODE_TILE = {"block_m": 64, "block_n": 64}
#: the fewest K tiles (64 elements each) a split keeps
MIN_SPLIT_TILES = 4
#: a CTA's fixed cost in K tiles' time: its ring filling, its share of the reduction
CTA_OVERHEAD_TILES = 4
#: the most splits tried
MAX_SPLITS = 32
#: the deepest ring the small-M kernel takes
MAX_STAGES = 8
#: the byte multiple of a K-major operand's row pitch at which the tile kernel's TMA loads
#: run at full rate.  Measured on an H100 (2026-12-05, ``bench/gemm.py --tiles`` and
#: ``--ops``, TFLOP/s of the best tile): rows of 8000 bytes (4096 x 4096 x 4000, 0 mod 64) ran
#: at 714 against 734 at k = 4096; rows of 10000 bytes (5000^3, 16 mod 32) at 485 against 657
#: at k = 5120, every tile at 0.55-0.78 of its rate; and padded to 32 bytes, rows of 10016
#: (5000 x 5000 x 5008, 32 mod 64: 412) and 8224 bytes (4097 x 4095 x 4112: 354) stayed slow.
#: So 64; that padding to 64 restores the rate has not yet run on a GPU
ROW_PITCH_BYTES = 64
#: the least ``m n / (m + n)`` at which padding K pays: the copy of both operands moves
#: ``4 (m + n) k`` bytes (read and write, 2-byte elements), the kernel saves about a third
#: of ``2 m n k`` FLOPs' time; at ~650 TFLOP/s and ~3 TB/s the saving is twice the copy
#: from ``m n / (m + n)`` of about 1000
PAD_MIN_ROWS = 1024


@dataclass(frozen=True)
class SmallMPlan:
    """The small-M kernel's options for one shape: :func:`~.small_m.make_small_m_gemm`'s
    ``block_m``, ``splits`` and ``stages``."""

    block_m: int
    splits: int
    stages: int

    def options(self) -> dict:
        """The plan as keyword arguments of ``make_small_m_gemm``."""
        return {"block_m": self.block_m, "splits": self.splits, "stages": self.stages}


def _check_positive(**values):
    for name, value in values.items():
        if type(value) is not int or value < 1:  # noqa: E721  (not bool)
            raise ValueError(f"choose_gemm: {name} must be a positive int, found {value!r}")


def _splits(tiles: int, k_tiles: int, sms: int) -> int:
    """The split count of least modelled cost (module docstring)."""
    most = max(1, min(MAX_SPLITS, k_tiles // MIN_SPLIT_TILES))
    # splits of ceil(k_tiles / s) tiles: only the counts that leave no split empty
    counts = {-(-k_tiles // -(-k_tiles // s)) for s in range(1, most + 1)}
    cost = {s: -(-tiles * s // sms) * (-(-k_tiles // s) + CTA_OVERHEAD_TILES) for s in counts}
    return min(cost, key=lambda s: (cost[s], s))


def choose_small_m(m: int, n: int, k: int, sms: int = SMS) -> SmallMPlan:
    """The small-M kernel's plan for ``C (m, n) = X (m, k) @ W (n, k)^T``, ``m <= SMALL_M``.

    ``block_m`` is the narrowest of :data:`~.small_m.BLOCK_MS` holding ``m`` rows; the
    splits come from the wave model of the module docstring (the kernel's split-K sum is
    bitwise reproducible, so deterministic mode takes the same plan); the ring is as deep
    as fits, at most :data:`MAX_STAGES`.

    Raises
    ------
    ValueError
        ``m``, ``n``, ``k`` or ``sms`` not a positive int, or ``m > SMALL_M``.
    """
    _check_positive(m=m, n=n, k=k, sms=sms)
    if m > SMALL_M:
        raise ValueError(f"choose_small_m: m must be at most {SMALL_M}, found {m}")
    block_m = min(b for b in BLOCK_MS if b >= m)
    k_tiles = -(-k // 64)
    splits = _splits(-(-n // ROWS_W), k_tiles, sms)
    return SmallMPlan(block_m, splits, small_m_stages(block_m))


def small_m_stages(block_m: int) -> int:
    """The deepest ring of the small-M kernel with tiles of ``block_m`` rows of X (one of
    :data:`~.small_m.BLOCK_MS`) that fits :data:`~.config.SMEM_LIMIT` bytes of shared
    memory, at most :data:`MAX_STAGES` buffers."""
    stages = MAX_STAGES
    while small_m_smem_bytes(stages, block_m) > SMEM_LIMIT:
        stages -= 1
    return stages


def _k_share(k_tiles: int, splits: int) -> float:
    """The share of a CTA's time that multiplies: its ``k_tiles / splits`` K tiles against
    those (rounded up), :data:`FILL_TILES` and, with splits, :data:`REDUCE_TILES`."""
    own = -(-k_tiles // splits)
    return k_tiles / splits / (own + FILL_TILES + (REDUCE_TILES if splits > 1 else 0))


def choose_split(m: int, n: int, k: int, tile: dict, out_dtype: str = "bfloat16", sms: int = SMS) -> dict:
    """``tile`` (:func:`~.tiles.choose_tile`'s options for ``C (m, n)``) or, where the model
    scores it higher, a 128-row tile of :data:`SPLIT_BLOCK_NS` with ``splits`` CTAs per
    tile over parts of K: each candidate's :func:`~.tiles.wave_score` with its CTAs times
    :func:`_k_share`; counts above :data:`MAX_TILE_SPLITS`, or that leave a split without
    a K tile or with fewer than :data:`MIN_SPLIT_TILES`, are not tried.  The costs are not yet calibrated on a GPU
    (:data:`FILL_TILES`, :data:`REDUCE_TILES`).

    Returns
    -------
    dict
        ``tile``, or ``{"block_n", "stages", "splits"}``.
    """
    k_tiles = -(-k // 64)
    rate = tile_rate(tile.get("block_m", BM), tile["block_n"])
    best = wave_score(m, n, tile.get("block_m", BM), tile["block_n"], rate, sms) * _k_share(k_tiles, 1)
    choice = tile
    for block_n in SPLIT_BLOCK_NS:
        for splits in range(2, min(MAX_TILE_SPLITS, k_tiles // MIN_SPLIT_TILES) + 1):
            if not no_empty_split(k_tiles, splits):
                continue
            score = wave_score(m, n, BM, block_n, TILE_RATE[block_n], sms, splits) * _k_share(k_tiles, splits)
            if score > best:
                best, choice = score, {"block_n": block_n, "stages": deepest_ring(block_n, out_dtype),
                                       "splits": splits}
    return choice


#: (n, k, m or None) -> the plan given by :func:`override`
_OVERRIDES: dict = {}


def _tile_override(plan: dict, k: int) -> dict:
    """:func:`override`'s tile ``plan`` checked and completed (``stages``: the deepest ring),
    or ValueError: keys other than ``block_n``, ``stages``, ``block_m``, ``splits``; a
    width or a row count the tile kernel does not have; ``splits`` that is not a positive
    int, or above 1 with 256 rows or with a split left without a 64-element K tile of
    ``k``."""
    splits, block_m = plan.get("splits", 1), plan.get("block_m", BM)
    if (set(plan) - {"block_n", "stages", "block_m", "splits"} or plan.get("block_n") not in BLOCK_NS
            or block_m not in TILE_BLOCK_MS or type(splits) is not int or splits < 1):  # noqa: E721
        raise ValueError(f"override: a tile plan is {{'block_n': a multiple of 8 from {BLOCK_NS[0]} to "
                         f"{BLOCK_NS[-1]}}} (and optionally 'stages', 'block_m' in {list(TILE_BLOCK_MS)}, "
                         f"'splits' a positive int), found {plan!r}")
    k_tiles = -(-k // 64)
    if splits > 1 and (block_m != BM or not no_empty_split(k_tiles, splits)):
        raise ValueError(f"override: 'splits': {splits} needs 128-row tiles and k = {k} of enough 64-element K "
                         f"tiles ({k_tiles}) for every split, found {plan!r}")
    stages = plan.get("stages", deepest_ring(plan["block_n"], "bfloat16", block_m=block_m))
    return {"block_n": plan["block_n"], "stages": stages, **({"block_m": block_m} if block_m != BM else {}),
            **({"splits": splits} if splits != 1 else {})}


def override(n: int, k: int, plan, m: int | None = None) -> None:
    """Take ``plan`` for GEMMs of ``n`` columns and reduction ``k`` (with ``m`` rows only, or
    every ``m`` when None) instead of the model's choice, in :func:`choose_gemm`.

    Launch plans the torch operators already made keep their kernel: call
    :func:`tvm_tirx.ops.gemm_kernels.clear_kernels` after overriding.

    Parameters
    ----------
    n, k : int
        The GEMM's columns and reduction length, elements, as the caller's tensors have
        them (the operators and the Relax offload ask for the unpadded ``k`` when they
        pad K, :func:`k_padding`).
    plan : SmallMPlan | dict
        A :class:`SmallMPlan` (the small-M kernel, taken even while :data:`SMALL_M_ROUTE`
        is off: any ``m`` is computed correctly, fast up to its ``block_m``) or the tile
        kernel's options ``{"block_n": a multiple of 8 from 16 to 256}`` (and optionally
        ``"stages"``, ``"splits"``, and ``"block_m": 64 | 128 | 256``: the 64-row tile of one
        consumer warpgroup, the cooperative 256-row tile).
    m : int | None
        The rows the override is for; None: every ``m``.  A tile plan's ``splits`` serves
        the shape's plain bf16 products (the torch operators'; the Relax offload and fused
        or fp8 calls take the tile unsplit).

    Raises
    ------
    ValueError
        ``plan`` of another type, or a tile ``block_n`` or ``block_m`` the tile kernel does
        not have, or ``splits`` it cannot take for ``k`` (a 256-row tile's other rules,
        ``block_n`` at most 192, are the kernel's: checked when the kernel is made).
    """
    if isinstance(plan, dict):
        plan = _tile_override(plan, k)
    elif not isinstance(plan, SmallMPlan):
        raise ValueError(f"override: plan must be a SmallMPlan or a dict of tile options, found {plan!r}")
    _OVERRIDES[(n, k, m)] = plan


def clear_overrides() -> None:
    """Forget every :func:`override` (plans already made keep theirs)."""
    _OVERRIDES.clear()


def choose_gemm(m: int, n: int, k: int, out_dtype: str = "bfloat16", sms: int = SMS,  # noqa: PLR0913
                small_m: bool | None = None, fused: bool = False, split_k: bool | None = None):
    """The kernel for ``C (m, n) = A (m, k) @ B (n, k)^T``: an :func:`override` of the
    shape if there is one, else a :class:`SmallMPlan` for ``m < SMALL_M_TILE_FROM`` (when
    ``small_m``; bf16 K-major operands, no fused epilogue), else the tile kernel's options
    (a dict with ``block_n`` and ``stages``, and ``block_m`` where it is not 128):
    :data:`DECODE_TILE` for ``m <= 64``, else :func:`~.tiles.choose_tile`'s.  The torch operators and the
    Relax offload both take their tile here.

    Parameters
    ----------
    m, n, k : int
        The GEMM's sizes, elements (positive).
    out_dtype : str
        ``"bfloat16"`` or ``"float32"``.
    sms : int
        SMs of the GPU.
    small_m : bool | None
        Whether the small-M kernel may be taken; None: :data:`SMALL_M_ROUTE`.
    fused : bool
        Whether the kernel fuses an epilogue stage (bias, activation, residual):
        :func:`~.tiles.choose_tile`'s ``fused``; such a kernel never splits K.
    split_k : bool | None
        Whether the tile kernel may split K (:func:`choose_split`; bf16 inputs, a plain
        product, a caller that passes the workspaces); None: :data:`SPLIT_K_ROUTE`.

    Raises
    ------
    ValueError
        A size not a positive int; ``out_dtype`` unknown.
    """
    _check_positive(m=m, n=n, k=k, sms=sms)
    found = _OVERRIDES.get((n, k, m), _OVERRIDES.get((n, k, None)))
    if found is not None:
        return found
    if m < SMALL_M_TILE_FROM and (SMALL_M_ROUTE if small_m is None else small_m):
        return choose_small_m(m, n, k, sms)
    if m <= DECODE_TILE["block_m"]:
        rows, columns = DECODE_TILE["block_m"], DECODE_TILE["block_n"]
        return {**DECODE_TILE, "stages": deepest_ring(columns, out_dtype, block_m=rows)}
    tile = choose_tile(m, n, out_dtype, sms, fused=fused)
    if fused or not (SPLIT_K_ROUTE if split_k is None else split_k):
        return tile
    return choose_split(m, n, k, tile, out_dtype, sms)


def k_padding(m: int, n: int, k: int, itemsize: int) -> int:
    """Zero elements to append to each row of K-major ``A (m, k)`` and ``B (n, k)`` (the
    product is unchanged: the appended columns add ``0 * 0``) so that the tile kernel reads
    rows of a multiple of :data:`ROW_PITCH_BYTES`, or 0 where the rows are already such or
    where the copy would cost more than it saves (``m n < PAD_MIN_ROWS (m + n)``, which
    leaves out every small-M shape).

    Parameters
    ----------
    m, n, k : int
        The GEMM's sizes, elements (positive).
    itemsize : int
        Bytes per element of A and B (2 for bfloat16, 1 for float8); the rows, as
        stored, are a multiple of 16 bytes (the operators' rule).

    Raises
    ------
    ValueError
        A size or ``itemsize`` not a positive int.
    """
    _check_positive(m=m, n=n, k=k, itemsize=itemsize)
    pitch = k * itemsize
    if pitch % ROW_PITCH_BYTES == 0 or m * n < PAD_MIN_ROWS * (m + n):
        return 0
    return -pitch % ROW_PITCH_BYTES // itemsize
