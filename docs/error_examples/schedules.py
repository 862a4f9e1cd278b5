"""Tensor intrinsics in TIR schedules: the ``"warp"`` fragments a tensorized block reads.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import SCHEDULE, Case, example


def fragment_schedule(layout: str, rows: int = 32) -> str:
    """An ``exec`` example: ``B = A`` (f16, ``rows x 16``) scheduled through a
    shared stage and a ``"warp"`` fragment cache laid out by ``layout`` (the
    body of ``def layout(i, j)``), whose 16-row tiles are tensorized with
    ``tvm_tirx.ldmatrix_x4_f16``; then built."""
    return example(f'''
        import tvm
        import tvm_tirx
        import tvm_tirx.schedule.tensor_intrin
        from tvm.s_tir.tensor_intrin.cuda import shared_16x16_to_ldmatrix_32x8_layout as fragment

        @T.prim_func(s_tir=True)
        def copy(A: T.Buffer(({rows}, 16), "float16"), B: T.Buffer(({rows}, 16), "float16")):
            for i, j in T.grid({rows}, 16):
                with T.sblock("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj]

        def layout(i, j):
            {layout}

        sch = tvm.s_tir.Schedule(copy)
        block = sch.get_sblock("B")
        shared = sch.cache_read(block, 0, "shared")
        regs = sch.cache_read(block, 0, "warp")
        _, tx, vec = sch.split(sch.fuse(*sch.get_loops(shared)), [None, 32, 8])
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(vec)
        i, _ = sch.get_loops(regs)
        io, ii = sch.split(i, [None, 16])
        sch.transform_layout(regs, ("write", 0), layout)
        sch.tensorize(ii, "tvm_tirx.ldmatrix_x4_f16")
        tvm_tirx.compile(sch.mod, target="cuda", arch="sm_90a")
    ''')


CASES = [
    Case(
        SCHEDULE,
        r"must end in \(lanes, slots\)",
        "Fragment buffer without a lane axis",
        fragment_schedule("lane, slot = fragment(i % 16, j)\n            return i // 16 * 32 + lane, slot"),
        "exec",
        "A ``\"warp\"``-scope buffer that a fragment intrinsic of ``tvm_tirx.schedule.tensor_intrin`` "
        "reads or writes becomes per-thread registers when the kernel is built, which needs "
        "its lanes as the second-to-last axis: ``(..., 32, slots)``. Here the layout folds "
        "the fragment index into the lane axis (64 rows).",
        "Lay the buffer out with the fragment map and keep the fragment number in the leading "
        "axes: ``return i // 16, *fragment(i % 16, j)``.",
    ),
    Case(
        SCHEDULE,
        r"is not one whole fragment",
        "Tensorized tile that is not one whole fragment",
        fragment_schedule("lane, slot = fragment(i % 16, j)\n            return lane, i // 16 * 8 + slot"),
        "exec",
        "Each tile a fragment intrinsic matches must be all 32 lanes and all slots of one "
        "leading coordinate of the ``\"warp\"`` buffer, so that it is one contiguous run of "
        "the thread's registers. Here two fragments share the slot axis: each tile is half of it.",
        "Put the fragment number in a leading axis (``return i // 16, *fragment(i % 16, j)``), "
        "one ``(32, slots)`` fragment per leading coordinate.",
    ),
    Case(
        SCHEDULE,
        r"element by element",
        "Fragment read element by element",
        fragment_schedule("return fragment(i, j)", rows=16),
        "exec",
        "Once a fragment intrinsic of ``tvm_tirx.schedule.tensor_intrin`` touches a ``\"warp\"`` buffer, "
        "the buffer is the threads' registers and apache-tvm's warp-memory lowering no longer "
        "applies: a block that reads or writes one lane's slot by index (here ``B``, the "
        "consumer of the fragment) cannot be compiled.",
        "Tensorize every block that touches the fragment with a fragment intrinsic "
        "(``stmatrix``, ``mma``, ``mma_fill``, ``mma_store``), or keep apache-tvm's own "
        "intrinsics for the whole fragment.",
    ),
]
