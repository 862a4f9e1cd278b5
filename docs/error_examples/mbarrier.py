"""The ``mbarrier`` family and ``T.cuda.mbarrier_wait_phase``: peer CTAs and the barrier waited on.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import COLLECTIVE, PRED, PROTOCOL, Case, example


CASES = [
    Case(
        COLLECTIVE,
        r"remote_cta_id needs a cluster launch",
        "Peer CTA without a cluster launch",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32))
                tid = T.cuda.thread_idx("x")
                bar = T.alloc_shared((1,), "uint64", align=8)
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.arrive.release.cluster.shared::cluster.b64"], bar,
                                      remote_cta_id=T.uint32(1))
        '''),
        "lower",
        "``remote_cta_id`` names a CTA of the cluster, and ``.multicast::cluster`` "
        "writes to several: without ``cluster=`` in the launch there is no other CTA.",
        "Launch clusters: ``T.cuda.LaunchConfig(grid=2, block=32, cluster=2)``.",
    ),
    Case(
        COLLECTIVE,
        r"remote_cta_id outside the cluster",
        "Peer rank outside the cluster",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=32, cluster=2))
                tid = T.cuda.thread_idx("x")
                bar = T.alloc_shared((1,), "uint64", align=8)
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cluster.b64"], bar, remote_cta_id=T.uint32(2))
        '''),
        "lower",
        "``remote_cta_id`` is the rank of a CTA inside its cluster (``%cluster_ctarank``), "
        "from 0 to the cluster size minus one, not a block index.",
        "Pass the rank within the cluster, e.g. ``1 - rank`` for the other CTA of a pair.",
    ),
    Case(
        PRED,
        r"invalid parameter 'remote_cta_id'",
        "Peer rank of the wrong type",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32, cluster=2))
                bar = T.alloc_shared((1,), "uint64", align=8)
                T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cluster.b64"], bar, remote_cta_id=T.float32(1))
        '''),
        "parse",
        "A parameter the family owns (no PTX operand of its own) failed the family's "
        "check: ``remote_cta_id`` is a 32-bit integer rank.",
        "Pass ``T.uint32(rank)`` or an int32/uint32 expression.",
    ),
    Case(
        COLLECTIVE,
        r"not one mbarrier",
        "Waiting on a view that is not one mbarrier",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                bars = T.alloc_shared((2, 1), "uint64", align=8)
                T.cuda.mbarrier_wait_phase(bars, 0)
        '''),
        "parse",
        "``T.cuda.mbarrier_wait_phase`` waits on one barrier: a ``uint64`` shared view "
        "of shape ``(1,)``.",
        "Select the stage: ``T.cuda.mbarrier_wait_phase(bars.sub[s, :], phase)``.",
    ),
    Case(
        COLLECTIVE,
        r"barrier is not a tensor view",
        "Waiting on an address instead of a view",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                bar = T.alloc_shared((1,), "uint64", align=8)
                T.cuda.mbarrier_wait_phase(bar.ptr_to([0]), 0)
        '''),
        "parse",
        "The helper checks the barrier as the tile families do, so it takes the view, "
        "not a pointer.",
        "Pass the view (``bar``, ``bars.sub[s, :]``); apache-tvm's ``T.cuda.mbarrier_wait`` "
        "takes a pointer if you need one.",
    ),
    Case(
        COLLECTIVE,
        r"unknown wait scope",
        "Unknown acquire scope of a wait",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                bar = T.alloc_shared((1,), "uint64", align=8)
                T.cuda.mbarrier_wait_phase(bar, 0, scope="gpu")
        '''),
        "parse",
        "The wait acquires at CTA or cluster scope (``mbarrier.try_wait.parity.acquire.{cta,cluster}``).",
        'Pass ``scope="cta"`` (the default) or ``scope="cluster"`` for arrivals from other CTAs.',
    ),
]

# -- protocols: kernel rules of the family (docs/guides/pipelines.rst) ---------------------------

_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"


def _box_kernel(tx: int, wait: bool = True, fence: bool = True) -> str:
    """A 64 x 64 float32 box (16384 bytes) loaded by TMA and read by every thread."""
    fence_line = 'T.ptx["fence.mbarrier_init.release.cluster"]()' if fence else "pass"
    wait_line = "T.cuda.mbarrier_wait_phase(bar, 0)" if wait else "pass  # no wait"
    return example(f'''
        @T.function
        def kernel(A: T.Tensor((64, 64), "float32", align=16), B: T.Tensor((64, 64), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, dynamic_smem_bytes=16384 + 1024))
            tile = T.alloc_shared((64, 64), "float32", scope="shared.dyn", align=128)
            bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
            tid = T.cuda.thread_idx("x")
            if tid == 0:
                T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(1))
                {fence_line}
            T.cuda.cta_sync()
            if tid == 0:
                T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar, tx=T.uint32({tx}))
                T.cuda.tile.apply(T.ptx["{_LOAD}"], tile, A, mbar=bar, coords=(0, 0))
            {wait_line}
            for i in T.unroll(32):
                B[i * 2 + tid // 64, tid % 64] = tile[i * 2 + tid // 64, tid % 64]
    ''')


def _ring(stages: int = 3, empty_count: int = 32, consumer_parity: int = 0, parity: str | None = None) -> str:
    """A producer thread and 32 consumer lanes around a ring of ``stages`` 1 KiB tiles;
    the consumers wait on ``full`` with ``parity`` (default ``(k // stages + consumer_parity) % 2``)."""
    parity = parity or f"(k // {stages} + {consumer_parity}) % 2"
    return example(f'''
        @T.function
        def kernel(A: T.Tensor((96, 32), "float32", align=16), B: T.Tensor((96, 32), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64, dynamic_smem_bytes={stages} * 1024 + 64))
            buf = T.alloc_shared(({stages}, 8, 32), "float32", scope="shared.dyn", align=128)
            full = T.alloc_shared(({stages}, 1), "uint64", scope="shared.dyn", align=8)
            empty = T.alloc_shared(({stages}, 1), "uint64", scope="shared.dyn", align=8)
            tid = T.cuda.thread_idx("x")
            if tid == 0:
                T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], full, count=T.uint32(1))
                T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], empty, count=T.uint32({empty_count}))
                T.ptx["fence.mbarrier_init.release.cluster"]()
            T.cuda.cta_sync()
            if tid == 0:  # the producer: its first wait on each empty[s] is on parity 1
                for k in T.serial(12):
                    s = k % {stages}
                    T.cuda.mbarrier_wait_phase(empty.sub[s, :], (k // {stages} + 1) % 2)
                    T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], full.sub[s, :],
                                      tx=T.uint32(1024))
                    T.cuda.tile.apply(T.ptx["{_LOAD}"], buf.sub[s], A, mbar=full.sub[s, :], coords=(k * 8, 0))
            if tid >= 32:  # 32 consumer lanes
                for k in T.serial(12):
                    s = k % {stages}
                    T.cuda.mbarrier_wait_phase(full.sub[s, :], {parity})
                    for r in T.unroll(8):
                        B[k * 8 + r, tid - 32] = buf[s, r, tid - 32] * T.float32(2)
                    T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], empty.sub[s, :])
    ''')


CASES += [
    Case(
        PROTOCOL,
        r"expect_tx bytes differ from the copies of the phase",
        "expect_tx bytes differ from the copies",
        _box_kernel(4096),
        "lower",
        "``arrive.expect_tx`` announces 4096 bytes, but the TMA load completing on the same barrier "
        "in that phase brings its whole 64 x 64 float32 box, 16384 bytes. A phase completes when the "
        "transaction count returns to zero: the barrier's phase ends early (or, with too many bytes "
        "announced, never), and the waiters read a half-written tile or hang.",
        "Announce the bytes every copy of the phase brings: ``tx=T.uint32(64 * 64 * 4)`` "
        "(the box's bytes, every repeat coordinate, out-of-bounds elements included).",
    ),
    Case(
        PROTOCOL,
        r"expect_tx bytes differ from the copies of the phase",
        "expect_tx of a symmetric multicast counting only the CTA's own bytes",
        example(f'''
            @T.function
            def kernel(A: T.Tensor((8, 32), "float32", align=16), B: T.Tensor((2, 8, 32), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=256, cluster=2, dynamic_smem_bytes=2048))
                tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
                bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
                tid = T.cuda.thread_idx("x")
                rank = T.cuda.cluster_ctaid("x")
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(1))
                    T.ptx["fence.mbarrier_init.release.cluster"]()
                T.cuda.cluster_sync()
                if tid == 0:  # each CTA multicasts its 512-byte half into both
                    T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar, tx=T.uint32(512))
                    T.cuda.tile.apply(T.ptx["{_LOAD}.multicast::cluster"], tile.view(2, 4, 32).sub[rank], A,
                                      mbar=bar, coords=(rank * 4, 0), cta_mask=T.uint16(3))
                T.cuda.mbarrier_wait_phase(bar, 0)
                B[rank, tid // 32, tid % 32] = tile[tid // 32, tid % 32]
                T.cuda.cluster_sync()
        '''),
        "lower",
        "Each CTA multicasts its half of the tile into both CTAs of the pair: every CTA's barrier "
        "receives its own 512 bytes and its peer's 512. A multicast signals the barrier of each CTA "
        "of ``cta_mask`` at the same offset, so the phase waits for 1024 bytes -- announcing 512 "
        "completes it before the peer's half lands (or, the other way round, hangs).",
        "Announce the bytes every CTA of the cluster multicasts into this one: "
        "``tx=T.uint32(2 * 512)``.",
    ),
    Case(
        PROTOCOL,
        r"arrivals never reach the mbarrier's init count",
        "Arrivals never reach the init count",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                bar = T.alloc_shared((1,), "uint64", align=8)
                tid = T.cuda.thread_idx("x")
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(2))
                T.cuda.cta_sync()
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], bar)
                T.cuda.mbarrier_wait_phase(bar, 0)
        '''),
        "lower",
        "The barrier expects 2 arrivals per phase; the kernel arrives once in all, and every thread "
        "waits for phase 0: it never completes. The rule counts every arrival of the kernel "
        "(threads x loop iterations) and the phases each thread's waits need (one per change of "
        "parity) when all of them can be enumerated.",
        "Initialise with the number of arrivals a phase really gets (``count=T.uint32(1)``), or "
        "arrive from every thread the count stands for.",
    ),
    Case(
        PROTOCOL,
        r"first wait on parity 1 of a fresh mbarrier returns at once",
        "First wait on parity 1 of a fresh mbarrier",
        _ring(consumer_parity=1),
        "lower",
        "A barrier starts in phase 0; a wait on parity 1 asks for the phase *before* it, which counts "
        "as completed, so it returns at once. The consumers of ``full`` pass their first wait before "
        "the TMA has written anything. (The producer waiting on parity 1 of a fresh ``empty`` is the "
        "legal twin: the ring starts empty.)",
        "Wait on parity ``(k // stages) % 2`` for use ``k`` of a stage: 0 the first time.",
    ),
    Case(
        PROTOCOL,
        r"wait parity does not flip between uses of the mbarrier",
        "Wait parity that does not flip per reuse of a stage",
        _ring(parity="0"),
        "lower",
        "The consumers wait on parity 0 at every use of a stage. The first wait on ``full[s]`` "
        "returns when phase 0 completes; at the stage's next use the barrier is in phase 1, of parity "
        "1, and a wait on parity 0 returns at once: the consumers read the stage before the refill "
        "lands. The rule enumerates each thread's waits over loops of constant trip count.",
        "Flip the parity per reuse: ``(k // stages) % 2``, or a register flipped with "
        "``phase ^= 1`` each time the ring wraps.",
    ),
    Case(
        PROTOCOL,
        r"more arrivals in one iteration than the mbarrier's init count",
        "More arrivals in one iteration than the init count",
        _ring(empty_count=1),
        "lower",
        "``empty`` is initialised with count 1, but the 32 consumer lanes each arrive on "
        "``empty[s]`` once per iteration. The first arrival completes the phase and the producer "
        "refills the stage while the other lanes still read it; their arrivals complete the next "
        "phases early.",
        "Initialise the barrier with the arrivals one use really makes "
        "(``count=T.uint32(32)``), or arrive from one lane per warp with a matching count.",
    ),
    Case(
        PROTOCOL,
        r"mbarrier used before its init is visible",
        "mbarrier used before its init is visible",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                bar = T.alloc_shared((1,), "uint64", align=8)
                tid = T.cuda.thread_idx("x")
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(64))
                T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], bar)
                T.cuda.mbarrier_wait_phase(bar, 0)
        '''),
        "lower",
        "Thread 0 initialises the barrier and the other 63 threads arrive on it with nothing in "
        "between: they may arrive on memory that is not yet a barrier. Another thread needs a CTA "
        "barrier after the init; the TMA unit, ``fence.mbarrier_init.release.cluster`` (or a barrier); "
        "a peer CTA, the fence and ``T.cuda.cluster_sync()``.",
        "``T.ptx[\"fence.mbarrier_init.release.cluster\"]()`` after the init, then ``T.cuda.cta_sync()``.",
    ),
    Case(
        PROTOCOL,
        r"tile read before the wait on its copy's mbarrier",
        "Tile read before the wait on its copy",
        _box_kernel(16384, wait=False),
        "lower",
        "The threads read the tile right after thread 0 issued the TMA load into it: the copy is "
        "asynchronous, and only a wait on the barrier it completes on makes its data visible.",
        "Wait first: ``T.cuda.mbarrier_wait_phase(bar, 0)`` before reading the tile.",
    ),
    Case(
        PROTOCOL,
        r"tile read before the wait on its copy's mbarrier",
        "Tile read after a CTA barrier, with no wait on its copy",
        example(f'''
            @T.function
            def kernel(A: T.Tensor((8, 32), "float32", align=16), B: T.Tensor((8, 32), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                tile = T.alloc_shared((8, 32), "float32", align=128)
                bar = T.alloc_shared((1,), "uint64", align=8)
                one = T.alloc_local((1,), "float32")
                tid = T.cuda.thread_idx("x")
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(1))
                    T.ptx["fence.mbarrier_init.release.cluster"]()
                T.cuda.cta_sync()
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar, tx=T.uint32(1024))
                    T.cuda.tile.apply(T.ptx["{_LOAD}"], tile, A, mbar=bar, coords=(0, 0))
                T.cuda.cta_sync()
                T.cuda.tile.apply(T.ptx["ld.shared.f32"], one, tile.sub[tid // 32, tid % 32 : tid % 32 + 1])
                B[tid // 32, tid % 32] = one[0]
        '''),
        "lower",
        "A CTA barrier orders the threads, not the TMA: no thread waited on ``bar``, so when they "
        "pass the barrier the copy may still be writing the tile.",
        "Wait on the copy's barrier before the read -- every reader, or one thread before the CTA "
        "barrier (``T.cuda.mbarrier_wait_phase(bar, 0)`` under ``if tid == 0:``).",
    ),
    Case(
        PROTOCOL,
        r"tile refilled while threads may still read it",
        "Tile refilled while threads may still read it",
        example(f'''
            @T.function
            def kernel(A: T.Tensor((32, 32), "float32", align=16), B: T.Tensor((32, 32), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                tile = T.alloc_shared((8, 32), "float32", align=128)
                bar = T.alloc_shared((1,), "uint64", align=8)
                tid = T.cuda.thread_idx("x")
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(1))
                    T.ptx["fence.mbarrier_init.release.cluster"]()
                T.cuda.cta_sync()
                for k in T.serial(4):
                    if tid == 0:
                        T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar, tx=T.uint32(1024))
                        T.cuda.tile.apply(T.ptx["{_LOAD}"], tile, A, mbar=bar, coords=(k * 8, 0))
                    T.cuda.mbarrier_wait_phase(bar, k % 2)
                    B[k * 8 + tid // 32, tid % 32] = tile[tid // 32, tid % 32]
        '''),
        "lower",
        "Thread 0 loads the next tile into the buffer while the other threads may still be reading "
        "the previous one: nothing tells thread 0 that they are done.",
        "A CTA barrier at the end of the iteration (``T.cuda.cta_sync()``), or an ``empty`` "
        "barrier the readers arrive on and the producer waits on before the copy.",
    ),
]
