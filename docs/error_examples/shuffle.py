"""The ``shfl.sync`` family: the member mask, the source lane, the opcode's spelling, and
``T.cuda.tile.reduce_lanes``.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).  The
member mask rules are shared by every warp-synchronous family (``vote.sync``,
``match.sync``, ``redux.sync``, ``elect.sync``); the shuffle stands in for them.
"""

from __future__ import annotations

from . import COLLECTIVE, OPCODE, Case, example

CASES = [
    Case(
        OPCODE,
        r"unknown or illegal opcode spelling: expected T.ptx\[\"shfl_sync",
        "A multi-word PTX mnemonic in T.ptx[...]",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                x = T.alloc_local((1,), "float32")
                T.cuda.tile.apply(T.ptx["shfl.sync.bfly.b32"], x, x, b=1)
        '''),
        "parse",
        "apache-tvm's ``T.ptx[...]`` reads the first word of the text as the instruction "
        "family, and names the families of multi-word mnemonics (``shfl.sync``, "
        "``vote.sync``, ``redux.sync``, ``elect.sync``, ``cvt.pack``) with an underscore.",
        'Write the PTX text as a string, ``T.cuda.tile.apply("shfl.sync.bfly.b32", ...)``, '
        'or apache-tvm\'s spelling ``T.ptx["shfl_sync.bfly.b32"]``; both name the same instruction.',
    ),
    Case(
        COLLECTIVE,
        r"member mask differs from the lanes that reach the call",
        "Member mask naming lanes that do not execute the shuffle",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                x = T.alloc_local((1,), "float32")
                if T.cuda.lane_id() < 16:
                    T.cuda.tile.apply("shfl.sync.bfly.b32", x, x, b=1, membermask=0xFFFFFFFF)
        '''),
        "lower",
        "Every lane named in ``membermask`` must execute the same ``.sync`` instruction, "
        "and a lane that executes it must be named (PTX ISA, ``shfl.sync``): here lanes "
        "16-31 never arrive, so lanes 0-15 wait for them or read undefined values. The "
        "guards are evaluated lane by lane to find the lanes that reach the call.",
        "Pass the mask of the lanes that reach it (``membermask=0xFFFF``), or leave "
        "``membermask=`` out: the default is exactly those lanes.",
    ),
    Case(
        COLLECTIVE,
        r"lanes that reach the call differ between warps",
        "Default member mask under a guard that treats warps differently",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                x = T.alloc_local((1,), "float32")
                if T.cuda.thread_idx("x") < 48:
                    T.cuda.tile.apply("shfl.sync.down.b32", x, x, b=1)
        '''),
        "lower",
        "Without ``membermask=`` the mask is the constant of the lanes that reach the call; "
        "warp 0 runs it with all 32 lanes, warp 1 with 16, and one constant cannot be both.",
        "Split the call so that each warp's lanes are one mask, or pass a mask computed in "
        "each warp (``vote.sync.ballot.b32`` of the guard's condition).",
    ),
    Case(
        COLLECTIVE,
        r"member mask not uniform over the warp",
        "Member mask read per lane",
        example('''
            @T.function
            def kernel(M: T.Tensor((64,), "uint32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                x = T.alloc_local((1,), "float32")
                mask = M[T.cuda.thread_idx("x")]
                T.cuda.tile.apply("shfl.sync.idx.b32", x, x, b=0, membermask=mask)
        '''),
        "lower",
        "Every lane of the mask must pass the same mask. A mask computed at run time is "
        "accepted when it has one value over the warp (a ``vote.sync.ballot`` result, a "
        "kernel argument, a read-only load at a warp-uniform address); here each lane "
        "reads its own element.",
        "Compute the mask once per warp, e.g. ``T.cuda.tile.apply(\"vote.sync.ballot.b32\", "
        "mask, cond)``, then shuffle under ``if cond:`` with ``membermask=mask[0]``.",
    ),
    Case(
        COLLECTIVE,
        r"pred: pred not uniform over the warp: expected a predicate with one value for all lanes",
        "Per-lane predicate on a shuffle",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                x = T.alloc_local((1,), "float32")
                T.cuda.tile.apply("shfl.sync.bfly.b32", x, x, b=1, pred=T.cuda.lane_id() < 8)
        '''),
        "lower",
        "A lane whose predicate is false does not execute the instruction, yet the member "
        "mask (here the whole warp) names it.",
        "Guard the call with ``if`` instead (the default mask then follows the guard), or "
        "predicate on a value uniform over the warp.",
    ),
    Case(
        COLLECTIVE,
        r"source lane outside the member mask",
        "Shuffle reading a lane that does not take part",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                x = T.alloc_local((1,), "float32")
                if T.cuda.lane_id() < 16:
                    T.cuda.tile.apply("shfl.sync.bfly.b32", x, x, b=16)
        '''),
        "lower",
        "The value a lane reads from a lane outside the member mask is undefined (PTX ISA, "
        "``shfl.sync``). With ``b``, ``c`` and the mask constant, the source lane of every "
        "lane is computed as the ISA does (``lane ^ b`` here).",
        "Shuffle within the lanes that take part (``b=8`` among lanes 0-15), or let more "
        "lanes reach the call.",
    ),
    Case(
        COLLECTIVE,
        r"tile.reduce_lanes: one lane group needed",
        "reduce_lanes without a lane group",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                row = T.alloc_local((2, 1), "float32")
                T.cuda.tile.reduce_lanes(T.ptx["max.f32"], row)
        '''),
        "parse",
        "``reduce_lanes`` reduces over a group of lanes given one way: ``lanes=n`` "
        "consecutive lanes, the butterfly's masks ``xor=(1, 2)``, or ``across=(tensor, "
        "axis)``, the lanes over which an axis of a fragment lies.",
        "Name the group, e.g. ``lanes=4`` for the four lanes that share a row of an "
        "mma.sync or wgmma accumulator.",
    ),
    Case(
        COLLECTIVE,
        r"tile.reduce_lanes: invalid lane group",
        "reduce_lanes over a group that is not a butterfly",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                row = T.alloc_local((2, 1), "float32")
                T.cuda.tile.reduce_lanes(T.ptx["max.f32"], row, lanes=6)
        '''),
        "parse",
        "A butterfly reduction combines lanes ``i`` and ``i ^ m`` for each mask ``m``: it "
        "covers groups of a power-of-two number of lanes.",
        "Use ``lanes=`` 2, 4, 8, 16 or 32, or masks none of which is the XOR of the others.",
    ),
    Case(
        COLLECTIVE,
        r"lanes along the axis are not a butterfly group",
        "reduce_lanes across an axis that spans several warps",
        example('''
            from tvm_tirx.tile.families.wgmma import accumulator_layout

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
                acc = T.alloc_local((64, 32), "float32", layout=accumulator_layout(32))
                col = T.alloc_local((8, 1), "float32")
                T.cuda.tile.reduce_lanes(T.ptx["add.f32"], col, across=(acc, 0))
        '''),
        "parse",
        "``across=(acc, axis)`` reads from the layout the lanes over which ``axis`` lies. "
        "A column of a wgmma accumulator (axis 0) spans the four warps of the warpgroup: "
        "shuffles reach only the lanes of one warp. Its rows (axis 1) lie on four lanes.",
        "Reduce rows with ``across=(acc, 1)``; a column sum over warps goes through shared memory.",
    ),
    Case(
        COLLECTIVE,
        r"member mask differs from the lanes that reach the call.*found 0xffffffff",
        "Raw shfl.sync with a full-warp mask under a lane guard",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                x = T.alloc_local((1,), "float32")
                if T.cuda.lane_id() < 16:
                    T.ptx["shfl_sync.bfly.b32"](x[0], x[0], T.uint32(1), T.uint32(31), T.uint32(0xFFFFFFFF))
        '''),
        "lower",
        "A raw ``T.ptx[\"shfl_sync...\"](d, a, b, c, membermask)`` call is checked as the "
        "tile form: its ``membermask`` operand is the tile form's ``membermask=``, held "
        "against the lanes that reach the call.  Lanes 16-31 never execute the shuffle "
        "that lanes 0-15 wait for.",
        "Pass the mask of the lanes that reach it (``T.uint32(0xFFFF)``).",
    ),
]
