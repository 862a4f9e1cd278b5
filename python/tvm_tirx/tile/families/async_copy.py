"""``cp.async``: asynchronous global -> shared copies of 4, 8 or 16 bytes per thread.

``cp.async.{ca,cg}.shared{::cta}.global [dst], [src], cp-size{, src-size}``
(PTX ISA 9.7.9.25.3).  Operands, in call order: ``shared, global``; both end
in the chunk, whose extent times the element size is the copy size in bytes:
4, 8 or 16 for ``.ca``, 16 only for ``.cg``.  Both chunks must be contiguous
and aligned to their size.  ``pred`` does not skip the copy: it becomes the
ISA's ``src-size`` (the full chunk, or 0), so a false predicate writes zeros
to shared memory.  Completion is the user's: ``T.ptx["cp.async.commit_group"]()``,
``T.ptx["cp.async.wait_group"](n)`` and a barrier -- nothing is inserted.
Parameter: ``cache_policy`` for ``.L2::cache_hint`` forms.
"""

from __future__ import annotations

from ...errors import TileError, operand_label
from ..contract import Contract, OperandRole

MNEMONICS = ("cp",)
PARAMS = ("cache_policy",)
CHUNK_BYTES = {"ca": (4, 8, 16), "cg": (16,)}


def _chunk_bytes(operands) -> int:
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel

    op = operands[0]
    return op.shape[-1] * DataType(op.value.dtype).bits // 8


def _check(contract, operands):
    """Both chunks hold the same bytes, a size the cache operator allows."""
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel

    allowed = CHUNK_BYTES[contract.instruction.modifiers["cop"]]
    sizes = []
    for role, op in zip(contract.roles, operands):
        if op.kind != "tensor":
            return None
        size = op.shape[-1] * DataType(op.value.dtype).bits // 8
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


def contract(instr) -> Contract | str:
    """The tile contract of a cp.async form, or the reason it has none."""
    if not instr.entry_name.startswith(("cp_async_ca", "cp_async_cg")) or instr.entry_name.endswith("ignore_src"):
        return "tile forms of cp: cp.async.ca / cp.async.cg shared <- global copies"
    if instr.entry_name.endswith("src_size"):
        return "the src-size form is what pred= selects"
    ops = {op.name: op for op in instr.operands}
    dst, src = ops["dst_mem"], ops["src_mem"]
    any_dtype = ("uint8", "int8", "uint16", "int16", "float16", "bfloat16", "uint32", "int32", "float32", "uint64", "int64", "float64")
    roles = (
        OperandRole("dst", dst, "memory", (None,), any_dtype, True, ("shared", "shared.dyn")),
        OperandRole("src", src, "memory", (None,), any_dtype, False, ("global",)),
    )
    params = {name: op for name, op in ops.items() if name in PARAMS}
    from tvm.tirx import IntImm, Select  # pylint: disable=import-outside-toplevel

    size = lambda operands, pred: IntImm("int32", _chunk_bytes(operands))  # noqa: E731
    zero_fill = lambda operands, pred: Select(  # noqa: E731
        pred, IntImm("uint32", _chunk_bytes(operands)), IntImm("uint32", 0)
    )
    return Contract(
        instruction=instr,
        roles=roles,
        params=params,
        derived={"cp_size": size, "src_size": zero_fill},
        pred_operand=("src_size", "cp_size"),
        check=_check,
    )
