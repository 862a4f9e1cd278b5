"""The ``cp_async`` family (``cp.async.ca`` / ``.cg``): its chunk sizes.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import COLLECTIVE, Case, example


CASES = [
    Case(
        COLLECTIVE,
        r"chunk size not allowed for this cache operator",
        "cp.async chunk size the cache operator does not allow",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 2), "float32", align=8)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                s = T.alloc_shared((64, 2), "float32", align=8)
                T.cuda.tile.apply(T.ptx["cp.async.cg.shared.global"], s.sub[tid, :], A.sub[tid, :])
        '''),
        "parse",
        "A ``cp.async`` copies 4, 8 or 16 bytes per thread, given by the last axis "
        "of its operands; ``.cg`` (cache at L2 only) allows 16 bytes only.",
        "Use ``cp.async.ca`` for 4 and 8 bytes, or copy 16-byte chunks.",
    ),
    Case(
        COLLECTIVE,
        r"chunk sizes differ",
        "cp.async chunks of different sizes",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                s = T.alloc_shared((64, 4), "float32", align=16)
                T.cuda.tile.apply(T.ptx["cp.async.ca.shared.global"], s.sub[tid, :], A.sub[tid, 0:2])
        '''),
        "parse",
        "One ``cp.async`` copies the same number of bytes it reads; the shared and "
        "global chunks must be equally large.",
        "Give both views the same chunk size in bytes.",
    ),
]
