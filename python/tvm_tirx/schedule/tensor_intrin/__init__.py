"""Tensor intrinsics for apache-tvm's TIR schedules whose implementation is a checked tile call.

``import tvm_tirx.schedule.tensor_intrin`` registers, with ``tvm.s_tir.TensorIntrin``,
one intrinsic per instruction form below; ``sch.tensorize(loop_or_block,
"tvm_tirx.<name>")`` then replaces a matching block of a scheduled PrimFunc
by a ``T.cuda.tile.apply`` call, and ``tvm.compile(mod, target,
tir_pipeline="tvm_tirx")`` (or :func:`tvm_tirx.compile`) checks that call
against its instruction's contract on the scheduled kernel -- threads bound by
the schedule included -- and expands it (see :mod:`tvm_tirx.schedule.scheduled`).

Each intrinsic is a ``(desc, impl)`` pair of ``s_tir`` PrimFuncs, as apache-tvm
declares its own (``tvm/s_tir/tensor_intrin/cuda.py``): ``desc`` states what the
block computes, ``impl`` is the one tile call that computes it.  Buffers are
matched with ``offset_factor=1``: where a tile starts is not restricted here,
the contract's alignment proof decides it (a misaligned tile is a
:class:`~tvm_tirx.TileError` at build time, naming the block and the
intrinsic).

Thread-level memory intrinsics (:mod:`._memory`):

=========================================  ==============================================
``tvm_tirx.ld_<space>_v<n>_<dtype>``        ``n`` elements, memory -> registers (``ld.<space>.v<n>.b<bits>``)
``tvm_tirx.st_<space>_v<n>_<dtype>``        ``n`` elements, registers -> memory (``st.<space>.v<n>.b<bits>``)
``tvm_tirx.cp_async_cg_16B_<dtype>``        16 bytes, global -> shared, asynchronous (``cp.async.cg.shared.global``)
=========================================  ==============================================

``<space>`` is ``global`` or ``shared``, ``<n>`` is 2 or 4, ``<dtype>`` is
``f32``, ``i32``, ``u32`` (``.b32``) or ``f16``, ``bf16`` (``.b16``).  The
``cp.async`` copies leave completion to the schedule's author (``commit_group``
/ ``wait_group`` and a barrier), as every tile call does.

Warp-level matrix intrinsics (:mod:`._warp`) move and multiply register
fragments held in ``"warp"``-scope buffers, apache-tvm's convention: a
``rows x cols`` tile is a ``(32, rows * cols / 32)`` buffer (lane, slot), laid
out by :func:`~._fragments.fragment_index` (for 16 x 16 tiles the same map as
apache-tvm's ``shared_16x16_to_ldmatrix_32x8_layout``), so a schedule written
for apache-tvm's ``mma_*`` intrinsics tensorizes with these too:

=================================================  ==================================================
``tvm_tirx.ldmatrix_x{1,2,4}[_trans]_<dtype>``       shared tile -> fragment (``ldmatrix...m8n8.x{1,2,4}[.trans]...b16``)
``tvm_tirx.stmatrix_x{1,2,4}[_trans]_<dtype>``       fragment -> shared tile (``stmatrix...``, sm_90)
``tvm_tirx.mma_m16n{8,16}k16_f32_<dtype>``           ``C += A @ B^T`` on fragments (``mma.sync.aligned.m16n8k16.row.col.f32...``)
``tvm_tirx.mma_fill_16x{8,16}_f32``                  accumulator fragment = 0 (``mov.b32``)
``tvm_tirx.mma_store_16x{8,16}_f32_<space>``         accumulator fragment -> memory (``st.<space>.v2.f32``)
=================================================  ==================================================

``x1``, ``x2``, ``x4`` move 8 x 8, 8 x 16 and 16 x 16 tiles (rows x cols of
the fragment; ``_trans`` reads the transposed tile from memory).  Fragments
held in ``"warp"`` buffers become per-thread registers when the kernel is
built (:mod:`tvm_tirx.schedule.scheduled_registers`); every access to such a buffer
must then be one of these intrinsics.

Hardware facts: PTX ISA 9.7.10.8 / 9.7.10.11 (``ld`` / ``st``), 9.7.9.25.3
(``cp.async``), 9.7.14.5.15 / 9.7.14.5.16 (``ldmatrix`` / ``stmatrix``),
9.7.14.5.8 (``mma.sync`` m16n8k16 fragments).
"""

from __future__ import annotations

import functools
import subprocess
import sys

from ..intrin_registry import MARKER, PREFIX, operand_builder, register, registered
from . import _memory, _warp

__all__ = [
    "PREFIX", "MARKER", "list_intrinsics", "register_all", "register", "operand_builder", "tensorize_supported",
]  # fmt: skip


def register_all() -> None:
    """Register every intrinsic of this package with ``tvm.s_tir.TensorIntrin``
    (idempotent; runs at import)."""
    if registered():
        return
    _memory.register_memory()
    _warp.register_warp()


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
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, timeout=300, check=False)
    return done.returncode == 0


def list_intrinsics() -> list:
    """The names of the registered intrinsics (``"tvm_tirx.ld_global_v4_f32"`` ...), sorted."""
    register_all()
    return sorted(registered())


register_all()
