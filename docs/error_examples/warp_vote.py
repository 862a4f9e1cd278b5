"""The ``vote.sync`` / ``match.sync`` / ``activemask`` family: which results are one value per warp.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import COLLECTIVE, Case, example

CASES = [
    Case(
        COLLECTIVE,
        r"guard not uniform over the warp: .*peers is written by a call whose result is per thread",
        "Warp collective guarded by a match.any result",
        example('''
            @T.function
            def kernel(K: T.Tensor((32,), "uint32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                s = T.alloc_shared((8, 4), "uint32", align=16)
                r = T.alloc_local((1, 8, 4), "uint32", layout=TileLayout(S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)]))
                key = T.alloc_local((1,), "uint32")
                peers = T.alloc_local((1,), "uint32")
                key[0] = K[T.cuda.thread_idx("x")]
                T.cuda.tile.apply("match.any.sync.b32", peers, key)
                if peers[0] == T.uint32(0xFFFFFFFF):
                    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x1.shared.b16"], r, s.view(1, 8, 4), scope="warp")
        '''),
        "lower",
        "``match.any`` gives each lane the mask of the lanes holding its own value: lanes "
        "with different keys get different masks. ``vote.sync`` results and both results "
        "of ``match.all`` are one value per warp (when the whole warp votes); ``match.any`` "
        "and ``activemask`` results are not.",
        "Guard warp collectives with ``match.all.sync``'s predicate or a ``vote.sync`` "
        "result (``vote.sync.all.pred`` of ``peers == 0xFFFFFFFF``).",
    ),
]
