"""Warp-level matrix intrinsics: ``ldmatrix`` / ``stmatrix``, ``mma.sync`` m16n8k16
with f32 accumulators, and the accumulator's fill and store (names in
:mod:`tvm_tirx.schedule.tensor_intrin`; fragments in :mod:`._fragments`).

Each ``impl`` holds a placeholder tile call over the matched tiles; the
``operands`` function registered with it builds the instruction's operands
(:func:`tvm_tirx.schedule.tensor_intrin.register`), and the contract checks them on the
scheduled kernel: a whole warp, 16-byte aligned shared rows, the launch's lanes.

Hardware facts: PTX ISA 9.7.14.5.15 / 9.7.14.5.16 (``ldmatrix`` / ``stmatrix``:
``.x1/.x2/.x4`` 8 x 8 matrices of 16-bit elements, ``.trans``; ``stmatrix`` needs
sm_90), 9.7.14.5.8 (``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}``).
"""

from __future__ import annotations

from tvm.tirx import Cast, FloatImm
from tvm.tirx.script.builder import ir as B

from ...tile.rules.op import unchecked_call
from ..intrin_registry import MARKER, PREFIX, register
from ._ir import block, build, copy_loops, marker, match
from ._fragments import accumulator_rows, fragment_index, matrices, mma_operand, slots

#: short name -> TVM dtype of the 16-bit inputs
INPUTS = {"f16": "float16", "bf16": "bfloat16"}
#: ``x<count>`` -> fragment (rows, cols)
SHAPES = {1: (8, 8), 2: (8, 16), 4: (16, 16)}


def _fragment_at(index, a, b, trans):
    """Fragment (lane, slot) of memory element ``(a, b)``: ``(b, a)`` of the fragment when transposed."""
    return index(b, a) if trans else index(a, b)


def _move_desc(rows, cols, dtype, mem_scope, loads, trans):
    """``desc`` of a fragment <-> memory move; the memory tile is ``(cols, rows)`` when ``trans``."""
    index, n = fragment_index(rows, cols), slots(rows, cols)
    mr, mc = (cols, rows) if trans else (rows, cols)
    with build("load" if loads else "store", "regs_handle", "mem_handle") as ((regs_h, mem_h), func):
        regs = match(regs_h, "regs", (32, n), dtype, "warp")
        mem = match(mem_h, "mem", (mr, mc), dtype, mem_scope)
        tiles = ([mem[0:mr, 0:mc]], [regs[0:32, 0:n]])
        with block("root", *(tiles if loads else tiles[::-1])):

            def store(va, vb):
                lane, slot = _fragment_at(index, va, vb, trans)
                if loads:
                    B.buffer_store(regs, mem[va, vb], [lane, slot])
                else:
                    B.buffer_store(mem, regs[lane, slot], [va, vb])

            copy_loops((mr, mc), ("load" if loads else "store", ("a", "b"), ("va", "vb")), "SS", store)
    return func[0]


def _move_impl(name, opcode, rows, cols, dtype, mem_scope, trans, scope):
    """``impl`` of a fragment <-> memory move: the placeholder call over (regs, mem)."""
    n = slots(rows, cols)
    mr, mc = (cols, rows) if trans else (rows, cols)
    with build("impl", "regs_handle", "mem_handle") as ((regs_h, mem_h), func):
        regs = match(regs_h, "regs", (32, n), dtype, "warp")
        mem = match(mem_h, "mem", (mr, mc), dtype, mem_scope)
        both = [mem[0:mr, 0:mc], regs[0:32, 0:n]]
        with block("root", both, both):
            with marker(MARKER, name):
                B.evaluate(unchecked_call(opcode, regs, mem, scope=scope))
    return func[0]


def _memory_matrices(mem, rows, cols, trans):
    """The 8 x 8 matrices of a 16-bit memory tile as ``(count, 8, 4)`` b32 words,
    numbered as the fragment's blocks (:mod:`._fragments`); rows are memory rows."""
    words = mem.view("uint32")
    count = rows * cols // 64
    if trans:  # memory (k, n) of an (n, k) fragment: block (k / 8) * (rows / 8) + n / 8
        return words.view(cols // 8, 8, rows // 8, 4).permute(0, 2, 1, 3).view(count, 8, 4)
    return words.view(rows // 8, 8, cols // 8, 4).permute(2, 0, 1, 3).view(count, 8, 4)


def _matrix_moves():
    """``ldmatrix`` / ``stmatrix`` ``.x1/.x2/.x4`` [``.trans``] for f16 and bf16 fragments."""
    for short, dtype in INPUTS.items():
        for count, (rows, cols) in SHAPES.items():
            for trans in (False, True):
                for mnemonic, loads in (("ldmatrix", True), ("stmatrix", False)):
                    suffix = ".trans" if trans else ""
                    name = f"{PREFIX}{mnemonic}_x{count}{'_trans' if trans else ''}_{short}"
                    opcode = f"{mnemonic}.sync.aligned.m8n8.x{count}{suffix}.shared.b16"

                    def operands(regs, mem, count=count, rows=rows, cols=cols, trans=trans, loads=loads):
                        tiles = (matrices(regs, count), _memory_matrices(mem, rows, cols, trans))
                        return tiles if loads else tiles[::-1]

                    register(name, _move_desc(rows, cols, dtype, "shared", loads, trans),
                             _move_impl(name, opcode, rows, cols, dtype, "shared", trans, "warp"), operands)


def _mma_buffers(handles, n, dtype):
    """The ``(A, B, C)`` fragments of an m16n``n``k16 block, matched from ``handles``."""
    sb, sc = slots(n, 16), slots(16, n)
    a_h, b_h, c_h = handles
    return (match(a_h, "A", (32, 8), dtype, "warp"), match(b_h, "B", (32, sb), dtype, "warp"),
            match(c_h, "C", (32, sc), "float32", "warp"))


def _mma_desc(n, dtype):
    """``desc``: ``C[m, n] += A[m, k] * B[n, k]`` over 16 x ``n`` x 16, in fragments."""
    ia, ib, ic = fragment_index(16, 16), fragment_index(n, 16), fragment_index(16, n)
    sb, sc = slots(n, 16), slots(16, n)
    with build("desc", "a_handle", "b_handle", "c_handle") as (handles, func):
        A, Bf, C = _mma_buffers(handles, n, dtype)
        with block("root", [C[0:32, 0:sc], A[0:32, 0:8], Bf[0:32, 0:sb]], [C[0:32, 0:sc]]):

            def update(vi, vj, vk):
                c_at, a_at, b_at = ic(vi, vj), ia(vi, vk), ib(vj, vk)
                product = Cast("float32", A[a_at]) * Cast("float32", Bf[b_at])
                B.buffer_store(C, C[c_at] + product, list(c_at))

            copy_loops((16, n, 16), ("C", ("i", "j", "k"), ("vi", "vj", "vk")), "SSR", update)
    return func[0]


def _mma_impl(name, opcode, n, dtype):
    sb, sc = slots(n, 16), slots(16, n)
    with build("impl", "a_handle", "b_handle", "c_handle") as (handles, func):
        A, Bf, C = _mma_buffers(handles, n, dtype)
        with block("root", [C[0:32, 0:sc], A[0:32, 0:8], Bf[0:32, 0:sb]], [C[0:32, 0:sc]]):
            with marker(MARKER, name):
                B.evaluate(unchecked_call(opcode, A, Bf, C, scope="warp"))
    return func[0]


def _mmas():
    """``mma.sync`` m16n8k16 ``.row.col.f32.<in>.<in>.f32``: one (n 8) or two (n 16) per block."""
    for short, dtype in INPUTS.items():
        for n in (8, 16):
            name = f"{PREFIX}mma_m16n{n}k16_f32_{short}"
            opcode = f"mma.sync.aligned.m16n8k16.row.col.f32.{short}.{short}.f32"

            def operands(a, b, c, n=n):
                acc = mma_operand(c, n, "c")
                return acc, mma_operand(a, n, "a"), mma_operand(b, n, "b"), acc

            register(name, _mma_desc(n, dtype), _mma_impl(name, opcode, n, dtype), operands)


def _fill_desc(n):
    index, sc = fragment_index(16, n), slots(16, n)
    with build("desc", "c_handle") as ((c_h,), func):
        C = match(c_h, "C", (32, sc), "float32", "warp")
        with block("root", [], [C[0:32, 0:sc]]):
            zero = lambda vi, vj: B.buffer_store(C, FloatImm("float32", 0.0), list(index(vi, vj)))  # noqa: E731
            copy_loops((16, n), ("fill", ("i", "j"), ("vi", "vj")), "SS", zero)
    return func[0]


def _fill_impl(name, n):
    sc = slots(16, n)
    with build("impl", "c_handle") as ((c_h,), func):
        C = match(c_h, "C", (32, sc), "float32", "warp")
        with block("root", [], [C[0:32, 0:sc]]):
            with marker(MARKER, name):
                B.evaluate(unchecked_call("mov.b32", C))
    return func[0]


def _accumulators():
    """The f32 accumulator's fill (``mov.b32`` per register) and store (``st.<space>.v2.f32``)."""
    for n in (8, 16):
        name = f"{PREFIX}mma_fill_16x{n}_f32"
        register(name, _fill_desc(n), _fill_impl(name, n),
                 lambda regs, n=n: (regs.view(slots(16, n), 1), FloatImm("float32", 0.0)))
        for space in ("global", "shared"):
            name = f"{PREFIX}mma_store_16x{n}_f32_{space}"

            def operands(regs, mem, n=n):
                rows = mem.view(2, 8, n // 8, 4, 2).permute(1, 3, 2, 0, 4).view(32, n // 8, 2, 2)
                return rows, accumulator_rows(regs, n)

            register(name, _move_desc(16, n, "float32", space, False, False),
                     _move_impl(name, f"st.{space}.v2.f32", 16, n, "float32", space, False, "warp"), operands)


def register_warp() -> None:
    """Register the ``ldmatrix`` / ``stmatrix``, ``mma.sync`` and accumulator intrinsics."""
    _matrix_moves()
    _mmas()
    _accumulators()
