"""Warp-scope fragment buffers of a scheduled kernel, as per-thread registers.

apache-tvm's schedules keep an mma fragment in a ``"warp"``-scope buffer whose
last two axes are (lane, slot): ``(..., 32, s)`` per warp, ``s`` values per
lane (``sch.cache_read(block, i, "warp")`` then ``transform_layout`` with a
fragment map, see :mod:`tvm_tirx.schedule.tensor_intrin`).  A tile call wants the
thread's own registers instead, with the lane in the layout.  So, for every
``"warp"`` buffer that a tensor intrinsic of ours reads or writes:

* its allocation becomes a ``"local"`` buffer of ``prod(...) * s`` values, the
  lane axis dropped (:func:`register_storage`);
* each tile of it that a tensorized block matched -- one ``(32, s)`` fragment --
  becomes a view of those registers at the fragment's first slot
  (:func:`register_tile`);
* any other access to it is refused (:func:`refuse_element_access`): a block
  that reads one lane's slot by index would need apache-tvm's warp-memory
  lowering, which no longer applies.
"""

from __future__ import annotations

import tvm_ffi
from tvm import s_tir, tirx
from tvm.ir import TensorLoad
from tvm.sym import Analyzer
from tvm.tirx.buffer import buffer_data

from ..errors import TileError

__all__ = ["register_storage", "register_tile", "replace_allocations", "refuse_element_access"]


def register_storage(warp_buffers) -> dict:
    """``{warp buffer: local buffer}``: per-thread storage for each ``"warp"``
    buffer of ``warp_buffers`` (``[(buffer, where)]``; shape ``(..., 32, s)``,
    ``s`` values per lane; ``where`` names a block that tensorized a tile of it).

    Raises
    ------
    TileError
        A buffer's second-to-last axis is not the 32 lanes of a warp; the
        message's location is ``where``.
    """
    out = {}
    for buf, where in warp_buffers:
        shape = [int(n) for n in buf.shape]
        if len(shape) < 2 or shape[-2] != 32:
            raise TileError(
                "", f"warp-scope fragment buffer '{buf.name}' must end in (lanes, slots)",
                expected="shape (..., 32, slots) (transform_layout with a fragment map)", found=str(tuple(shape)),
                location=where,
            )  # fmt: skip
        count = 1
        for n in shape[:-2]:
            count *= n
        out[buf] = tirx.decl_buffer((count * shape[-1],), buf.dtype, name=f"{buf.name}_regs", scope="local")
    return out


def register_tile(match, storage, where=None):
    """``(view, [DeclBuffer])``: the thread's registers of the fragment that
    ``match`` (a block's ``MatchBufferRegion`` over a ``"warp"`` buffer) names,
    as a ``(s,)`` local view of ``storage`` at the fragment's first slot.
    ``where`` (the block and intrinsic) is the error's location.

    Raises
    ------
    TileError
        The region is not one whole fragment: all 32 lanes and all ``s`` slots
        of a single leading coordinate.
    """
    region = match.source
    buf, ranges = region.source, list(region.region)
    shape = [int(n) for n in buf.shape]
    slots = shape[-1]
    ana = Analyzer()
    whole = [(r.min, r.extent, lo, n) for r, lo, n in zip(ranges[-2:], (0, 0), shape[-2:])]
    ones = [r.extent for r in ranges[:-2]]
    if not all(ana.can_prove_equal(m, lo) and ana.can_prove_equal(e, n) for m, e, lo, n in whole) or not all(
        ana.can_prove_equal(e, 1) for e in ones
    ):
        raise TileError(
            "", f"a tile of warp-scope buffer '{buf.name}' is not one whole fragment",
            expected=f"[i, ..., 0:32, 0:{slots}]", found=str(region), location=where,
        )  # fmt: skip
    offset, step = 0, slots
    for r, n in reversed(list(zip(ranges[:-2], shape[:-2]))):
        offset = offset + r.min * step
        step *= n
    view = tirx.decl_buffer(
        (slots,), buf.dtype, name=f"{match.buffer.name}_regs", data=storage.data,
        elem_offset=ana.simplify(offset), scope="local",
    )  # fmt: skip
    return view, [tirx.DeclBuffer(view, data=buffer_data(storage))]


def _is(buf, storage) -> bool:
    return any(buf.same_as(b) for b in storage)


def replace_allocations(block, storage):
    """``block`` (an ``SBlock``) with each ``"warp"`` buffer of ``storage``
    allocated as its registers, and its read/write regions of them dropped."""
    allocs = [next((v for k, v in storage.items() if k.same_as(b)), b) for b in block.alloc_buffers]
    reads = [r for r in block.reads if not _is(r.source, storage)]
    writes = [r for r in block.writes if not _is(r.source, storage)]
    matches = [m for m in block.match_buffers if not _is(m.source.source, storage)]
    kept = len(reads) + len(writes) + len(matches) == len(block.reads) + len(block.writes) + len(block.match_buffers)
    if kept and all(a.same_as(b) for a, b in zip(allocs, block.alloc_buffers)):
        return block
    return s_tir.SBlock(
        block.iter_vars, reads, writes, block.name_hint, block.body, block.init,
        allocs, matches, block.annotations, block.span,
    )  # fmt: skip


def refuse_element_access(block, storage) -> None:
    """Raise if ``block``'s own statements (nested blocks excluded) load or
    store a ``"warp"`` buffer of ``storage`` element by element.

    Raises
    ------
    TileError
        Names the block and the buffer: it must be tensorized with one of
        :mod:`tvm_tirx.schedule.tensor_intrin`'s fragment intrinsics.
    """
    own = tvm_ffi.structural_map(block.body, (s_tir.SBlockRealize, lambda _: tirx.Evaluate(0)))
    found = []

    def visit(node):
        buf = node.buffer if isinstance(node, tirx.BufferStore) else node.source
        if _is(buf, storage):
            found.append(buf.name)

    tvm_ffi.structural_walk(own, ((TensorLoad, tirx.BufferStore), visit))
    if found:
        raise TileError(
            "", f"warp-scope fragment buffer '{found[0]}' is read or written element by element",
            expected="every access to a fragment that a tvm_tirx intrinsic touches is a tvm_tirx fragment "
            "intrinsic (ldmatrix/stmatrix/mma/mma_fill/mma_store); tensorize this block too",
            found="a BufferLoad/BufferStore", location=f"block '{block.name_hint}'",
        )  # fmt: skip
