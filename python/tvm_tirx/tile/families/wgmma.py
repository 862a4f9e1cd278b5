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
    uniform over the warpgroup (not checked here yet).
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

from ...errors import TileError, operand_label
from ..contract import WARPGROUP, Contract, OperandRole, Param, register_role
from ..emit import register_kind
from ..memory_proofs import check_bounds
from ..points import exact_values
from ..ptx_table import Instruction
from ..registry import register_family
from ..views import repeat_shape
from . import _matrix_descriptor as md

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
        w, lane = position // 32, position % 32
        g, t = lane // 4, lane % 4
        if packed:
            return [(16 * w + g + 8 * (j % 2), 4 * (j // 2) + t) for j in range(n // 4)]
        return [(16 * w + g + 8 * ((r >> 1) & 1), 8 * (r >> 2) + 2 * t + (r & 1)) for r in range(n // 2)]

    return coords


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
    from tvm.tirx.layout import Axis, S, TileLayout  # pylint: disable=import-outside-toplevel

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
    from tvm.tirx.layout import Axis, S, TileLayout  # pylint: disable=import-outside-toplevel

    t = Axis.tid_in_wg
    extents, strides = (4, 2, 8, 2, 4), (32 @ t, 1, 4 @ t, 2, 1 @ t)
    if m_tiles is not None or k_tiles is not None:
        mt, kt = m_tiles or 1, k_tiles or 1
        extents, strides = (mt, kt, *extents), (4 * kt, 4, *strides)
    return TileLayout(S[extents:strides])


def _elem_bytes(role) -> int:
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel

    return DataType(role.dtypes[0]).bits // 8


def _descriptor_analysis(role, op, group):
    """:func:`_matrix_descriptor.analyse` of a shared operand over the call's coordinates."""
    rows, cols = role.atom
    eb = _elem_bytes(role)
    return md.analyse(op.value, tuple(group), repeat_shape(role, op, group), rows, cols, eb, eb == 2)


def _no_descriptor(opcode, role, op, reason):
    return TileError(
        opcode,
        "shared-memory layout has no matrix descriptor",
        operand=operand_label(role.role, op.index),
        expected=md.accepted(_elem_bytes(role) == 2),
        found=reason,
    )


def _aligned_start(facts, opcode, label, root, elem_offset, elem_bytes, need, conds):
    """The tile's first element is ``need``-byte aligned at every point that reaches the call."""
    from tvm.tirx import floormod  # pylint: disable=import-outside-toplevel

    base = int(root.data_alignment)
    addr = facts.analyzer.simplify(elem_offset * elem_bytes)
    if base % need == 0 and facts.analyzer.can_prove(floormod(addr, need) == 0):
        return None
    exact = exact_values(facts, addr, conds) if base % need == 0 else None
    if exact is not None and all(value % need == 0 for value, _ in exact):
        return None
    found = f"{root.name} declared align={base}" if base % need else f"byte offset {addr} in {root.name}"
    return TileError(
        opcode,
        "matrix tile not provably aligned for its descriptor",
        operand=label,
        expected=f"a tile starting on a {need}-byte boundary ({root.name} declared with align>={need})",
        found=found,
    )


def _descriptor_prove(facts, opcode, role, op, group, repeat, pred, conds):  # pylint: disable=too-many-arguments
    """The kernel-level rules of a shared operand: a descriptor for every tile of
    the call, the pattern-aligned start, and the bounds."""
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel

    del repeat  # the analysis reads the operand's own repeat axes
    label = operand_label(role.role, op.index)
    found = _descriptor_analysis(role, op, group)
    if isinstance(found, str):
        return _no_descriptor(opcode, role, op, found)
    buf = op.value
    root = facts.root_of(buf)
    if root is None:
        return TileError(
            opcode,
            "memory view without a known tensor",
            operand=label,
            expected="a view of a shared-memory allocation",
            found=buf.name,
        )
    elem_bytes = DataType(buf.dtype).bits // 8
    elem_offset = facts.expand_scalars(buf.elem_offset)
    conds = tuple(facts.expand_scalars(c) for c in conds)
    err = _aligned_start(facts, opcode, label, root, elem_offset, elem_bytes, found.canonical.period, conds)
    root_start = facts.analyzer.simplify(facts.base_bytes.get(root, 0) // elem_bytes)
    return err or check_bounds(facts, opcode, label, root, elem_offset - root_start, found.first, found.last, conds, pred)


def _descriptor_setup(role, op, emission):
    """Before the loops: a ``uint64`` local and its encoding for the tile at the
    thread's group coordinate and repeat 0.  The value the arguments then see is
    ``(descriptor buffer, byte step per repeat axis)``."""
    from tvm import tirx  # pylint: disable=import-outside-toplevel
    from tvm.backend.cuda.op import cuda_wgmma_encode_matrix_descriptor  # pylint: disable=import-outside-toplevel

    found = _descriptor_analysis(role, op, emission.group)
    c = found.canonical
    desc = tirx.decl_buffer((1,), "uint64", name=f"{role.role}_desc", scope="local")
    lead = [*emission.group_coord, *([0] * (len(op.value.shape) - len(emission.group_coord) - 2)), 0, 0]
    encode = cuda_wgmma_encode_matrix_descriptor(
        tirx.address_of(desc[0]), op.value.ptr_to(lead), c.lbo >> 4, c.sbo >> 4, c.code
    )
    return [tirx.AllocBuffer(desc), tirx.Evaluate(encode)], (desc, found.steps)


def _descriptor_args(role, op, group_coord, rep):  # pylint: disable=unused-argument
    """The descriptor at repeat coordinate ``rep``: the base plus ``sum(rep * step) / 16``."""
    from tvm import tirx  # pylint: disable=import-outside-toplevel

    desc, steps = op.value
    terms = [r * (s >> 4) for r, s in zip(rep, steps) if s]
    if not terms:
        return [desc[0]]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return [desc[0] + tirx.Cast("uint64", total)]


register_kind("descriptor", _descriptor_args, setup=_descriptor_setup, prove=_descriptor_prove)


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
    from tvm import tirx  # pylint: disable=import-outside-toplevel

    value = call.params["scale_d"]
    const = value if isinstance(value, bool) else _int_value(value) if isinstance(value, tirx.IntImm) else None
    later = tirx.NE(call.repeat[1], tirx.const(0, "int32"))
    if const is not None:
        return tirx.const(True, "bool") if const else later
    return tirx.Or(value, later)


def _scale(name):
    return lambda call: _int_value(call.params.get(name, 1))


def _transpose(index, role):
    """``imm-trans``: 1 when operand ``index``'s tile is MN-major (its layout says so)."""

    def derive(call):
        op = call.operands[index]
        rows, cols = role.atom
        found = md.canonical_at_origin(op.value, len(op.shape) - 2, rows, cols, _elem_bytes(role), True)
        return int(not isinstance(found, str) and found.major == "MN")

    return derive


def _check_layouts(contract, operands):
    """Parse time: each shared operand's tile at the origin has a descriptor."""
    for role, op in zip(contract.roles, operands):
        if role.kind != "descriptor" or op.kind != "tensor":
            continue
        rows, cols = role.atom
        eb = _elem_bytes(role)
        found = md.canonical_at_origin(op.value, len(op.shape) - 2, rows, cols, eb, eb == 2)
        if isinstance(found, str):
            return _no_descriptor(contract.opcode, role, op, found)
    return None


def _shared_role(name, ptx, dtype, atom, repeat_axes):
    """A shared-memory operand named by a matrix descriptor."""
    return OperandRole(
        role=name,
        ptx=ptx,
        kind="descriptor",
        atom=atom,
        dtypes=(dtype,),
        writes=False,
        scopes=("shared", "shared.dyn"),
        repeat_axes=repeat_axes,
    )


def _roles(instr, n, k):
    """``(D, A, B)`` of a form with shape m64nNk."""
    m = instr.modifiers
    ops = {op.name: op for op in instr.operands}
    packed = m["dtype"] == "f16"
    d_atom = (64, n // 2) if packed else (64, n)
    d = register_role("D", ops["d"], atom=d_atom, lane_coords=accumulator_coords(n, packed), repeat_axes=(0,))
    if "a_desc" in ops:
        a = _shared_role("A", ops["a_desc"], ELEMENT_DTYPES[m["atype"]], (64, k), (0, 1))
    else:
        a = register_role("A", ops["a"], atom=(64, 8), lane_coords=a_fragment_coords, repeat_axes=(0, 1))
    b = _shared_role("B", ops["b_desc"], ELEMENT_DTYPES[m["btype"]], (n, k), (1,))
    return d, a, b


def _derived(instr, roles):
    """The PTX operands the family computes: scale-d per K step, the scales, the transposes."""
    names = {op.name for op in instr.operands}
    derived = {"scale_d": _scale_d}
    for name in ("scale_a", "scale_b"):
        if name in names:
            derived[name] = _scale(name)
    if "trans_a" in names:
        derived["trans_a"] = _transpose(1, roles[1])
    if "trans_b" in names:
        derived["trans_b"] = _transpose(2, roles[2])
    return derived


@register_family(entries=_ENTRIES, isa={"wgmma": "9.7.15.5.2"})
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
        check=_check_layouts,
        error_priority=1 if "a_desc" in {op.name for op in instr.operands} else 0,
    )
