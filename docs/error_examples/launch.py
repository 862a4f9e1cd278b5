"""Errors outside the tile contract: the target, the launch, and a kernel's call arguments.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import OTHER, Case, example


CASES = [
    Case(
        OTHER,
        r"no CUDA GPU is present",
        "Compiling without a GPU and without ``arch``",
        example('''
            @T.function
            def kernel(Out: T.Tensor((4, 1), "uint32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
                a = T.alloc_local((4, 1), "uint32")
                T.cuda.tile.apply(T.ptx["mov.b32"], a, T.uint32(17))
                T.cuda.tile.apply(T.ptx["st.global.b32"], Out, a)
        '''),
        "compile-noarch",
        "Without a GPU, ``tvm_tirx.compile`` cannot detect the architecture.",
        'Pass it: ``tvm_tirx.compile(kernel, target="cuda", arch="sm_90a")``.',
        error="ValueError",
    ),
    Case(
        OTHER,
        r"whole number of clusters",
        "Grid that is not whole clusters",
        example('''
            launch = T.cuda.LaunchConfig(grid=3, block=32, cluster=2)
        '''),
        "exec",
        "Each grid extent must be a multiple of the cluster's.",
        "Round the grid up to whole clusters.",
        error="ValueError",
    ),
    Case(
        OTHER,
        r"more than 1024",
        "Block of more than 1024 threads",
        example('''
            launch = T.cuda.LaunchConfig(grid=1, block=(64, 32))
        '''),
        "exec",
        "A CTA holds at most 1024 threads.",
        "Use more CTAs, or more work per thread (repeat axes).",
        error="ValueError",
    ),
    Case(
        OTHER,
        r"expected a CUDA tensor",
        "Kernel called with something that is not a tensor",
        example('''
            import numpy as np
            import tvm_tirx

            @T.function
            def kernel(Out: T.Tensor((4, 1), "uint32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
                a = T.alloc_local((4, 1), "uint32")
                T.cuda.tile.apply(T.ptx["mov.b32"], a, T.uint32(17))
                T.cuda.tile.apply(T.ptx["st.global.b32"], Out, a)

            compiled = tvm_tirx.compile(kernel, target="cuda", arch="sm_90a")
            compiled(np.zeros((4, 1), "uint32"))
        '''),
        "exec",
        "Arguments are checked before the launch: a NumPy array lives on the host.",
        "Pass a torch CUDA tensor (or a tvm tensor on the GPU).",
        error="ValueError",
    ),
    Case(
        OTHER,
        r"expected dtype",
        "Kernel called with a tensor of another dtype",
        example('''
            import numpy as np
            import tvm
            import tvm_tirx

            @T.function
            def kernel(Out: T.Tensor((4, 1), "uint32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
                a = T.alloc_local((4, 1), "uint32")
                T.cuda.tile.apply(T.ptx["mov.b32"], a, T.uint32(17))
                T.cuda.tile.apply(T.ptx["st.global.b32"], Out, a)

            compiled = tvm_tirx.compile(kernel, target="cuda", arch="sm_90a")
            compiled(tvm.runtime.tensor(np.zeros((4, 1), "float32")))
        '''),
        "exec",
        "The dtype (then shape, device, strides and alignment) of every tensor "
        "argument must equal the parameter's declaration; nothing is converted.",
        "Allocate the argument with the declared dtype and shape (contiguous, on "
        "the GPU, aligned as declared).",
        error="ValueError",
    ),
    Case(
        OTHER,
        r"uses the run-time size n inside an expression",
        "Run-time size that only appears inside an expression",
        example('''
            n = T.dynamic("n")

            @T.function
            def kernel(A: T.Tensor((n * 4,), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(n, 64), block=64))
                i = T.cuda.block_idx("x") * 64 + T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                if i < n:
                    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[i * 4:i * 4 + 4])
        '''),
        "parse",
        "The kernel learns a run-time size from its arguments: from a scalar parameter, or "
        "from a shape extent that is the variable alone. ``(n * 4,)`` is checked against "
        "the argument's shape but does not say what ``n`` is.",
        "Give ``n`` as an extent of its own (``T.Tensor((n, 4), ...)``, rows "
        "``A.sub[i, :]``), or add a scalar parameter ``n: T.int32`` that the caller passes.",
        error="ValueError",
    ),
]
