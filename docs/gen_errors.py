"""Generate the error-message guide's examples by triggering every error for real.

Run by ``conf.py`` at build time (or by hand: ``python docs/gen_errors.py OUT.rst``).
Each example below is a small kernel file that breaks one rule.  The script
writes it to a temporary ``example.py``, parses / lowers / compiles it, and
records the message tvm_tirx actually raises, so the guide cannot drift from
the code.  Absolute paths and object addresses are stripped from the
messages so that the output is stable.

The script also reads every ``TileError(...)`` raised in ``python/tvm_tirx``
(with :mod:`ast`) and fails when a rule has no example here, or when an
example no longer raises the rule it documents.
"""

from __future__ import annotations

import ast
import importlib.util
import pathlib
import re
import sys
import tempfile
import textwrap
from dataclasses import dataclass

HEADER = """\
from tvm.tirx.layout import Axis, ComposeLayout, S, TileLayout
from tvm_tirx.script import tirx as T

"""
#: First line number of an example's own source inside ``example.py``.
FIRST_LINE = HEADER.count("\n") + 1


@dataclass
class Case:
    """One documented error.

    ``action`` says what is done with ``example.py``: ``"parse"`` (import it:
    ``@T.function`` parses the kernel), ``"lower"`` (run ``LowerTileApply`` on
    its ``kernel``), ``"compile"`` (``tvm_tirx.compile(kernel, arch="sm_90a")``),
    ``"compile-sm100a"`` (the same for ``arch="sm_100a"``) or ``"exec"`` (import
    it; the code itself raises).
    """

    section: str
    rule: str  # a regular expression the message must match
    title: str
    source: str
    action: str
    meaning: str
    fix: str
    error: str = "TileError"


def _k(body: str) -> str:
    return textwrap.dedent(body).strip("\n") + "\n"


OPCODE, OPERANDS, MEMORY, PRED, SCOPE, COLLECTIVE, EWISE, SCHEDULE, OTHER = (
    "Opcode and instruction form",
    "Operands: kinds, shapes and types",
    "Memory operands: alignment and bounds",
    "Predication and parameters",
    "Execution scopes, ownership and guards",
    "Warp-collective and asynchronous instructions",
    "tile.ewise",
    "Tensor intrinsics in TIR schedules",
    "Errors outside the tile contract",
)

_X1 = "ldmatrix.sync.aligned.m8n8.x1.shared.b16"

_TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"


def _tma(call: str, tile="(8, 32)", dtype="float32", gshape="(8, 32)", gdtype=None, galign=16, layout="") -> str:
    """An example kernel around one TMA tile call (``s`` shared, ``A`` global, ``bar`` mbarrier)."""
    lay = f", layout={layout}" if layout else ""
    return _k(f'''
        @T.function
        def kernel(A: T.Tensor({gshape}, "{gdtype or dtype}", align={galign})):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=16384))
            s = T.alloc_shared({tile}, "{dtype}", scope="shared.dyn", align=1024{lay})
            bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
            if T.cuda.thread_idx("x") == 0:
                {call}
    ''')


def _tma_load(extra="", a="A") -> str:
    return f'T.cuda.tile.apply(T.ptx["{_TMA_LOAD}"], s, {a}, mbar=bar, coords=(0, 0){extra})'


def _fragment_schedule(layout: str, rows: int = 32) -> str:
    """An ``exec`` example: ``B = A`` (f16, ``rows x 16``) scheduled through a
    shared stage and a ``"warp"`` fragment cache laid out by ``layout`` (the
    body of ``def layout(i, j)``), whose 16-row tiles are tensorized with
    ``tvm_tirx.ldmatrix_x4_f16``; then built."""
    return _k(f'''
        import tvm
        import tvm_tirx
        import tvm_tirx.schedule.tensor_intrin
        from tvm.s_tir.tensor_intrin.cuda import shared_16x16_to_ldmatrix_32x8_layout as fragment

        @T.prim_func(s_tir=True)
        def copy(A: T.Buffer(({rows}, 16), "float16"), B: T.Buffer(({rows}, 16), "float16")):
            for i, j in T.grid({rows}, 16):
                with T.sblock("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj]

        def layout(i, j):
            {layout}

        sch = tvm.s_tir.Schedule(copy)
        block = sch.get_sblock("B")
        shared = sch.cache_read(block, 0, "shared")
        regs = sch.cache_read(block, 0, "warp")
        _, tx, vec = sch.split(sch.fuse(*sch.get_loops(shared)), [None, 32, 8])
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(vec)
        i, _ = sch.get_loops(regs)
        io, ii = sch.split(i, [None, 16])
        sch.transform_layout(regs, ("write", 0), layout)
        sch.tensorize(ii, "tvm_tirx.ldmatrix_x4_f16")
        tvm_tirx.compile(sch.mod, target="cuda", arch="sm_90a")
    ''')


CASES = [
    # ------------------------------------------------------------------ opcode
    Case(
        OPCODE,
        r"unknown opcode",
        "Empty or non-string opcode",
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        r"instruction needs a newer architecture",
        "Form newer than the target architecture",
        _k('''
            @T.function
            def kernel(A: T.Tensor((64, 8), "float32", align=32)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((8,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v8.b32"], r, A.sub[tid, :])
        '''),
        "compile",
        "The form exists in PTX but ``ptxas`` accepts it only from a newer "
        "architecture than the one compiled for (256-bit loads need sm_100). "
        "Checked when the kernel is compiled, since only then is the target known.",
        "Compile for the architecture named in the message, or use a narrower form "
        "(two ``ld.global.v4.b32`` over a ``(2, 4)`` view).",
    ),
    # ---------------------------------------------------------------- operands
    Case(
        OPERANDS,
        r"operand count",
        "Wrong number of operands",
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
    # ------------------------------------------------------- memory proofs
    Case(
        MEMORY,
        r"vector atom not provably aligned",
        "Alignment not provable from the index",
        _k('''
            @T.function
            def kernel(A: T.Tensor((64, 5), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, 0:4])
        '''),
        "lower",
        "A ``.v4.b32`` access must be 16-byte aligned (PTX ISA 5.4.6). Rows of "
        "five floats start at byte ``20 * tid``, which is not a multiple of 16 for "
        "every thread.",
        "Pad rows to a multiple of the vector size, or use narrower forms.",
    ),
    Case(
        MEMORY,
        r"vector atom not provably aligned",
        "Alignment not promised by the tensor",
        _k('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])
        '''),
        "lower",
        "Alignment proofs start from the tensor's declared ``align``; without it a "
        "float32 tensor is only known to be 4-byte aligned.",
        "Declare ``T.Tensor(..., align=16)``; the compiled kernel then checks every "
        "argument's pointer against it.",
    ),
    Case(
        MEMORY,
        r"view provably out of the tensor's bounds",
        "View outside its tensor",
        _k('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid + 1, :])
        '''),
        "lower",
        "Thread 63 would read row 64 of a 64-row tensor. The check evaluates the "
        "view's offset for every thread of the launch that reaches the call (the "
        "enclosing ``if`` guards are taken into account) and names one that is out.",
        "Wrap the index (``(tid + 1) % 64``), guard the call (``if tid < 63:``), pass "
        "``pred=`` to skip the access at run time, or enlarge the tensor.",
    ),
    Case(
        MEMORY,
        r"view not provably within the tensor's bounds",
        "View that may leave its tensor",
        _k('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16), Idx: T.Tensor((64,), "int32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[Idx[tid], :])
        '''),
        "lower",
        "The row comes from memory, so no proof can place it inside ``A``. A view "
        "that is neither provably inside nor provably outside is accepted only when "
        "the call is predicated or sits under an ``if``: then the check is yours.",
        "Predicate the access (``pred=Idx[tid] < 64``), guard it (``if Idx[tid] < 64:``), or clamp the "
        "index (``T.min(Idx[tid], 63)``).",
    ),
    Case(
        MEMORY,
        r"memory view without a known tensor",
        "Memory view of an unknown tensor",
        _k('''
            @T.function
            def kernel(p: T.handle("float32", "global")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                A = T.decl_buffer((64, 4), "float32", data=p, align=16)
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])
        '''),
        "lower",
        "The bounds and alignment proofs need the tensor a view belongs to: a "
        "kernel parameter or an allocation. A buffer declared over a raw pointer "
        "(``T.decl_buffer(..., data=p)``) has neither, so nothing can be proven.",
        "Declare the parameter as ``A: T.Tensor((64, 4), \"float32\", align=16)``.",
    ),
    Case(
        MEMORY,
        r"dtype view not aligned to its element size",
        "Dtype view that starts inside a wider element",
        _k('''
            @T.function
            def kernel(A: T.Tensor((64, 8), "uint8", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((1,), "uint32")
                T.cuda.tile.apply(T.ptx["ld.global.b32"], r, A.sub[tid, 2:6].view("uint32"))
        '''),
        "lower",
        "Bytes 2..5 of each row viewed as one ``uint32``: ``.view(dtype)`` expresses the "
        "view's start in ``uint32`` elements and rounds it down, so the load would read "
        "bytes 0..3. A wider dtype view must start at a multiple of its element size "
        "(which the wider access needs anyway); it is never rounded.",
        "Start the view on a wide element (``A.sub[tid, 4:8].view(\"uint32\")``), or load "
        "the bytes with a narrower instruction (``ld.global.v4.b8``).",
    ),
    # ---------------------------------------------------- pred and params
    Case(
        PRED,
        r"preserve_dst without pred",
        "``preserve_dst`` without ``pred``",
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
    # ---------------------------------------------------------------- scopes
    Case(
        SCOPE,
        r"unknown execution scope",
        "Unknown scope name",
        _k('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :], scope="grid")
        '''),
        "parse",
        "Scopes are ``thread``, ``warp``, ``warpgroup``, ``cta`` and ``cluster``.",
        "Use one of the names in the message.",
    ),
    Case(
        SCOPE,
        r"group shape does not match the scope",
        "Group axes that do not match the launch",
        _k('''
            cta_regs = TileLayout(S[(2, 32, 3, 4) : (1 @ Axis.warpid, 1 @ Axis.laneid, 4, 1)])

            @T.function
            def kernel(A: T.Tensor((64, 12), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
                r = T.alloc_local((2, 32, 3, 4), "float32", layout=cta_regs)
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 32, 3, 4), scope="cta")
        '''),
        "lower",
        "At ``scope=\"cta\"`` the leading axes are ``(warps, 32)`` of the launch: "
        "128 threads give ``(4, 32)``, but the operands start with ``(2, 32)``.",
        "Shape the operands for the launch's block, or launch the block the tile "
        "was written for.",
    ),
    Case(
        SCOPE,
        r"-scope call needs whole",
        "Block that is not whole warps",
        _k('''
            warp_regs = TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)])

            @T.function
            def kernel(A: T.Tensor((48, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=48))
                r = T.alloc_local((32, 4), "float32", layout=warp_regs)
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[0:32, :], scope="warp")
        '''),
        "lower",
        "A warp-scope call spreads over whole warps (warpgroup scope: whole "
        "warpgroups of 128 threads); 48 threads leave a partial warp.",
        "Launch a multiple of 32 threads (128 for ``warpgroup``), or restrict the "
        "call with a guard to the full warps.",
    ),
    Case(
        SCOPE,
        r"cluster scope without a cluster launch",
        "Cluster scope without clusters",
        _k('''
            @T.function
            def kernel(A: T.Tensor((2, 64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64))
                r = T.alloc_local((2, 2, 32, 4), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 2, 32, 4), scope="cluster")
        '''),
        "parse",
        "The cluster scope's leading group axes are the CTA's position in its "
        "cluster, which only a cluster launch has.",
        "Launch with ``T.cuda.LaunchConfig(..., cluster=2)`` (sm_90 or newer).",
    ),
    Case(
        SCOPE,
        r"-scope call needs the kernel's launch",
        "Collective scope without a launch",
        _k('''
            warp_regs = TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)])

            @T.function
            def kernel(A: T.Tensor((32, 4), "float32", align=16)):
                T.device_entry()
                r = T.alloc_local((32, 4), "float32", layout=warp_regs)
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")
        '''),
        "lower",
        "Group coordinates are computed from the thread indices of the launch; "
        "this kernel declares none.",
        "Start the kernel with ``T.device_entry(launch=T.cuda.LaunchConfig(grid=..., block=...))``.",
    ),
    Case(
        SCOPE,
        r"register value owned by another thread",
        "Register layout that puts values on the wrong lane",
        _k('''
            wrong = TileLayout(S[(2, 32, 4) : (1 @ Axis.warpid, 2 @ Axis.laneid, 1)])

            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                r = T.alloc_local((2, 32, 4), "float32", layout=wrong)
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 32, 4), scope="cta")
        '''),
        "lower",
        "The thread at group coordinate ``(w, l)`` issues the instruction for "
        "that coordinate, so the layout must place those values on lane ``l`` "
        "of warp ``w``; a stride of 2 on ``laneid`` places them elsewhere. "
        "Values never move between threads.",
        "Give each group axis a thread axis with stride 1 in group order, e.g. "
        "``S[(2, 32, 4) : (1 @ Axis.warpid, 1 @ Axis.laneid, 1)]``.",
    ),
    Case(
        SCOPE,
        r"group axis not mapped to a thread axis",
        "Register tensor without thread axes at a collective scope",
        _k('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                r = T.alloc_local((2, 32, 4), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 32, 4), scope="cta")
        '''),
        "lower",
        "A default (thread-local) layout would give every thread all 256 values; "
        "the group axes must be distributed over threads.",
        "Allocate the registers with a layout whose leading axes use "
        "``Axis.warpid`` / ``Axis.laneid`` (see the tile contract page).",
    ),
    Case(
        SCOPE,
        r"guard not understood",
        "Guard that reads memory",
        _k('''
            warp_regs = TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)])

            @T.function
            def kernel(A: T.Tensor((32, 4), "float32", align=16), Flag: T.Tensor((32,), "int32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((32, 4), "float32", layout=warp_regs)
                if Flag[tid] == 1:
                    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")
        '''),
        "lower",
        "Around a call at warp scope or wider, the ``if`` decides which threads of "
        "the group take part.  A condition over thread ids is evaluated for every "
        "thread; one without thread ids or memory reads (loop counters, "
        "``blockIdx``) keeps the whole group or none of it.  A condition that reads "
        "memory can differ between threads in ways the lowering cannot see.",
        "Move the condition into ``pred=``, or compute a thread-id range instead.",
    ),
    Case(
        SCOPE,
        r"guarded threads do not form a box of the group",
        "Guard selecting a non-rectangular set of lanes",
        _k('''
            regs = TileLayout(S[(16, 4) : (1 @ Axis.laneid, 1)])

            @T.function
            def kernel(A: T.Tensor((16, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                r = T.alloc_local((16, 4), "float32", layout=regs)
                if T.cuda.lane_id() % 2 == 0:
                    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")
        '''),
        "lower",
        "Under a guard, the participating threads become the group; they must form "
        "a contiguous range of group coordinates (even lanes do not).",
        "Guard with a range (``T.cuda.lane_id() < 16``), or use ``pred=`` on a "
        "full-warp call.",
    ),
    Case(
        SCOPE,
        r"guarded threads differ between instances of the scope",
        "Guard selecting different lanes in different warps",
        _k('''
            regs = TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)])

            @T.function
            def kernel(A: T.Tensor((32, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                r = T.alloc_local((32, 4), "float32", layout=regs)
                if T.cuda.thread_idx("x") < 48:
                    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")
        '''),
        "lower",
        "One call has one group shape: warp 0 runs it with 32 lanes but warp 1 "
        "with 16.",
        "Guard so that every instance (every warp here) keeps the same lanes, or "
        "select whole warps (``T.cuda.warp_id() == 0``).",
    ),
    # ------------------------------------------------- collective and async
    Case(
        COLLECTIVE,
        r"warp-collective instruction at thread scope",
        "Warp-collective instruction at thread scope",
        _k(f'''
            frag = TileLayout(S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)])

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                s = T.alloc_shared((8, 4), "uint32", align=16)
                r = T.alloc_local((1, 8, 4), "uint32", layout=frag)
                T.cuda.tile.apply(T.ptx["{_X1}"], r, s.view(1, 8, 4))
        '''),
        "lower",
        "``ldmatrix``, ``stmatrix`` and ``mma.sync`` are executed by the 32 lanes of "
        "a warp together; their atom already spans the warp, so they have no "
        "per-thread form.",
        'Call them with ``scope="warp"`` (or a wider scope, whose group is then the warps).',
    ),
    Case(
        COLLECTIVE,
        r"warp-collective instruction needs all 32 lanes",
        "Warp-collective instruction under a partial-warp guard",
        _k(f'''
            frag = TileLayout(S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)])

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                s = T.alloc_shared((8, 4), "uint32", align=16)
                r = T.alloc_local((1, 8, 4), "uint32", layout=frag)
                if T.cuda.lane_id() < 16:
                    T.cuda.tile.apply(T.ptx["{_X1}"], r, s.view(1, 8, 4), scope="warp")
        '''),
        "lower",
        "``.sync.aligned`` instructions must be executed by every lane of the warp "
        "at once; a guard that leaves out lanes would hang or corrupt the warp.",
        "Guard whole warps only (``T.cuda.warp_id() == 0``), or move the condition "
        "out of the collective call.",
    ),
    Case(
        COLLECTIVE,
        r"pred not uniform over the warp",
        "Warp-collective instruction with a per-lane predicate",
        _k(f'''
            frag = TileLayout(S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)])

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                s = T.alloc_shared((8, 4), "uint32", align=16)
                r = T.alloc_local((1, 8, 4), "uint32", layout=frag)
                T.cuda.tile.apply(T.ptx["{_X1}"], r, s.view(1, 8, 4), scope="warp", pred=T.cuda.lane_id() % 2 == 0)
        '''),
        "lower",
        "A predicate is a guard on each thread: true for even lanes only, it splits "
        "the warp exactly as ``if T.cuda.lane_id() % 2 == 0:`` would, and a "
        "``.aligned`` instruction must be executed by the whole collective (a warp, "
        "or a warpgroup of 128 threads). The rule proves the predicate has one value "
        "per collective, or names a thread where it differs from the first one.",
        "Predicate on something uniform over the collective (the warp id, a loop "
        "counter, a run-time size), or move the per-lane condition into the data.",
    ),
    Case(
        COLLECTIVE,
        r"guarded warps do not form a box of the group",
        "Guard selecting a non-contiguous set of warps",
        _k(f'''
            frag = TileLayout(S[(3, 1, 8, 4) : (1 @ Axis.warpid, 1, 4 @ Axis.laneid, 1 @ Axis.laneid)])

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=96))
                s = T.alloc_shared((3, 8, 4), "uint32", align=16)
                r = T.alloc_local((3, 1, 8, 4), "uint32", layout=frag)
                if T.cuda.warp_id() != 1:
                    T.cuda.tile.apply(T.ptx["{_X1}"], r, s.view(3, 1, 8, 4), scope="cta")
        '''),
        "lower",
        "Above warp scope the group of a collective call is its warps; under a "
        "guard the participating warps must be a contiguous range (warps 0 and 2 "
        "are not).",
        "Guard a contiguous range of warps, or issue two calls.",
    ),
    Case(
        COLLECTIVE,
        r"guarded warps differ between instances of the scope",
        "Guard selecting different warps in different warpgroups",
        _k(f'''
            frag = TileLayout(S[(4, 1, 8, 4) : (1 @ Axis.wid_in_wg, 1, 4 @ Axis.laneid, 1 @ Axis.laneid)])

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                s = T.alloc_shared((4, 8, 4), "uint32", align=16)
                r = T.alloc_local((4, 1, 8, 4), "uint32", layout=frag)
                if T.cuda.thread_idx("x") < 192:
                    T.cuda.tile.apply(T.ptx["{_X1}"], r, s.view(4, 1, 8, 4), scope="warpgroup")
        '''),
        "lower",
        "One call has one group shape: the first warpgroup would run it with four "
        "warps, the second with two.",
        "Keep the same warps in every warpgroup (e.g. guard on ``T.cuda.warp_id() % 4``).",
    ),
    Case(
        COLLECTIVE,
        r"warp-collective register operand without a lane axis",
        "Fragment registers without lane placement",
        _k(f'''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                s = T.alloc_shared((8, 4), "uint32", align=16)
                r = T.alloc_local((1, 8, 4), "uint32")
                T.cuda.tile.apply(T.ptx["{_X1}"], r, s.view(1, 8, 4), scope="warp")
        '''),
        "lower",
        "The ISA fixes which lane receives each word of the fragment (word "
        "``(m, r, w)`` of ``ldmatrix`` goes to lane ``4 * r + w``); a thread-local "
        "layout does not say which lane holds what.",
        "Lay the registers out with the lane map, e.g. "
        "``S[(1, 8, 4) : (1, 4 @ Axis.laneid, 1 @ Axis.laneid)]``.",
    ),
    Case(
        COLLECTIVE,
        r"chunk size not allowed for this cache operator",
        "cp.async chunk size the cache operator does not allow",
        _k('''
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
        _k('''
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
    # ------------------------------------------------------------------ TMA
    Case(
        COLLECTIVE,
        r"box differs from the shared image",
        "TMA box= that is not the shared tile's shape",
        _tma(_tma_load(", box=(8, 16)")),
        "parse",
        "The box a TMA copies is the shared operand's last N extents (N from ``.Nd``); "
        "``box=`` may restate it but not change it.",
        "Drop ``box=``, or give the shared view the box's shape (``s.sub[...]``).",
    ),
    Case(
        COLLECTIVE,
        r"coordinate count",
        "TMA coords= of the wrong length",
        _tma(_tma_load().replace("coords=(0, 0)", "coords=(0, 0, 0)")),
        "parse",
        "``coords`` gives the box's first element: one int32 per tensor axis, "
        "outermost first, as many as the opcode's ``.Nd``.",
        "Pass one coordinate per axis of the global tensor.",
    ),
    Case(
        COLLECTIVE,
        r"coord_steps do not match the repeat axes",
        "TMA repeat axes without coord_steps",
        _tma(_tma_load(), tile="(2, 8, 32)"),
        "parse",
        "Leading axes of the shared operand beyond the box are repeat axes: each "
        "coordinate issues one copy, whose coordinates are ``coords`` plus the repeat "
        "coordinate times that axis' ``coord_steps`` entry.",
        "Pass ``coord_steps=`` with one tuple of N steps per repeat axis, e.g. "
        "``coord_steps=((8, 0),)`` for boxes stacked along the rows.",
    ),
    Case(
        COLLECTIVE,
        r"box extent out of range",
        "TMA box over 256 elements along an axis",
        _tma(_tma_load(), tile="(300, 4)", gshape="(300, 4)"),
        "parse",
        "A tensor map's box extents are 1..256 (``cuTensorMapEncodeTiled``).",
        "Split the box: make the long axis a repeat axis with ``coord_steps``.",
    ),
    Case(
        COLLECTIVE,
        r"inner box row not a multiple of 16 bytes",
        "TMA box row of 12 bytes",
        _tma(_tma_load(), tile="(8, 3)", gshape="(8, 4)"),
        "parse",
        "The box's innermost extent times the element size must be a multiple of 16 "
        "bytes (``cuTensorMapEncodeTiled``).",
        "Widen the box's last axis to a multiple of 16 bytes.",
    ),
    Case(
        COLLECTIVE,
        r"inner box row wider than the swizzle span",
        "TMA box row wider than its swizzle",
        _tma(_tma_load(", swizzle=1")),
        "parse",
        "With a swizzle, the box's inner row may not exceed the swizzle span: 32, 64 or "
        "128 bytes for ``swizzle=1, 2, 3``.",
        "Use a wider swizzle, or split the row into boxes with a repeat axis.",
    ),
    Case(
        COLLECTIVE,
        r"shared layout is not the TMA image",
        "TMA swizzle on a row-major tile",
        _tma(_tma_load(", swizzle=3")),
        "parse",
        "The TMA writes the box in a fixed order: row-major, or with ``swizzle=`` the "
        "16-byte chunks of each 128-byte row permuted; the shared operand's layout must "
        "say the same, so that every later access reads what the TMA wrote.",
        "Allocate the tile with ``layout=swizzled_layout(shape, dtype, swizzle)`` "
        "(``tvm_tirx.tile.families.tma``), the layout the message shows.",
    ),
    Case(
        COLLECTIVE,
        r"element types differ",
        "TMA between tensors of different element types",
        _tma(_tma_load(), gdtype="int32"),
        "parse",
        "A TMA copies elements without converting them: the tensor map's type is the "
        "global tensor's, and the shared image must hold the same type.",
        "Use the same dtype on both sides (``.view(dtype)`` reinterprets bits).",
    ),
    Case(
        COLLECTIVE,
        r"element type not reducible with this operation",
        "TMA reduction of a type the operation does not take",
        _tma('T.cuda.tile.apply(T.ptx["cp.reduce.async.bulk.tensor.2d.global.shared::cta.inc.bulk_group"], A, s, coords=(0, 0))'),
        "parse",
        "Each reduction takes the element types PTX ISA 9.7.9.25.5.2 lists: ``.inc`` "
        "and ``.dec`` only ``u32``; ``.add`` ``u32 s32 u64 f32 f16 bf16`` ...",
        "Reduce a type the operation takes, or use another operation.",
    ),
    Case(
        COLLECTIVE,
        r"global tensor not strided with a contiguous inner axis",
        "TMA from a transposed view",
        _tma(_tma_load(a="A.permute(1, 0)"), tile="(8, 8)", gshape="(8, 8)"),
        "parse",
        "A tensor map walks the tensor's innermost axis contiguously; the other axes "
        "have byte strides.",
        "Map the tensor as it is stored and transpose in shared memory (or with the box).",
    ),
    Case(
        COLLECTIVE,
        r"global stride not a multiple of 16 bytes",
        "TMA over rows of 24 bytes",
        _tma(_tma_load(), tile="(8, 4)", gshape="(8, 6)"),
        "parse",
        "Every byte stride of a tensor map (all axes but the innermost) is a multiple of "
        "16 (``cuTensorMapEncodeTiled``).",
        "Pad the rows to a multiple of 16 bytes.",
    ),
    Case(
        COLLECTIVE,
        r"global extent out of range",
        "TMA over an axis of more than 2**32 elements",
        _tma('T.cuda.tile.apply(T.ptx["cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"], s, A, mbar=bar, coords=(0,))',
             tile="(16,)", dtype="uint8", gshape=f"({2**32 + 16},)"),
        "parse",
        "A tensor map's extents are at most 2**32 elements per axis.",
        "View the tensor with more axes (``A.view(rows, cols)``).",
    ),
    Case(
        COLLECTIVE,
        r"tensor map base not 16-byte aligned",
        "TMA from a view that starts off 16 bytes",
        _tma(_tma_load(a="A.sub[:, 1:33]"), gshape="(8, 64)"),
        "parse",
        "A tensor map's base address is 16-byte aligned: the tensor is declared with "
        "``align>=16`` and a view starts at a multiple of 16 bytes.",
        "Start the view at a multiple of 16 bytes, or keep the whole tensor and move "
        "the box with ``coords``.",
    ),
    Case(
        COLLECTIVE,
        r"tensor map of a tensor that is not a kernel parameter",
        "TMA from a global allocation",
        _tma('G = T.alloc_buffer((8, 32), "float32", scope="global", align=16)\n                '
             + _tma_load(a="G")),
        "lower",
        "The tensor map is encoded on the host from a kernel parameter's pointer; a "
        "tensor the kernel allocates has none there.",
        "Pass the tensor as a kernel parameter, or encode a map yourself and pass "
        "``T.address_of(map)``.",
    ),
    Case(
        PRED,
        r"invalid parameter 'swizzle'",
        "TMA swizzle= out of range",
        _tma(_tma_load(", swizzle=4")),
        "parse",
        "A family parameter has its own check; ``swizzle`` is 0 (none), 1 (32B), "
        "2 (64B) or 3 (128B).",
        "Pass one of the values the message lists.",
    ),
    Case(
        COLLECTIVE,
        r"shared-memory layout has no matrix descriptor",
        "wgmma: a shared tile whose layout no matrix descriptor describes",
        _k('''
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
        _k('''
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
        OPCODE,
        r"instruction is specific to another architecture",
        "Arch-specific instruction compiled for another target",
        _k('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, min_blocks_per_sm=1))
                T.cuda.tile.apply(T.ptx["setmaxnreg.inc.sync.aligned.u32"], scope="warpgroup", nreg=232)
        '''),
        "compile-sm100a",
        "``wgmma`` and ``setmaxnreg`` belong to sm_90a's arch-specific feature set: "
        "ptxas refuses them for sm_90 (no ``a``) and for newer architectures "
        "(sm_100a has ``tcgen05`` instead).",
        'Compile this kernel for ``arch="sm_90a"``.',
    ),
    Case(
        COLLECTIVE,
        r"setmaxnreg without a register cap at the kernel's entry",
        "setmaxnreg in a kernel without launch bounds",
        _k('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                if T.cuda.warp_id() < 4:
                    T.cuda.tile.apply(T.ptx["setmaxnreg.dec.sync.aligned.u32"], scope="warpgroup", nreg=40)
                else:
                    T.cuda.tile.apply(T.ptx["setmaxnreg.inc.sync.aligned.u32"], scope="warpgroup", nreg=232)
        '''),
        "lower",
        "ptxas applies ``setmaxnreg`` only when it knows the register count at the "
        "kernel's entry; otherwise it drops the instruction with warning C7508 and "
        "the warpgroups keep their registers.",
        "Cap the registers at entry: ``T.cuda.LaunchConfig(..., min_blocks_per_sm=1)`` "
        "(``__launch_bounds__(threads, 1)``) or ``max_registers=``.",
    ),
    Case(
        PRED,
        r"invalid parameter 'nreg'",
        "A family parameter its check refuses",
        _k('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, min_blocks_per_sm=1))
                T.cuda.tile.apply(T.ptx["setmaxnreg.dec.sync.aligned.u32"], scope="warpgroup", nreg=36)
        '''),
        "parse",
        "A keyword parameter the instruction family owns has its own rule: "
        "``setmaxnreg``'s register count is 24 to 256 in steps of 8 (PTX ISA).",
        "Pass a value the message allows (``nreg=40``).",
    ),
    # ------------------------------------------------------------------ ewise
    Case(
        EWISE,
        r"execution scope not supported",
        "Scope other than thread",
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
    # ------------------------------------------------------ dynamic shared memory
    Case(
        MEMORY,
        r"shared\.dyn allocation without dynamic shared memory",
        "Dynamic shared memory not declared",
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
    # ------------------------------------------------------------------ other
    Case(
        OTHER,
        r"no CUDA GPU is present",
        "Compiling without a GPU and without ``arch``",
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
        _k('''
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
    # ------------------------------------------------ mbarrier and bulk copies
    Case(
        COLLECTIVE,
        r"remote_cta_id needs a cluster launch",
        "Peer CTA without a cluster launch",
        _k('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32))
                tid = T.cuda.thread_idx("x")
                bar = T.alloc_shared((1,), "uint64", align=8)
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.arrive.release.cluster.shared::cluster.b64"], bar,
                                      remote_cta_id=T.uint32(1))
        '''),
        "lower",
        "``remote_cta_id`` names a CTA of the cluster, and ``.multicast::cluster`` "
        "writes to several: without ``cluster=`` in the launch there is no other CTA.",
        "Launch clusters: ``T.cuda.LaunchConfig(grid=2, block=32, cluster=2)``.",
    ),
    Case(
        COLLECTIVE,
        r"remote_cta_id outside the cluster",
        "Peer rank outside the cluster",
        _k('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=32, cluster=2))
                tid = T.cuda.thread_idx("x")
                bar = T.alloc_shared((1,), "uint64", align=8)
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cluster.b64"], bar, remote_cta_id=T.uint32(2))
        '''),
        "lower",
        "``remote_cta_id`` is the rank of a CTA inside its cluster (``%cluster_ctarank``), "
        "from 0 to the cluster size minus one, not a block index.",
        "Pass the rank within the cluster, e.g. ``1 - rank`` for the other CTA of a pair.",
    ),
    Case(
        PRED,
        r"invalid parameter 'remote_cta_id'",
        "Peer rank of the wrong type",
        _k('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32, cluster=2))
                bar = T.alloc_shared((1,), "uint64", align=8)
                T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cluster.b64"], bar, remote_cta_id=T.float32(1))
        '''),
        "parse",
        "A parameter the family owns (no PTX operand of its own) failed the family's "
        "check: ``remote_cta_id`` is a 32-bit integer rank.",
        "Pass ``T.uint32(rank)`` or an int32/uint32 expression.",
    ),
    Case(
        COLLECTIVE,
        r"bulk copy size not a positive multiple of 16 bytes",
        "Bulk copy of a size that is not a multiple of 16 bytes",
        _k('''
            @T.function
            def kernel(A: T.Tensor((6,), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
                s = T.alloc_shared((6,), "float32", align=16)
                bar = T.alloc_shared((1,), "uint64", align=8)
                T.cuda.tile.apply(T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"],
                                  s, A, mbar=bar)
        '''),
        "parse",
        "``cp.async.bulk`` copies a run of bytes whose size is a positive multiple "
        "of 16; the last axis of each operand is that run.",
        "Copy runs of 16-byte multiples (pad the tensor), or use ``cp.async`` for small pieces.",
    ),
    Case(
        COLLECTIVE,
        r"bulk copy runs differ in size",
        "Bulk copy between runs of different sizes",
        _k('''
            @T.function
            def kernel(B: T.Tensor((8,), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
                s = T.alloc_shared((16,), "float32", align=16)
                T.cuda.tile.apply(T.ptx["cp.async.bulk.global.shared::cta.bulk_group"], B, s)
        '''),
        "parse",
        "One copy moves the same bytes out of the source as into the destination: "
        "both last axes must hold the same number of bytes.",
        "Narrow one view (``s.sub[0:8]``) or view both with the same run.",
    ),
    Case(
        COLLECTIVE,
        r"missing parameter 'mbar'",
        "Bulk copy without its mbarrier",
        _k('''
            @T.function
            def kernel(A: T.Tensor((64,), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
                s = T.alloc_shared((64,), "float32", align=16)
                T.cuda.tile.apply(T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"], s, A)
        '''),
        "parse",
        "The ``.mbarrier::complete_tx::bytes`` forms complete on an mbarrier, which "
        "the call passes by keyword.",
        "Pass ``mbar=bar`` (a ``uint64`` shared view of shape ``(1,)``).",
    ),
    Case(
        COLLECTIVE,
        r"cta_mask names CTAs outside the cluster",
        "Multicast mask beyond the cluster",
        _k('''
            @T.function
            def kernel(A: T.Tensor((64,), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=1, cluster=2))
                s = T.alloc_shared((64,), "float32", align=16)
                bar = T.alloc_shared((1,), "uint64", align=8)
                T.cuda.tile.apply(
                    T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"],
                    s, A, mbar=bar, cta_mask=T.uint16(0b100))
        '''),
        "lower",
        "Bit ``i`` of ``cta_mask`` sends the data to the CTA of rank ``i`` in the cluster; "
        "a cluster of 2 has ranks 0 and 1.",
        "Set only bits below the cluster size (``T.uint16(0b11)`` for both CTAs of a pair).",
    ),
    Case(
        COLLECTIVE,
        r"not one mbarrier",
        "Waiting on a view that is not one mbarrier",
        _k('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                bars = T.alloc_shared((2, 1), "uint64", align=8)
                T.cuda.mbarrier_wait_phase(bars, 0)
        '''),
        "parse",
        "``T.cuda.mbarrier_wait_phase`` waits on one barrier: a ``uint64`` shared view "
        "of shape ``(1,)``.",
        "Select the stage: ``T.cuda.mbarrier_wait_phase(bars.sub[s, :], phase)``.",
    ),
    Case(
        COLLECTIVE,
        r"barrier is not a tensor view",
        "Waiting on an address instead of a view",
        _k('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                bar = T.alloc_shared((1,), "uint64", align=8)
                T.cuda.mbarrier_wait_phase(bar.ptr_to([0]), 0)
        '''),
        "parse",
        "The helper checks the barrier as the tile families do, so it takes the view, "
        "not a pointer.",
        "Pass the view (``bar``, ``bars.sub[s, :]``); apache-tvm's ``T.cuda.mbarrier_wait`` "
        "takes a pointer if you need one.",
    ),
    Case(
        COLLECTIVE,
        r"unknown wait scope",
        "Unknown acquire scope of a wait",
        _k('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                bar = T.alloc_shared((1,), "uint64", align=8)
                T.cuda.mbarrier_wait_phase(bar, 0, scope="gpu")
        '''),
        "parse",
        "The wait acquires at CTA or cluster scope (``mbarrier.try_wait.parity.acquire.{cta,cluster}``).",
        'Pass ``scope="cta"`` (the default) or ``scope="cluster"`` for arrivals from other CTAs.',
    ),
    # ------------------------------------------------------------ TIR schedules
    Case(
        SCHEDULE,
        r"must end in \(lanes, slots\)",
        "Fragment buffer without a lane axis",
        _fragment_schedule("lane, slot = fragment(i % 16, j)\n            return i // 16 * 32 + lane, slot"),
        "exec",
        "A ``\"warp\"``-scope buffer that a fragment intrinsic of ``tvm_tirx.schedule.tensor_intrin`` "
        "reads or writes becomes per-thread registers when the kernel is built, which needs "
        "its lanes as the second-to-last axis: ``(..., 32, slots)``. Here the layout folds "
        "the fragment index into the lane axis (64 rows).",
        "Lay the buffer out with the fragment map and keep the fragment number in the leading "
        "axes: ``return i // 16, *fragment(i % 16, j)``.",
    ),
    Case(
        SCHEDULE,
        r"is not one whole fragment",
        "Tensorized tile that is not one whole fragment",
        _fragment_schedule("lane, slot = fragment(i % 16, j)\n            return lane, i // 16 * 8 + slot"),
        "exec",
        "Each tile a fragment intrinsic matches must be all 32 lanes and all slots of one "
        "leading coordinate of the ``\"warp\"`` buffer, so that it is one contiguous run of "
        "the thread's registers. Here two fragments share the slot axis: each tile is half of it.",
        "Put the fragment number in a leading axis (``return i // 16, *fragment(i % 16, j)``), "
        "one ``(32, slots)`` fragment per leading coordinate.",
    ),
    Case(
        SCHEDULE,
        r"element by element",
        "Fragment read element by element",
        _fragment_schedule("return fragment(i, j)", rows=16),
        "exec",
        "Once a fragment intrinsic of ``tvm_tirx.schedule.tensor_intrin`` touches a ``\"warp\"`` buffer, "
        "the buffer is the threads' registers and apache-tvm's warp-memory lowering no longer "
        "applies: a block that reads or writes one lane's slot by index (here ``B``, the "
        "consumer of the fragment) cannot be compiled.",
        "Tensorize every block that touches the fragment with a fragment intrinsic "
        "(``stmatrix``, ``mma``, ``mma_fill``, ``mma_store``), or keep apache-tvm's own "
        "intrinsics for the whole fragment.",
    ),
]


#: Rules that have no example yet, with the reason.  Each is listed on the page
#: without an example.  Replace an entry by a Case as soon as one is written;
#: an entry that no rule in the code matches is ignored.
PENDING = {
    "register slots differ between lanes": "needs a register layout whose slot for a "
    "fragment word depends on the lane, which strided layouts cannot express; no example yet",
}


# --------------------------------------------------------------------------
# Running the cases
# --------------------------------------------------------------------------


def _load(path: pathlib.Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _clean(message: str, tmp: str) -> str:
    text = re.sub(re.escape(tmp) + r"/case\d+/", "", message)
    # any remaining absolute path: keep the file name only
    text = re.sub(r"(?:/[\w.\-+]+)+/([\w.\-+]+\.py)", r"\1", text)
    text = re.sub(r" at 0x[0-9a-fA-F]+", " at 0x...", text)
    return text.strip()


def trigger(case: Case, index: int, root: pathlib.Path):
    """Run ``case``; return the exception it raised (or None)."""
    import tvm_tirx  # pylint: disable=import-outside-toplevel

    folder = root / f"case{index:02d}"
    folder.mkdir()
    path = folder / "example.py"
    path.write_text(HEADER + case.source)
    try:
        if case.action == "compile-noarch":
            kernel_module = __import__("tvm_tirx.build.target", fromlist=["_gpu_arch"])
            saved = kernel_module._gpu_arch  # pylint: disable=protected-access
            kernel_module._gpu_arch = lambda: None  # pylint: disable=protected-access
            try:
                module = _load(path, f"_tvm_tirx_doc_error_{index}")
                tvm_tirx.compile(module.kernel, target="cuda")
            finally:
                kernel_module._gpu_arch = saved  # pylint: disable=protected-access
            return None
        module = _load(path, f"_tvm_tirx_doc_error_{index}")
        if case.action == "lower":
            tvm_tirx.testing.lower(module.kernel)
        elif case.action == "compile":
            tvm_tirx.compile(module.kernel, target="cuda", arch="sm_90a")
        elif case.action == "compile-sm100a":
            tvm_tirx.compile(module.kernel, target="cuda", arch="sm_100a")
    except Exception as err:  # pylint: disable=broad-except
        return err
    return None


def _last_line(err) -> str:
    text = str(err)
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else text


def run_cases(cases=CASES):
    """``[(case, message)]``, raising if a case does not raise what it documents."""
    from tvm_tirx import TileError  # pylint: disable=import-outside-toplevel

    out, problems = [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp).resolve()
        for i, case in enumerate(cases):
            err = trigger(case, i, root)
            want = {"TileError": TileError, "ValueError": ValueError, "TypeError": TypeError}[case.error]
            if err is None:
                problems.append(f"{case.title!r}: raised nothing")
                continue
            if not isinstance(err, want) or not re.search(case.rule, str(err)):
                problems.append(
                    f"{case.title!r}: expected {case.error} matching {case.rule!r}, "
                    f"got {type(err).__name__}: {err}"
                )
                continue
            # A TileError is shown whole (the spec asks for one line; a
            # multi-line one shows up as such in the guide).  Other errors may
            # carry a TVMScript diagnostic excerpt: its last line is the message.
            text = str(err) if isinstance(err, TileError) else _last_line(err)
            out.append((case, type(err).__name__, _clean(text, str(root))))
    if problems:
        raise RuntimeError("gen_errors: examples out of date:\n  " + "\n  ".join(problems))
    return out


# --------------------------------------------------------------------------
# Every rule in the source must have an example
# --------------------------------------------------------------------------


def _expr_regexes(node, func) -> list | None:
    """Regular expressions for every text the rule expression ``node`` can produce."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [re.escape(node.value)]
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            parts.append(re.escape(value.value) if isinstance(value, ast.Constant) else ".+?")
        return ["".join(parts)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _expr_regexes(node.left, func), _expr_regexes(node.right, func)
        if left is None or right is None:
            return None
        return [a + b for a in left for b in right]
    if isinstance(node, ast.IfExp):
        body, other = _expr_regexes(node.body, func), _expr_regexes(node.orelse, func)
        if body is None or other is None:
            return None
        return body + other
    if isinstance(node, ast.Name) and func is not None:
        # a local variable: every value it is assigned
        options = []
        for sub in ast.walk(func):
            if isinstance(sub, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == node.id for t in sub.targets
            ):
                found = _expr_regexes(sub.value, func)
                if found is None:
                    return None
                options += found
        return options or None
    return None


def source_rules(package_dir: pathlib.Path) -> dict:
    """``{regex: "file:line"}`` of the rule argument of every ``TileError(...)`` call."""
    rules = {}
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            if name != "TileError" or len(node.args) < 2:
                continue
            arg = node.args[1]
            if isinstance(arg, ast.Attribute):  # TileError.at(): re-raises self.rule
                continue
            func = node
            while func is not None and not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                func = parents.get(func)
            regexes = _expr_regexes(arg, func)
            where = f"{path.relative_to(package_dir.parent)}:{node.lineno}"
            if regexes is None:
                raise RuntimeError(f"gen_errors: cannot read the rule of TileError at {where}")
            for regex in regexes:
                # the rule is one ': '-separated field of the message
                rules.setdefault(f"(?:^|: ){regex}(?:: |$)", where)
    return rules


def check_coverage(results, package_dir: pathlib.Path) -> list:
    """Fail unless every rule in the source has an example (or a PENDING entry).

    Returns ``[(rule text, "file:line", reason)]`` of the pending rules found.
    """
    messages = [msg for case, kind, msg in results if kind == "TileError"]
    missing, pending = [], []
    for regex, where in source_rules(package_dir).items():
        if any(re.search(regex, m) for m in messages):
            continue
        waiting = [text for text in PENDING if re.search(regex, text)]
        if waiting:
            pending.append((waiting[0], where, PENDING[waiting[0]]))
        else:
            missing.append(f"{where}: rule /{regex}/")
    if missing:
        raise RuntimeError(
            "gen_errors: TileError rules without an example in docs/gen_errors.py "
            "(add a Case that triggers each, or, while no kernel can reach it, a PENDING entry):\n  "
            + "\n  ".join(missing)
        )
    return pending


def family_examples(cases=CASES) -> dict:
    """``{family name: [case title, ...]}``: the examples whose kernel names an
    opcode of each registered family (from the registry, so a new family
    without an example shows up empty)."""
    from tvm_tirx import TileError  # pylint: disable=import-outside-toplevel
    from tvm_tirx.tile.ptx_table import resolve  # pylint: disable=import-outside-toplevel
    from tvm_tirx.tile.registry import families, family_of  # pylint: disable=import-outside-toplevel

    out = {f.name: [] for f in families()}
    for case in cases:
        for opcode in set(re.findall(r'T\.ptx\["([^"{}]+)"\]', case.source.replace("{_X1}", _X1))):
            try:
                family = family_of(resolve(opcode)[0].entry)
            except TileError:
                continue
            if family is not None and case.title not in out[family.name]:
                out[family.name].append(case.title)
    return out


def check_family_examples(cases=CASES) -> None:
    """Fail unless every registered family has an example on the page."""
    missing = [name for name, titles in family_examples(cases).items() if not titles]
    if missing:
        raise RuntimeError(
            "gen_errors: families without an example in docs/gen_errors.py (add a Case "
            "whose kernel calls one of their instructions): " + ", ".join(missing)
        )


def render_pending(pending) -> str:
    if not pending:
        return ""
    lines = [
        _heading("Rules without an example yet", "-"),
        "These rules exist in the code but have no example on this page yet.",
        "",
    ]
    lines += [f"* ``{text}`` (``{where}``): {reason}" for text, where, reason in pending]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# reST output
# --------------------------------------------------------------------------

_STAGE = {
    "parse": "when the kernel is parsed (``@T.function``)",
    "lower": "when ``LowerTileApply`` runs (``tvm_tirx.compile`` or ``tvm_tirx.testing.lower``)",
    "compile": "when the kernel is compiled for a target (``tvm_tirx.compile``)",
    "compile-noarch": "in ``tvm_tirx.compile``",
    "compile-sm100a": "when the kernel is compiled for a target (``tvm_tirx.compile``, here sm_100a)",
    "exec": "when the code runs",
}


def _heading(text: str, char: str) -> str:
    return f"{text}\n{char * len(text)}\n"


def render(results) -> str:
    lines = [
        ".. This file is generated by docs/gen_errors.py at build time; do not edit.",
        "",
    ]
    sections = []
    for case, _, _ in results:
        if case.section not in sections:
            sections.append(case.section)
    labels = set()
    for section in sections:
        lines += [_heading(section, "-"), ""]
        for case, kind, message in results:
            if case.section != section:
                continue
            label = _label(case)
            if label in labels:
                raise RuntimeError(f"gen_errors: two examples are titled {case.title!r}")
            labels.add(label)
            lines += [f".. _{label}:", "", _heading(case.title, "~")]
            lines += [
                f"Raised {_STAGE[case.action]}.",
                "",
                ".. code-block:: python",
                "   :caption: example.py",
                f"   :lineno-start: {FIRST_LINE}",
                "",
            ]
            lines += ["   " + line if line else "" for line in case.source.rstrip("\n").split("\n")]
            lines += [
                "",
                f"Message (``{kind}``):",
                "",
                ".. code-block:: text",
                "",
                *["   " + line for line in message.splitlines()],
                "",
                f"**What it means.** {case.meaning}",
                "",
                f"**Fix.** {case.fix}",
                "",
            ]
    return "\n".join(lines) + "\n"


def _label(case) -> str:
    return "error-" + re.sub(r"[^a-z0-9]+", "-", case.title.lower()).strip("-")


def render_index(results) -> str:
    """A table: rule (as the message words it) -> its examples, for the top of the page."""
    rules = {}
    for case, kind, message in results:
        if kind == "TileError":
            rules.setdefault(_rule_words(message), []).append(_label(case))
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 45 55",
        "",
        "   * - Rule (as the message words it)",
        "     - Example",
    ]
    for rule, labels in rules.items():
        lines += [f"   * - ``{rule}``", "     - " + ", ".join(f":ref:`{label}`" for label in labels)]
    return "\n".join(lines) + "\n"


def _rule_words(message: str) -> str:
    """The rule part of a TileError message: after location/opcode/operand, before ': expected'."""
    text = re.split(r": expected |: found ", message)[0]
    return text.split(": ")[-1]


def generate(out_path: pathlib.Path) -> None:
    package_dir = pathlib.Path(__file__).resolve().parent.parent / "python" / "tvm_tirx"
    check_family_examples()
    results = run_cases()
    pending = check_coverage(results, package_dir)
    text = render(results) + render_pending(pending)
    index = render_index(results)
    for path, content in ((out_path, text), (out_path.with_name(out_path.stem + "_index.rst"), index)):
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != content:
            path.write_text(content)


if __name__ == "__main__":
    target = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/_generated/errors.rst")
    generate(target)
    print(f"wrote {target}")
