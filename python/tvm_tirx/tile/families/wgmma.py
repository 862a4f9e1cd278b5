"""``wgmma.mma_async``: warpgroup matrix multiply-accumulate of an m64nNk tile (sm_90a).

PTX ISA
    9.7.15.5.2 (``wgmma.mma_async``), 9.7.15.5.1.1 (register fragments),
    9.7.15.5.1.2 (shared memory matrix layout and matrix descriptor), 9.7.15.2
    (shapes); PTX ISA 8.x numbering -- apache-tvm 0.27's table cites the same
    sections as 9.7.17.x.
Forms
    ``wgmma.mma_async.sync.aligned.m64nNk{8,16,32}.<dtype>.<atype>.<btype>`` for
    every N the table lists: f16 and bf16 inputs (k16) with an f32 accumulator,
    f16 with an f16 accumulator, tf32 (k8, f32), e4m3/e5m2 (k32, f32 or f16),
    s8/u8 (k32, s32, optional ``.satfinite``); each in the "ss" form (A and B
    in shared memory) and the "rs" form (A in registers).  The single-bit
    ``.b1`` forms are not tile forms; ``wgmma.fence``, ``commit_group`` and
    ``wait_group`` stay raw ``T.ptx`` calls: nothing is inserted.
Operand roles and atoms
    ``D, A, B``.  D: register accumulators ``(64, N)`` (f32 and s32, one
    register each) or ``(64, N/2)`` b32 words (an f16 accumulator, two halves
    per word), placed by :func:`accumulator_coords`.  A: a shared-memory view
    ``(64, K)`` of the input type (ss), or registers ``(64, 8)`` b32 words
    placed by :func:`a_fragment_coords` (rs).  B: a shared-memory view ``(N,
    K)`` of the input type (B stored as N rows of K, like ``mma``'s ``.col``
    operand; an N-major B is the transposed view of a ``(K, N)`` tile).  The
    call's repeat axes are ``(M, K)``: D carries ``(M,)``, A ``(M, K)``, B
    ``(K,)``; repeating over K accumulates into the same D.  Parameters:
    ``scale_d`` (required, a run-time bool: False computes ``D = A*B`` at the
    first K step, True ``D = A*B + D``; later K steps always accumulate),
    ``scale_a``/``scale_b`` (``1`` or ``-1``, default 1; not on s8/u8 forms).
    The transpose immediates are not parameters: they follow from the layouts.
Legality
    A collective of the 128 threads of a warpgroup (four consecutive warps,
    the first a multiple of 4): at ``scope="warpgroup"``, or ``"cta"`` with one
    group axis counting warpgroups; a guard must keep whole warpgroups.  The
    accumulator (and the rs A) registers must hold each element on the thread
    the ISA's fragment map gives, in the same register slot on every thread.
    Each shared-memory view's layout must be a canonical layout a matrix
    descriptor can describe (K-major with no swizzle or the 32/64/128-byte
    swizzle; MN-major too for f16/bf16, whose transpose immediates allow it),
    every repeat step a constant byte offset, the tile on a 16-byte boundary
    (a swizzled one on its 256/512/1024-byte pattern boundary: the base offset
    is 0) and inside its tensor.  Target exactly sm_90a.  ``pred=`` must be
    uniform over the warpgroup (not checked here yet).  Kernel rules: the
    accumulators are not read or written, and a ring stage the call reads is
    not released (an ``mbarrier.arrive`` on the stage's barrier), until a
    ``wgmma.wait_group`` retires the call's group (:mod:`._wgmma_groups`,
    :mod:`._wgmma_stages`; PTX ISA 9.7.15.7); no register operand is written
    between the ``wgmma.fence`` before the call and the call
    (:mod:`._wgmma_fence`; PTX ISA 9.7.15.7.1).
Lowering emits
    Per thread: one matrix descriptor per shared operand, encoded once before
    the loops (``T.cuda.wgmma.encode_matrix_descriptor``); then one
    ``wgmma.mma_async`` per ``(m, k)`` repeat coordinate, K innermost, whose
    descriptors are the base plus the repeat's constant offset (bytes / 16).
Architectures
    sm_90a only (``wgmma`` is an arch-specific feature: neither sm_90 nor
    sm_100a accepts it).
"""

from __future__ import annotations

from tvm import tirx
from tvm.tirx.layout import Axis, S, TileLayout

from .. import WARPGROUP, Contract, Instruction, Param, register_family, register_role
from ._descriptor_kind import KINDS, check_layouts, shared_role, transpose
from ._wgmma_fence import registers_written_after_fence
from ._wgmma_groups import accumulators_in_flight
from ._wgmma_stages import stages_released_in_flight

#: Input PTX type -> the tensor dtype of a shared operand holding it.
ELEMENT_DTYPES = {
    "f16": "float16",
    "bf16": "bfloat16",
    "tf32": "float32",
    "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "s8": "int8",
    "u8": "uint8",
}
_K = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32}
_ENTRIES = tuple(
    f"wgmma_{group}_{form}"
    for group in ("f16", "f16_f16acc", "bf16", "tf32", "fp8", "fp8_f16acc", "int", "b1")
    for form in ("ss", "rs")
)


def accumulator_coords(n: int, packed: bool):
    """The accumulator fragment of ``m64nN`` (PTX ISA 9.7.15.5.1.1, "Matrix D"):
    ``position -> [(row, col), ...]`` of the D registers of thread ``position``
    (0..127) of the warpgroup, in PTX operand order.

    Thread ``32 w + 4 g + t`` holds rows ``16 w + g`` and ``16 w + g + 8``; its
    register ``r`` is element ``(16 w + g + 8 ((r >> 1) & 1), 8 (r >> 2) + 2 t + (r & 1))``
    (``N/2`` registers).  ``packed`` (an f16 accumulator): word ``j`` holds
    elements ``2 j`` and ``2 j + 1`` of that sequence, so the coordinates are
    ``(row, word)`` of a ``(64, N/2)`` b32 tile (``N/4`` registers).
    """

    def coords(position):
        if packed:
            return [(accumulator_row(0, position, j % 2), 4 * (j // 2) + position % 4) for j in range(n // 4)]
        return [(accumulator_row(0, position, (r >> 1) & 1), accumulator_col(0, position, r >> 2, r & 1))
                for r in range(n // 2)]

    return coords


def accumulator_row(row0, tid, h=0):
    """The row of the wgmma accumulator elements that thread ``tid`` holds in row half ``h``:
    ``row0 + 16 w + 8 h + g`` for warp ``w = tid % 128 / 32`` of the warpgroup and ``g =
    lane / 4`` (PTX ISA 9.7.15.5.1.1; :mod:`..fragments`).  For kernels that address the
    memory of one accumulator element at a time (guarded stores, bias or residual loads).

    Parameters
    ----------
    row0 : int or PrimExpr
        The first row of the warpgroup's 64-row tile.
    tid : int or PrimExpr
        The thread's index in the CTA (its warpgroup is ``tid / 128``).
    h : int or PrimExpr
        The row half, 0 or 1 (register ``4 b + 2 h + e``).

    Returns
    -------
    int or PrimExpr
        ``row0 + tid % 128 // 32 * 16 [+ h * 8] + tid % 32 // 4``, evaluated left to right.
    """
    row = row0 + tid % 128 // 32 * 16
    if not (isinstance(h, int) and h == 0):
        row = row + h * 8
    return row + tid % 32 // 4


def accumulator_col(col0, tid, b, e):
    """The column of wgmma (or mma.sync) accumulator register ``4 b + 2 h + e`` of thread
    ``tid``: ``col0 + 8 b + 2 t + e`` with ``t = lane % 4`` (PTX ISA 9.7.15.5.1.1, 9.7.14.5.8).

    Parameters
    ----------
    col0 : int or PrimExpr
        The tile's first column.
    tid : int or PrimExpr
        The thread's index (only ``tid % 4`` matters).
    b, e : int or PrimExpr
        The 8-column block and the element of the pair (0 or 1).

    Returns
    -------
    int or PrimExpr
        ``col0 + b * 8 + tid % 4 * 2 + e``, evaluated left to right.
    """
    return col0 + b * 8 + tid % 4 * 2 + e


def a_fragment_coords(position):
    """The register fragment of A in the rs form (PTX ISA 9.7.15.5.1.1, "Matrix A"):
    ``[(row, word), ...]`` of thread ``position``'s four b32 registers in a
    ``(64, 8)``-word tile (a row's K elements packed: 2 of 16 bits, 1 tf32 or 4
    of 8 bits per word).  Thread ``32 w + 4 g + t`` holds words ``t`` and ``t + 4``
    of rows ``16 w + g`` and ``16 w + g + 8``."""
    w, lane = position // 32, position % 32
    g, t = lane // 4, lane % 4
    row = 16 * w + g
    return [(row, t), (row + 8, t), (row, t + 4), (row + 8, t + 4)]


def accumulator_layout(n: int, m_tiles: int | None = None, packed: bool = False):
    """A register layout of the accumulators that :func:`accumulator_coords` accepts.

    For a ``(64, N)`` tile (or ``(m_tiles, 64, N)``; with ``packed``, the f16
    accumulator's ``(.., 64, N/2)`` b32 words): each element on its thread
    (``Axis.tid_in_wg``) in the slot of its PTX register, ``N/2`` (``N/4``)
    registers per tile, tiles one after another.

    Returns
    -------
    tvm.tirx.layout.TileLayout
    """
    t = Axis.tid_in_wg
    if packed:
        extents, strides, regs = (4, 2, 8, n // 8, 4), (32 @ t, 1, 4 @ t, 2, 1 @ t), n // 4
    else:
        extents, strides, regs = (4, 2, 8, n // 8, 4, 2), (32 @ t, 2, 4 @ t, 4, 1 @ t, 1), n // 2
    if m_tiles is not None:
        extents, strides = (m_tiles, *extents), (regs, *strides)
    return TileLayout(S[extents:strides])


def a_fragment_layout(m_tiles: int | None = None, k_tiles: int | None = None):
    """A register layout of the rs form's A that :func:`a_fragment_coords` accepts:
    ``(64, 8)`` b32 words, or ``(m_tiles, k_tiles, 64, 8)``, four registers per tile.

    Returns
    -------
    tvm.tirx.layout.TileLayout
    """
    t = Axis.tid_in_wg
    extents, strides = (4, 2, 8, 2, 4), (32 @ t, 1, 4 @ t, 2, 1 @ t)
    if m_tiles is not None or k_tiles is not None:
        mt, kt = m_tiles or 1, k_tiles or 1
        extents, strides = (mt, kt, *extents), (4 * kt, 4, *strides)
    return TileLayout(S[extents:strides])


def _check_scale(value):
    """``scale_a``/``scale_b``: the immediate 1 or -1 (PTX ISA 9.7.15.5.2)."""
    v = _int_value(value)
    return None if v in (1, -1) else f"{value} (the ISA's imm-scale is 1 or -1)"


def _check_scale_d(value):
    """``scale_d``: a bool (a run-time predicate or a constant)."""
    if isinstance(value, bool):
        return None
    dtype = getattr(getattr(value, "ty", None), "dtype", None)
    return None if dtype == "bool" else f"{value} ({dtype or type(value).__name__}; expected a bool expression)"


def _int_value(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _scale_d(call):
    """``scale_d`` at the emitted repeat coordinate: the user's at the first K
    step, True (accumulate) at the others."""
    value = call.params["scale_d"]
    const = value if isinstance(value, bool) else _int_value(value) if isinstance(value, tirx.IntImm) else None
    later = tirx.NE(call.repeat[1], tirx.const(0, "int32"))
    if const is not None:
        return tirx.const(True, "bool") if const else later
    return tirx.Or(value, later)


def _scale(name):
    return lambda call: _int_value(call.params.get(name, 1))


def _roles(instr, n, k):
    """``(D, A, B)`` of a form with shape m64nNk."""
    m = instr.modifiers
    ops = {op.name: op for op in instr.operands}
    packed = m["dtype"] == "f16"
    d_atom = (64, n // 2) if packed else (64, n)
    d = register_role("D", ops["d"], atom=d_atom, lane_coords=accumulator_coords(n, packed), repeat_axes=(0,))
    if "a_desc" in ops:
        a = shared_role("A", ops["a_desc"], ELEMENT_DTYPES[m["atype"]], (64, k), (0, 1))
    else:
        a = register_role("A", ops["a"], atom=(64, 8), lane_coords=a_fragment_coords, repeat_axes=(0, 1))
    b = shared_role("B", ops["b_desc"], ELEMENT_DTYPES[m["btype"]], (n, k), (1,))
    return d, a, b


def _derived(instr, roles):
    """The PTX operands the family computes: scale-d per K step, the scales, the transposes."""
    names = {op.name for op in instr.operands}
    derived = {"scale_d": _scale_d}
    for name in ("scale_a", "scale_b"):
        if name in names:
            derived[name] = _scale(name)
    if "trans_a" in names:
        derived["trans_a"] = transpose(1, roles[1])
    if "trans_b" in names:
        derived["trans_b"] = transpose(2, roles[2])
    return derived


@register_family(
    entries=_ENTRIES,
    isa={"wgmma": "9.7.15.5.2"},
    kernel_rules=(registers_written_after_fence, accumulators_in_flight, stages_released_in_flight),
    kinds=KINDS,
)
def contract(instr: Instruction) -> Contract | str:
    """The tile contract of a wgmma.mma_async form, or the reason it has none."""
    m = instr.modifiers
    if m.get("atype") == "b1":
        return "the single-bit .b1 forms of wgmma are not tile forms"
    shape = m["shape"]
    n, k = int(shape.split("n")[1].split("k")[0]), int(shape.split("k")[1])
    if _K[m["atype"]] != k:
        return f"unexpected K {k} for .{m['atype']}"
    roles = _roles(instr, n, k)
    options = {"scale_d": Param("accumulate into D (a bool; False overwrites D at the first K step)", _check_scale_d)}
    for name in ("scale_a", "scale_b"):
        if any(op.name == name for op in instr.operands):
            options[name] = Param(f"{name[-1].upper()} is multiplied by 1 or -1", _check_scale, required=False)
    return Contract(
        instruction=instr,
        roles=roles,
        options=options,
        collective=WARPGROUP,
        archs=("sm_90a",),
        repeat_rank=2,
        derived=_derived(instr, roles),
        check=check_layouts,
        error_priority=1 if "a_desc" in {op.name for op in instr.operands} else 0,
    )
