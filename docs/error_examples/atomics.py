"""The ``atomics`` family (``atom`` / ``red``): its destination, its state spaces, its bounds.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import MEMORY, OPCODE, OPERANDS, Case, example


CASES = [
    Case(
        OPERANDS,
        r"operand count",
        "A result register for red",
        example('''
            @T.function
            def kernel(H: T.Tensor((64,), "uint32", align=4)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                old = T.alloc_local((1,), "uint32")
                T.cuda.tile.apply(T.ptx["red.global.add.u32"], old, H.sub[tid : tid + 1], T.uint32(1))
        '''),
        "parse",
        "``red`` updates memory and returns nothing: its operands are the memory view "
        "and the value (``mem, b``).  ``atom`` is the same operation returning the old "
        "value, and ``atom`` without a destination discards it.",
        "Drop the register, or use ``atom.global.add.u32`` to receive the old value.",
    ),
    Case(
        MEMORY,
        r"view not provably within the tensor's bounds",
        "A histogram bin read from memory",
        example('''
            @T.function
            def kernel(A: T.Tensor((256,), "int32", align=4), H: T.Tensor((64,), "uint32", align=4)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                tid = T.cuda.thread_idx("x")
                T.cuda.tile.apply(T.ptx["red.global.add.u32"], H.sub[A[tid] : A[tid] + 1], T.uint32(1))
        '''),
        "lower",
        "Each atomic's address must be proven inside its tensor; an index read from "
        "memory has no known range, so the prover cannot show it.",
        "Bound the index where it is computed (``A[tid] % 64`` is a bin in [0, 64)), "
        "guard the call, or state what the prover cannot derive with ``T.assume(cond)``.",
    ),
    Case(
        OPCODE,
        r"\.shared::cluster needs a cluster launch",
        "A cluster atomic without a cluster launch",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64))
                tid = T.cuda.thread_idx("x")
                counts = T.alloc_shared((64,), "uint32", align=4)
                T.cuda.tile.apply(T.ptx["red.shared::cluster.add.u32"], counts.sub[tid : tid + 1], T.uint32(1),
                                  remote_cta_id=T.uint32(1))
        '''),
        "lower",
        "``.shared::cluster`` addresses the shared memory of a CTA of the cluster "
        "(``remote_cta_id=``): without ``cluster=`` in the launch there is no other CTA, "
        "and ``.shared::cta`` is the same operation on this CTA.",
        "Launch clusters (``T.cuda.LaunchConfig(grid=2, block=64, cluster=2)``), or use ``.shared::cta``.",
    ),
    Case(
        OPCODE,
        r"unsupported form.*\.add\.noftz\.f32",
        "An atomic form the CUDA toolkit does not assemble",
        example('''
            @T.function
            def kernel(A: T.Tensor((64,), "float32", align=4)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                T.cuda.tile.apply(T.ptx["red.global.add.noftz.f32"], A.sub[tid : tid + 1], T.float32(1))
        '''),
        "parse",
        "apache-tvm's table has PTX ISA 9.4's ``.add.noftz.f32`` (an f32 add that keeps "
        "subnormals), but the ptxas of CUDA 13.0 assembles it for no target.",
        "Use ``red.global.add.f32`` (global memory flushes f32 subnormals to zero), or "
        "add in shared memory, which keeps them.",
    ),
]
