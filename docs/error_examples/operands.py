"""Operands: their count, kinds, shapes, element types and register slots.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import OPERANDS, Case, example


CASES = [
    Case(
        OPERANDS,
        r"operand count",
        "Wrong number of operands",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r)
        '''),
        "parse",
        "Each role of the instruction form takes exactly one operand, in the "
        "form's order (``ld``: dst, src).",
        "Pass one operand per role listed in the message.",
    ),
    Case(
        OPERANDS,
        r"untyped scalar",
        "Untyped Python number",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
                a = T.alloc_local((4, 1), "uint32")
                T.cuda.tile.apply(T.ptx["mov.b32"], a, 17)
        '''),
        "parse",
        "A bare Python number has no dtype, so its bit width cannot be checked "
        "against the PTX type.",
        "Write a typed scalar: ``T.uint32(17)``, ``T.float32(0)``.",
    ),
    Case(
        OPERANDS,
        r"operand is not a tensor view or scalar expression",
        "Operand that is neither a view nor a scalar",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub)
        '''),
        "parse",
        "Tile operands are buffer views, regions (``A[tid, 0:4]``, taken as the view "
        "``A.sub[tid:tid + 1, 0:4]``) or typed scalar expressions; ``A.sub`` without an "
        "index is the indexer that makes views, not a view.",
        "Index it: ``A.sub[tid, :]`` (a zero-copy view).",
    ),
    Case(
        OPERANDS,
        r"scalar in a destination slot",
        "Scalar where the instruction writes",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
                r = T.alloc_local((1,), "float32")
                T.cuda.tile.apply(T.ptx["mov.b32"], T.float32(0), r)
        '''),
        "parse",
        "Scalars may only stand in for values the instruction reads.",
        "Put the destination first, as a register tensor: "
        '``T.cuda.tile.apply(T.ptx["mov.b32"], r, T.float32(0))``.',
    ),
    Case(
        OPERANDS,
        r"scalar in a memory slot",
        "Scalar where memory is read",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
                r = T.alloc_local((1,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.b32"], r, T.float32(0))
        '''),
        "parse",
        "A memory operand must be a tensor view: its address is what the "
        "instruction uses.",
        "Pass a view of a global/shared/local tensor, or use ``mov`` to fill registers.",
    ),
    Case(
        OPERANDS,
        r"scalar for a register group",
        "Scalar for a vector of registers",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                T.cuda.tile.apply(T.ptx["st.global.v4.b32"], A.sub[tid, :], T.float32(0))
        '''),
        "parse",
        "A scalar covers one register; this operand's atom is a group of four.",
        "Fill a ``(4,)`` register tensor first (``mov.b32`` with the scalar, over a "
        "``(4, 1)`` view) and store that.",
    ),
    Case(
        OPERANDS,
        r"wrong state space for the opcode",
        "Memory tensor in the wrong state space",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                s = T.alloc_shared((64, 4), "float32", align=16)
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, s.sub[tid, :])
        '''),
        "parse",
        "The opcode's state space (``.global``) and the tensor's storage scope "
        "(shared) disagree. Nothing converts addresses between spaces.",
        "Use the opcode of the tensor's space (``ld.shared.v4.b32``) or the right tensor.",
    ),
    Case(
        OPERANDS,
        r"wrong state space for the opcode",
        "Memory tensor where registers are expected",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16),
                       B: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], B.sub[tid, :], A.sub[tid, :])
        '''),
        "parse",
        "``ld`` moves memory into registers; a global-to-global copy is two "
        "instructions.",
        "Load into a ``T.alloc_local`` tensor, then ``st`` it.",
    ),
    Case(
        OPERANDS,
        r"element bit width differs from the PTX type's",
        "Element width differs from the PTX type",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float16", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])
        '''),
        "parse",
        "Every operand element must have the width of the PTX type (32 bits for "
        "``.b32``); nothing is converted or repacked implicitly.",
        'Reinterpret the bits with ``.view("uint32")`` (two halves per word) or '
        "choose the opcode of the element width (``ld.global.v4.b16``).",
    ),
    Case(
        OPERANDS,
        r"dtype not accepted by the PTX type",
        "Dtype of the right width but the wrong kind",
        example('''
            @T.function
            def kernel(A: T.Tensor((64,), "int32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((1,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[tid : tid + 1])
        '''),
        "parse",
        "A typed PTX type (``.f32``, ``.s32``) accepts only its own dtype; the "
        "bit types (``.b32``) accept any dtype of their width (PTX ISA 5.2).",
        "Use a ``.bN`` opcode to move bits, or ``.view(dtype)`` the tensor.",
    ),
    Case(
        OPERANDS,
        r"symbolic shape",
        "Extent that is not a constant",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 64), "float32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((64, 1), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.b32"], r.sub[0:tid, :], A.sub[tid, 0:tid].view(tid, 1))
        '''),
        "parse",
        "Repeat axes are unrolled at compile time, so every extent must be a constant.",
        "Give views constant extents (``A.sub[tid, 0:4]``), and guard or predicate "
        "the part that depends on run-time values.",
    ),
    Case(
        OPERANDS,
        r"wrong atom shape",
        "Trailing axes do not match the atom",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((3,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, 0:3])
        '''),
        "parse",
        "Each operand's shape must end in the instruction's atom (``(4,)`` for a "
        "``.v4`` access); the instruction is never narrowed to fit.",
        "Make the view's last axis the atom, or pick the opcode whose atom fits "
        "(``ld.global.b32`` over a ``(3, 1)`` view).",
    ),
    Case(
        OPERANDS,
        r"repeat shapes differ",
        "Operands with different repeat shapes",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 8), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((3, 4), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :].view(2, 4))
        '''),
        "parse",
        "One instruction is emitted per repeat coordinate, so all operands must "
        "agree on the repeat axes (between group and atom).",
        "Reshape with ``.view(...)`` or narrow with ``.sub[...]`` until the repeat "
        "shapes are equal.",
    ),
    Case(
        OPERANDS,
        r"repeat shapes differ",
        "mma operands that disagree on a repeat axis",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                d = T.alloc_local((2, 1, 16, 8), "float32")
                a = T.alloc_local((1, 1, 16, 8), "uint32")
                b = T.alloc_local((1, 1, 8, 8), "uint32")
                T.cuda.tile.apply(T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"],
                                  d, a, b, d, scope="warp")
        '''),
        "parse",
        "``mma.sync``'s repeat axes are ``(M, N, K)``: ``D`` and ``C`` carry ``(M, N)``, "
        "``A`` ``(M, K)``, ``B`` ``(N, K)``. Here ``D`` has two tiles along M and ``A`` one.",
        "Give every operand the same extent on each axis it carries (``A`` of shape "
        "``(2, 1, 16, 8)``).",
    ),
    Case(
        OPERANDS,
        r"vector atom not contiguous",
        "Vector atom not contiguous in memory",
        example('''
            @T.function
            def kernel(A: T.Tensor((4, 64), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[:, tid])
        '''),
        "parse",
        "A vector access reads consecutive elements; this view's atom walks a "
        "column (stride 64).",
        "Use scalar forms over a ``(4, 1)`` view (``ld.global.b32``), or lay the "
        "data out so the atom is a row.",
    ),
    Case(
        OPERANDS,
        r"view offsets not static",
        "Sub-view of a swizzled tensor at a per-thread start",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                tid = T.cuda.thread_idx("x")
                sm = T.alloc_shared((32, 8), "float32", align=16,
                                    layout=ComposeLayout(2, 2, 3, TileLayout(S[(32, 8)])))
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], r, sm.sub[tid, 0:4])
        '''),
        "parse",
        "A swizzle does not commute with an offset that is not a whole number of "
        "its periods (here 2^(2+2+3) = 128 elements): row ``tid`` of 8 elements "
        "starts mid-period, so where each element lands depends on the thread and "
        "contiguity and alignment cannot be checked.",
        "Give each thread's view a start that is a multiple of the swizzle period, "
        "or view the whole tensor with the threads as group axes "
        "(``sm.view(32, 2, 4)`` at ``scope=\"warp\"``, with a lane-distributed register layout).",
    ),
    Case(
        OPERANDS,
        r"overlapping register destinations",
        "Two destination coordinates in one register",
        example('''
            overlapping = TileLayout(S[(2, 2, 1) : (1, 1, 1)])

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
                d = T.alloc_local((2, 2, 1), "uint32", layout=overlapping)
                T.cuda.tile.apply(T.ptx["mov.b32"], d, T.uint32(1))
        '''),
        "parse",
        "The destination's layout maps two coordinates to the same register slot, "
        "so one write would silently replace another.",
        "Use a layout whose destination slots are distinct (gaps are fine).",
    ),
    Case(
        OPERANDS,
        r"slice of a view across its layout's blocks",
        "Slice of a view across the blocks of its layout",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 8), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((2, 4), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r.view(8).sub[2:6], A.sub[tid, 0:4])
        '''),
        "parse",
        "``.view()`` reshapes a tensor but keeps its layout: ``r.view(8)`` of a ``(2, 4)`` "
        "tensor is still two blocks of four registers, and a slice of it must start and "
        "end on a block boundary, at numbers known when the kernel is parsed.",
        "Slice the tensor before viewing it (``A.sub[i, :]`` rather than "
        "``A.view(n * 4).sub[4 * i:4 * i + 4]``), or allocate it in the shape you slice "
        "(``T.alloc_local((8,), ...)``, then ``.view(2, 4)`` where you need two axes).",
    ),
    Case(
        OPERANDS,
        r"raw call whose operands the checker cannot read",
        "Raw call whose operands the checker cannot read",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                s = T.alloc_shared((32,), "float32")
                x = T.alloc_local((1,), "float32")
                T.ptx["shfl_sync.bfly.b32"](s[0], x[0], T.uint32(1), T.uint32(31), T.uint32(0xFFFFFFFF))
        '''),
        "lower",
        "A raw ``T.ptx[...]`` call of an instruction whose family checks raw calls (named "
        "barriers, ``shfl.sync``, ``vote.sync``, ``match.sync``, ``redux.sync``, "
        "``elect.sync``) is read back into its tile form and checked by the same rules. "
        "The checker reads a register an instruction writes only as an element of a "
        "``T.alloc_local`` tensor; here the shuffle writes a shared-memory element.",
        "Write the tile form the message names (its operands are views the checker "
        "reads), or shuffle into a register and store it with ``st.shared``.",
    ),
]
