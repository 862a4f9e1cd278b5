"""``cp.async.bulk.tensor`` / ``cp.reduce.async.bulk.tensor``: TMA box copies
between a global tensor and a shared image.

PTX ISA
    9.7.9.25.5.1 (``cp.async.bulk.tensor``), 9.7.9.25.5.2
    (``cp.reduce.async.bulk.tensor``), 5.5 (tensors, bounding box, tiled mode,
    swizzling modes); CUDA Driver API ``cuTensorMapEncodeTiled`` (the
    tensor-map rules).
Forms
    Tiled loads ``cp.async.bulk.tensor.{1..5}d.shared::cluster.global[.tile]
    .mbarrier::complete_tx::bytes[.multicast::cluster][.L2::cache_hint]`` (and
    the ``.shared::cta`` destination), stores ``cp.async.bulk.tensor.Nd.global
    .shared::cta[.tile].bulk_group[.L2::cache_hint]`` and reductions
    ``cp.reduce.async.bulk.tensor.Nd.global.shared::cta.<op>[.tile].bulk_group``
    with ``<op>`` one of add, min, max, inc, dec, and, or, xor.  Not tile
    forms: ``.tile::gather4`` / ``.tile::scatter4`` (four rows, not a box),
    the ``im2col`` modes, ``.multicast::cluster::16b/32b``.
Operand roles and atoms
    Load: ``dst`` shared image, ``src`` global tensor, and by keyword
    ``mbar=`` a ``uint64`` shared view of shape ``(1,)``.  Store and
    reduce: ``dst`` global tensor, ``src`` shared image.  The shared operand is
    ``(*repeat, *box)``: its last N axes (N from ``.Nd``) are the box, in the
    tensor's axis order; each repeat coordinate issues one instruction.  The
    global operand is a kernel tensor parameter or a strided view of one with
    N axes -- its tensor map is encoded on the host, once per distinct
    encoding -- or a caller-encoded map, ``T.address_of(map)`` (the caller
    then owns every field of the map).  Parameters: ``coords`` (required; one
    int32 per tensor axis, outermost first, the box's first element),
    ``coord_steps`` (one tuple of N per repeat axis: added to ``coords`` per
    unit of that axis; required with repeat axes), ``box`` (optional; must
    equal the shared operand's last N extents), ``swizzle`` (0 none, 1 32B,
    2 64B, 3 128B; default 0), ``l2_promotion`` (0..3, the map's L2 promotion
    of none/64B/128B/256B; default 0), ``cta_mask`` (``uint16``, with
    ``.multicast::cluster``), ``cache_policy`` (``uint64``, with
    ``.L2::cache_hint``).
Legality
    The shared operand's layout equals the image the TMA writes: row-major
    for no swizzle, else :func:`swizzled_layout` (the 16-byte chunk ``c`` of
    each 128-byte row ``r`` stored at ``c ^ (r % 8)``, over ``2 ** swizzle``
    chunks); each image starts 128-byte aligned, and at a multiple of the
    swizzle's repeat (256, 512, 1024 bytes) when swizzled, so its layout is
    the same relative to its first byte.  Element types equal on both sides,
    one the TMA unit moves.  From ``cuTensorMapEncodeTiled``: the innermost
    tensor axis is contiguous, the other strides are multiples of 16 bytes
    (below ``2**40``), the map's base is 16-byte aligned, every box extent is
    1..256, the inner box row is a multiple of 16 bytes and, when swizzled,
    at most the swizzle span (32/64/128 bytes).  A box may hang over the
    tensor's edge: the TMA fills out-of-range elements with zeros on a load
    and skips them on a store, so the global operand has no bounds rule.
    Reductions take the element types PTX ISA 9.7.9.25.5.2 lists per
    operation (:data:`REDUCE_DTYPES`; 9.7.9.27.1.3 in PTX ISA 9.1).  ``mbar`` is 8-byte aligned and within its tensor.
Lowering emits
    One instruction per repeat coordinate (the issuing thread: guard the call
    or pass ``pred=``), its coordinates ``coords + sum(r_k * coord_steps[k])``
    innermost first; for a host-encoded map, ``T.tvm_stack_alloca`` and
    ``T.tensormap_encode_tiled`` before the kernel's device entry (the kernel
    receives the map as a ``__grid_constant__ CUtensorMap``).  Completion is
    the user's: ``mbarrier.arrive.expect_tx`` and a wait for loads; a
    ``fence.proxy.async.shared::cta`` before a store of values written by
    threads, then ``cp.async.bulk.commit_group`` / ``wait_group``.
Architectures
    sm_90a.  ``.cta_group::1/::2`` need sm_100a (PTX ISA 9.7.9.25.5.1,
    "requires sm_100a").
"""

from __future__ import annotations

import itertools

from ...errors import TileError, operand_label
from ..contract import Contract, OperandRole, Param, replace
from ..emit import register_kind
from ..ptx_table import Instruction
from ..registry import register_family
from ..views import ViewMap, int_or_none

__all__ = ["swizzled_layout", "SWIZZLE_BYTES", "REDUCE_DTYPES", "contract"]

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
IMAGE_ALIGN = 128
ENTRIES = (
    "cp_async_bulk_tensor_g2s_cluster",
    "cp_async_bulk_tensor_g2s_cta",
    "cp_async_bulk_tensor_s2g",
    "cp_reduce_async_bulk_tensor",
    "cp_async_bulk_tensor_g2s_cluster_multicast16",
    "cp_async_bulk_tensor_g2s_cluster_multicast32",
    "cp_async_bulk_tensor_g2s_cta_im2col",
    "cp_async_bulk_tensor_g2s_cluster_im2col",
    "cp_async_bulk_tensor_s2g_im2col_no_offs_w",
    "cp_reduce_async_bulk_tensor_im2col_no_offs_w",
)


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
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel
    from tvm.tirx.layout import ComposeLayout, S, TileLayout  # pylint: disable=import-outside-toplevel

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


def _period(swizzle: int) -> int:
    """Bytes after which a swizzle pattern repeats (the image's alignment)."""
    return max(IMAGE_ALIGN, 8 * SWIZZLE_BYTES[swizzle])


# -- parameters ------------------------------------------------------------------------------


def _ints(value):
    """``value`` (a tuple of ints / IntImm) as a tuple of ints, or None."""
    if not isinstance(value, tuple | list):
        return None
    out = tuple(int_or_none(v) for v in value)
    return None if None in out else out


def _check_swizzle(value):
    v = int_or_none(value)
    return None if v in SWIZZLE_BYTES else f"{value} (one of 0, 1, 2, 3)"


def _check_l2(value):
    v = int_or_none(value)
    return None if v in (0, 1, 2, 3) else f"{value} (one of 0, 1, 2, 3)"


def _check_coords(value):
    if not isinstance(value, tuple | list) or not value:
        return f"{value!r} (a tuple of int32 expressions)"
    for v in value:
        if not (isinstance(v, int) or getattr(getattr(v, "ty", None), "dtype", None) == "int32"):
            return f"element {v!r} (int32 expressions or ints)"
    return None


def _check_int_tuple(value):
    if isinstance(value, tuple | list) and all(_ints(row) is not None for row in value):
        return None
    return f"{value!r} (a tuple of constant int tuples)"


def _check_box(value):
    return None if _ints(value) is not None else f"{value!r} (a tuple of constant ints)"


OPTIONS = {
    "coords": Param("the box's first element, one int32 per tensor axis, outermost first", _check_coords),
    "coord_steps": Param("per repeat axis, the coordinate step of one unit, one int per tensor axis", _check_int_tuple, required=False),
    "box": Param("the box extents (the shared operand's last extents)", _check_box, required=False),
    "swizzle": Param("0 none, 1 32B, 2 64B, 3 128B", _check_swizzle, required=False),
    "l2_promotion": Param("the map's L2 promotion: 0 none, 1 64B, 2 128B, 3 256B", _check_l2, required=False),
}


# -- the call's rules ------------------------------------------------------------------------


class _Call:  # pylint: disable=too-few-public-methods
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
        self.elem_bytes = _bytes(self.shared.value.dtype)


def _bytes(dtype) -> int:
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel

    return DataType(dtype).bits // 8


def _rule_params(c):
    """``box`` equals the image, ``coords`` and ``coord_steps`` have the box's rank."""
    params = c.call.params
    box = params.get("box")
    if box is not None and _ints(box) != c.box:
        return TileError(c.opcode, "box differs from the shared image", operand="parameter box", expected=f"box={c.box} (the shared operand's last {c.rank} extents)", found=f"box={_ints(box)}")
    coords = params.get("coords", ())  # required; an IR built without the parser may lack it
    if len(coords) != c.rank:
        return TileError(c.opcode, "coordinate count", operand="parameter coords", expected=f"{c.rank} coordinates (.{c.rank}d), outermost first", found=f"{len(coords)}")
    steps = params.get("coord_steps", ())
    if len(steps) != len(c.repeat) or any(len(s) != c.rank for s in steps):
        return TileError(c.opcode, "coord_steps do not match the repeat axes", operand="parameter coord_steps", expected=f"{len(c.repeat)} tuple(s) of {c.rank} (repeat axes {c.repeat})", found=f"{tuple(_ints(s) for s in steps)}")
    return None


def _rule_box(c):
    """Box extents 1..256; the inner row a multiple of 16 bytes, within the swizzle span."""
    if any(not 1 <= n <= MAX_BOX for n in c.box):
        return TileError(c.opcode, "box extent out of range", operand=c.s_label, expected=f"box extents 1..{MAX_BOX} (cuTensorMapEncodeTiled)", found=f"box {c.box}")
    row = c.box[-1] * c.elem_bytes
    if row % 16:
        return TileError(c.opcode, "inner box row not a multiple of 16 bytes", operand=c.s_label, expected="box[-1] * element bytes a multiple of 16 (cuTensorMapEncodeTiled)", found=f"{c.box[-1]} x {c.elem_bytes} = {row} bytes")
    span = SWIZZLE_BYTES[c.swizzle]
    if span and row > span:
        return TileError(c.opcode, "inner box row wider than the swizzle span", operand=c.s_label, expected=f"at most {span} bytes with swizzle={c.swizzle} (cuTensorMapEncodeTiled)", found=f"{row} bytes")
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


def _rule_layout(c):
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
    return TileError(c.opcode, "shared layout is not the TMA image", operand=c.s_label, expected=f"the {what} image of swizzle={c.swizzle}: layout {expected} per box", found=f"element {coord} of box {rep} at offset {found}, the image has it at {want}")


def _rule_dtype(c):
    """Both sides hold the same element type, one the TMA moves; reductions as the ISA lists."""
    dtype = c.shared.value.dtype
    if c.glob.kind == "tensor" and c.glob.value.dtype != dtype:
        return TileError(c.opcode, "element types differ", operand=c.g_label, expected=f"{dtype} like the shared image", found=str(c.glob.value.dtype))
    op = c.contract.instruction.modifiers.get("redop")
    if op and dtype not in REDUCE_DTYPES[op]:
        return TileError(c.opcode, "element type not reducible with this operation", operand=c.s_label, expected=f"one of {' / '.join(REDUCE_DTYPES[op])} for .{op} (PTX ISA 9.7.9.25.5.2)", found=dtype)
    return None


def _global_strides(buf):
    """Per axis of view ``buf``, its element stride (ints), or None when not strided."""
    view = ViewMap(buf)
    if not view.separable or view.has_thread_axes():
        return None
    zero = (0,) * len(view.shape)
    base = view.offset(zero)
    return tuple(view.offset(tuple(1 if j == i else 0 for j in range(len(zero)))) - base for i in range(len(zero)))


def _rule_global(c):
    """A host-encodable tensor: contiguous inner axis, 16-byte strides and base."""
    if c.glob.kind != "tensor":
        return None
    buf = c.glob.value
    strides = _global_strides(buf)
    found = f"shape {tuple(buf.shape)}, layout {buf.layout}"
    if strides is None or strides[-1] != 1:
        return TileError(c.opcode, "global tensor not strided with a contiguous inner axis", operand=c.g_label, expected="a kernel tensor or a strided view whose last axis has stride 1", found=found)
    byte_strides = [s * c.elem_bytes for s in strides[:-1]]
    if any(b % 16 or not 0 < b < MAX_STRIDE for b in byte_strides):
        return TileError(c.opcode, "global stride not a multiple of 16 bytes", operand=c.g_label, expected="byte strides of the outer axes multiples of 16, below 2**40 (cuTensorMapEncodeTiled)", found=f"byte strides {tuple(byte_strides)}")
    if any(not 0 < int(n) <= MAX_DIM for n in buf.shape):
        return TileError(c.opcode, "global extent out of range", operand=c.g_label, expected="extents 1..2**32", found=str(tuple(buf.shape)))
    offset = int_or_none(buf.elem_offset)
    if offset is None or (offset * c.elem_bytes) % 16 or int(buf.data_alignment) % 16:
        return TileError(c.opcode, "tensor map base not 16-byte aligned", operand=c.g_label, expected="a tensor declared with align>=16 and a view starting at a multiple of 16 bytes (cuTensorMapEncodeTiled)", found=f"align={int(buf.data_alignment)}, element offset {buf.elem_offset}")
    return None


def _rule_root_param(c):
    """While lowering: a host-encoded map's tensor is a kernel parameter."""
    facts = c.call.facts
    if c.glob.kind != "tensor" or facts is None:
        return None
    root = facts.root_of(c.glob.value)
    if root is None or not any(root.same_as(p) for p in facts.params):
        return TileError(c.opcode, "tensor map of a tensor that is not a kernel parameter", operand=c.g_label, expected="a kernel tensor parameter (or a view of one): its map is encoded on the host", found=getattr(root, "name", c.glob.value.name))
    return None


RULES = (_rule_params, _rule_dtype, _rule_box, _rule_global, _rule_layout, _rule_root_param)


def _bind(contract, call):
    """Check the call's parameters with its operands; align the image to its swizzle's repeat."""
    c = _Call(contract, call)
    for rule in RULES:
        err = rule(c)
        if err:
            return err
    roles = list(contract.roles)
    roles[c.s_index] = replace(roles[c.s_index], align=_period(c.swizzle))
    return replace(contract, roles=tuple(roles))


# -- emission --------------------------------------------------------------------------------


def _coords(call):
    """The instruction's coordinates, innermost first (PTX order)."""
    from tvm.tirx import IntImm  # pylint: disable=import-outside-toplevel

    coords = [IntImm("int32", v) if isinstance(v, int) else v for v in call.params["coords"]]
    for r, steps in zip(call.repeat, call.params.get("coord_steps", ())):
        coords = [x + r * int(s) if int(s) else x for x, s in zip(coords, _ints(steps))]
    return list(reversed(coords))


def _imm(value: int):
    from tvm.tirx import IntImm  # pylint: disable=import-outside-toplevel

    return IntImm("int32" if value < (1 << 31) else "int64", value)


class TensorMapEncoding:  # pylint: disable=too-few-public-methods
    """The fields of one host-encoded tiled tensor map, in CUDA Driver API order
    (dimension 0 innermost; ``strides`` in bytes, of dimensions 1..rank-1)."""

    def __init__(self, root, buf, call):
        rank = len(buf.shape)
        elem = _bytes(buf.dtype)
        self.root, self.elem_offset = root, int_or_none(buf.elem_offset)
        self.dtype = DESCRIPTOR_DTYPE[buf.dtype]
        self.dims = tuple(int(n) for n in reversed(buf.shape))
        self.strides = tuple(s * elem for s in reversed(_global_strides(buf)[:-1]))
        self.box = _box_of(call, rank)
        self.swizzle = int_or_none(call.params.get("swizzle", 0))
        self.l2 = int_or_none(call.params.get("l2_promotion", 0))

    def key(self):
        """What makes two encodings the same map."""
        return ("tma_map", self.root, self.elem_offset, self.dtype, self.dims, self.strides, self.box, self.swizzle, self.l2)

    def host_stmts(self, var):
        """``[Bind(var, stack alloca), Evaluate(encode)]``."""
        from tvm import tirx  # pylint: disable=import-outside-toplevel
        from tvm.tirx.op import tensormap_encode_tiled, tvm_stack_alloca  # pylint: disable=import-outside-toplevel

        base = self.root.data if not self.elem_offset else self.root.ptr_to(_unravel(self.elem_offset, self.root.shape))
        rank = len(self.dims)
        encode = tensormap_encode_tiled(
            var, base, *map(_imm, self.dims), *map(_imm, self.strides), *map(_imm, self.box), *map(_imm, [1] * rank),
            descriptor_dtype=self.dtype, rank=rank, interleave=0, swizzle=self.swizzle,
            l2_promotion=self.l2, oob_fill=0, force_cu_dtype=-1,
        )  # fmt: skip
        return [tirx.Bind(var, tvm_stack_alloca("tensormap", 1)), tirx.Evaluate(encode)]


def _box_of(call, rank):
    """The box, innermost first: the shared image's last ``rank`` extents (the
    image is the call's first shared operand; a load's ``mbar`` comes after it)."""
    shared = next(op for op in call.operands if op.kind == "tensor" and op.value.scope().startswith("shared"))
    return tuple(int(n) for n in reversed(shared.shape[-rank:]))


def _unravel(flat, shape):
    out = []
    for n in reversed([int(s) for s in shape]):
        out.append(flat % n)
        flat //= n
    return list(reversed(out))


def _map_var(call, op):
    """The tensor-map Var of ``op``'s encoding in this kernel (one per distinct encoding)."""
    from tvm import tirx  # pylint: disable=import-outside-toplevel
    from tvm.tirx.script.builder.ir import TensorMap  # pylint: disable=import-outside-toplevel

    facts = call.facts
    enc = TensorMapEncoding(facts.root_of(op.value), op.value, call)
    maps = facts.family_values.setdefault("tma_maps", {})
    key = enc.key()
    if key not in maps:
        maps[key] = (tirx.Var(f"{enc.root.name}_tmap", TensorMap().ty), enc)
    return maps[key][0]


def _tensor_map_setup(role, op, emission):  # pylint: disable=unused-argument
    """Before the loops: nothing to emit; the operand's value becomes the
    address of the kernel's host-encoded map of the global view."""
    from tvm.tirx.op import address_of  # pylint: disable=import-outside-toplevel

    return [], address_of(_map_var(emission.call, op))


def _tensor_map_args(role, op, group_coord, rep):  # pylint: disable=unused-argument
    """The ``tensorMap`` operand: a caller's map address, or the host-encoded map's
    (the value :func:`_tensor_map_setup` gave the global view)."""
    return [op.value]


register_kind("tensor_map", _tensor_map_args, setup=_tensor_map_setup, scalar=True)


def _host_setup(call, stmt):
    """Encode this call's map before the device entry, unless another call did."""
    from tvm import tirx  # pylint: disable=import-outside-toplevel

    op = next((o for o in call.operands if o.kind == "tensor" and o.value.scope() == "global"), None)
    if op is None:
        return stmt
    var = _map_var(call, op)
    done = call.facts.family_values.setdefault("tma_encoded", [])
    if any(var.same_as(v) for v in done):
        return stmt
    done.append(var)
    enc = next(e for v, e in call.facts.family_values["tma_maps"].values() if v.same_as(var))
    stmts = enc.host_stmts(var)
    if isinstance(stmt, tirx.SeqStmt):  # earlier maps: keep them first, the entry last
        return tirx.SeqStmt([*stmt.seq[:-1], *stmts, stmt.seq[-1]])
    return tirx.SeqStmt([*stmts, stmt])


# -- the contract ----------------------------------------------------------------------------


def _excluded(instr: Instruction) -> str | None:
    name, mods = instr.entry_name, instr.modifiers
    if "im2col" in name:
        return "the im2col modes are not tile forms (a box of the tiled mode only)"
    if "multicast16" in name or "multicast32" in name:
        return ".multicast::cluster::16b/32b are not tile forms (sm_100+; use .multicast::cluster)"
    if mods.get("load_mode", "") not in ("", "tile"):
        return f".{mods['load_mode']} moves four rows, not a box: not a tile form"
    return None


def _roles(instr: Instruction, ops: dict):
    rank = int(instr.modifiers["dim"][0])
    atom = (None,) * rank
    dtypes = tuple(DESCRIPTOR_DTYPE)
    shared_scopes = ("shared", "shared.dyn")
    loads = "dst_mem" in ops
    image = OperandRole(
        "dst" if loads else "src", ops["dst_mem" if loads else "src_mem"], "memory", atom, dtypes,
        loads, shared_scopes, align=IMAGE_ALIGN, image=True,
    )  # fmt: skip
    tmap = OperandRole("src" if loads else "dst", ops["tmap"], "tensor_map", atom, dtypes, not loads, ("global",), repeat_axes=())
    if not loads:
        return (tmap, image)
    mbar = OperandRole(
        "mbar", ops["mbar"], "memory", (1,), ("uint64", "int64"), True, shared_scopes,
        repeat_axes=(), align=8, keyword="mbar",
    )  # fmt: skip
    return (image, tmap, mbar)


@register_family(entries=ENTRIES, isa={"cp": "9.7.9.25.5.1 (cp.async.bulk.tensor), 9.7.9.25.5.2 (cp.reduce.async.bulk.tensor)"})
def contract(instr: Instruction) -> Contract | str:
    """The tile contract of a TMA form, or the reason it has none."""
    reason = _excluded(instr)
    if reason:
        return reason
    ops = {op.name: op for op in instr.operands}
    params = {name: ops[name] for name in ("cta_mask", "cache_policy") if name in ops}
    # PTX ISA 9.7.9.25.5.1: .cta_group requires sm_100a.
    floor = "sm_100a" if instr.modifiers.get("cta_group") else None
    return Contract(
        instruction=instr,
        roles=_roles(instr, ops),
        params=params,
        options=dict(OPTIONS),
        derived={"coords": _coords},
        bind=_bind,
        host_setup=_host_setup,
        min_arch=floor,
    )
