"""Predication and parameters: ``pred=``, ``preserve_dst=`` and the keyword parameters of a form.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import PRED, Case, example


CASES = [
    Case(
        PRED,
        r"preserve_dst without pred",
        "``preserve_dst`` without ``pred``",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :], preserve_dst=True)
        '''),
        "parse",
        "``preserve_dst`` says what happens when the predicate is false; without a "
        "predicate it means nothing.",
        "Add ``pred=<bool expression>`` or drop ``preserve_dst``.",
    ),
    Case(
        PRED,
        r"register dtype cannot be bound read-write",
        "``preserve_dst`` with 8-bit registers",
        example('''
            @T.function
            def kernel(A: T.Tensor((64,), "int8", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((1,), "int8")
                T.cuda.tile.apply(T.ptx["ld.global.s8"], r, A.sub[tid : tid + 1], pred=tid < 32, preserve_dst=True)
        '''),
        "parse",
        "``preserve_dst`` binds the destination read-write so that a false predicate "
        "keeps its value; inline asm has no 8-bit register binding, and an 8-bit value "
        "travels through a 16-bit carrier that cannot be written back in place.",
        "Load into ``int32``/``uint32`` registers (``ld.global.s8`` sign-extends, "
        "``.u8`` zero-extends into them), or drop ``preserve_dst``.",
    ),
    Case(
        PRED,
        r"preserve_dst on an instruction without a register destination",
        "``preserve_dst`` on a store",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["st.global.v4.b32"], A.sub[tid, :], r,
                                  pred=tid < 32, preserve_dst=True)
        '''),
        "parse",
        "A predicated-off store leaves memory untouched anyway; there is no "
        "register destination to preserve.",
        "Drop ``preserve_dst=True``.",
    ),
    Case(
        PRED,
        r"pred must be a bool expression",
        "Predicate that is not a bool",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :], pred=tid)
        '''),
        "parse",
        "``pred`` becomes a PTX predicate register; an integer is not truth-tested "
        "implicitly.",
        "Write a comparison: ``pred=tid < 32``.",
    ),
    Case(
        PRED,
        r"unknown parameter",
        "Parameter the form does not take",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                policy = T.alloc_local((1,), "uint64")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :],
                                  cache_policy=policy[0])
        '''),
        "parse",
        "Family parameters bind PTX operands that the opcode names; "
        "``cache_policy`` belongs to ``.L2::cache_hint`` forms only.",
        "Use ``ld.global.L2::cache_hint.v4.b32`` with it, or drop the parameter.",
    ),
    Case(
        PRED,
        r"missing parameter",
        "Parameter the opcode requires",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.L2::cache_hint.v4.b32"], r, A.sub[tid, :])
        '''),
        "parse",
        "The ``.L2::cache_hint`` qualifier adds a 64-bit cache-policy operand to "
        "the instruction; it has no default.",
        "Create a policy (``createpolicy``) and pass ``cache_policy=policy[0]``.",
    ),
    Case(
        PRED,
        r"parameter of the wrong type",
        "Parameter of the wrong type",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.L2::cache_hint.v4.b32"], r, A.sub[tid, :],
                                  cache_policy=T.float32(1))
        '''),
        "parse",
        "A parameter that binds a PTX operand takes an expression of a dtype the "
        "operand's PTX type accepts. Here the cache policy is not a 64-bit integer.",
        "Pass the operand with the type the message names (a ``uint64`` policy "
        "from ``createpolicy``).",
    ),
    Case(
        PRED,
        r"malformed tile\.apply flags",
        "Hand-written printed form with bad flags",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply("ld.global.v4.b32", r, A.sub[tid, :], "scope=thread,fast")
        '''),
        "parse",
        "A call whose opcode and last argument are both strings is read as the "
        "*printed* form (``kernel.script()`` output), whose last string lists "
        "``scope=``, ``pred``, ``keep`` and ``param=`` flags. Another word is not a flag.",
        "Write calls with keyword arguments (``scope=\"warp\"``, ``pred=...``); "
        "keep printed text as printed.",
    ),
]
