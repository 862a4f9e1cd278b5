"""Thread-level memory intrinsics: vector ``ld`` / ``st`` and 16-byte ``cp.async``
(names in :mod:`tvm_tirx.schedule.tensor_intrin`).

Hardware facts: PTX ISA 9.7.10.8 / 9.7.10.11 (``ld`` / ``st``, vectors and their
natural alignment), 9.7.9.25.3 (``cp.async``, 16-byte ``.cg`` chunks).
"""

from __future__ import annotations

from tvm.runtime import DataType

from ...script import tirx as T
from ..intrin_registry import MARKER, PREFIX, register

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
    @T.prim_func(s_tir=True)
    def desc(dst_handle: T.handle, src_handle: T.handle):
        dst = T.match_buffer(dst_handle, (n,), dtype, offset_factor=1, scope=dst_scope)
        src = T.match_buffer(src_handle, (n,), dtype, offset_factor=1, scope=src_scope)
        with T.sblock("root"):
            T.reads(src[0:n])
            T.writes(dst[0:n])
            for i in range(n):
                with T.sblock("copy"):
                    vi = T.axis.remap("S", [i])
                    dst[vi] = src[vi]

    return desc


def _tile_impl(name, opcode, n, dtype, dst_scope, src_scope):
    """``impl``: one ``T.cuda.tile.apply(opcode, dst, src)`` at thread scope."""
    @T.prim_func(s_tir=True)
    def impl(dst_handle: T.handle, src_handle: T.handle):
        dst = T.match_buffer(dst_handle, (n,), dtype, offset_factor=1, scope=dst_scope)
        src = T.match_buffer(src_handle, (n,), dtype, offset_factor=1, scope=src_scope)
        with T.sblock("root"):
            T.reads(src[0:n])
            T.writes(dst[0:n])
            with T.attr(0, MARKER, name):
                T.cuda.tile.apply(opcode, dst, src)

    return impl


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
