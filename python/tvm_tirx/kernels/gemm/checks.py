"""The checks :class:`~.config.GemmConfig` runs when it is made: the options
(:func:`check_options`) and the sizes (:func:`check_sizes`), each refusal a ``ValueError``
that names the option or size, the rule and what was found."""

from __future__ import annotations

from typing import TYPE_CHECKING

import tvm
from tvm.runtime import DataType

from .geometry import (ACTIVATIONS, BIAS_DTYPES, BLOCK_MS, BLOCK_N_MIN, BLOCK_N_STEP, BLOCK_NS, BM, COOP_MAX_BLOCK_N,
                       GATED_BLOCK_NS, INPUTS, MAX_ELEMENTS, MAX_SIZE, OUTPUTS, SMEM_LIMIT, TMA_STRIDE,
                       gemm_smem_bytes)
from .block_scales import BLOCK_NS as SCALED_BLOCK_NS
from .operands import CHUNK, check_major
from ..parts.split_k import no_empty_split

if TYPE_CHECKING:
    from .config import GemmConfig

__all__ = ["check_options", "check_sizes", "check_size", "check_stride", "static"]


def static(value) -> int | None:
    """``value`` if it is a Python int (a static size), else None (a run-time extent)."""
    return value if isinstance(value, int) else None


def check_options(cfg: GemmConfig):
    """The options of ``cfg`` (dtypes, tile, fused epilogue, layouts, schedule) are ones
    ``make_gemm`` has.

    Raises
    ------
    ValueError
        The first option out of range, named, with the rule and what was found.
    """
    if cfg.in_dtype not in INPUTS:
        raise ValueError(f"make_gemm: in_dtype must be one of {sorted(INPUTS)}, found {cfg.in_dtype!r}")
    if cfg.out_dtype not in OUTPUTS:
        raise ValueError(f"make_gemm: out_dtype must be one of {list(OUTPUTS)}, found {cfg.out_dtype!r}")
    if cfg.bias not in BIAS_DTYPES:
        raise ValueError(f"make_gemm: bias must be one of {list(BIAS_DTYPES)} (the Bias vector's dtype), "
                         f"found {cfg.bias!r}")
    if cfg.activation not in ACTIVATIONS:
        raise ValueError(f"make_gemm: activation must be one of {list(ACTIVATIONS)}, found {cfg.activation!r}")
    if type(cfg.block_n) is not int or cfg.block_n not in BLOCK_NS:  # noqa: E721  (not bool, not float)
        raise ValueError(f"make_gemm: block_n must be a multiple of {BLOCK_N_STEP} from {BLOCK_N_MIN} to "
                         f"{BLOCK_NS[-1]} (wgmma's N), found {cfg.block_n!r}")
    for name in ("gated", "residual"):
        if type(getattr(cfg, name)) is not bool:  # noqa: E721
            raise ValueError(f"make_gemm: {name} must be a bool, found {getattr(cfg, name)!r}")
    if cfg.residual and cfg.in_dtype != "bfloat16":
        raise ValueError(f"make_gemm: residual needs in_dtype='bfloat16', found {cfg.in_dtype!r}")
    check_major("A", cfg.a_major, cfg.in_dtype)
    check_major("B", cfg.b_major, cfg.in_dtype)
    if cfg.b_major != "k" and cfg.block_n % CHUNK:
        raise ValueError(f"make_gemm: b_major='n' stores B's stage as {CHUNK}-column chunks: it needs block_n a "
                         f"multiple of {CHUNK}, found {cfg.block_n}")
    if cfg.gated and cfg.block_n not in GATED_BLOCK_NS:
        raise ValueError(f"make_gemm: a gated GEMM needs block_n in {GATED_BLOCK_NS} (its output tile, block_n / 2 "
                         f"columns, is stored in 64-column boxes), found {cfg.block_n}")
    _check_block_m(cfg)
    _check_splits(cfg)
    _check_block_scales(cfg)
    smem = (gemm_smem_bytes(cfg.stages, cfg.out_dtype, cfg.block_n, cfg.gated, cfg.block_m, cfg.splits)
            if isinstance(cfg.stages, int) else None)
    tile = f"block_n={cfg.block_n}" + (f", block_m={cfg.block_m}" if cfg.block_m != BM else "")
    rules = [
        ("stages", isinstance(cfg.stages, int) and cfg.stages >= 1 and smem <= SMEM_LIMIT,
         f"a positive int whose ring and epilogue fit {SMEM_LIMIT} bytes of shared memory"
         + (f" ({smem} bytes with {cfg.out_dtype} output and {tile})" if smem else "")),
        ("wait_depth", cfg.wait_depth in (0, 1), "0 or 1"),
        ("cluster", cfg.cluster in (1, 2), "1 or 2"),
        ("group_m", isinstance(cfg.group_m, int) and cfg.group_m >= 1, "a positive int"),
        ("ctas", isinstance(cfg.ctas, int) and cfg.ctas >= 1, "a positive int"),
    ]
    for name, ok, want in rules:
        if not ok:
            raise ValueError(f"make_gemm: {name} must be {want}, found {getattr(cfg, name)!r}")


def _fused(cfg: GemmConfig) -> list:
    """The fused epilogue options ``cfg`` sets, by name (what split-K and block scales refuse)."""
    return [name for name in ("bias", "activation", "gated", "residual") if getattr(cfg, name)]


def _check_splits(cfg: GemmConfig):
    """``splits`` is a positive int; more than one needs a static ``k`` of at least
    ``splits`` K tiles that leaves no split without one, one CTA per tile and split (not
    persistent, no cluster), 128-row tiles and a plain product (no fused epilogue stage,
    bf16 inputs): the kernel's signature with the workspaces exists for those only."""
    splits = cfg.splits
    if type(splits) is not int or splits < 1:  # noqa: E721  (not bool)
        raise ValueError(f"make_gemm: splits must be a positive int, found {splits!r}")
    if splits == 1:
        return
    k_tiles = static(cfg.k_tiles)
    if k_tiles is None or not no_empty_split(k_tiles, splits):
        raise ValueError(f"make_gemm: splits={splits} needs a static k whose {cfg.bk}-element K tiles leave no "
                         f"split without one (splits of ceil(k_tiles / splits) tiles), found k={cfg.k}")
    fused = _fused(cfg)
    if cfg.persistent or cfg.cluster != 1 or cfg.block_m != BM or fused or cfg.in_dtype != "bfloat16":
        raise ValueError(f"make_gemm: splits={splits} needs persistent=False, cluster=1, block_m={BM}, bf16 inputs "
                         f"and no fused epilogue, found persistent={cfg.persistent}, cluster={cfg.cluster}, "
                         f"block_m={cfg.block_m}, in_dtype={cfg.in_dtype!r}, fused {fused or 'none'}")


def _check_block_scales(cfg: GemmConfig):
    """``block_scales`` is a bool; True needs float8 inputs on 128-row tiles whose columns
    lie in one 128-row block of B (``block_n`` 64 or 128), no fused epilogue stage and one
    split (:mod:`.block_scales`)."""
    if type(cfg.block_scales) is not bool:  # noqa: E721
        raise ValueError(f"make_gemm: block_scales must be a bool, found {cfg.block_scales!r}")
    if not cfg.block_scales:
        return
    fused = _fused(cfg)
    if (cfg.in_dtype != "float8_e4m3fn" or cfg.block_m != BM or cfg.block_n not in SCALED_BLOCK_NS or fused
            or cfg.splits != 1):
        raise ValueError(f"make_gemm: block_scales=True needs in_dtype='float8_e4m3fn', block_m={BM}, block_n in "
                         f"{SCALED_BLOCK_NS} (one 128-row block of B per tile), no fused epilogue and splits=1, "
                         f"found in_dtype={cfg.in_dtype!r}, block_m={cfg.block_m}, block_n={cfg.block_n}, "
                         f"fused {fused or 'none'}, splits={cfg.splits}")


def _check_block_m(cfg: GemmConfig):
    """``block_m`` is 64, 128 or 256; a 256-row tile is neither gated (the gated epilogue's
    second register set, ``activation(gate) * up``, would come on top of two accumulator
    sets) nor wider than :data:`~.geometry.COOP_MAX_BLOCK_N` columns (a consumer thread
    holds ``block_n`` fp32 accumulators, two 64-row blocks of ``block_n / 2``: 256 of them
    at ``block_n=256``, every register a thread may have, past the consumers' 232)."""
    if type(cfg.block_m) is not int or cfg.block_m not in BLOCK_MS:  # noqa: E721  (not bool, not float)
        raise ValueError(f"make_gemm: block_m must be one of {list(BLOCK_MS)} (rows of C per CTA tile), "
                         f"found {cfg.block_m!r}")
    if cfg.block_m <= BM:  # one accumulator set per consumer thread
        return
    if cfg.gated:
        raise ValueError(f"make_gemm: block_m={cfg.block_m} (two accumulator sets per consumer thread) cannot be "
                         f"gated (the gate's output registers would come on top of them): it needs gated=False, "
                         f"found gated=True")
    if cfg.block_n > COOP_MAX_BLOCK_N:
        raise ValueError(f"make_gemm: block_m={cfg.block_m} needs block_n at most {COOP_MAX_BLOCK_N} (a consumer "
                         f"thread holds block_n fp32 accumulators, under its 232 registers), found {cfg.block_n}")


def check_stride(operands: str, elements: int, dtype: str):
    """Refuse rows the TMA cannot address: every global stride of a tensor map but the
    innermost is a multiple of 16 bytes (PTX ISA 5.5.5, ``cuTensorMapEncodeTiled``)."""
    size = DataType(dtype).bits // 8
    if elements * size % TMA_STRIDE:
        raise ValueError(f"make_gemm: TMA row stride not a multiple of {TMA_STRIDE} bytes: {operands} rows of "
                         f"{elements} {dtype} take {elements * size} bytes; the TMA needs a multiple of "
                         f"{TMA_STRIDE} (pad it to a multiple of {TMA_STRIDE // size} elements)")


def check_size(name: str, value, in_dtype: str):
    """A size is a positive int up to :data:`MAX_SIZE` or an int32 run-time extent (with bf16
    inputs only: the TMA moves fp8 as bytes, through a ``.view("uint8")`` that a run-time
    extent does not survive)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= MAX_SIZE:
            raise ValueError(f"make_gemm: {name} must be in 1 .. {MAX_SIZE} (int32 row indices), found {value}")
        return
    dtype = str(value.ty.dtype) if isinstance(value, tvm.tirx.Var) else None
    if dtype != "int32":
        found = f"the run-time extent {value} of dtype {dtype}" if dtype else f"{value!r} ({type(value).__name__})"
        raise ValueError(f"make_gemm: {name} must be a positive Python int or an int32 run-time extent "
                         f"(T.dynamic({name!r})), found {found}")
    if in_dtype != "bfloat16":
        raise ValueError(f"make_gemm: a run-time {name} needs in_dtype='bfloat16', found {in_dtype!r} "
                         f"(give {name} as an int for fp8 inputs)")


def _check_elements(cfg: GemmConfig):
    """A static A (m, k), B (n, k) and C (m, n) hold at most :data:`MAX_ELEMENTS` elements."""
    for tensor, a, b in (("A", "m", "k"), ("B", "b_rows", "k"), ("C", "m", "n")):
        x, y = static(getattr(cfg, a)), static(getattr(cfg, b))
        if x is not None and y is not None and x * y > MAX_ELEMENTS:
            how = f"give {a} as a run-time extent or split the product" if a == "m" else "split the product"
            raise ValueError(f"make_gemm: {tensor} ({a}, {b}) = ({x}, {y}) holds {x * y} elements; at most "
                             f"{MAX_ELEMENTS} (apache-tvm sizes a static buffer in int32): {how}")


def check_sizes(cfg: GemmConfig):
    """The sizes of ``cfg``: ``m``, ``n``, ``k`` in range (``m``, ``k`` possibly int32
    run-time extents), static tensors of at most :data:`~.geometry.MAX_ELEMENTS` elements,
    TMA row strides, and a 2-CTA cluster's pairing.

    Raises
    ------
    ValueError
        The first rule broken, naming the size and what was found.
    """
    for name in ("m", "n", "k"):
        check_size(name, getattr(cfg, name), cfg.in_dtype)
    _check_elements(cfg)
    n = static(cfg.n)
    if n is None:
        # bf16: the TMA store sees C as uint32 pairs, a view a run-time last axis cannot take;
        # float32: the bounds rule cannot prove row * n + col < m * n (non-linear in n)
        raise ValueError(f"make_gemm: n must be an int (a run-time n is not supported), found {cfg.n!r}")
    _check_strides(cfg)
    if cfg.cluster == 2:
        _check_cluster(cfg)


def _check_strides(cfg: GemmConfig):
    """The row stride of A and of B (their innermost extent) where it is static; a
    run-time one is checked on the host at each call, by the TMA maps' encoding."""
    k_major = [name for name, major in (("A (m, k)", cfg.a_major), ("B (n, k)", cfg.b_major)) if major == "k"]
    if k_major and static(cfg.k) is not None:
        check_stride(f"k: {' and '.join(k_major)}", cfg.k, cfg.in_dtype)
    for major, extent, operand in ((cfg.a_major, cfg.m, "A (k, m)"), (cfg.b_major, cfg.b_rows, "B (k, n)")):
        if major != "k" and static(extent) is not None:
            check_stride(f"{major}: {operand}", extent, cfg.in_dtype)


def _check_cluster(cfg: GemmConfig):
    """The two CTAs of a cluster share one operand (:attr:`~.config.GemmConfig.multicast`):
    B when every pair of consecutive tiles has the same column tile (every group of row
    tiles has an even size), A when C has one row tile (consecutive tiles side by side);
    each CTA loads half of the shared stage, whole 8-row groups of the 128-byte swizzle."""
    tiles_m = static(cfg.tiles_m)
    if tiles_m is None or (tiles_m != 1 and (tiles_m % 2 or cfg.group_m % 2)):
        raise ValueError(f"make_gemm: cluster=2 pairs CTAs on tiles of the same B columns or, with one row tile, "
                         f"of the same A rows: it needs a static m with one or an even number of "
                         f"{cfg.block_m}-row tiles, and an even group_m, found m={cfg.m}, group_m={cfg.group_m}")
    operand, rows, major = ("A", "block_m", cfg.a_major) if tiles_m == 1 else ("B", "block_n", cfg.b_major)
    if getattr(cfg, rows) % 16:
        raise ValueError(f"make_gemm: cluster=2 multicasts halves of {operand}'s stage, each whole 8-row groups of "
                         f"the 128-byte swizzle (1024 bytes): it needs {rows} a multiple of 16, found "
                         f"{getattr(cfg, rows)}")
    if major != "k" and getattr(cfg, rows) // 2 % CHUNK:
        raise ValueError(f"make_gemm: cluster=2 with {operand.lower()}_major='{major}' loads whole {CHUNK}-column "
                         f"chunks of {operand} in each CTA: it needs {rows} 128 or 256, found {getattr(cfg, rows)}")
    if not isinstance(cfg.grid, int) or cfg.grid % 2:
        raise ValueError(f"make_gemm: a 2-CTA cluster needs an even grid (an int: a run-time grid is launched "
                         f"without clusters), found {cfg.grid}")
    if cfg.n_tiles % 2:  # a persistent pair would split at the last tile: one CTA waiting for the other's half
        raise ValueError(f"make_gemm: the CTAs of a 2-CTA cluster take their tiles together (each loads half of "
                         f"{operand}'s stage for both): it needs an even number of tiles, found {cfg.n_tiles}")
