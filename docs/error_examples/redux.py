"""The ``redux.sync`` family: the targets of its ``.f32`` forms.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import OPCODE, Case, example

CASES = [
    Case(
        OPCODE,
        r"redux.sync.max.f32: needs sm_100f or newer \(PTX ISA 9\.7\.15\.13; measured with ptxas",
        "Floating-point warp reduction compiled for Hopper",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                x = T.alloc_local((1,), "float32")
                T.cuda.tile.apply("redux.sync.max.f32", x, x)
        '''),
        "compile",
        "``redux.sync`` reduces 32-bit integers from sm_80, but its ``.f32`` forms exist "
        "on sm_100f, sm_100a, sm_103f and sm_103a only (ptxas refuses them elsewhere: "
        "a newer target such as sm_120a is refused as \"specific to another architecture\").",
        "On sm_90a, reduce floats over the warp with "
        '``T.cuda.tile.reduce_lanes(T.ptx["max.f32"], x, lanes=32)`` (five butterfly shuffles).',
    ),
]
