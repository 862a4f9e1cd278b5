"""Small arithmetic kernels: one named instruction per step, as the register families expect."""

from tvm.tirx.layout import Axis, S, TileLayout

from tvm_tirx.script import tirx as T

cta_regs = TileLayout(S[(2, 32, 4) : (1 @ Axis.warpid, 1 @ Axis.laneid, 1)])


@T.function
def two_a_plus_one(A: T.Tensor((64, 4), "float32", align=16), Out: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    a = T.alloc_local((4, 1), "float32")
    d = T.alloc_local((4, 1), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], a.view(4), A.sub[tid, :])
    T.cuda.tile.apply(T.ptx["fma.rn.f32"], d, a, T.float32(2), T.float32(1))
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out.sub[tid, :], d.view(4))


@T.function
def relu_2a1_cta(A: T.Tensor((64, 4), "float32", align=16), Out: T.Tensor((64, 4), "float32", align=16)):
    # max(2*A + 1, 0) with every call at CTA scope over 64 threads x 4 values
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    a = T.alloc_local((2, 32, 4), "float32", layout=cta_regs)
    d = T.alloc_local((2, 32, 4), "float32", layout=cta_regs)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], a, A.view(2, 32, 4), scope="cta")
    T.cuda.tile.apply(T.ptx["fma.rn.f32"], d.view(2, 32, 4, 1), a.view(2, 32, 4, 1), T.float32(2), T.float32(1), scope="cta")
    T.cuda.tile.apply(T.ptx["max.f32"], d.view(2, 32, 4, 1), d.view(2, 32, 4, 1), T.float32(0), scope="cta")
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out.view(2, 32, 4), d, scope="cta")


@T.function
def neg_abs(A: T.Tensor((64, 4), "float32", align=16), Out: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    a = T.alloc_local((4, 1), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], a.view(4), A.sub[tid, :])
    T.cuda.tile.apply(T.ptx["abs.f32"], a, a)
    T.cuda.tile.apply(T.ptx["neg.f32"], a, a)
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out.sub[tid, :], a.view(4))


@T.function
def sqrt_quarter(A: T.Tensor((4,), "float32", align=16), Out: T.Tensor((4,), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    a = T.alloc_local((4, 1), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], a.view(4), A)
    T.cuda.tile.apply(T.ptx["div.rn.f32"], a, a, T.float32(4))
    T.cuda.tile.apply(T.ptx["sqrt.rn.f32"], a, a)
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out, a.view(4))


@T.function
def exp2(A: T.Tensor((4,), "float32", align=16), Out: T.Tensor((4,), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    a = T.alloc_local((4, 1), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], a.view(4), A)
    T.cuda.tile.apply(T.ptx["ex2.approx.f32"], a, a)
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out, a.view(4))


@T.function
def pack_f16x2(A: T.Tensor((8,), "float32", align=16), Out: T.Tensor((4,), "uint32", align=16)):
    # Out[i] = (f16(A[2i + 1]) << 16) | f16(A[2i]): hi is the odd element
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    a = T.alloc_local((4, 2), "float32")
    d = T.alloc_local((4, 1), "uint32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], a.view(2, 4), A.view(2, 4))
    T.cuda.tile.apply(T.ptx["cvt.rn.f16x2.f32"], d, a.sub[:, 1:2], a.sub[:, 0:1])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out, d.view(4))


@T.function
def add_f16x2(A: T.Tensor((8,), "float16", align=16), B: T.Tensor((8,), "float16", align=16), Out: T.Tensor((8,), "float16", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    a = T.alloc_local((4, 1), "uint32")
    b = T.alloc_local((4, 1), "uint32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], a.view(4), A.view("uint32"))
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], b.view(4), B.view("uint32"))
    T.cuda.tile.apply(T.ptx["add.rn.f16x2"], a, a, b)
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out.view("uint32"), a.view(4))


@T.function
def pack_unpack_b64(A: T.Tensor((4,), "uint32", align=16), Out: T.Tensor((4,), "uint32", align=16), Wide: T.Tensor((2,), "uint64", align=16)):
    # mov.b64 d, {lo, hi} packs two words; mov.b64 {lo, hi}, d unpacks them
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    w = T.alloc_local((2, 2), "uint32")
    p = T.alloc_local((2, 1), "uint64")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], w.view(4), A)
    T.cuda.tile.apply(T.ptx["mov.b64"], p, w)
    T.cuda.tile.apply(T.ptx["st.global.v2.b64"], Wide, p.view(2))
    T.cuda.tile.apply(T.ptx["mov.b64"], w, p)
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out, w.view(4))


@T.function
def silu(A: T.Tensor((64, 4), "float32", align=16), Out: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    x = T.alloc_local((4,), "float32")
    y = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], x, A.sub[tid, :])
    T.cuda.tile.ewise(lambda v: v * T.sigmoid(v), y, x)
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out.sub[tid, :], y)
