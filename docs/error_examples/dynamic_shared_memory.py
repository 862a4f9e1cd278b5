"""Dynamic shared memory: the pool, its carve-outs and the target's limit.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import MEMORY, Case, example


CASES = [
    Case(
        MEMORY,
        r"shared\.dyn allocation without dynamic shared memory",
        "Dynamic shared memory not declared",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                tile = T.alloc_shared((64, 64), "bfloat16", scope="shared.dyn", align=1024)
        '''),
        "parse",
        "A ``shared.dyn`` tensor is carved out of the kernel's dynamic shared memory, "
        "and the launch declares none.",
        "Give the launch ``dynamic_smem_bytes=N`` (bytes); see :doc:`guides/dynamic_shared_memory`.",
    ),
    Case(
        MEMORY,
        r"carve-out past the declared dynamic shared memory",
        "Carve-out past the declared dynamic shared memory",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=8192))
                bar = T.alloc_shared((2,), "uint64", scope="shared.dyn", align=8)
                tile = T.alloc_shared((64, 64), "bfloat16", scope="shared.dyn", align=1024)
        '''),
        "parse",
        "The carve-out's bytes end past ``dynamic_smem_bytes``; here the 1024-byte "
        "alignment pushes the 8 KB tile to byte 1024.",
        "Declare enough bytes for every carve-out and its alignment padding, or shrink the carve-out.",
    ),
    Case(
        MEMORY,
        r"overlapping dynamic shared memory carve-outs",
        "Overlapping carve-outs",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=8192))
                a = T.alloc_shared((256,), "float32", scope="shared.dyn", align=16)
                b = T.alloc_shared((64,), "float32", scope="shared.dyn", align=16, offset=512)
        '''),
        "parse",
        "An explicit ``offset=`` places the carve-out on bytes an earlier one already owns.",
        "Leave ``offset=None`` (the next free byte), choose free bytes, or pass "
        "``alias=True`` when reusing the bytes is intended.",
    ),
    Case(
        MEMORY,
        r"carve-out alignment",
        "Carve-out alignment out of range",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=8192))
                a = T.alloc_shared((256,), "float32", scope="shared.dyn", align=2048)
        '''),
        "parse",
        "``align`` must be a power of two from the element size up to 1024 bytes, "
        "the alignment of the pool itself.",
        "Use at most ``align=1024`` (what the 128-byte swizzle needs).",
    ),
    Case(
        MEMORY,
        r"carve-out offset",
        "Carve-out offset not a multiple of its alignment",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=8192))
                a = T.alloc_shared((256,), "float32", scope="shared.dyn", align=128, offset=64)
        '''),
        "parse",
        "An explicit ``offset=`` must keep the carve-out's promised alignment.",
        "Round the offset up to a multiple of ``align``.",
    ),
    Case(
        MEMORY,
        r"shared memory over the target's limit",
        "More shared memory than the target allows",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=240 * 1024))
                a = T.alloc_shared((64,), "float32", scope="shared.dyn", align=16)
        '''),
        "compile",
        "Dynamic plus static shared memory exceed the per-CTA limit of the target's "
        "compute capability (232448 bytes, 227 KB, on sm_90a).",
        "Use fewer or smaller stages, or reuse bytes with ``alias=True``.",
    ),
]
