"""The ``named_barrier`` family: ``bar.sync`` / ``bar.arrive`` ids and counts, the threads
that use each barrier, and the cluster barrier.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import COLLECTIVE, PRED, Case, example


CASES = [
    Case(
        PRED,
        r"barrier id outside 0\.\.15",
        "Named barrier id outside 0..15",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                T.cuda.tile.apply(T.ptx["bar.sync"], id=T.uint32(16), count=T.uint32(256))
        '''),
        "parse",
        "A CTA has sixteen named barriers, numbered 0 to 15 (PTX ISA 9.7.13.1).  An id "
        "computed from the thread ids is checked for every warp when the kernel is lowered.",
        "Use an id in 1..15 (0 is ``T.cuda.cta_sync()``'s barrier).",
    ),
    Case(
        PRED,
        r"thread count not a positive multiple of 32",
        "Named barrier count that is not a multiple of 32",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                if T.cuda.thread_idx("x") < 96:
                    T.cuda.tile.apply(T.ptx["bar.sync"], id=T.uint32(1), count=T.uint32(100))
        '''),
        "parse",
        "The hardware counts a barrier's arrivals per warp, 32 threads at a time: the "
        "ISA requires the count to be a multiple of the warp size.",
        "Count whole warps: ``count=T.uint32(96)`` for the three warps under the guard.",
    ),
    Case(
        PRED,
        r"thread count above the CTA's threads",
        "Named barrier count above the CTA's threads",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
                T.cuda.tile.apply(T.ptx["bar.sync"], id=T.uint32(1), count=T.uint32(256))
        '''),
        "lower",
        "A named barrier joins threads of one CTA: it cannot wait for more threads than "
        "the CTA has (it would never complete).",
        "Count the threads that take part, at most the block size.",
    ),
    Case(
        PRED,
        r"pred on a barrier",
        "pred= on a named barrier",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                T.cuda.tile.apply(T.ptx["bar.sync"], id=T.uint32(1), count=T.uint32(128),
                                  pred=T.cuda.warp_id() < 4)
        '''),
        "parse",
        "The threads that take part in a barrier are counted from the guards around the "
        "call; a predicate would hide which threads arrive.",
        "Write the condition as a guard: ``if T.cuda.warp_id() < 4:`` around the call.",
    ),
    Case(
        PRED,
        r"barrier id not known when compiling",
        "Named barrier id only known at run time",
        example('''
            @T.function
            def kernel(which: T.int32):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
                T.cuda.tile.apply(T.ptx["bar.sync"], id=T.uint32(which), count=T.uint32(128))
        '''),
        "lower",
        "The threads of each barrier id are counted when the kernel is compiled, so the id "
        "and the count must be computable then: constants, or expressions of thread ids, "
        "loop counters and CTA ids.",
        "Compute the id from the thread ids (``1 + tid // 128``) or a loop counter, or "
        "branch on the run-time value around calls with constant ids.",
    ),
    Case(
        COLLECTIVE,
        r"barrier id not uniform over the warp",
        "Named barrier id that differs within a warp",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                tid = T.cuda.thread_idx("x")
                T.cuda.tile.apply(T.ptx["bar.sync"], id=T.uint32(1 + tid % 2), count=T.uint32(128))
        '''),
        "lower",
        "A warp arrives at a barrier once, for all its threads: its 32 threads must name "
        "the same barrier and the same count.",
        "Derive the id from the warp or warpgroup index: ``id=T.uint32(1 + tid // 128)``.",
    ),
    Case(
        COLLECTIVE,
        r"barrier reached by part of a warp",
        "Named barrier under a guard that splits a warp",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                if T.cuda.thread_idx("x") < 48:
                    T.cuda.tile.apply(T.ptx["bar.sync"], id=T.uint32(1), count=T.uint32(64))
        '''),
        "lower",
        "``bar.sync`` is ``barrier.sync.aligned``: every thread of a warp executes it "
        "together, and the barrier counts the warp's 32 threads when the warp arrives.  "
        "``tid < 48`` keeps half of warp 1.",
        "Guard whole warps (``if T.cuda.warp_id() < 2:``); a non-aligned ``barrier.sync`` "
        "may be reached by a warp's threads at different call sites.",
    ),
    Case(
        COLLECTIVE,
        r"barrier \d+: count \d+ but \d+ threads use it",
        "Named barrier count other than the threads that use it",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384))
                wg = T.cuda.warp_id() // 4
                if wg == 1:
                    T.cuda.tile.apply(T.ptx["bar.sync"], id=T.uint32(2), count=T.uint32(256))
        '''),
        "lower",
        "A barrier completes when ``count`` threads have arrived.  Across the kernel only "
        "warpgroup 1 uses barrier 2: its 128 threads would wait forever for 128 more.  The "
        "rule counts the threads that use each id at every call site, sync and arrive.",
        "Give the partner its half (warpgroup 2 ``bar.arrive`` on barrier 2 with count "
        "256, the ping-pong of FlashAttention-3), or count the threads that take part: "
        "``count=T.uint32(128)``.",
    ),
    Case(
        COLLECTIVE,
        r"barrier \d+: calls state different counts",
        "Calls on one named barrier with different counts",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                if T.cuda.warp_id() < 4:
                    T.cuda.tile.apply(T.ptx["bar.arrive"], id=T.uint32(1), count=T.uint32(256))
                else:
                    T.cuda.tile.apply(T.ptx["bar.sync"], id=T.uint32(1), count=T.uint32(128))
        '''),
        "lower",
        "Every thread that arrives at a barrier states how many threads it waits for; "
        "calls on one id that disagree leave the barrier's count undefined.",
        "State the one count of the barrier at every call (here 256: both warpgroups).",
    ),
    Case(
        COLLECTIVE,
        r"barrier 0 with a count other than the CTA's threads",
        "Named barrier 0 over part of the CTA",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                if T.cuda.warp_id() < 4:
                    T.cuda.tile.apply(T.ptx["bar.sync"], id=T.uint32(0), count=T.uint32(128))
        '''),
        "lower",
        "Barrier 0 is the one ``T.cuda.cta_sync()`` (``__syncthreads()``) uses, with "
        "every thread of the CTA; sharing it with a smaller count mixes the two.",
        "Use another id (1..15) for a barrier over part of the CTA.",
    ),
    Case(
        COLLECTIVE,
        r"barrier\.cluster needs a cluster launch",
        "Cluster barrier without a cluster launch",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=128))
                T.cuda.tile.apply(T.ptx["barrier.cluster.arrive.release.aligned"])
                T.cuda.tile.apply(T.ptx["barrier.cluster.wait.acquire.aligned"])
        '''),
        "lower",
        "``barrier.cluster`` joins the CTAs of a cluster; without ``cluster=`` each CTA is "
        "its own cluster and a CTA barrier says the same more cheaply.",
        "Launch clusters (``cluster=2``), or use ``T.cuda.cta_sync()``.",
    ),
    Case(
        COLLECTIVE,
        r"barrier\.cluster reached by part of the cluster",
        "Cluster barrier under a guard",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=128, cluster=2))
                if T.cuda.thread_idx("x") < 64:
                    T.cuda.tile.apply(T.ptx["barrier.cluster.arrive.release.aligned"])
                T.cuda.tile.apply(T.ptx["barrier.cluster.wait.acquire.aligned"])
        '''),
        "lower",
        "The cluster barrier completes when every thread of every CTA of the cluster has "
        "arrived; threads that skip the arrive leave the others waiting.",
        "Arrive with every thread (no guard around ``barrier.cluster.arrive``).",
    ),
    Case(
        COLLECTIVE,
        r"barrier 1: count 256 but 128 threads use it",
        "Raw bar.sync reached by fewer threads than its count",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                if T.cuda.warp_id() < 4:
                    T.ptx["bar.sync"](T.uint32(1), T.uint32(256))
        '''),
        "lower",
        "A raw ``T.ptx[\"bar.sync\"](id, count)`` call is checked as the tile form "
        "``T.cuda.tile.apply(T.ptx[\"bar.sync\"], id=..., count=...)``: the same rules count "
        "the threads that reach each barrier id.  Here warpgroup 0 waits for 256 threads "
        "and only its 128 ever arrive: the kernel hangs.",
        "State the threads that take part (``T.uint32(128)``), or let every warp reach the barrier.",
    ),
]
