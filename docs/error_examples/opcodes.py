"""Opcodes and instruction forms: the opcode text, the table entry, the family and the arch.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import OPCODE, Case, example


CASES = [
    Case(
        OPCODE,
        r"unknown opcode",
        "Empty or non-string opcode",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply("", r, A.sub[tid, :])
        '''),
        "parse",
        "The first argument of ``tile.apply`` must name a PTX instruction.",
        'Pass ``T.ptx["<opcode>"]`` or the opcode text, e.g. ``T.ptx["ld.global.v4.b32"]``.',
    ),
    Case(
        OPCODE,
        r"unknown or illegal opcode spelling",
        "Misspelt opcode (string)",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply("ld.global.v3.b32", r, A.sub[tid, :])
        '''),
        "parse",
        "apache-tvm's PTX table has no instruction spelt this way: a qualifier is "
        "unknown (PTX has no ``.v3`` vectors) or in the wrong place.",
        "Spell the instruction as the PTX ISA does; the instruction reference of "
        "this site lists every form that ``tile.apply`` accepts.",
    ),
    Case(
        OPCODE,
        r"unknown or illegal opcode spelling",
        "Misspelt opcode (``T.ptx[...]``)",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.globl.v4.b32"], r, A.sub[tid, :])
        '''),
        "parse",
        "The same rule, found by ``T.ptx[...]`` itself while the kernel is parsed.",
        "Correct the spelling (here ``.global``).",
    ),
    Case(
        OPCODE,
        r"illegal opcode",
        "Incomplete or illegal qualifier combination",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4"], r, A.sub[tid, :])
        '''),
        "parse",
        "Every qualifier is known, but the instruction is not complete (here the "
        "``.type`` is missing) or the PTX ISA forbids the combination; the message "
        "gives the table's reason.",
        "Add the missing qualifier (``ld.global.v4.b32``) or drop the illegal one.",
    ),
    Case(
        OPCODE,
        r"no tile family for this instruction",
        "Instruction without a tile family",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
                r = T.alloc_local((1,), "uint32")
                T.cuda.tile.apply(T.ptx["popc.b32"], r, r)
        '''),
        "parse",
        "The instruction is valid PTX, but no tile family claims its PTX table entry. "
        "The message lists the families and their mnemonics.",
        "Use one of the listed instructions, or call the PTX intrinsic directly: "
        '``T.ptx["popc.b32"](r[0], r[0])`` (no tile checks then).',
    ),
    Case(
        OPCODE,
        r"unsupported form",
        "Form outside the family's contract",
        example('''
            @T.function
            def kernel(A: T.Tensor((64,), "float32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((1,), "float32")
                T.cuda.tile.apply(T.ptx["ld.b32"], r, A.sub[tid : tid + 1])
        '''),
        "parse",
        "The family exists but excludes this form; the message says why (here: "
        "generic addressing, since ``ld``/``st`` tile forms must name their state space).",
        "Name the state space in the opcode: ``ld.global.b32``.",
    ),
    Case(
        OPCODE,
        r"needs sm_100 or newer \(PTX ISA .*ptxas",
        "Form newer than the target architecture",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 8), "float32", align=32)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((8,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v8.b32"], r, A.sub[tid, :])
        '''),
        "compile",
        "The form exists in PTX but ``ptxas`` accepts it only from a newer "
        "architecture than the one compiled for (256-bit loads need sm_100; a TMA "
        "or ``cp.async.bulk`` needs sm_90, ``cp.async`` sm_80). Every form's floor was "
        "measured with ptxas (``tools/probe_arch_floors.py``; the reference page of "
        "each family lists them). Checked when the kernel is compiled, since only "
        "then is the target known, and before nvcc runs.",
        "Compile for the architecture named in the message, or use a narrower form "
        "(two ``ld.global.v4.b32`` over a ``(2, 4)`` view).",
    ),
]
