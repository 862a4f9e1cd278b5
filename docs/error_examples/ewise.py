"""``T.cuda.tile.ewise``: its scope, operands and function.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import EWISE, Case, example


CASES = [
    Case(
        EWISE,
        r"execution scope not supported",
        "Scope other than thread",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                x = T.alloc_local((4,), "float32")
                T.cuda.tile.ewise(lambda v: v + v, x, x, scope="warp")
        '''),
        "parse",
        "``tile.ewise`` works on each thread's own registers only.",
        "Drop ``scope=`` (it defaults to ``\"thread\"``).",
    ),
    Case(
        EWISE,
        r"not a register tensor",
        "Memory tensor passed to ewise",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                x = T.alloc_local((4,), "float32")
                s = T.alloc_shared((4,), "float32")
                T.cuda.tile.ewise(lambda v: v + v, s, x)
        '''),
        "parse",
        "``tile.ewise`` computes on registers; memory is read and written by "
        "explicit ``ld`` / ``st``.",
        "Compute into a ``T.alloc_local`` tensor, then store it.",
    ),
    Case(
        EWISE,
        r"shapes differ",
        "Inputs of another shape",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                x = T.alloc_local((4,), "float32")
                y = T.alloc_local((8,), "float32")
                T.cuda.tile.ewise(lambda v: v + v, x, y)
        '''),
        "parse",
        "ewise pairs coordinates one to one, so every register tensor has ``dst``'s "
        "shape (no broadcasting of tensors; scalars are reused).",
        "Pass views of equal shape (``y.sub[0:4]``).",
    ),
    Case(
        EWISE,
        r"operand is not a register tensor",
        "Input that is neither a tensor nor a typed scalar",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                x = T.alloc_local((4,), "float32")
                T.cuda.tile.ewise(lambda v, s: v * s, x, x, 2.0)
        '''),
        "parse",
        "A bare Python number has no dtype.",
        "Pass ``T.float32(2.0)``.",
    ),
    Case(
        EWISE,
        r"operand is not a register tensor",
        "Scalar as the destination",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                x = T.alloc_local((4,), "float32")
                T.cuda.tile.ewise(lambda v: v + v, T.float32(0), x)
        '''),
        "parse",
        "``dst`` is written at every coordinate, so it must be a register tensor.",
        "Pass the ``T.alloc_local`` tensor that receives the results first.",
    ),
    Case(
        EWISE,
        r"input count",
        "Function arity differs from the inputs",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                x = T.alloc_local((4,), "float32")
                T.cuda.tile.ewise(lambda v, w: v + w, x, x)
        '''),
        "parse",
        "The function takes one argument per input after ``dst``.",
        "Pass as many inputs as the function has parameters.",
    ),
    Case(
        EWISE,
        r"input dtype differs from the function's parameter",
        "Input dtype differs from the annotation",
        example('''
            def twice(v: T.float16):
                return v * T.float16(2)

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                x = T.alloc_local((4,), "float32")
                T.cuda.tile.ewise(twice, x, x)
        '''),
        "parse",
        "Annotated parameters state the dtype the function computes in; nothing "
        "is converted to it.",
        "Annotate with the input's dtype, or convert explicitly first (``cvt``).",
    ),
    Case(
        EWISE,
        r"result dtype differs from dst",
        "Result dtype differs from dst",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                x = T.alloc_local((4,), "float32")
                h = T.alloc_local((4,), "float16")
                T.cuda.tile.ewise(lambda v: v * T.float32(2), h, x)
        '''),
        "parse",
        "The function's result is stored as it is; a float32 result is not "
        "narrowed into a float16 register.",
        'Return the destination\'s dtype (``T.Cast("float16", ...)``) or convert '
        "with ``cvt.rn.f16.f32``.",
    ),
]
