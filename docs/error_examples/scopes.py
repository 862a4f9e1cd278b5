"""Execution scopes: groups, guards and which thread owns which register.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import SCOPE, Case, example


CASES = [
    Case(
        SCOPE,
        r"unknown execution scope",
        "Unknown scope name",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :], scope="grid")
        '''),
        "parse",
        "Scopes are ``thread``, ``warp``, ``warpgroup``, ``cta`` and ``cluster``.",
        "Use one of the names in the message.",
    ),
    Case(
        SCOPE,
        r"group shape does not match the scope",
        "Group axes that do not match the launch",
        example('''
            cta_regs = TileLayout(S[(2, 32, 3, 4) : (1 @ Axis.warpid, 1 @ Axis.laneid, 4, 1)])

            @T.function
            def kernel(A: T.Tensor((64, 12), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
                r = T.alloc_local((2, 32, 3, 4), "float32", layout=cta_regs)
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 32, 3, 4), scope="cta")
        '''),
        "lower",
        "At ``scope=\"cta\"`` the leading axes are ``(warps, 32)`` of the launch: "
        "128 threads give ``(4, 32)``, but the operands start with ``(2, 32)``.",
        "Shape the operands for the launch's block, or launch the block the tile "
        "was written for.",
    ),
    Case(
        SCOPE,
        r"-scope call needs whole",
        "Block that is not whole warps",
        example('''
            warp_regs = TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)])

            @T.function
            def kernel(A: T.Tensor((48, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=48))
                r = T.alloc_local((32, 4), "float32", layout=warp_regs)
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[0:32, :], scope="warp")
        '''),
        "lower",
        "A warp-scope call spreads over whole warps (warpgroup scope: whole "
        "warpgroups of 128 threads); 48 threads leave a partial warp.",
        "Launch a multiple of 32 threads (128 for ``warpgroup``), or restrict the "
        "call with a guard to the full warps.",
    ),
    Case(
        SCOPE,
        r"cluster scope without a cluster launch",
        "Cluster scope without clusters",
        example('''
            @T.function
            def kernel(A: T.Tensor((2, 64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64))
                r = T.alloc_local((2, 2, 32, 4), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 2, 32, 4), scope="cluster")
        '''),
        "parse",
        "The cluster scope's leading group axes are the CTA's position in its "
        "cluster, which only a cluster launch has.",
        "Launch with ``T.cuda.LaunchConfig(..., cluster=2)`` (sm_90 or newer).",
    ),
    Case(
        SCOPE,
        r"-scope call needs the kernel's launch",
        "Collective scope without a launch",
        example('''
            warp_regs = TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)])

            @T.function
            def kernel(A: T.Tensor((32, 4), "float32", align=16)):
                T.device_entry()
                r = T.alloc_local((32, 4), "float32", layout=warp_regs)
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")
        '''),
        "lower",
        "Group coordinates are computed from the thread indices of the launch; "
        "this kernel declares none.",
        "Start the kernel with ``T.device_entry(launch=T.cuda.LaunchConfig(grid=..., block=...))``.",
    ),
    Case(
        SCOPE,
        r"register value owned by another thread",
        "Register layout that puts values on the wrong lane",
        example('''
            wrong = TileLayout(S[(2, 32, 4) : (1 @ Axis.warpid, 2 @ Axis.laneid, 1)])

            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                r = T.alloc_local((2, 32, 4), "float32", layout=wrong)
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 32, 4), scope="cta")
        '''),
        "lower",
        "The thread at group coordinate ``(w, l)`` issues the instruction for "
        "that coordinate, so the layout must place those values on lane ``l`` "
        "of warp ``w``; a stride of 2 on ``laneid`` places them elsewhere. "
        "Values never move between threads.",
        "Give each group axis a thread axis with stride 1 in group order, e.g. "
        "``S[(2, 32, 4) : (1 @ Axis.warpid, 1 @ Axis.laneid, 1)]``.",
    ),
    Case(
        SCOPE,
        r"group axis not mapped to a thread axis",
        "Register tensor without thread axes at a collective scope",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                r = T.alloc_local((2, 32, 4), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 32, 4), scope="cta")
        '''),
        "lower",
        "A default (thread-local) layout would give every thread all 256 values; "
        "the group axes must be distributed over threads.",
        "Allocate the registers with a layout whose leading axes use "
        "``Axis.warpid`` / ``Axis.laneid`` (see the tile contract page).",
    ),
    Case(
        SCOPE,
        r"guard not uniform over the warp",
        "Guard that reads memory",
        example('''
            warp_regs = TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)])

            @T.function
            def kernel(A: T.Tensor((32, 4), "float32", align=16), Flag: T.Tensor((32,), "int32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((32, 4), "float32", layout=warp_regs)
                if Flag[tid] == 1:
                    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")
        '''),
        "lower",
        "Around a call at warp scope or wider, the ``if`` decides which threads of "
        "the group take part.  A condition over thread ids is evaluated for every "
        "thread; any other part of it must have one value for all threads of the "
        "group (loop counters, ``blockIdx``, a value every lane loads from one "
        "address).  ``Flag[tid]`` is read from a different address by each lane, so "
        "the lanes may disagree.",
        "Move the condition into ``pred=``, read one flag per warp, or compute a "
        "thread-id range instead.",
    ),
    Case(
        SCOPE,
        r"guard not uniform over the warp: .*ticket is loaded from shared memory slot that no CTA barrier publishes",
        "Guard on a shared-memory value no barrier publishes",
        example('''
            warp_regs = TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)])

            @T.function
            def kernel(A: T.Tensor((32, 4), "float32", align=16), Work: T.Tensor((2,), "int32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((32, 4), "float32", layout=warp_regs)
                slot = T.alloc_shared((1,), "int32", align=4)
                ticket = T.alloc_local((1,), "int32")
                if tid == 0:
                    slot[0] = Work[T.cuda.block_idx("x")]
                T.cuda.tile.apply(T.ptx["ld.shared.b32"], ticket, slot)
                if ticket[0] > 0:
                    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")
        '''),
        "lower",
        "One thread writes the ticket and every thread reads it back, but nothing "
        "orders the read after the write: the other lanes may read the slot before "
        "thread 0 has stored into it, so they may disagree.  A value read from shared "
        "memory -- as ``slot[0]``, with an ``ld.shared`` tile call or a raw "
        "``T.ptx`` call, and through ``T.cast``, ``mov``, ``cvt`` or arithmetic on "
        "it -- is uniform when a CTA barrier publishes it.",
        "Put ``T.cuda.cta_sync()`` between the store and the read (and another before "
        "the slot is written again, in a loop).",
    ),
    Case(
        SCOPE,
        r"CTA barrier reached by part of the CTA",
        "CTA barrier under a guard that part of the CTA passes",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])
                if tid < 32:
                    T.cuda.cta_sync()
        '''),
        "lower",
        "``T.cuda.cta_sync()`` (``bar.sync 0``) waits for every thread of the CTA "
        "(PTX ISA 9.7.13.1); reached by half of them it deadlocks, or synchronises "
        "the wrong threads.  ``T.cuda.cluster_sync()`` likewise needs every thread "
        "of the cluster.",
        "Call the barrier where every thread reaches it (outside the ``if``), or use "
        "a named barrier over the threads that do.",
    ),
    Case(
        SCOPE,
        r"guard not understood",
        "Guard over thread ids the lowering cannot evaluate",
        example('''
            warp_regs = TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)])

            @T.function
            def kernel(A: T.Tensor((32, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((32, 4), "float32", layout=warp_regs)
                if T.popcount(tid) == 1:
                    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")
        '''),
        "lower",
        "A condition over thread ids is evaluated for every thread of the launch; "
        "``T.popcount`` is a call the lowering's arithmetic does not evaluate, so it "
        "cannot tell which threads take part.",
        "Write the condition with comparisons and integer arithmetic over the ids "
        "(``tid & (tid - 1) == 0`` for powers of two), or move it into ``pred=``.",
    ),
    Case(
        SCOPE,
        r"guarded threads do not form a box of the group",
        "Guard selecting a non-rectangular set of lanes",
        example('''
            regs = TileLayout(S[(16, 4) : (1 @ Axis.laneid, 1)])

            @T.function
            def kernel(A: T.Tensor((16, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                r = T.alloc_local((16, 4), "float32", layout=regs)
                if T.cuda.lane_id() % 2 == 0:
                    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")
        '''),
        "lower",
        "Under a guard, the participating threads become the group; they must form "
        "a contiguous range of group coordinates (even lanes do not).",
        "Guard with a range (``T.cuda.lane_id() < 16``), or use ``pred=`` on a "
        "full-warp call.",
    ),
    Case(
        SCOPE,
        r"guarded threads differ between instances of the scope",
        "Guard selecting different lanes in different warps",
        example('''
            regs = TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)])

            @T.function
            def kernel(A: T.Tensor((32, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                r = T.alloc_local((32, 4), "float32", layout=regs)
                if T.cuda.thread_idx("x") < 48:
                    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")
        '''),
        "lower",
        "One call has one group shape: warp 0 runs it with 32 lanes but warp 1 "
        "with 16.",
        "Guard so that every instance (every warp here) keeps the same lanes, or "
        "select whole warps (``T.cuda.warp_id() == 0``).",
    ),
]
