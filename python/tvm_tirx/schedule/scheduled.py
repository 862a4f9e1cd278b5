"""Tile calls in scheduled ``s_tir`` PrimFuncs: what the ``"tvm_tirx"`` pipeline
does before apache-tvm's ``"s_tir"`` pipeline when ``sch.tensorize`` put
``T.cuda.tile.apply`` calls into a kernel (:mod:`tvm_tirx.schedule.tensor_intrin`).

1. :func:`prefix_passes`: apache-tvm's own first ``s_tir`` passes, through
   ``UnifyThreadBinding``: blocks become opaque, block iterators are replaced
   by loop expressions, and each bound thread id (``sch.bind(loop,
   "threadIdx.x")``) is one loop var per tag -- what the proofs read
   (:class:`~tvm_tirx.tile.kernel.kernel_facts.KernelFacts` takes thread-binding
   loops as the launch).
2. :func:`BindTileOperands`: a tensorized block passes its tiles to the
   intrinsic through ``match_buffer``; apache-tvm's ``LowerMatchBuffer``
   rewrites element accesses but not a buffer passed whole to a call, so here
   each matched buffer that a tile call reads is replaced by the equal view of
   its source (``source.sub[region]``, declared in the block), whose offset,
   strides and alignment the proofs then see.
3. ``LowerMatchBuffer`` and :func:`~tvm_tirx.tile.lower.lower.lower_tile_apply`; a
   :class:`~tvm_tirx.TileError` names the block and the intrinsic.
4. :func:`~tvm_tirx.schedule.scheduled_accesses.expose_memory_accesses`: the
   expanded calls' memory addresses become ``tvm_access_ptr`` calls, their
   offsets computed through the views' layouts and marked with the block's
   read/write direction, so that the stock pipeline neither flattens them
   row-major nor misses them when it puts the CTA barriers a scheduled kernel
   needs (``ThreadSync``) and plans its shared memory.

The result still is an ``s_tir`` PrimFunc; the whole stock ``"s_tir"``
pipeline runs on it next (its first passes find nothing more to do).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.script.ir_builder import IRBuilder, tirx as builder
from tvm.tirx.buffer import buffer_data
from tvm.tirx.layout import S, TileLayout
from tvm.tirx.transform import prim_func_pass

from ..tile.lower.lower import lower_tile_apply
from ..tile.rules.op import decode, is_tile_call, unchecked_call
from ..tile.ir.views import int_or_none
from . import scheduled_registers as regs
from .intrin_registry import MARKER, operand_builder
from .scheduled_accesses import expose_memory_accesses

__all__ = ["has_tile_calls", "prefix_passes", "BindTileOperands", "lower_scheduled", "LowerScheduledTileCalls"]


def has_tile_calls(func) -> bool:
    """Whether PrimFunc ``func`` holds a ``T.cuda.tile.apply`` call."""
    return _holds_tile_calls(func.body)


def _holds_tile_calls(stmt) -> bool:
    found = []
    tvm_ffi.structural_walk(stmt, (tirx.Evaluate, lambda n: found.append(1) if is_tile_call(n.value) else None))
    return bool(found)


def prefix_passes() -> list:
    """apache-tvm's ``s_tir`` passes that run before tile calls are lowered (the
    first ones of ``tvm/s_tir/pipeline.py``, in its order)."""
    t = s_tir.transform
    return [
        t.CanonicalizeLoop(),
        t.LowerCrossThreadReduction(),
        t.LowerInitBlock(),
        t.PlanAndUpdateBufferAllocationLocation(),
        t.ConvertBlocksToOpaque(),
        t.LiftThreadBinding(),
        t.ManifestSharedMemoryLocalStage(),
        t.CompactBufferAllocation(),
        t.LowerAutoCopy(),
        t.UnifyThreadBinding(),
    ]


def _strides(buf) -> list:
    """Element strides of ``buf``: its own, or row-major over its shape."""
    if len(buf.strides):
        return list(buf.strides)
    out, step = [], 1
    for extent in reversed(list(buf.shape)):
        out.append(step)
        step = step * extent
    return out[::-1]


def _source_view(match):
    """``(view, DeclBuffer)``: the view of ``match``'s source region with the
    matched buffer's shape -- region axes of extent 1 that the matched buffer
    does not have are dropped -- as a strided layout over the source's storage
    (the source's offset plus the region's start, in elements)."""
    buf, region = match.buffer, match.source
    source, ranges = region.source, list(region.region)
    strides = _strides(source)
    offset = source.elem_offset
    for r, stride in zip(ranges, strides):
        offset = offset + r.min * stride
    kept = [(int_or_none(r.extent), st) for r, st in zip(ranges, strides)]
    drop = len(kept) - len(buf.shape)
    while drop > 0:
        ones = next((i for i, (e, _) in enumerate(kept) if e == 1), None)
        if ones is None:
            break
        del kept[ones]
        drop -= 1
    shape = tuple(e for e, _ in kept)
    layout = TileLayout(S[shape : tuple(st for _, st in kept)])
    view = tirx.decl_buffer(
        shape, buf.dtype, name=f"{buf.name}_view", elem_offset=offset, scope=source.scope(),
        data_alignment=int(source.data_alignment), layout=layout,
    )  # fmt: skip
    return view, [tirx.DeclBuffer(view, data=buffer_data(source))]


def _marked(body):
    """``(intrinsic name or None, body without the marker AttrStmt)``."""
    if isinstance(body, tirx.AttrStmt) and body.attr_key == MARKER:
        return str(body.value.value if hasattr(body.value, "value") else body.value), body.body
    return None, body


def _with_origin(body, where):
    """``body`` with each tile call's span naming ``where`` (block and intrinsic)."""
    def mark(node):
        if not is_tile_call(node.value):
            return node
        old = node.value.span if node.value.span is not None else node.span
        line = getattr(old, "line", 0) or 1
        span = tvm.ir.Span(tvm.ir.SourceName(where), line, line, 0, 0)
        call = node.value
        call = tvm.ir.Call(call.op, list(call.args), call.attrs, span=span, ret_ty=call.ty)
        return tirx.Evaluate(call, span=span)

    return tvm_ffi.structural_map(body, (tirx.Evaluate, mark))


def _warp_sources(func) -> list:
    """``[(buffer, where)]``: the ``"warp"`` buffers that blocks holding tile
    calls match tiles of, each with the first such block (``"block 'name'"``)."""
    found = []

    def visit(block):
        if not _holds_tile_calls(block.body):
            return
        for match in block.match_buffers:
            src = match.source.source
            if src.scope() == "warp" and not any(src.same_as(b) for b, _ in found):
                found.append((src, f"block '{block.name_hint}'"))

    tvm_ffi.structural_walk(func.body, (s_tir.SBlock, visit))
    return found


def _shaped(body, name):
    """``body``'s tile call rebuilt with the operands that intrinsic ``name``'s
    ``operands`` function makes of it (:func:`tvm_tirx.schedule.tensor_intrin.register`),
    their views declared before it; ``body`` itself when it has none."""
    build = operand_builder(name) if name else None
    if build is None or not isinstance(body, tirx.Evaluate) or not is_tile_call(body.value):
        return body
    call = decode(body.value)
    with IRBuilder() as ib:
        with builder.prim_func():
            operands = build(*call.operands)
            builder.evaluate(
                unchecked_call(call.opcode, *operands, scope=call.scope, pred=call.pred,
                               preserve_dst=call.preserve_dst, **call.params)
            )  # fmt: skip
    return ib.get().body


def _bind_block(block, registers):
    """The block with its matched buffers replaced by source views in tile calls
    (``registers``: the thread's storage of each ``"warp"`` buffer)."""
    name, body = _marked(block.body)
    if (name is None and not block.match_buffers) or not _holds_tile_calls(body):
        return block
    where = f"block '{block.name_hint}'" + (f" (tensor intrinsic {name})" if name else "")
    decls, subst = [], {}
    for match in block.match_buffers:
        storage = next((v for k, v in registers.items() if k.same_as(match.source.source)), None)
        view, stmts = regs.register_tile(match, storage, where) if storage is not None else _source_view(match)
        decls += stmts
        subst[match.buffer] = view

    def sub(var):
        for old, new in subst.items():
            if var.same_as(old):
                return new
        return var

    body = tvm_ffi.structural_map(body, (tirx.Var, sub)) if subst else body
    body = _with_origin(_shaped(body, name), where)
    body = tirx.SeqStmt([*decls, body]) if decls else body
    return s_tir.SBlock(
        block.iter_vars, block.reads, block.writes, block.name_hint, body, block.init,
        block.alloc_buffers, block.match_buffers, block.annotations, block.span,
    )  # fmt: skip


def _bind_func(func):
    """:func:`BindTileOperands` on one PrimFunc."""
    storage = regs.register_storage(_warp_sources(func))
    body = tvm_ffi.structural_map(func.body, (s_tir.SBlock, lambda b: _bind_block(b, storage)))
    if storage:
        body = tvm_ffi.structural_map(body, (s_tir.SBlock, lambda b: regs.replace_allocations(b, storage)))
        tvm_ffi.structural_walk(body, (s_tir.SBlock, lambda b: regs.refuse_element_access(b, storage)))
    return func.with_body(body)


def BindTileOperands():  # pylint: disable=invalid-name
    """PrimFunc pass: in each block that holds tile calls, matched buffers become
    views of their source region and the calls' spans name the block and the
    tensor intrinsic (see the module docstring).  Run after
    :func:`prefix_passes` and before apache-tvm's ``LowerMatchBuffer``.

    Returns
    -------
    tvm.transform.Pass
    """
    @prim_func_pass(opt_level=0, name="tvm_tirx.BindTileOperands")
    def _pass(func, mod, ctx):  # pylint: disable=unused-argument
        if not has_tile_calls(func):
            return func
        return _bind_func(func)

    return _pass


def lower_scheduled(mod):
    """``mod`` with steps 1-4 of the module docstring applied to every PrimFunc
    holding tile calls (other functions are left as they are).

    Raises
    ------
    TileError
        A tile call put there by ``tensorize`` breaks its contract; the message
        names the block and the tensor intrinsic.
    """
    tiled = {gv: f for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc) and has_tile_calls(f)}
    if not tiled:
        return mod
    steps = tvm.ir.transform.Sequential(
        [*prefix_passes(), BindTileOperands(), s_tir.transform.LowerMatchBuffer(), s_tir.transform.StmtSimplify()]
    )
    out = mod.clone()
    for gv, func in steps(tvm.IRModule(tiled, attrs=mod.attrs)).functions.items():
        out.update_func(out.get_global_var(gv.name_hint), expose_memory_accesses(lower_tile_apply(func)))
    return out


def LowerScheduledTileCalls():  # pylint: disable=invalid-name
    """Module pass running :func:`lower_scheduled`.

    Returns
    -------
    tvm.transform.Pass
    """
    @tvm.transform.module_pass(opt_level=0, name="tvm_tirx.LowerScheduledTileCalls")
    def _pass(mod, _ctx):
        return lower_scheduled(mod)

    return _pass
