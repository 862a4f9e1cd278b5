"""The TMA family's image and its call rules (:mod:`.tma`): what the shared image the
TMA writes looks like, and the rules a call's box, tensors and layouts obey.

Each rule takes the call's pieces (:class:`TmaCall`) and returns a
:class:`~tvm_tirx.TileError` or None (the family's ``bind`` hook returns the
first one).  Facts from PTX ISA 5.5 (tensors, bounding box, swizzling modes),
9.7.9.25.5.2 (reduction element types) and the CUDA Driver API's
``cuTensorMapEncodeTiled`` (the tensor-map limits).
"""

from __future__ import annotations

import itertools

import tvm

from tvm.runtime import DataType
from tvm.tirx.layout import ComposeLayout, S, TileLayout

from .. import int_or_none, operand_label, TileError, ViewMap

__all__ = [
    "run_time_requirements", "layout_swizzle",
    "DESCRIPTOR_DTYPE", "SWIZZLE_BYTES", "REDUCE_DTYPES", "IMAGE_ALIGN", "swizzled_layout", "image_period",
    "constant_ints", "element_bytes", "global_strides", "TmaCall", "RULES",
]  # fmt: skip

#: Element types the TMA unit moves (CUDA ``CUtensorMapDataType``), -> the
#: descriptor type the map is encoded with (8/16-bit signed: the same bits).
DESCRIPTOR_DTYPE = {
    "uint8": "uint8", "int8": "uint8", "uint16": "uint16", "int16": "uint16",
    "float16": "float16", "bfloat16": "bfloat16", "uint32": "uint32", "int32": "int32",
    "float32": "float32", "uint64": "uint64", "int64": "int64", "float64": "float64",
}  # fmt: skip
#: Bytes of one swizzled row segment per ``swizzle=`` (CUDA ``CU_TENSOR_MAP_SWIZZLE_*``).
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}
#: Reduction operation -> element types: the table "valid combinations of .redOp and element
#: type" of ``cp.reduce.async.bulk.tensor`` (PTX ISA 9.1, section 9.7.9.27.1.3; 9.7.9.25.5.2 in
#: PTX ISA 8.x), checked against the 9.1 text.  The ISA's ``.b32`` / ``.b64`` (and, or, xor) are
#: read as the 32/64-bit integer map types; no floating-point map is a bit type.
REDUCE_DTYPES = {
    "add": ("uint32", "int32", "uint64", "float32", "float16", "bfloat16"),
    "min": ("uint32", "int32", "uint64", "int64", "float16", "bfloat16"),
    "max": ("uint32", "int32", "uint64", "int64", "float16", "bfloat16"),
    "inc": ("uint32",),
    "dec": ("uint32",),
    "and": ("uint32", "int32", "uint64", "int64"),
    "or": ("uint32", "int32", "uint64", "int64"),
    "xor": ("uint32", "int32", "uint64", "int64"),
}
#: cuTensorMapEncodeTiled limits.
MAX_BOX, MAX_STRIDE, MAX_DIM = 256, 1 << 40, 1 << 32
#: Bytes every image starts aligned to (without a swizzle).
IMAGE_ALIGN = 128


# -- the image ---------------------------------------------------------------------------------


def swizzled_layout(shape, dtype: str, swizzle: int):
    """The layout of the image a TMA box of ``shape`` writes with ``swizzle=``.

    Parameters
    ----------
    shape : tuple[int, ...]
        The box (or ``(*repeat, *box)``: boxes stacked row-major), in the
        tensor's axis order.
    dtype : str
        Element type; 1 to 8 bytes.
    swizzle : int
        0 (none: row-major), 1 (32B), 2 (64B), 3 (128B).

    Returns
    -------
    tvm.tirx.layout.TileLayout | ComposeLayout
        Row-major for 0; else ``ComposeLayout(log2(16 / bytes), swizzle, 3,
        row-major)``: in bytes, address bits ``[4, 4 + swizzle)`` XOR bits
        ``[7, 7 + swizzle)`` -- chunk ``c`` of 128-byte row ``r`` at ``c ^ (r % 8)``
        over ``2 ** swizzle`` chunks (CUDA C++ Programming Guide, "TMA Swizzle").
    """
    rowmajor = TileLayout(S[tuple(int(n) for n in shape)])
    if not swizzle:
        return rowmajor
    per_element = (16 // (DataType(dtype).bits // 8)).bit_length() - 1
    return ComposeLayout(per_element, int(swizzle), 3, rowmajor)


def _image_offset(flat: int, elem_bytes: int, swizzle: int) -> int:
    """Element offset where the TMA stores row-major element ``flat`` of a box."""
    if not swizzle:
        return flat
    b = flat * elem_bytes
    return (b ^ (((b >> 7) & ((1 << swizzle) - 1)) << 4)) // elem_bytes


def image_period(swizzle: int) -> int:
    """Bytes after which a swizzle pattern repeats (the image's alignment)."""
    return max(IMAGE_ALIGN, 8 * SWIZZLE_BYTES[swizzle])


def constant_ints(value):
    """``value`` (a tuple of ints / IntImm) as a tuple of ints, or None."""
    if not isinstance(value, tuple | list):
        return None
    out = tuple(int_or_none(v) for v in value)
    return None if None in out else out


def element_bytes(dtype) -> int:
    """Bytes of one element of ``dtype``."""
    return DataType(dtype).bits // 8


def global_strides(buf):
    """Per axis of view ``buf``, its element stride, or None when not strided: ints
    for a static view; for one with run-time extents (``T.dynamic``), the strides
    its layout states (int or PrimExpr), one plain axis per dimension."""
    if all(isinstance(int_or_none(n), int) for n in buf.shape):
        view = ViewMap(buf)
        if not view.separable or view.has_thread_axes():
            return None
        zero = (0,) * len(view.shape)
        base = view.offset(zero)
        strides = [view.offset(tuple(1 if j == i else 0 for j in range(len(zero)))) - base for i in range(len(zero))]
        return _unit_axes_contiguous(strides, [int(n) for n in buf.shape])
    shard = list(getattr(buf.layout, "shard", ()))
    if len(shard) != len(buf.shape) or list(getattr(buf.layout, "replica", ())) or getattr(buf.layout, "exclude", ()):
        return None
    analyzer = tvm.sym.Analyzer()
    if not all(analyzer.can_prove_equal(it.extent, n) for it, n in zip(shard, buf.shape)):
        return None
    strides = [int_or_none(it.stride) for it in shard]
    return tuple(s if s is not None else analyzer.simplify(it.stride) for s, it in zip(strides, shard))


def _unit_axes_contiguous(strides, shape) -> tuple:
    """``strides`` with each extent-1 axis given the stride it would have if contiguous
    over the axes inside it: only its coordinate 0 is in the tensor, so the tensor
    map never steps along it, but cuTensorMapEncodeTiled still wants a legal stride
    (the layout of an extent-1 axis may state 0, or anything)."""
    out = list(strides)
    for i in range(len(out) - 1, -1, -1):
        if shape[i] == 1:
            out[i] = out[i + 1] * shape[i + 1] if i + 1 < len(out) else 1
    return tuple(out)


def run_time_requirements(c) -> list:
    """``[(condition, message)]``: what a global view with run-time extents or
    strides must satisfy, checked by the host before each launch
    (:func:`._tma_host.host_setup`): each run-time byte stride a multiple of 16
    below 2**40, each run-time extent in 1..2**32 (cuTensorMapEncodeTiled)."""
    from tvm.tirx import IntImm  # pylint: disable=import-outside-toplevel

    buf, out = c.glob.value, []
    for stride in (global_strides(buf) or ())[:-1]:
        if not isinstance(stride, int):
            b = tvm.tirx.Cast("int64", stride) * c.elem_bytes
            out.append((tvm.tirx.all(b % 16 == 0, b > 0, b < IntImm("int64", MAX_STRIDE)),
                        f"{c.opcode}: {c.g_label}: global stride not a multiple of 16 bytes: expected the byte "
                        f"stride {stride} * {c.elem_bytes} of {buf.name} a multiple of 16 below 2**40 "
                        "(cuTensorMapEncodeTiled)"))
    for axis, n in enumerate(buf.shape):
        if int_or_none(n) is None:
            n64 = tvm.tirx.Cast("int64", n)
            out.append((tvm.tirx.all(n64 >= 1, n64 <= IntImm("int64", MAX_DIM)),
                        f"{c.opcode}: {c.g_label}: global extent out of range: expected extent {n} of axis {axis} "
                        f"of {buf.name} in 1..2**32 (cuTensorMapEncodeTiled)"))
    return out


# -- the call's rules --------------------------------------------------------------------------


class TmaCall:  # pylint: disable=too-few-public-methods
    """One call's pieces: the shared image, the global operand, the box."""

    def __init__(self, contract, call):
        self.contract, self.call = contract, call
        self.opcode = contract.opcode
        self.rank = int(contract.instruction.modifiers["dim"][0])
        roles = contract.roles
        self.s_index = next(i for i, r in enumerate(roles) if r.kind == "memory" and r.image)
        self.g_index = next(i for i, r in enumerate(roles) if r.kind == "tensor_map")
        self.shared, self.glob = call.operands[self.s_index], call.operands[self.g_index]
        self.s_label = operand_label(roles[self.s_index].role, self.shared.index)
        self.g_label = operand_label(roles[self.g_index].role, self.glob.index)
        self.box = tuple(self.shared.shape[-self.rank :])
        self.repeat = tuple(self.shared.shape[: -self.rank])
        self.swizzle = int_or_none(call.params.get("swizzle", 0))
        self.elem_bytes = element_bytes(self.shared.value.dtype)


def rule_params(c: TmaCall) -> TileError | None:
    """``box`` equals the image, ``coords`` and ``coord_steps`` have the box's rank."""
    params = c.call.params
    box = params.get("box")
    if box is not None and constant_ints(box) != c.box:
        return TileError(
            c.opcode, "box differs from the shared image", operand="parameter box",
            expected=f"box={c.box} (the shared operand's last {c.rank} extents)", found=f"box={constant_ints(box)}",
        )  # fmt: skip
    coords = params.get("coords", ())  # required; an IR built without the parser may lack it
    if len(coords) != c.rank:
        return TileError(
            c.opcode, "coordinate count", operand="parameter coords",
            expected=f"{c.rank} coordinates (.{c.rank}d), outermost first", found=f"{len(coords)}",
        )  # fmt: skip
    steps = params.get("coord_steps", ())
    if len(steps) != len(c.repeat) or any(len(s) != c.rank for s in steps):
        return TileError(
            c.opcode, "coord_steps do not match the repeat axes", operand="parameter coord_steps",
            expected=f"{len(c.repeat)} tuple(s) of {c.rank} (repeat axes {c.repeat})",
            found=f"{tuple(constant_ints(s) for s in steps)}",
        )  # fmt: skip
    return None


def layout_swizzle(buf, elem_bytes: int) -> int | None:
    """The ``swizzle=`` mode (1, 2, 3) whose image view ``buf``'s layout is swizzled
    like (:func:`swizzled_layout`: 16-byte chunks XOR'd by the 128-byte row), 0 for
    an unswizzled layout, None for a swizzle no TMA mode writes."""
    terms = ViewMap(buf).static_terms
    if terms is None:  # symbolic, or not a (swizzled) TileLayout: unknown
        return None
    if terms[2] is None:
        return 0
    per_element, swizzle_len, atom_len = terms[2]
    chunk = (1 << per_element) * elem_bytes
    return swizzle_len if chunk == 16 and atom_len == 3 and swizzle_len in (1, 2, 3) else None


def rule_swizzle_agrees(c: TmaCall) -> TileError | None:
    """A shared view laid out as one mode's swizzled image is copied with that mode."""
    mode = layout_swizzle(c.shared.value, c.elem_bytes)
    if not mode or mode == c.swizzle:
        return None  # unswizzled, or not a TMA swizzle: rule_layout compares the offsets
    said = f"swizzle={c.swizzle}" + (" (none)" if not c.swizzle else f" ({SWIZZLE_BYTES[c.swizzle]}B)")
    return TileError(
        c.opcode, "shared layout and swizzle= disagree", operand=c.s_label,
        expected=f"swizzle={mode}, the mode the shared view's layout is swizzled with (the "
        f"{SWIZZLE_BYTES[mode]}-byte image of swizzled_layout(..., {mode})): the layout and swizzle= name one mode",
        found=said,
    )  # fmt: skip


def rule_box(c: TmaCall) -> TileError | None:
    """Box extents 1..256; the inner row a multiple of 16 bytes, within the swizzle span."""
    if any(not 1 <= n <= MAX_BOX for n in c.box):
        return TileError(
            c.opcode, "box extent out of range", operand=c.s_label,
            expected=f"box extents 1..{MAX_BOX} (cuTensorMapEncodeTiled)", found=f"box {c.box}",
        )  # fmt: skip
    row = c.box[-1] * c.elem_bytes
    if row % 16:
        return TileError(
            c.opcode, "inner box row not a multiple of 16 bytes", operand=c.s_label,
            expected="box[-1] * element bytes a multiple of 16 (cuTensorMapEncodeTiled)",
            found=f"{c.box[-1]} x {c.elem_bytes} = {row} bytes",
        )  # fmt: skip
    span = SWIZZLE_BYTES[c.swizzle]
    if span and row > span:
        return TileError(
            c.opcode, "inner box row wider than the swizzle span", operand=c.s_label,
            expected=f"at most {span} bytes with swizzle={c.swizzle} (cuTensorMapEncodeTiled)", found=f"{row} bytes",
        )  # fmt: skip
    return None


#: (layout text, shape, rank, element bytes, swizzle) -> first mismatch or None
_LAYOUT_CHECKS: dict = {}


def _layout_mismatch(view, rank, elem_bytes, swizzle):
    """The first ``(repeat, coordinate, found, expected)`` where the offsets of
    ``view`` (a ViewMap, relative to each image's first element) differ from
    the image the TMA writes, or None."""
    shape = view.shape
    box, repeat = shape[len(shape) - rank :], shape[: len(shape) - rank]
    coords = list(itertools.product(*(range(n) for n in box)))
    for rep in itertools.product(*(range(n) for n in repeat)):
        base = view.offset((*rep, *(0,) * rank))
        for flat, coord in enumerate(coords):
            found = view.offset((*rep, *coord)) - base
            want = _image_offset(flat, elem_bytes, swizzle)
            if found != want:
                return rep, coord, found, want
    return None


def rule_layout(c: TmaCall) -> TileError | None:
    """The shared view's layout is the image the TMA writes."""
    buf = c.shared.value
    key = (str(buf.layout), c.shared.shape, c.rank, c.elem_bytes, c.swizzle)
    if key not in _LAYOUT_CHECKS:  # offsets depend on the layout and shape only
        _LAYOUT_CHECKS[key] = _layout_mismatch(ViewMap(buf), c.rank, c.elem_bytes, c.swizzle)
    bad = _LAYOUT_CHECKS[key]
    if bad is None:
        return None
    rep, coord, found, want = bad
    expected = swizzled_layout(c.box, buf.dtype, c.swizzle)
    what = "row-major" if not c.swizzle else f"{SWIZZLE_BYTES[c.swizzle]}-byte swizzled"
    unswizzled = c.swizzle and layout_swizzle(buf, c.elem_bytes) == 0
    return TileError(
        c.opcode, "shared layout is not the TMA image", operand=c.s_label,
        expected=f"the {what} image of swizzle={c.swizzle}: layout {expected} per box",
        found=f"element {coord} of box {rep} at offset {found}, the image has it at {want}"
        + (f" (the layout has no swizzle; allocate the tile with swizzled_layout(..., {c.swizzle}))"
           if unswizzled else ""),
    )  # fmt: skip


def rule_dtype(c: TmaCall) -> TileError | None:
    """Both sides hold the same element type, one the TMA moves; reductions as the ISA lists."""
    dtype = c.shared.value.dtype
    if c.glob.kind == "tensor" and c.glob.value.dtype != dtype:
        return TileError(
            c.opcode, "element types differ", operand=c.g_label,
            expected=f"{dtype} like the shared image", found=str(c.glob.value.dtype),
        )  # fmt: skip
    op = c.contract.instruction.modifiers.get("redop")
    if op and dtype not in REDUCE_DTYPES[op]:
        return TileError(
            c.opcode, "element type not reducible with this operation", operand=c.s_label,
            expected=f"one of {' / '.join(REDUCE_DTYPES[op])} for .{op} (PTX ISA 9.7.9.25.5.2)", found=dtype,
        )  # fmt: skip
    return None


def rule_global(c: TmaCall) -> TileError | None:
    """A host-encodable tensor: contiguous inner axis, 16-byte strides and base."""
    if c.glob.kind != "tensor":
        return None
    buf = c.glob.value
    strides = global_strides(buf)
    if strides is None or strides[-1] != 1:
        return TileError(
            c.opcode, "global tensor not strided with a contiguous inner axis", operand=c.g_label,
            expected="a kernel tensor or a strided view whose last axis has stride 1",
            found=f"shape {tuple(buf.shape)}, layout {buf.layout}",
        )  # fmt: skip
    byte_strides = [s * c.elem_bytes for s in strides[:-1] if isinstance(s, int)]  # run-time ones: at launch
    if any(b % 16 or not 0 < b < MAX_STRIDE for b in byte_strides):
        return TileError(
            c.opcode, "global stride not a multiple of 16 bytes", operand=c.g_label,
            expected="byte strides of the outer axes multiples of 16, below 2**40 (cuTensorMapEncodeTiled)",
            found=f"byte strides {tuple(byte_strides)}",
        )  # fmt: skip
    if any(isinstance(int_or_none(n), int) and not 0 < int(n) <= MAX_DIM for n in buf.shape):
        return TileError(
            c.opcode, "global extent out of range", operand=c.g_label,
            expected="extents 1..2**32", found=str(tuple(buf.shape)),
        )  # fmt: skip
    offset = int_or_none(buf.elem_offset)
    if offset is None or (offset * c.elem_bytes) % 16 or int(buf.data_alignment) % 16:
        return TileError(
            c.opcode, "tensor map base not 16-byte aligned", operand=c.g_label,
            expected="a tensor declared with align>=16 and a view starting at a multiple of 16 bytes "
            "(cuTensorMapEncodeTiled)",
            found=f"align={int(buf.data_alignment)}, element offset {buf.elem_offset}",
        )  # fmt: skip
    return None


def rule_root_param(c: TmaCall) -> TileError | None:
    """While lowering: a host-encoded map's tensor is a kernel parameter."""
    facts = c.call.facts
    if c.glob.kind != "tensor" or facts is None:
        return None
    root = facts.root_of(c.glob.value)
    if root is None or not any(root.same_as(p) for p in facts.params):
        return TileError(
            c.opcode, "tensor map of a tensor that is not a kernel parameter", operand=c.g_label,
            expected="a kernel tensor parameter (or a view of one): its map is encoded on the host",
            found=getattr(root, "name", c.glob.value.name),
        )  # fmt: skip
    return None


#: The call's rules, in the order they are checked.
RULES = (rule_params, rule_dtype, rule_swizzle_agrees, rule_box, rule_global, rule_layout, rule_root_param)
