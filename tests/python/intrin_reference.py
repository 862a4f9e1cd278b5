"""The tensor intrinsics' ``desc`` / ``impl`` functions written in TVMScript, parsed.

These are the definitions ``tvm_tirx.schedule.tensor_intrin`` had before it
built its PrimFuncs with the IRBuilder (the import parsed all 186 of them):
``test_tensor_intrin.py`` checks that the built functions are structurally
equal to these.
"""

from tvm.tirx import FloatImm  # noqa: F401

from tvm_tirx.schedule.intrin_registry import MARKER
from tvm_tirx.schedule.tensor_intrin._fragments import fragment_index, slots
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.rules.op import unchecked_call


def copy_desc(n, dtype, dst_scope, src_scope):
    """``desc``: ``dst[i] = src[i]`` for ``i < n``, as a block to match."""
    @T.prim_func(s_tir=True)
    def desc(dst_handle: T.handle, src_handle: T.handle):
        dst = T.match_buffer(dst_handle, (n,), dtype, offset_factor=1, scope=dst_scope)
        src = T.match_buffer(src_handle, (n,), dtype, offset_factor=1, scope=src_scope)
        with T.sblock("root"):
            T.reads(src[0:n])
            T.writes(dst[0:n])
            for i in range(n):
                with T.sblock("copy"):
                    vi = T.axis.remap("S", [i])
                    dst[vi] = src[vi]

    return desc


def tile_impl(name, opcode, n, dtype, dst_scope, src_scope):
    """``impl``: one ``T.cuda.tile.apply(opcode, dst, src)`` at thread scope."""
    @T.prim_func(s_tir=True)
    def impl(dst_handle: T.handle, src_handle: T.handle):
        dst = T.match_buffer(dst_handle, (n,), dtype, offset_factor=1, scope=dst_scope)
        src = T.match_buffer(src_handle, (n,), dtype, offset_factor=1, scope=src_scope)
        with T.sblock("root"):
            T.reads(src[0:n])
            T.writes(dst[0:n])
            with T.attr(0, MARKER, name):
                T.cuda.tile.apply(opcode, dst, src)

    return impl


def fragment_at(index, a, b, trans):
    """Fragment (lane, slot) of memory element ``(a, b)``: ``(b, a)`` of the fragment when transposed."""
    return index(b, a) if trans else index(a, b)


def move_desc(rows, cols, dtype, mem_scope, loads, trans):
    """``desc`` of a fragment <-> memory move; the memory tile is ``(cols, rows)`` when ``trans``."""
    index, n = fragment_index(rows, cols), slots(rows, cols)
    mr, mc = (cols, rows) if trans else (rows, cols)

    @T.prim_func(s_tir=True)
    def load(regs_handle: T.handle, mem_handle: T.handle):
        regs = T.match_buffer(regs_handle, (32, n), dtype, offset_factor=1, scope="warp")
        mem = T.match_buffer(mem_handle, (mr, mc), dtype, offset_factor=1, scope=mem_scope)
        with T.sblock("root"):
            T.reads(mem[0:mr, 0:mc])
            T.writes(regs[0:32, 0:n])
            for a, b in T.grid(mr, mc):
                with T.sblock("load"):
                    va, vb = T.axis.remap("SS", [a, b])
                    lane, slot = T.meta_var(fragment_at(index, va, vb, trans))
                    regs[lane, slot] = mem[va, vb]

    @T.prim_func(s_tir=True)
    def store(regs_handle: T.handle, mem_handle: T.handle):
        regs = T.match_buffer(regs_handle, (32, n), dtype, offset_factor=1, scope="warp")
        mem = T.match_buffer(mem_handle, (mr, mc), dtype, offset_factor=1, scope=mem_scope)
        with T.sblock("root"):
            T.reads(regs[0:32, 0:n])
            T.writes(mem[0:mr, 0:mc])
            for a, b in T.grid(mr, mc):
                with T.sblock("store"):
                    va, vb = T.axis.remap("SS", [a, b])
                    lane, slot = T.meta_var(fragment_at(index, va, vb, trans))
                    mem[va, vb] = regs[lane, slot]

    return load if loads else store


def move_impl(name, opcode, rows, cols, dtype, mem_scope, trans, scope):
    """``impl`` of a fragment <-> memory move: the placeholder call over (regs, mem)."""
    n = slots(rows, cols)
    mr, mc = (cols, rows) if trans else (rows, cols)

    @T.prim_func(s_tir=True)
    def impl(regs_handle: T.handle, mem_handle: T.handle):
        regs = T.match_buffer(regs_handle, (32, n), dtype, offset_factor=1, scope="warp")
        mem = T.match_buffer(mem_handle, (mr, mc), dtype, offset_factor=1, scope=mem_scope)
        with T.sblock("root"):
            T.reads(mem[0:mr, 0:mc], regs[0:32, 0:n])
            T.writes(mem[0:mr, 0:mc], regs[0:32, 0:n])
            with T.attr(0, MARKER, name):
                T.evaluate(unchecked_call(opcode, regs, mem, scope=scope))

    return impl


def mma_desc(n, dtype):
    """``desc``: ``C[m, n] += A[m, k] * B[n, k]`` over 16 x ``n`` x 16, in fragments."""
    ia, ib, ic = fragment_index(16, 16), fragment_index(n, 16), fragment_index(16, n)
    sb, sc = slots(n, 16), slots(16, n)

    @T.prim_func(s_tir=True)
    def desc(a_handle: T.handle, b_handle: T.handle, c_handle: T.handle):
        A = T.match_buffer(a_handle, (32, 8), dtype, offset_factor=1, scope="warp")
        B = T.match_buffer(b_handle, (32, sb), dtype, offset_factor=1, scope="warp")
        C = T.match_buffer(c_handle, (32, sc), "float32", offset_factor=1, scope="warp")
        with T.sblock("root"):
            T.reads(C[0:32, 0:sc], A[0:32, 0:8], B[0:32, 0:sb])
            T.writes(C[0:32, 0:sc])
            for i, j, k in T.grid(16, n, 16):
                with T.sblock("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    a_lane, a_slot = T.meta_var(ia(vi, vk))
                    b_lane, b_slot = T.meta_var(ib(vj, vk))
                    c_lane, c_slot = T.meta_var(ic(vi, vj))
                    C[c_lane, c_slot] = C[c_lane, c_slot] + T.Cast("float32", A[a_lane, a_slot]) * T.Cast(
                        "float32", B[b_lane, b_slot]
                    )

    return desc


def mma_impl(name, opcode, n, dtype):
    sb, sc = slots(n, 16), slots(16, n)

    @T.prim_func(s_tir=True)
    def impl(a_handle: T.handle, b_handle: T.handle, c_handle: T.handle):
        A = T.match_buffer(a_handle, (32, 8), dtype, offset_factor=1, scope="warp")
        B = T.match_buffer(b_handle, (32, sb), dtype, offset_factor=1, scope="warp")
        C = T.match_buffer(c_handle, (32, sc), "float32", offset_factor=1, scope="warp")
        with T.sblock("root"):
            T.reads(C[0:32, 0:sc], A[0:32, 0:8], B[0:32, 0:sb])
            T.writes(C[0:32, 0:sc])
            with T.attr(0, MARKER, name):
                T.evaluate(unchecked_call(opcode, A, B, C, scope="warp"))

    return impl


def fill_desc(n):
    index, sc = fragment_index(16, n), slots(16, n)

    @T.prim_func(s_tir=True)
    def desc(c_handle: T.handle):
        C = T.match_buffer(c_handle, (32, sc), "float32", offset_factor=1, scope="warp")
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:32, 0:sc])
            for i, j in T.grid(16, n):
                with T.sblock("fill"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    lane, slot = T.meta_var(index(vi, vj))
                    C[lane, slot] = T.float32(0)

    return desc


def fill_impl(name, n):
    sc = slots(16, n)

    @T.prim_func(s_tir=True)
    def impl(c_handle: T.handle):
        C = T.match_buffer(c_handle, (32, sc), "float32", offset_factor=1, scope="warp")
        with T.sblock("root"):
            T.reads()
            T.writes(C[0:32, 0:sc])
            with T.attr(0, MARKER, name):
                T.evaluate(unchecked_call("mov.b32", C))

    return impl
