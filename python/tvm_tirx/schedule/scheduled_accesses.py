"""Memory addresses of expanded tile calls in scheduled kernels, in the form
apache-tvm's ``s_tir`` pipeline understands.

A tile call expands into ``T.ptx`` calls whose memory operands are
``address_of(view[coord])`` of views with TIRx layouts (strided, permuted,
re-typed: ``ldmatrix`` row addresses, fragment stores).  Two stock ``s_tir``
steps get such an address wrong, so in a scheduled kernel it is rewritten
first:

* ``FlattenBuffer`` flattens a view's indices over its shape, row-major, not
  through its layout: the address of row ``r`` of a permuted ``(4, 8, 4)``
  view of a padded tile came out as ``4 * lane`` words.  Here the offset is
  the view's own (:class:`~tvm_tirx.tile.ir.views.ViewMap`, as the proofs see it).
* The barriers of a scheduled kernel are inserted by ``ThreadSync("shared")``,
  and its shared memory is planned by ``StorageRewrite`` /
  ``MergeSharedMemoryAllocations``; these see buffer loads, stores and
  ``tvm_access_ptr`` calls with a read/write mask
  (``src/s_tir/transform/storage_access.cc``), not ``address_of``.  Without
  the rewrite a kernel staging data in shared memory for ``ldmatrix`` got no
  barrier between the stores and the loads (a race).

:func:`expose_memory_accesses` therefore turns, inside every ``T.ptx`` call of
the kernel, each ``address_of(view[coord])`` of a memory (not register) view
into ``tvm_access_ptr(allocation dtype, data, element offset, 1, mask)``: the
same address, with the direction the enclosing block declares (``T.reads`` ->
read, ``T.writes`` -> write; neither -> both).  Hand-written kernels do not go
through it: apache-tvm's ``"tirx"`` pipeline lowers their views, and their
barriers are explicit (the tile contract inserts none).
"""

from __future__ import annotations

import tvm_ffi
from tvm import s_tir, tirx
from tvm.ir import Call, TensorLoad
from tvm.runtime import DataType

from ..errors import TileInternalError
from ..tile.kernel.kernel_facts import KernelFacts
from ..tile.ir.views import ViewMap

__all__ = ["expose_memory_accesses"]

#: storage scopes of registers: their operands are values, not addresses
REGISTER_SCOPES = ("local",)
#: ``tvm_access_ptr`` masks (``tvm/tirx/builtin.h``)
READ, WRITE = 1, 2


def _is_ptx_call(node) -> bool:
    op = getattr(node, "op", None)
    return op is not None and str(getattr(op, "name", "")).startswith("tirx.ptx.")


def _masks(block, root_of) -> list:
    """``[(allocation, mask)]`` of the buffers ``block`` declares it reads or writes."""
    out = []
    for regions, mask in ((block.reads, READ), (block.writes, WRITE)):
        for region in regions:
            root = root_of(region.source)
            if root is None:
                continue
            old = next((m for r, m in out if r.same_as(root)), 0)
            out = [(r, m) for r, m in out if not r.same_as(root)] + [(root, old | mask)]
    return out


def _access_ptr(load, root, mask):
    """``tvm_access_ptr`` of the element ``load`` (a BufferLoad of a view of
    ``root``) names, in elements of ``root``'s dtype (``tvm_access_ptr`` must
    use it), or None when the element does not start on one."""
    buf = load.source
    ratio, rest = divmod(DataType(str(buf.dtype)).bits, DataType(str(root.dtype)).bits)
    if ratio == 0 or rest:
        return None
    offset = (buf.elem_offset + ViewMap(buf).apply(tuple(load.indices))["m"]) * ratio
    return tirx.call_intrin(
        "handle", "tirx.tvm_access_ptr", tirx.type_annotation(root.dtype), buf.data, offset, 1, mask
    )


def _rewrite_addresses(call, masks, root_of):
    """``call`` with each memory ``address_of(view[...])`` argument as an access pointer."""
    def visit(node):
        if str(getattr(node.op, "name", "")) != "tirx.address_of" or not isinstance(node.args[0], TensorLoad):
            return node
        load = node.args[0]
        if load.source.scope() in REGISTER_SCOPES:
            return node
        root = root_of(load.source)
        if root is None:
            raise TileInternalError(f"no allocation found for the {load.source.scope()} view '{load.source.name}'")
        exposed = _access_ptr(load, root, next((m for r, m in masks if r.same_as(root)), READ | WRITE))
        if exposed is None:
            raise TileInternalError(
                f"a {load.source.scope()} view of {load.source.dtype} over {root.dtype} storage: "
                "its address cannot be given to apache-tvm's barrier analysis"
            )
        return exposed

    return tvm_ffi.structural_map(call, (Call, visit))


def _rewrite_block(block, root_of):
    masks = _masks(block, root_of)

    def visit(node):
        if not _is_ptx_call(node.value):
            return node
        return tirx.Evaluate(_rewrite_addresses(node.value, masks, root_of), span=node.span)

    body = tvm_ffi.structural_map(block.body, (tirx.Evaluate, visit))
    if body.same_as(block.body):
        return block
    return s_tir.SBlock(
        block.iter_vars, block.reads, block.writes, block.name_hint, body, block.init,
        block.alloc_buffers, block.match_buffers, block.annotations, block.span,
    )  # fmt: skip


def expose_memory_accesses(func):
    """PrimFunc ``func`` (an ``s_tir`` kernel whose tile calls are expanded) with
    the memory addresses of its ``T.ptx`` calls as ``tvm_access_ptr``
    (module docstring).  A block's mask for a buffer is what its ``T.reads`` /
    ``T.writes`` say; a buffer it declares neither way is marked read-write.

    Returns
    -------
    tvm.tirx.PrimFunc

    Raises
    ------
    TileInternalError
        A view narrower than its allocation's elements (no intrinsic makes
        one), or one whose allocation the kernel does not declare.
    """
    root_of = KernelFacts(func).root_of
    return func.with_body(tvm_ffi.structural_map(func.body, (s_tir.SBlock, lambda b: _rewrite_block(b, root_of))))
