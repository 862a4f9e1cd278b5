"""Split-K in one launch: the CTAs that share an output tile, each over a part of K, meet
in per-split slabs of a float32 workspace, and the last of them finishes the tile.

A consumer thread holds its fp32 accumulators as a ``(chunks, 2, 2 // width, width)``
view (:attr:`SplitK.values_shape`): register ``4 b + 2 h + e`` of the wgmma fragment map
(PTX ISA 9.7.15.5.1.1); the kernel's
``element(b, h, e, at)`` says where that register lies in C (``(row, col)``, int32), which
differs between kernels (the tile kernel's ``C``, the small-M kernel's ``C^T``).

:meth:`SplitK.make_publish`: every thread stores its registers inside C into its split's
slab, ``Partial[row, split * n + col]`` (``st.global.f32``: plain stores, no atomics),
fences them at GPU scope, and the consumer threads meet at a named barrier; one thread
(``leader``) counts the CTA in ``Counters[tile]`` between two ``fence.acq_rel.gpu`` (PTX
ISA 8.8: the release and acquire patterns, as CUDA's threadfence reduction) with
``atom.global.inc.u32`` bounded by ``splits - 1``, which wraps the counter back to 0 on the
last count, and publishes the count it found in a shared word; a second barrier hands it
to every consumer thread.  :meth:`SplitK.last` is then true in the CTA that found
``splits - 1``: it runs :meth:`SplitK.make_gather`, which reads slab 0 into the registers
and adds slabs 1, 2, ... in order (``ld.relaxed.gpu``: from L2, never a stale L1 line;
``add.rn.f32``), then the kernel's epilogue.  Each further slab is read in groups of up to
:data:`GROUP` register chunks into the scratch registers ``Workspace.part``, all of a
group's loads written before its adds (ptxas batches the loads either way; the groups cost
the tile kernel fewer registers: 128 x 128 tiles in 2 / 4 splits spill 0 / 188 bytes, 24 /
264 taken element by element).  The sum is the same whichever CTA comes
last, so the result is bitwise reproducible; ``Counters`` is zero again after every
launch and ``Partial`` needs no initial value (every element read was stored in the same
launch).  Only the elements inside C (``row < m`` and ``col < n``) are stored and read:
each access is predicated on that (``pred=``, PTX ``@p``), and where :attr:`SplitK.pairs`
holds with an even ``n`` a thread's two registers side by side in a row of C move as one
``.v2`` access.  On an H100 (ncu, 2026-12-06, ``1000^3`` in 2 splits) the earlier form --
an ``if``, an address and a 4-byte access per element -- left the last CTA issue-bound
(33.7 us against 13.3 unsplit); this one took 22.6 us.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, NamedTuple

from tvm.script import tirx as T

from .sequence import then

__all__ = ["GROUP", "SplitK", "Workspace", "make_walk", "no_empty_split"]

#: register chunks (4 fp32 registers each) of one slab read before they are added: the
#: loads a thread keeps in flight, and ``4 * GROUP`` scratch registers
GROUP = 8


def no_empty_split(k_tiles: int, splits: int) -> bool:
    """Whether ``splits`` splits of ``ceil(k_tiles / splits)`` K tiles each leave every
    split at least one of the ``k_tiles`` (the last split's range starts inside K)."""
    return (splits - 1) * -(-k_tiles // splits) < k_tiles


class Workspace(NamedTuple):
    """The memory of one split-K reduction.

    Attributes
    ----------
    partial : Buffer
        ``Partial (m, splits * n)`` float32, global: split ``s``'s slab is columns
        ``s n .. s n + n - 1``.
    counters : Buffer
        ``Counters`` uint32, global, zero before a launch (and left zero by it).
    slot : Buffer
        A ``(1,)`` uint32 shared buffer: the count the leader found.
    got : Buffer
        A ``(1,)`` uint32 register array (the leader's ``atom`` result).
    part : Buffer
        A ``(SplitK.part_registers,)`` float32 register array: a group of a slab's
        elements as they are read back.
    """

    partial: object
    counters: object
    slot: object
    got: object
    part: object


def make_walk(chunks: int, m, n: int, element: Callable, step, start: int = 0, width: int = 1):
    """The macro ``walk(tensor, values, at)``: ``step(tensor, value, row, col, at, pred)``
    for each of a thread's registers (``width`` 1) or side-by-side register pairs (``width``
    2: registers ``4 b + 2 h`` and ``4 b + 2 h + 1``, which ``element`` places at ``col``
    and ``col + 1`` of one row), ``values`` a ``(chunks, 2, 2 // width, width)`` view of
    chunks ``start .. start + chunks - 1`` (register ``4 b + 2 h + e`` at ``values[b -
    start, h, e // width, e % width]``), ``value`` its ``(width,)`` view, ``(row, col) =
    element(b, h, e, at)`` of its first register, ``row`` cast to int64 (row offsets of
    large tensors pass 2^31 elements) and ``pred`` whether all of it lies inside C (``row <
    m and col + width - 1 < n``): the step's access takes it as ``pred=`` (PTX ``@p``), so
    no branch surrounds it."""

    @T.macro
    def walk(tensor, values, at):
        for b in T.unroll(chunks):
            for h in T.unroll(2):
                for e in T.unroll(2 // width):
                    row, col = element(start + b, h, e * width, at)
                    step(tensor, values.sub[b, h, e, :], T.Cast("int64", row), col, at,
                         T.And(row < m, col + (width - 1) < n))

    return walk


def _make_slab_step(n: int, action: str, width: int):
    """The step between ``width`` registers and their elements of slab ``at.split``:
    ``"store"`` them, or ``"load"`` the elements into them (``.v2`` for a pair)."""
    vector = ".v2" if width == 2 else ""

    @T.macro
    def slab_step(work, value, row, col, at, pred):
        if action == "store":
            T.cuda.tile.apply(T.ptx[f"st.global{vector}.f32"],
                              work.partial.sub[row, at.split * n + col : at.split * n + col + width], value, pred=pred)
        else:
            T.cuda.tile.apply(T.ptx[f"ld.relaxed.gpu.global{vector}.f32"], value,
                              work.partial.sub[row, at.split * n + col : at.split * n + col + width], pred=pred)

    return slab_step


@dataclass(frozen=True)
class SplitK:
    """The split-K reduction of a kernel whose consumer threads hold ``4 chunks`` fp32
    registers, viewed :attr:`values_shape` (module docstring).

    Attributes
    ----------
    splits : int
        CTAs per output tile (at least 2).
    m : int or tvm.tirx.Var
        Rows of C.
    n : int
        Columns of C (the width of one slab), elements.
    chunks : int
        The first extent of a thread's register view (registers / 4).
    element : Callable
        ``element(b, h, e, at) -> (row, col)``: where register ``4 b + 2 h + e`` lies in C.
    threads : int
        The consumer threads that meet at the named barrier (all of the CTA's but the
        producer's), a multiple of 32.
    leader : int
        The thread index that counts the CTA (one of the consumers).
    barrier : int
        The named barrier's id (PTX ISA 9.7.13.1, ``barrier.sync``), not used by the kernel
        between its main loop and its epilogue for anything else.
    pairs : bool
        Whether ``element`` puts registers ``4 b + 2 h`` and ``4 b + 2 h + 1`` side by side
        in one row of C at an even column (the tile kernel's C; not the small-M kernel's
        C^T): with an even ``n`` they then move as one 8-byte ``.v2`` access
        (:attr:`width`), and ``Partial`` must be 8-byte aligned.
    """

    splits: int
    m: object
    n: int
    chunks: int
    element: Callable
    threads: int = 256
    leader: int = 128
    barrier: int = 1
    pairs: bool = False

    @property
    def width(self) -> int:
        """Registers per slab access: 2 with :attr:`pairs` and an even ``n`` (every pair
        then starts at an 8-byte boundary of ``Partial``), else 1."""
        return 2 if self.pairs and self.n % 2 == 0 else 1

    @property
    def values_shape(self) -> tuple:
        """The view of a thread's registers the macros take: ``(chunks, 2, 2 // width,
        width)``, register ``4 b + 2 h + e`` at ``[b, h, e // width, e % width]``."""
        return (self.chunks, 2, 2 // self.width, self.width)

    def make_publish(self):
        """The macro ``publish(work, values, at, tile)``: the CTA's registers ``values``
        into its slab ``at.split`` of ``work`` (a :class:`Workspace`), then its count in
        ``work.counters[tile]`` (``tile`` a pair of int32 indices, the tile's row inside
        ``Counters`` cast to int64 here); every consumer thread returns knowing
        :meth:`last`."""
        put = make_walk(self.chunks, self.m, self.n, self.element, _make_slab_step(self.n, "store", self.width),
                        width=self.width)
        splits, leader, bar, count, m = self.splits, self.leader, self.barrier, self.threads, self.m

        @T.macro
        def publish(work, values, at, tile):
            put(work, values, at)
            T.ptx["fence.acq_rel.gpu"]()  # this thread's stores, visible at GPU scope
            T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.uint32(bar), count=T.uint32(count))
            if T.And(at.tid == leader, tile[0] < m):  # (tile[0] < m always: the tile's first row)
                T.ptx["fence.acq_rel.gpu"]()  # release: the CTA's stores (the barrier's) before the count
                # atom.inc wraps: the last count (splits - 1) sets the counter back to 0 (PTX ISA,
                # atom: .inc gives old >= b ? 0 : old + 1), for the next launch
                T.cuda.tile.apply(T.ptx["atom.global.inc.u32"], work.got,
                                  work.counters.sub[T.Cast("int64", tile[0]), tile[1] : tile[1] + 1],
                                  T.uint32(splits - 1))
                T.ptx["fence.acq_rel.gpu"]()  # acquire: the counted CTAs' stores before the reads
                work.slot[0] = work.got[0]
            T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.uint32(bar), count=T.uint32(count))

        return publish

    @property
    def part_registers(self) -> int:
        """The float32 registers ``Workspace.part`` has: ``4 * min(chunks, GROUP)``."""
        return 4 * min(self.chunks, GROUP)

    def last(self, work):
        """Whether this CTA completed its tile's count (after :meth:`make_publish`'s macro)."""
        return work.slot[0] == T.uint32(self.splits - 1)

    def _make_add_span(self, step, start: int, size: int, group: int):
        """The macro ``add(work, values, at)``: chunks ``start .. start + size - 1`` of slab
        ``at.split`` read into ``work.part`` (viewed as ``values``, with ``group`` chunks),
        then added to ``values``."""
        read = make_walk(size, self.m, self.n, self.element, step, start, self.width)
        shape, chunks = (group, *self.values_shape[1:]), self.chunks

        @T.macro
        def add(work, values, at):
            read(work, work.part.view(*shape), at)
            acc, scratch = values.view(chunks, 4, 1), work.part.view(group, 4, 1)  # add.rn.f32's atom: one register
            T.cuda.tile.apply(T.ptx["add.rn.f32"], acc.sub[start : start + size, :, :], acc.sub[start : start + size, :, :],
                              scratch.sub[0:size, :, :])

        return add

    def make_gather(self):
        """The macro ``gather(work, values, at)``, for the CTA where :meth:`last` holds
        (``at`` a named tuple with a ``split`` field): the tile's sum into ``values``, slab 0
        then each further slab added in order, a group of :data:`GROUP` chunks at a time
        (all its loads, then its adds; registers outside C add stale scratch values and
        are never stored)."""
        step = _make_slab_step(self.n, "load", self.width)
        load = make_walk(self.chunks, self.m, self.n, self.element, step, width=self.width)
        group = min(self.chunks, GROUP)
        add = functools.reduce(then, [self._make_add_span(step, start, min(group, self.chunks - start), group)
                                       for start in range(0, self.chunks, group)])
        splits = self.splits

        @T.macro
        def gather(work, values, at):
            T.ptx["fence.acq_rel.gpu"]()
            load(work, values, at._replace(split=0))
            for j in T.unroll(1, splits):
                add(work, values, at._replace(split=j))

        return gather
