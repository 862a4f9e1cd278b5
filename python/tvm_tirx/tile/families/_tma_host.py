"""The TMA family's tensor maps (:mod:`.tma`): a global view's map is encoded on the
host, once per distinct encoding, and the instruction reads its address.

``T.tvm_stack_alloca`` and ``T.tensormap_encode_tiled`` go before the kernel's
device entry (apache-tvm passes the map as a ``__grid_constant__ CUtensorMap``);
the fields follow the CUDA Driver API's ``cuTensorMapEncodeTiled``.
"""

from __future__ import annotations

import tvm
from tvm import tirx
from tvm.tirx import IntImm
from tvm.tirx.op import address_of, tensormap_encode_tiled, tvm_stack_alloca
from tvm.tirx.script.builder.ir import TensorMap

from .. import OperandKind, int_or_none
from ._tma_rules import DESCRIPTOR_DTYPE, TmaCall, element_bytes, global_strides, run_time_requirements

__all__ = ["TensorMapEncoding", "host_setup", "KINDS"]


def _imm(value):
    """An encoding field: a constant as the narrowest int type that holds it, a
    run-time one (a ``T.dynamic`` extent, a stride of one) as int64."""
    if not isinstance(value, int):
        return tirx.Cast("int64", value)
    return IntImm("int32" if value < (1 << 31) else "int64", value)


def _field(value):
    """A constant as a Python int, else the expression itself."""
    constant = int_or_none(value)
    return constant if constant is not None else value


class TensorMapEncoding:  # pylint: disable=too-few-public-methods
    """The fields of one host-encoded tiled tensor map, in CUDA Driver API order
    (dimension 0 innermost; ``strides`` in bytes, of dimensions 1..rank-1)."""

    def __init__(self, root, buf, call):
        rank = len(buf.shape)
        elem = element_bytes(buf.dtype)
        self.root, self.elem_offset = root, int_or_none(buf.elem_offset)
        self.dtype = DESCRIPTOR_DTYPE[buf.dtype]
        self.dims = tuple(_field(n) for n in reversed(buf.shape))
        self.strides = tuple(s * elem for s in reversed(global_strides(buf)[:-1]))
        self.box = _box_of(call, rank)
        self.swizzle = int_or_none(call.params.get("swizzle", 0))
        self.l2 = int_or_none(call.params.get("l2_promotion", 0))

    def key(self):
        """What makes two encodings the same map (run-time fields by their text)."""
        dims, strides = tuple(map(str, self.dims)), tuple(map(str, self.strides))
        return ("tma_map", self.root, self.elem_offset, self.dtype, dims, strides, self.box, self.swizzle, self.l2)

    def host_stmts(self, var):
        """``[Bind(var, stack alloca), Evaluate(encode)]``."""
        if self.elem_offset:
            base = self.root.ptr_to(_unravel(self.elem_offset, self.root.shape))
        else:
            base = self.root.data
        rank = len(self.dims)
        encode = tensormap_encode_tiled(
            var, base, *map(_imm, self.dims), *map(_imm, self.strides), *map(_imm, self.box),
            *map(_imm, [1] * rank), descriptor_dtype=self.dtype, rank=rank, interleave=0,
            swizzle=self.swizzle, l2_promotion=self.l2, oob_fill=0, force_cu_dtype=-1,
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
    facts = call.facts
    enc = TensorMapEncoding(facts.root_of(op.value), op.value, call)
    maps = facts.family_values.setdefault("tma_maps", {})
    key = enc.key()
    if key not in maps:
        maps[key] = (tirx.Var(f"{enc.root.name}_tmap", TensorMap().ty), enc)
    return maps[key][0]


def _tensor_map_setup(call, index):
    """Before the loops: nothing to emit; the operand's value becomes the
    address of the kernel's host-encoded map of the global view."""
    return [], address_of(_map_var(call, call.operands[index]))


def _tensor_map_args(call, index):
    """The ``tensorMap`` operand: a caller's map address, or the host-encoded map's
    (the value :func:`_tensor_map_setup` gave the global view)."""
    return [call.value(index)]


#: ``register_family(kinds=...)`` of the tma family: the ``tensorMap`` operand (a host-encoded
#: map, or a caller's map address: ``scalar``).
KINDS = {"tensor_map": OperandKind(_tensor_map_args, setup=_tensor_map_setup, scalar=True)}


def host_setup(call, stmt):
    """The ``host_setup`` hook: encode this call's map before the device entry, unless
    another call did."""
    op = next((o for o in call.operands if o.kind == "tensor" and o.value.scope() == "global"), None)
    if op is None:
        return stmt
    var = _map_var(call, op)
    done = call.facts.family_values.setdefault("tma_encoded", [])
    if any(var.same_as(v) for v in done):
        return stmt
    done.append(var)
    enc = next(e for v, e in call.facts.family_values["tma_maps"].values() if v.same_as(var))
    stmts = _requirements(call) + enc.host_stmts(var)
    if isinstance(stmt, tirx.SeqStmt):  # earlier maps: keep them first, the entry last
        return tirx.SeqStmt([*stmt.seq[:-1], *stmts, stmt.seq[-1]])
    return tirx.SeqStmt([*stmts, stmt])


def _requirements(call) -> list:
    """Host asserts (``ValueError`` at launch) for what a global view with run-time
    extents must satisfy before its map is encoded (:func:`._tma_rules.run_time_requirements`)."""
    checks = run_time_requirements(TmaCall(call.contract, call))
    # (apache-tvm 0.27's Python AssertStmt names its first two parameters in the
    # opposite order of the FFI constructor, which takes (condition, kind, parts))
    return [tirx.AssertStmt(cond, tvm.ir.StringImm("ValueError"), [tvm.ir.StringImm(msg)]) for cond, msg in checks]
