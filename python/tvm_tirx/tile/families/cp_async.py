"""``cp.async``: asynchronous global -> shared copies of 4, 8 or 16 bytes per thread.

PTX ISA
    9.7.9.25.3 (``cp.async``).
Forms
    ``cp.async.{ca,cg}.shared{::cta}.global[.L2::cache_hint][.L2::{64,128,256}B]``
    ``[dst], [src], cp-size{, src-size}{, cache-policy}``; the ``src-size``
    syntax is what ``pred=`` selects, the ``ignore-src`` one is not a tile form.
Operand roles and atoms
    ``dst`` shared, ``src`` global; both end in the chunk, whose extent times
    the element size is the copy size in bytes.  Parameter ``cache_policy``
    for ``.L2::cache_hint`` forms.
Legality
    Chunk sizes 4, 8 or 16 bytes for ``.ca``, 16 only for ``.cg``, the same
    for both operands; both chunks contiguous and aligned to their size.
    ``pred`` does not skip the copy: it becomes the ISA's ``src-size`` (the
    full chunk, or 0), so a false predicate still writes zeros to shared
    memory -- the destination's bounds hold whatever the predicate.
Lowering emits
    One ``cp.async`` per repeat coordinate per thread, ``cp-size`` the chunk's
    bytes.  Completion is the user's: ``T.ptx["cp.async.commit_group"]()``,
    ``T.ptx["cp.async.wait_group"](n)`` and a barrier -- nothing is inserted.
Architectures
    sm_80, every form (measured with ptxas 13.0
    (``tools/probe_arch_floors.py``, ``arch_floors.json``)).
"""

from __future__ import annotations

from tvm.runtime import DataType
from tvm.tirx import IntImm, Select

from .. import Contract, Instruction, operand_label, OperandRole, register_family, TileError

PARAMS = ("cache_policy",)
CHUNK_BYTES = {"ca": (4, 8, 16), "cg": (16,)}
ANY_DTYPE = (
    "uint8", "int8", "uint16", "int16", "float16", "bfloat16",
    "uint32", "int32", "float32", "uint64", "int64", "float64",
)  # fmt: skip


def _bytes(op) -> int:
    return op.shape[-1] * DataType(op.value.dtype).bits // 8


def _check(call):
    """Both chunks hold the same bytes, a size the cache operator allows."""
    contract, operands = call.contract, call.operands
    allowed = CHUNK_BYTES[contract.instruction.modifiers["cop"]]
    sizes = []
    for role, op in zip(contract.roles, operands):
        if op.kind != "tensor":
            return None
        size = _bytes(op)
        sizes.append(size)
        if size not in allowed:
            return TileError(
                contract.opcode,
                "chunk size not allowed for this cache operator",
                operand=operand_label(role.role, op.index),
                expected=f"a last axis of {' / '.join(map(str, allowed))} bytes (PTX ISA 9.7.9.25.3)",
                found=f"{op.shape[-1]} x {op.value.dtype} = {size} bytes",
            )
    if len(set(sizes)) > 1:
        return TileError(
            contract.opcode,
            "chunk sizes differ",
            operand=operand_label(contract.roles[1].role, operands[1].index),
            expected=f"{sizes[0]} bytes like the shared chunk",
            found=f"{sizes[1]} bytes",
        )
    return None


def _cp_size(call):
    return IntImm("int32", _bytes(call.operands[0]))


def _src_size(call):
    """``src-size``: the whole chunk where ``pred`` holds, else 0 (zero-fill)."""
    return Select(call.pred, IntImm("uint32", _bytes(call.operands[0])), IntImm("uint32", 0))


@register_family(
    entries=("cp_async_ca", "cp_async_ca_src_size", "cp_async_ca_ignore_src", "cp_async_cg", "cp_async_cg_src_size", "cp_async_cg_ignore_src"),
    isa={"cp": "9.7.9.25.3"},
)
def contract(instr: Instruction) -> Contract | str:
    """The tile contract of a cp.async form, or the reason it has none."""
    if instr.entry_name.endswith("ignore_src"):
        return "tile forms of cp.async: cp.async.ca / cp.async.cg shared <- global copies (not ignore-src)"
    if instr.entry_name.endswith("src_size"):
        return "the src-size form is what pred= selects"
    ops = {op.name: op for op in instr.operands}
    roles = (
        OperandRole("dst", ops["dst_mem"], "memory", (None,), ANY_DTYPE, True, ("shared", "shared.dyn"), pred_skips=False),
        OperandRole("src", ops["src_mem"], "memory", (None,), ANY_DTYPE, False, ("global",)),
    )
    return Contract(
        instruction=instr,
        roles=roles,
        params={name: op for name, op in ops.items() if name in PARAMS},
        derived={"cp_size": _cp_size, "src_size": _src_size},
        pred_operand=("src_size", "cp_size"),
        check=_check,
    )
