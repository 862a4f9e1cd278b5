"""The ``mbarrier`` family and ``T.cuda.mbarrier_wait_phase``: peer CTAs and the barrier waited on.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import COLLECTIVE, PRED, Case, example


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
