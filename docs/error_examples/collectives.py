"""Warp-collective instructions (``ldmatrix`` stands in for all of them): scopes, guards, fragments.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import COLLECTIVE, Case, example


_X1 = "ldmatrix.sync.aligned.m8n8.x1.shared.b16"


CASES = [
    Case(
        COLLECTIVE,
        r"warp-collective instruction at thread scope",
        "Warp-collective instruction at thread scope",
        example(f'''
            frag = TileLayout(S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)])

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                s = T.alloc_shared((8, 4), "uint32", align=16)
                r = T.alloc_local((1, 8, 4), "uint32", layout=frag)
                T.cuda.tile.apply(T.ptx["{_X1}"], r, s.view(1, 8, 4))
        '''),
        "lower",
        "``ldmatrix``, ``stmatrix`` and ``mma.sync`` are executed by the 32 lanes of "
        "a warp together; their atom already spans the warp, so they have no "
        "per-thread form.",
        'Call them with ``scope="warp"`` (or a wider scope, whose group is then the warps).',
    ),
    Case(
        COLLECTIVE,
        r"warp-collective instruction needs all 32 lanes",
        "Warp-collective instruction under a partial-warp guard",
        example(f'''
            frag = TileLayout(S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)])

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                s = T.alloc_shared((8, 4), "uint32", align=16)
                r = T.alloc_local((1, 8, 4), "uint32", layout=frag)
                if T.cuda.lane_id() < 16:
                    T.cuda.tile.apply(T.ptx["{_X1}"], r, s.view(1, 8, 4), scope="warp")
        '''),
        "lower",
        "``.sync.aligned`` instructions must be executed by every lane of the warp "
        "at once; a guard that leaves out lanes would hang or corrupt the warp.",
        "Guard whole warps only (``T.cuda.warp_id() == 0``), or move the condition "
        "out of the collective call.",
    ),
    Case(
        COLLECTIVE,
        r"pred not uniform over the warp",
        "Warp-collective instruction with a per-lane predicate",
        example(f'''
            frag = TileLayout(S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)])

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                s = T.alloc_shared((8, 4), "uint32", align=16)
                r = T.alloc_local((1, 8, 4), "uint32", layout=frag)
                T.cuda.tile.apply(T.ptx["{_X1}"], r, s.view(1, 8, 4), scope="warp", pred=T.cuda.lane_id() % 2 == 0)
        '''),
        "lower",
        "A predicate is a guard on each thread: true for even lanes only, it splits "
        "the warp exactly as ``if T.cuda.lane_id() % 2 == 0:`` would, and a "
        "``.aligned`` instruction must be executed by the whole collective (a warp, "
        "or a warpgroup of 128 threads). The rule proves the predicate has one value "
        "per collective, or names a thread where it differs from the first one.",
        "Predicate on something uniform over the collective (the warp id, a loop "
        "counter, a run-time size), or move the per-lane condition into the data.",
    ),
    Case(
        COLLECTIVE,
        r"guarded warps do not form a box of the group",
        "Guard selecting a non-contiguous set of warps",
        example(f'''
            frag = TileLayout(S[(3, 1, 8, 4) : (1 @ Axis.warpid, 1, 4 @ Axis.laneid, 1 @ Axis.laneid)])

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=96))
                s = T.alloc_shared((3, 8, 4), "uint32", align=16)
                r = T.alloc_local((3, 1, 8, 4), "uint32", layout=frag)
                if T.cuda.warp_id() != 1:
                    T.cuda.tile.apply(T.ptx["{_X1}"], r, s.view(3, 1, 8, 4), scope="cta")
        '''),
        "lower",
        "Above warp scope the group of a collective call is its warps; under a "
        "guard the participating warps must be a contiguous range (warps 0 and 2 "
        "are not).",
        "Guard a contiguous range of warps, or issue two calls.",
    ),
    Case(
        COLLECTIVE,
        r"guarded warps differ between instances of the scope",
        "Guard selecting different warps in different warpgroups",
        example(f'''
            frag = TileLayout(S[(4, 1, 8, 4) : (1 @ Axis.wid_in_wg, 1, 4 @ Axis.laneid, 1 @ Axis.laneid)])

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                s = T.alloc_shared((4, 8, 4), "uint32", align=16)
                r = T.alloc_local((4, 1, 8, 4), "uint32", layout=frag)
                if T.cuda.thread_idx("x") < 192:
                    T.cuda.tile.apply(T.ptx["{_X1}"], r, s.view(4, 1, 8, 4), scope="warpgroup")
        '''),
        "lower",
        "One call has one group shape: the first warpgroup would run it with four "
        "warps, the second with two.",
        "Keep the same warps in every warpgroup (e.g. guard on ``T.cuda.warp_id() % 4``).",
    ),
    Case(
        COLLECTIVE,
        r"warp-collective register operand without a lane axis",
        "Fragment registers without lane placement",
        example(f'''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                s = T.alloc_shared((8, 4), "uint32", align=16)
                r = T.alloc_local((1, 8, 4), "uint32")
                T.cuda.tile.apply(T.ptx["{_X1}"], r, s.view(1, 8, 4), scope="warp")
        '''),
        "lower",
        "The ISA fixes which lane receives each word of the fragment (word "
        "``(m, r, w)`` of ``ldmatrix`` goes to lane ``4 * r + w``); a thread-local "
        "layout does not say which lane holds what.",
        "Lay the registers out with the lane map, e.g. "
        "``S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)]``.",
    ),
]
