"""The ``elect.sync`` family: which of its results is one value per warp.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import COLLECTIVE, Case, example

CASES = [
    Case(
        COLLECTIVE,
        r"guard not uniform over the warp: .*elected is written by a call whose result is per thread",
        "Warp collective guarded by elect.sync's per-lane predicate",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                s = T.alloc_shared((8, 4), "uint32", align=16)
                r = T.alloc_local((1, 8, 4), "uint32", layout=TileLayout(S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)]))
                leader = T.alloc_local((1,), "uint32")
                elected = T.alloc_local((1,), "uint32")
                T.cuda.tile.apply("elect.sync", leader, elected)
                if elected[0] == T.uint32(1):
                    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x1.shared.b16"], r, s.view(1, 8, 4), scope="warp")
        '''),
        "lower",
        "``elect.sync`` returns the leader's lane id in every lane (one value per warp when "
        "the whole warp takes part) and a predicate true in the leader only: a branch on "
        "it leaves 31 lanes out of a warp-collective ``ldmatrix``.",
        "Branch on the predicate for work of one lane (a TMA copy, an mbarrier arrival); "
        "warp collectives stay outside, or are guarded by ``leader``.",
    ),
]
