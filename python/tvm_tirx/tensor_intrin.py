"""Tensor intrinsics for apache-tvm's TIR schedules whose implementation is a checked tile call.

``import tvm_tirx.tensor_intrin`` registers, with ``tvm.s_tir.TensorIntrin``,
one intrinsic per instruction form below; ``sch.tensorize(loop_or_block,
"tvm_tirx.<name>")`` then replaces a matching block of a scheduled PrimFunc
by a ``T.cuda.tile.apply`` call, and ``tvm.compile(mod, target,
tir_pipeline="tvm_tirx")`` (or :func:`tvm_tirx.compile`) checks that call
against its instruction's contract on the scheduled kernel -- threads bound by
the schedule included -- and expands it (see :mod:`tvm_tirx.scheduled`).

Each intrinsic is a ``(desc, impl)`` pair of ``s_tir`` PrimFuncs, as apache-tvm
declares its own (``tvm/s_tir/tensor_intrin/cuda.py``): ``desc`` states what the
block computes (an element-wise copy of a small tile), ``impl`` is the one tile
call that computes it.  Buffers are matched with ``offset_factor=1``: where the
tile starts is not restricted here, the contract's alignment proof decides it
(a misaligned tile is a :class:`~tvm_tirx.TileError` at build time, naming the
block and the intrinsic).

Names (:func:`list_intrinsics` lists them):

=========================================  ==============================================
``tvm_tirx.ld_<space>_v<n>_<dtype>``        ``n`` elements, memory -> registers (``ld.<space>.v<n>.b<bits>``)
``tvm_tirx.st_<space>_v<n>_<dtype>``        ``n`` elements, registers -> memory (``st.<space>.v<n>.b<bits>``)
``tvm_tirx.cp_async_cg_16B_<dtype>``        16 bytes, global -> shared, asynchronous (``cp.async.cg.shared.global``)
=========================================  ==============================================

``<space>`` is ``global`` or ``shared``, ``<n>`` is 2 or 4, ``<dtype>`` is
``f32``, ``i32``, ``u32`` (``.b32``) or ``f16``, ``bf16`` (``.b16``).  The
``cp.async`` copies leave completion to the schedule's author (``commit_group``
/ ``wait_group`` and a barrier), as every tile call does.

Hardware facts: PTX ISA 9.7.10.8 / 9.7.10.11 (``ld`` / ``st``, vectors and
their natural alignment), 9.7.9.25.3 (``cp.async``, 16-byte ``.cg`` chunks).
"""

from __future__ import annotations

import functools

__all__ = ["PREFIX", "list_intrinsics", "register_all", "MARKER", "tensorize_supported"]

#: Every intrinsic name registered here starts with it.
PREFIX = "tvm_tirx."
#: AttrStmt key around each implementation's tile call: its value is the
#: intrinsic's name, which :mod:`tvm_tirx.scheduled` puts in error messages.
MARKER = "tvm_tirx.tensor_intrin"

#: short dtype name -> (TVM dtype, PTX bit type of one element)
_DTYPES = {
    "f32": ("float32", "b32"),
    "i32": ("int32", "b32"),
    "u32": ("uint32", "b32"),
    "f16": ("float16", "b16"),
    "bf16": ("bfloat16", "b16"),
}
_REGISTERED: list = []


def _copy_desc(n, dtype, dst_scope, src_scope):
    """``desc``: ``dst[i] = src[i]`` for ``i < n``, as a block to match."""
    from tvm.script import tirx as T  # pylint: disable=import-outside-toplevel

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
    from tvm.script import tirx as T  # pylint: disable=import-outside-toplevel

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


def _register(name, desc, impl):
    from tvm.s_tir import TensorIntrin  # pylint: disable=import-outside-toplevel

    TensorIntrin.register(name, desc, impl, override=True)
    _REGISTERED.append(name)


def _vector_memory():
    """``ld`` / ``st`` of ``.v2`` / ``.v4`` between registers and global or shared memory."""
    for short, (dtype, bits) in _DTYPES.items():
        for space in ("global", "shared"):
            for n in (2, 4):
                name = f"{PREFIX}ld_{space}_v{n}_{short}"
                _register(name, _copy_desc(n, dtype, "local", space),
                          _tile_impl(name, f"ld.{space}.v{n}.{bits}", n, dtype, "local", space))
                name = f"{PREFIX}st_{space}_v{n}_{short}"
                _register(name, _copy_desc(n, dtype, space, "local"),
                          _tile_impl(name, f"st.{space}.v{n}.{bits}", n, dtype, space, "local"))


def _async_copies():
    """16-byte ``cp.async.cg`` global -> shared copies."""
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel

    for short, (dtype, _) in _DTYPES.items():
        n = 16 * 8 // DataType(dtype).bits
        name = f"{PREFIX}cp_async_cg_16B_{short}"
        _register(name, _copy_desc(n, dtype, "shared", "global"),
                  _tile_impl(name, "cp.async.cg.shared.global", n, dtype, "shared", "global"))


def register_all() -> None:
    """Register every intrinsic of this module with ``tvm.s_tir.TensorIntrin``
    (idempotent; runs at import)."""
    if _REGISTERED:
        return
    from .script import install  # pylint: disable=import-outside-toplevel

    install.install()
    _vector_memory()
    _async_copies()


_PROBE = "import tvm; tvm.ir.save_json(tvm.tirx.IntImm('int32', 1))"


@functools.cache
def tensorize_supported() -> bool:
    """Whether apache-tvm's ``tensorize`` can run in this environment.

    ``Schedule.tensorize`` copies the intrinsic's implementation through
    tvm-ffi's JSON graph (``tvm::s_tir::Tensorize`` calls
    ``tvm::ffi::ToJSONGraph``); with apache-tvm 0.27.0.post1 and
    apache-tvm-ffi 0.1.15.post2 that segfaults on IR nodes that carry a dtype
    (``PrimType``, ``Var``, ``IntImm``, ...), for apache-tvm's own intrinsics too.  The crash, without
    tensorize::

        import tvm
        tvm.ir.save_json(tvm.ir.PrimType("int32"))        # segfault (0.1.15.post2)
        tvm.ir.save_json(tvm.tirx.Var("x", "int32"))      # segfault (0.1.15.post2)

    With apache-tvm-ffi 0.1.14.post0 both work, and so does tensorize.  The
    probe runs in a subprocess, once per process, so that a crash is reported
    here as False instead of killing the caller.

    Returns
    -------
    bool
        False where the probe's process died (any nonzero exit).
    """
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel

    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, timeout=300, check=False)
    return done.returncode == 0


def list_intrinsics() -> list:
    """The names of the registered intrinsics (``"tvm_tirx.ld_global_v4_f32"`` ...), sorted."""
    register_all()
    return sorted(_REGISTERED)


register_all()
