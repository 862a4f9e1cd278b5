"""The ``wgmma`` family: the matrix descriptors of its shared operands.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import COLLECTIVE, MEMORY, Case, example


CASES = [
    Case(
        COLLECTIVE,
        r"shared-memory layout has no matrix descriptor",
        "wgmma: a shared tile whose layout no matrix descriptor describes",
        example('''
            from tvm_tirx.tile.families.wgmma import accumulator_layout

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
                a = T.alloc_shared((64, 16), "bfloat16", align=1024)  # rows of 32 bytes, unswizzled
                b = T.alloc_shared((64, 16), "bfloat16", align=1024)
                acc = T.alloc_local((64, 64), "float32", layout=accumulator_layout(64))
                T.cuda.tile.apply(T.ptx["wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"],
                                  acc, a, b, scope="warpgroup", scale_d=False)
        '''),
        "parse",
        "``wgmma`` reads a shared operand through a matrix descriptor, which can "
        "describe only the ISA's canonical layouts: K-major tiles of 8-row core "
        "matrices (each 128 contiguous bytes) or rows of 32/64/128 bytes under the "
        "matching XOR swizzle (and, for f16/bf16, the MN-major forms).  The message "
        "names the first element the closest canonical layout would read elsewhere.",
        "Give the tile a canonical layout: here rows of 32 bytes need the 32-byte "
        "swizzle, ``layout=ComposeLayout(3, 1, 3, TileLayout(S[(64, 16)]))`` (a TMA "
        "load with the matching swizzle writes exactly that), or core matrices "
        "``TileLayout(S[(8, 8, 2, 8) : (64, 8, 512, 1)])``.  See the wgmma guide.",
    ),
    Case(
        MEMORY,
        r"matrix tile not provably aligned for its descriptor",
        "wgmma: a swizzled tile off its pattern boundary",
        example('''
            from tvm_tirx.tile.families.wgmma import accumulator_layout

            SW128 = ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)]))

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
                a = T.alloc_shared((64, 64), "bfloat16", align=128, layout=SW128)
                b = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=SW128)
                acc = T.alloc_local((64, 64), "float32", layout=accumulator_layout(64))
                T.cuda.tile.apply(T.ptx["wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"],
                                  acc, a.view(1, 64, 4, 16).permute(0, 2, 1, 3),
                                  b.view(64, 4, 16).permute(1, 0, 2), scope="warpgroup", scale_d=False)
        '''),
        "lower",
        "A swizzled tile's XOR pattern is taken from the shared-memory address bits, "
        "and the descriptor's base offset is 0: the tile must start on the pattern's "
        "boundary (1024 bytes for the 128-byte swizzle, 512 and 256 for 64 and 32).",
        "Declare the tile with ``align=1024`` (dynamic shared memory: a carve-out at "
        "a multiple of 1024 bytes).",
    ),
    Case(
        COLLECTIVE,
        r"accumulators used while the wgmma may still write them",
        "wgmma: accumulators stored before wait_group",
        example('''
            from tvm_tirx.tile.families.wgmma import accumulator_layout

            SW128 = ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)]))

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
                a = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=SW128)
                b = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=SW128)
                acc = T.alloc_local((64, 64), "float32", layout=accumulator_layout(64))
                T.ptx["wgmma.fence.sync.aligned"]()
                T.cuda.tile.apply(T.ptx["wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"],
                                  acc, a.view(1, 64, 4, 16).permute(0, 2, 1, 3),
                                  b.view(64, 4, 16).permute(1, 0, 2), scope="warpgroup", scale_d=False)
                T.ptx["wgmma.commit_group.sync.aligned"]()
                T.cuda.tile.apply(T.ptx["mov.b32"], acc.local().view(32, 1), T.float32(0))
        '''),
        "lower",
        "A committed wgmma group writes its accumulator registers until a "
        "``wgmma.wait_group N`` leaves at most N newer groups pending (PTX ISA 9.7.15.7); "
        "reading or writing them before that sees or clobbers half-computed values.",
        "Wait for the group first: ``T.ptx[\"wgmma.wait_group.sync.aligned\"](0)`` before "
        "the epilogue (or keep one batch in flight with ``wait_group 1`` and touch only "
        "accumulators of older groups).",
    ),
    Case(
        COLLECTIVE,
        r"registers written between wgmma.fence and the wgmma",
        "wgmma: accumulators zeroed after wgmma.fence",
        example('''
            from tvm_tirx.tile.families.wgmma import accumulator_layout

            SW128 = ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)]))

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
                a = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=SW128)
                b = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=SW128)
                acc = T.alloc_local((64, 64), "float32", layout=accumulator_layout(64))
                T.ptx["wgmma.fence.sync.aligned"]()
                T.cuda.tile.apply(T.ptx["mov.b32"], acc.local().view(32, 1), T.float32(0))
                T.cuda.tile.apply(T.ptx["wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"],
                                  acc, a.view(1, 64, 4, 16).permute(0, 2, 1, 3),
                                  b.view(64, 4, 16).permute(1, 0, 2), scope="warpgroup", scale_d=True)
                T.ptx["wgmma.commit_group.sync.aligned"]()
                T.ptx["wgmma.wait_group.sync.aligned"](0)
        '''),
        "lower",
        "``wgmma.fence`` orders the warpgroup's earlier register accesses before the wgmma that "
        "follow it; the ``mov`` that clears the accumulators comes after the fence, so the "
        "asynchronous wgmma may read them before they are zero (the ISA requires the fence between "
        "any register write and the wgmma using those registers).",
        "Clear first, then fence: the ``mov``, ``T.ptx[\"wgmma.fence.sync.aligned\"]()``, the "
        "wgmma (or drop the ``mov`` and pass ``scale_d=False``).",
    ),
    Case(
        COLLECTIVE,
        r"ring stage released while the wgmma may still read it",
        "wgmma: a ring stage released before wait_group",
        example('''
            from tvm_tirx.tile.families.tma import swizzled_layout
            from tvm_tirx.tile.families.wgmma import accumulator_layout

            RING = swizzled_layout((2, 64, 64), "bfloat16", 3)

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
                sa = T.alloc_shared((2, 64, 64), "bfloat16", align=1024, layout=RING)
                sb = T.alloc_shared((2, 64, 64), "bfloat16", align=1024, layout=RING)
                empty = T.alloc_shared((2, 1), "uint64", align=8)
                acc = T.alloc_local((1, 64, 64), "float32", layout=accumulator_layout(64, 1))
                tid = T.cuda.thread_idx("x")
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], empty, count=T.uint32(1))
                T.cuda.cta_sync()
                for k in T.serial(4):
                    T.ptx["wgmma.fence.sync.aligned"]()
                    T.cuda.tile.apply(T.ptx["wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"], acc,
                                      sa.sub[k % 2].view(1, 64, 4, 16).permute(0, 2, 1, 3),
                                      sb.sub[k % 2].view(64, 4, 16).permute(1, 0, 2), scope="warpgroup", scale_d=k > 0)
                    T.ptx["wgmma.commit_group.sync.aligned"]()
                    if tid == 0:  # tells the producer it may refill stage k % 2
                        T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], empty.sub[k % 2, :])
                T.ptx["wgmma.wait_group.sync.aligned"](0)
        '''),
        "lower",
        "A wgmma reads its shared operands asynchronously until a ``wgmma.wait_group`` "
        "retires its group (PTX ISA 9.7.15.7).  Arriving on a stage's \"empty\" barrier "
        "before that lets the producer's next copy overwrite the tiles the wgmma is still "
        "reading: the product mixes two K tiles, silently.",
        "Release the stage after a wait that retires its group: ``wait_group 0`` then the "
        "arrive, or (one batch in flight) ``wait_group 1`` and release the *previous* stage, "
        "``empty.sub[(k - 1) % 2, :]``, as the Hopper GEMM does.",
    ),
]
