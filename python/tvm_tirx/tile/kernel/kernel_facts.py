"""What lowering knows of the kernel being lowered: root tensors, variable
ranges, loops, the launch, run-time scalars and the guards around each tile call.

:class:`KernelFacts` is built once per PrimFunc by one walk of its body; the
proofs (:mod:`..analysis.points`, :mod:`..analysis.memory_proofs`, :mod:`..analysis.groups`) read it.
"""

from __future__ import annotations

import re

from .kernel_calls import KernelCalls
from ..ir.launch_ids import CUDA_ID_NAMES, binding, scope_pairs, thread_binding_ids, thread_tag
from ..analysis.machine_ints import extent_facts
from ..rules.op import is_tile_call
from ..analysis.prover import make_analyzer
from ..rules.raw_calls import is_raw_checked
from ..rules.raw_tile import is_raw_tile_candidate
from ..ir.scope import LaunchFacts
from .sites import collect_sites, is_assume
from ..ir.views import dtype_bytes, int_or_none

__all__ = ["KernelFacts", "is_checked_call"]


#: The names apache-tvm's TVMScript printer gives ids nobody named.
_INTERNAL_NAME = re.compile(r"|v(_\d+)?")


def _prod(shape):
    out = 1
    for s in shape:
        out *= s
    return out


def _is_dyn_pool(buf) -> bool:
    """Whether ``buf`` is a dynamic shared memory pool: a ``shared.dyn`` buffer of
    zero extent (apache-tvm's ``extern __shared__`` convention) or of a run-time
    extent (a run-time ``dynamic_smem_bytes``); see :mod:`tvm_tirx.script.dyn_smem`.
    Buffers declared over it are carve-outs."""
    return buf.scope() == "shared.dyn" and int_or_none(_prod(buf.shape)) in (0, None)


def _carve_out_offset(buf):
    """Byte offset of carve-out ``buf`` in its pool (an expression)."""
    return buf.elem_offset * dtype_bytes(buf.dtype)


def _alloc_extent(buf):
    """Elements of an allocation: its layout's span (a gapped layout); with
    strides (``sch.storage_align`` pads rows), the element after the last one
    they reach; else its shape's product."""
    layout = buf.layout
    if layout is not None:
        value = int_or_none(layout.span())
        if value is not None:
            return value
    if len(buf.strides):
        last = 0
        for extent, stride in zip(buf.shape, buf.strides):
            last = last + (extent - 1) * stride
        return last + 1
    return _prod(buf.shape)


class KernelFacts:  # pylint: disable=too-many-instance-attributes
    """What the proofs need from the enclosing PrimFunc.

    Attributes
    ----------
    arch : str | None
        The target's ``sm_XY`` (None when no target is bound).
    roots : dict
        Root buffer (parameter or allocation) -> element extent.
    parent : dict
        View buffer -> the buffer it views.
    ranges : dict
        Var -> ``(lo, hi)``: constant range ``[lo, hi)`` of loop and id vars.
    loops : list
        ``(var, min, extent, step)`` of every ``For``.
    launch : LaunchFacts | None
        The launch, when the kernel defines its thread ids.
    scalars : dict
        Single-assignment local scalar buffer -> its value (``w = T.cuda.warp_id()``).
    sites : dict
        :func:`.sites.call_key` of each tile-call ``Evaluate`` (and of each raw
        ``T.ptx`` call a family checks, :mod:`..rules.raw_calls`) -> its
        :class:`~.sites.CallSite` (guards, assumptions, enclosing loops).
    calls : KernelCalls
        The same calls, each decoded once on first use: ``calls.tile_call(stmt)``
        (:class:`~..rules.op.TileCall`) and ``calls.view(stmt)`` (the as-written
        :class:`~..ir.call_view.CallView`), for every reader of the kernel.
    params : tuple
        The kernel's tensor parameters (buffers), in order.
    family_values : dict
        Values a family creates once per kernel and every call shares (a
        TMA's tensor map per distinct encoding); keys are the family's.
    entry_attrs : dict
        Attributes the kernel's body sets with ``T.attr`` (key -> value), such
        as the launch bounds ``T.device_entry`` writes
        (``tirx.launch_bounds_min_blocks_per_sm``, ``tirx.max_registers``).
    """

    def __init__(self, func):
        import tvm  # pylint: disable=import-outside-toplevel
        from tvm import tirx  # pylint: disable=import-outside-toplevel

        self.arch = _target_arch(func)
        self.analyzer = make_analyzer()
        self.params = tuple(p for p in func.params if tirx.is_buffer_var(p))
        self.roots = {p: _prod(p.shape) for p in self.params}
        self.family_values = {}
        self.parent, self.ranges, self.loops = {}, {}, []
        #: lo <= var < hi of each var with a symbolic range, 0 <= extent of each
        #: symbolic tensor extent, the element count of a tensor with int32
        #: run-time extents, the host's ``assert`` conditions: true wherever the var exists
        self.range_facts = extent_facts(self.params)
        #: root -> byte offset of its first element in its storage (dynamic
        #: shared memory carve-outs; 0 for every other root)
        self.base_bytes = {}
        #: launch id Var -> its CUDA name (``threadIdx.x``, ``blockIdx.y``), for messages
        self.cuda_names = {}
        self.launch = None
        self.entry_attrs = {}
        self._walk(func.body)
        #: the kernel's tile calls and checked raw calls, each decoded once (:mod:`.kernel_calls`)
        self.calls = KernelCalls(self)
        self.sites = collect_sites(func.body, self.calls.targets, self.root_of, is_checked_call)
        self.body = func.body
        self._uniformity = None

    def _walk(self, body):
        """One walk of ``body``: allocations, views, ids, loops, stores."""
        import tvm_ffi  # pylint: disable=import-outside-toplevel
        from tvm import tirx  # pylint: disable=import-outside-toplevel

        from tvm.s_tir import SBlock  # pylint: disable=import-outside-toplevel

        ids, stores, assumed = {}, {}, []

        def visit(node):
            if isinstance(node, tirx.AllocBuffer):
                self.roots[node.buffer] = _alloc_extent(node.buffer)
            elif isinstance(node, tirx.DeclBuffer):
                args = getattr(node.data, "args", None)
                if args and tirx.is_buffer_var(args[0]) and _is_dyn_pool(args[0]):
                    # a carve-out of dynamic shared memory: a root of its own
                    # (own extent, own align), base_bytes into the pool
                    self.roots[node.buffer] = _alloc_extent(node.buffer)
                    self.base_bytes[node.buffer] = _carve_out_offset(node.buffer)
                elif args and tirx.is_buffer_var(args[0]):
                    self.parent[node.buffer] = args[0]
            elif isinstance(node, tirx.ScopeIdDefStmt):
                self._scope_ids(getattr(node, "def"), ids)
            elif isinstance(node, tirx.For) and thread_tag(node) is not None:
                self._thread_binding(node, ids)
            elif isinstance(node, tirx.For):
                self._bind(node.loop_var, node.min, node.min + node.extent)
                step = int_or_none(getattr(node, "step", None)) or 1
                self.loops.append((node.loop_var, node.min, node.extent, step))
            elif isinstance(node, SBlock):
                # an s_tir block's own allocations (``T.sblock_alloc_buffer``)
                for buf in node.alloc_buffers:
                    self.roots[buf] = _alloc_extent(buf)
            elif isinstance(node, tirx.BufferStore):
                stores.setdefault(node.buffer, []).append(node.value)
            elif isinstance(node, tirx.AttrStmt):
                self.entry_attrs[str(node.attr_key)] = node.value
            else:
                self._fact(node, assumed)

        tvm_ffi.structural_walk(body, (object, visit))
        thread_binding_ids(ids)
        # `w = T.cuda.warp_id()` parses to a local scalar stored once; reading
        # it is reading that value, which the proofs need to see.
        self.scalars = {
            buf: values[0]
            for buf, values in stores.items()
            if len(values) == 1 and _prod(buf.shape) == 1 and buf.scope() == "local"
        }
        #: the ``T.assume`` conditions of the body, scalars expanded
        self.assumed = [self.expand_scalars(c) for c in assumed]
        block, cluster = ids.get("block"), ids.get("cluster")
        if block is not None:
            self.launch = LaunchFacts(
                block=tuple(block[1]) + (1,) * (3 - len(block[1])),
                thread_vars=block[0],
                cluster=tuple(cluster[1]) if cluster else (),
                cluster_vars=tuple(cluster[0]) if cluster else (),
            )

    def _fact(self, node, assumed):
        """Record a ``T.assume`` condition in ``assumed``, a host ``assert`` (checked
        before the launch) in :attr:`range_facts`."""
        from tvm import tirx  # pylint: disable=import-outside-toplevel

        if is_assume(node):
            assumed.append(node.value.args[0])
        elif isinstance(node, tirx.AssertStmt):
            self.range_facts.append(node.condition)

    def _scope_ids(self, d, ids):
        """Record the ranges of a ``ScopeIdDef``'s ids, and the thread / cluster-CTA ids."""
        if d.extents is None:
            return
        prefix = CUDA_ID_NAMES.get(scope_pairs().get(int(d.scope)))
        for axis, (var, ext) in enumerate(zip(d.def_ids, d.extents)):
            self._bind(var, 0, ext)
            if prefix is not None and axis < 3:
                self.cuda_names[var] = f"{prefix}.{'xyz'[axis]}"
        extents = tuple(int_or_none(e) for e in d.extents)
        if None in extents:
            return
        if d.scope == binding("cta", "thread"):
            ids["block"] = (tuple(d.def_ids), extents)
        elif d.scope == binding("cluster", "cta"):
            ids["cluster"] = (tuple(d.def_ids), extents)

    def _thread_binding(self, node, ids):
        """Record a thread-binding loop of an s_tir schedule (``sch.bind(loop,
        "threadIdx.x")``): its var is that CUDA id, ranging over the loop."""
        tag = thread_tag(node)
        self._bind(node.loop_var, node.min, node.min + node.extent)
        self.cuda_names[node.loop_var] = tag
        if tag.startswith("threadIdx."):
            ids.setdefault("thread_bindings", {})[tag[-1]] = (node.loop_var, int_or_none(node.extent))

    def _bind(self, var, lo, hi):
        import tvm  # pylint: disable=import-outside-toplevel

        try:
            self.analyzer.bind(var, tvm.ir.Range(lo, hi))
        except Exception:  # pylint: disable=broad-except
            pass  # a symbolic range the analyzer cannot take: the fact below still holds
        lo_int, hi_int = int_or_none(lo), int_or_none(hi)
        if lo_int is not None and hi_int is not None:
            self.ranges[var] = (lo_int, hi_int)
        else:
            # The analyzer reads a symbolic range [lo, hi) as "hi <= lo or lo <= var <
            # hi"; where var exists (inside its loop, in a launched CTA) the range is
            # not empty, so lo <= var < hi is a fact.
            self.range_facts.append(tvm.tirx.all(lo <= var, var < hi))

    @property
    def uniformity(self):
        """The kernel's :class:`~..analysis.uniformity.Uniformity` (built on first use)."""
        if self._uniformity is None:
            from ..analysis.call_results import result_level  # pylint: disable=import-outside-toplevel
            from ..analysis.uniformity import Uniformity  # pylint: disable=import-outside-toplevel

            self._uniformity = Uniformity(self, self.body, lambda stmt, buf: result_level(self, stmt, buf))
        return self._uniformity

    def known(self, conds=()) -> tuple:
        """``conds`` with the kernel-wide facts (:attr:`range_facts`) before them:
        what the proofs of a call take as given (:func:`..analysis.prover.proves`)."""
        return (*self.range_facts, *conds)

    def split_assumed(self, conds) -> tuple:
        """``(guards, assumptions)``: ``conds`` split into those the kernel
        computes (if-conditions, predicates) and ``T.assume`` conditions."""
        import tvm_ffi  # pylint: disable=import-outside-toplevel

        def assumed(c):
            return any(tvm_ffi.structural_equal(c, a) for a in self.assumed)

        return tuple(c for c in conds if not assumed(c)), tuple(c for c in conds if assumed(c))

    def name_of(self, var) -> str:
        """``var``'s name in messages: the user's, or the CUDA name of a launch id
        that has none of its own (the parser names such ids ``v``, ``v_1`` ...)."""
        name = str(var.name)
        if _INTERNAL_NAME.fullmatch(name):
            return self.cuda_names.get(var, name or "?")
        return name

    def display(self, expr) -> str:
        """``expr`` as text, launch ids the user did not name shown by their CUDA
        names (``blockIdx.x * 4096 + threadIdx.x * 16``)."""
        import tvm_ffi  # pylint: disable=import-outside-toplevel
        from tvm.ir import Var  # pylint: disable=import-outside-toplevel

        shown = {}

        def rename(v):
            name = self.name_of(v)
            if name == str(v.name):
                return v
            placeholder = f"tvm_tirx_id{len(shown)}_"
            shown[placeholder] = name
            return Var(placeholder, v.ty)

        text = str(tvm_ffi.structural_map(expr, (Var, rename)))
        for placeholder, name in shown.items():
            text = text.replace(placeholder, name)
        return text

    def per_thread_vars(self) -> list:
        """The thread and cluster-CTA id Vars of the launch."""
        launch = self.launch
        return [*launch.thread_vars, *launch.cluster_vars] if launch is not None else []

    def all_threads(self) -> list:
        """``[(t, c)]``: every linear thread ``t`` of every cluster rank ``c``."""
        launch = self.launch
        return [(t, c) for c in range(launch.cluster_size) for t in range(launch.threads)]

    def expand_scalars(self, expr):
        """``expr`` with loads of single-assignment local scalars replaced by their value."""
        import tvm_ffi  # pylint: disable=import-outside-toplevel
        from tvm.ir import TensorLoad  # pylint: disable=import-outside-toplevel

        if not self.scalars:
            return expr

        def sub(load):
            for buf, value in self.scalars.items():
                if load.source.same_as(buf):
                    return self.expand_scalars(value)
            return load

        return tvm_ffi.structural_map(expr, (TensorLoad, sub))

    def root_bytes(self, root):
        """Bytes of root allocation ``root`` (its element extent times its element
        size, every lane counted; an expression for a run-time extent)."""
        from tvm.tirx import Cast, IntImm  # pylint: disable=import-outside-toplevel

        extent = self.roots[root]
        if isinstance(extent, IntImm):  # in int64: 4 GiB and more do not wrap
            return IntImm("int64", int(extent.value) * dtype_bytes(root.dtype))
        return Cast("int64", extent) * dtype_bytes(root.dtype)

    def rounded_dtype_views(self, buf) -> list:
        """``[(view, parent)]``: the links of ``buf``'s view chain made by
        apache-tvm's ``.view(dtype)`` to a wider dtype, whose start may have
        been rounded down (``tirx/_buffer_view.py`` divides the element offset
        by the width ratio).  A link is one when its element offset is that
        quotient and not provably exact; a ``T.decl_buffer`` alias with an
        offset of its own is taken as written."""
        from tvm.tirx import floordiv  # pylint: disable=import-outside-toplevel

        out, seen = [], 0
        while buf in self.parent and seen < 64:
            parent, seen = self.parent[buf], seen + 1
            wide, narrow = dtype_bytes(buf.dtype), dtype_bytes(parent.dtype)
            if wide > narrow and wide % narrow == 0:
                child_eo = self.expand_scalars(buf.elem_offset)
                parent_eo = self.expand_scalars(parent.elem_offset)
                exact = self.analyzer.can_prove_equal(child_eo * wide, parent_eo * narrow)
                if not exact and self.analyzer.can_prove_equal(child_eo, floordiv(parent_eo, wide // narrow)):
                    out.append((buf, parent))
            buf = parent
        return out

    def root_of(self, buf):
        """The parameter or allocation that ``buf`` views, or None."""
        seen = 0
        while buf not in self.roots and buf in self.parent and seen < 64:
            buf, seen = self.parent[buf], seen + 1
        return buf if buf in self.roots else None


def is_checked_call(stmt) -> bool:
    """Whether ``stmt`` (an ``Evaluate``) is a call the lowering checks: a tile call, or a
    raw ``T.ptx`` call checked as its tile form (a family's raw spelling, or one with
    address operands that spells a tile call)."""
    return is_tile_call(stmt.value) or is_raw_checked(stmt.value) or is_raw_tile_candidate(stmt.value)


def _target_arch(func=None) -> str | None:
    """``arch`` of the PrimFunc's own ``target`` attribute (what ``tvm.compile``
    binds before its TIR pipeline runs), else of the current ``tvm.target.Target``."""
    from tvm.target import Target  # pylint: disable=import-outside-toplevel

    target = None
    if func is not None and func.attrs is not None and "target" in func.attrs:
        target = func.attrs["target"]
    if target is None:
        target = Target.current(allow_none=True)
    if target is None:
        return None
    arch = target.attrs.get("arch")
    return str(arch) if arch else None
