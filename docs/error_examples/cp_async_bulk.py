"""The ``cp_async_bulk`` family (``cp.async.bulk``): sizes, runs, the mbarrier and the multicast mask.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import COLLECTIVE, PROTOCOL, Case, example


CASES = [
    Case(
        COLLECTIVE,
        r"bulk copy size not a positive multiple of 16 bytes",
        "Bulk copy of a size that is not a multiple of 16 bytes",
        example('''
            @T.function
            def kernel(A: T.Tensor((6,), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
                s = T.alloc_shared((6,), "float32", align=16)
                bar = T.alloc_shared((1,), "uint64", align=8)
                T.cuda.tile.apply(T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"],
                                  s, A, mbar=bar)
        '''),
        "parse",
        "``cp.async.bulk`` copies a run of bytes whose size is a positive multiple "
        "of 16; the last axis of each operand is that run.",
        "Copy runs of 16-byte multiples (pad the tensor), or use ``cp.async`` for small pieces.",
    ),
    Case(
        COLLECTIVE,
        r"bulk copy runs differ in size",
        "Bulk copy between runs of different sizes",
        example('''
            @T.function
            def kernel(B: T.Tensor((8,), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
                s = T.alloc_shared((16,), "float32", align=16)
                T.cuda.tile.apply(T.ptx["cp.async.bulk.global.shared::cta.bulk_group"], B, s)
        '''),
        "parse",
        "One copy moves the same bytes out of the source as into the destination: "
        "both last axes must hold the same number of bytes.",
        "Narrow one view (``s.sub[0:8]``) or view both with the same run.",
    ),
    Case(
        COLLECTIVE,
        r"missing parameter 'mbar'",
        "Bulk copy without its mbarrier",
        example('''
            @T.function
            def kernel(A: T.Tensor((64,), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
                s = T.alloc_shared((64,), "float32", align=16)
                T.cuda.tile.apply(T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"], s, A)
        '''),
        "parse",
        "The ``.mbarrier::complete_tx::bytes`` forms complete on an mbarrier, which "
        "the call passes by keyword.",
        "Pass ``mbar=bar`` (a ``uint64`` shared view of shape ``(1,)``).",
    ),
    Case(
        COLLECTIVE,
        r"cta_mask names CTAs outside the cluster",
        "Multicast mask beyond the cluster",
        example('''
            @T.function
            def kernel(A: T.Tensor((64,), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=1, cluster=2))
                s = T.alloc_shared((64,), "float32", align=16)
                bar = T.alloc_shared((1,), "uint64", align=8)
                T.cuda.tile.apply(
                    T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"],
                    s, A, mbar=bar, cta_mask=T.uint16(0b100))
        '''),
        "lower",
        "Bit ``i`` of ``cta_mask`` sends the data to the CTA of rank ``i`` in the cluster; "
        "a cluster of 2 has ranks 0 and 1.",
        "Set only bits below the cluster size (``T.uint16(0b11)`` for both CTAs of a pair).",
    ),
]

# -- protocols --------------------------------------------------------------------------------------

CASES += [
    Case(
        PROTOCOL,
        r"shared memory rewritten before the bulk store has read it",
        "Tile rewritten before the bulk store has read it",
        example('''
            @T.function
            def kernel(B: T.Tensor((4, 1024), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                buf = T.alloc_shared((1024,), "float32", align=128)
                tid = T.cuda.thread_idx("x")
                for i in T.serial(4):
                    for j in T.unroll(4):
                        buf[j * 256 + tid] = T.float32(i)
                    T.ptx["fence.proxy.async.shared::cta"]()
                    T.cuda.cta_sync()
                    if tid == 0:
                        T.cuda.tile.apply(T.ptx["cp.async.bulk.global.shared::cta.bulk_group"], B.sub[i, :], buf)
                        T.ptx["cp.async.bulk.commit_group"]()
                    T.cuda.cta_sync()
        '''),
        "lower",
        "The bulk store reads ``buf`` asynchronously; the next iteration's threads write ``buf`` "
        "again before anything waited for that read, so the store may copy the new values.",
        "Thread 0 waits for the store's read before the barrier that releases the writers: "
        "``T.ptx[\"cp.async.bulk.wait_group.read\"](0)`` after the commit.",
    ),
]
