"""Thread-level memory intrinsics: vector ``ld`` / ``st`` and 16-byte ``cp.async``
(names in :mod:`tvm_tirx.schedule.tensor_intrin`).

Hardware facts: PTX ISA 9.7.10.8 / 9.7.10.11 (``ld`` / ``st``, vectors and their
natural alignment), 9.7.9.25.3 (``cp.async``, 16-byte ``.cg`` chunks).
"""

from __future__ import annotations

from tvm.runtime import DataType

from tvm.tirx.script.builder import ir as B

from ...script import tirx as T
from ..intrin_registry import MARKER, PREFIX, register
from ._ir import block, build, copy_loops, marker, match

#: short dtype name -> (TVM dtype, PTX bit type of one element)
DTYPES = {
    "f32": ("float32", "b32"),
    "i32": ("int32", "b32"),
    "u32": ("uint32", "b32"),
    "f16": ("float16", "b16"),
    "bf16": ("bfloat16", "b16"),
}


def _copy_desc(n, dtype, dst_scope, src_scope):
    """``desc``: ``dst[i] = src[i]`` for ``i < n``, as a block to match."""
    with build("desc", "dst_handle", "src_handle") as ((dst_h, src_h), func):
        dst = match(dst_h, "dst", (n,), dtype, dst_scope)
        src = match(src_h, "src", (n,), dtype, src_scope)
        with block("root", [src[0:n]], [dst[0:n]]):
            copy_loops((n,), ("copy", ("i",), ("vi",)), "S", lambda vi: B.buffer_store(dst, src[vi], [vi]))
    return func[0]


def _tile_impl(name, opcode, n, dtype, dst_scope, src_scope):
    """``impl``: one ``T.cuda.tile.apply(opcode, dst, src)`` at thread scope."""
    with build("impl", "dst_handle", "src_handle") as ((dst_h, src_h), func):
        dst = match(dst_h, "dst", (n,), dtype, dst_scope)
        src = match(src_h, "src", (n,), dtype, src_scope)
        with block("root", [src[0:n]], [dst[0:n]]):
            with marker(MARKER, name):
                B.evaluate(T.cuda.tile.apply(opcode, dst, src))
    return func[0]


def _vector_memory():
    """``ld`` / ``st`` of ``.v2`` / ``.v4`` between registers and global or shared memory."""
    for short, (dtype, bits) in DTYPES.items():
        for space in ("global", "shared"):
            for n in (2, 4):
                name = f"{PREFIX}ld_{space}_v{n}_{short}"
                register(name, _copy_desc(n, dtype, "local", space),
                         _tile_impl(name, f"ld.{space}.v{n}.{bits}", n, dtype, "local", space))
                name = f"{PREFIX}st_{space}_v{n}_{short}"
                register(name, _copy_desc(n, dtype, space, "local"),
                         _tile_impl(name, f"st.{space}.v{n}.{bits}", n, dtype, space, "local"))


def _async_copies():
    """16-byte ``cp.async.cg`` global -> shared copies."""
    for short, (dtype, _) in DTYPES.items():
        n = 16 * 8 // DataType(dtype).bits
        name = f"{PREFIX}cp_async_cg_16B_{short}"
        register(name, _copy_desc(n, dtype, "shared", "global"),
                 _tile_impl(name, "cp.async.cg.shared.global", n, dtype, "shared", "global"))


def register_memory() -> None:
    """Register the vector ``ld`` / ``st`` and ``cp.async`` intrinsics."""
    _vector_memory()
    _async_copies()
