"""Warp matrix kernels: staged ldmatrix + mma.sync, and an ldmatrix with interleaved rows."""

from tvm.tirx.layout import Axis, S, TileLayout
from tvm_tirx.script import tirx as T

L = Axis.laneid
a_frag = TileLayout(S[(2, 8, 2, 4) : (1, 4 @ L, 2, 1 @ L)])     # A (16 rows, 8 words)
a_ldm = TileLayout(S[(4, 8, 4) : (1, 4 @ L, 1 @ L)])            # the same registers as 4 8x8 matrices
b_frag = TileLayout(S[(8, 2, 4) : (4 @ L, 1, 1 @ L)])           # B (8 n, 8 words)
b_ldm = TileLayout(S[(2, 8, 4) : (1, 4 @ L, 1 @ L)])
c_frag = TileLayout(S[(2, 8, 4, 2) : (2, 4 @ L, 1 @ L, 1)])     # C (16, 8) f32
c_rows = TileLayout(S[(32, 2, 2) : (1 @ L, 2, 1)])              # C as (lane, half, pair)

@T.function
def warp_mma(A: T.Tensor((16, 16), "float16", align=16), B: T.Tensor((8, 16), "float16", align=16), C: T.Tensor((16, 8), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.thread_idx("x")
    sa = T.alloc_shared((16, 16), "float16", align=16)
    sb = T.alloc_shared((8, 16), "float16", align=16)
    T.cuda.tile.apply(T.ptx["cp.async.ca.shared.global"], sa.view(32, 8).sub[lane, :], A.view(32, 8).sub[lane, :])
    T.cuda.tile.apply(T.ptx["cp.async.ca.shared.global"], sb.view(32, 4).sub[lane, :], B.view(32, 4).sub[lane, :])
    T.ptx["cp.async.commit_group"]()
    T.ptx["cp.async.wait_group"](0)
    T.cuda.warp_sync()
    a = T.alloc_local((16, 8), "uint32", layout=a_frag)
    b = T.alloc_local((8, 8), "uint32", layout=b_frag)
    c = T.alloc_local((16, 8), "float32", layout=c_frag)
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"], a.view(4, 8, 4, layout=a_ldm), sa.view("uint32").view(2, 8, 2, 4).permute(2, 0, 1, 3).view(4, 8, 4), scope="warp")
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"], b.view(2, 8, 4, layout=b_ldm), sb.view("uint32").view(8, 2, 4).permute(1, 0, 2), scope="warp")
    T.cuda.tile.apply(T.ptx["mov.b32"], c.local().view(4, 1), T.float32(0))
    T.cuda.tile.apply(T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"], c, a, b, c, scope="warp")
    T.cuda.tile.apply(T.ptx["st.global.v2.f32"], C.view(2, 8, 4, 2).permute(1, 2, 0, 3).view(32, 2, 2), c.view(32, 2, 2, layout=c_rows), scope="warp")



# ldmatrix .x2 from interleaved rows into gapped registers: matrix m's row r is
# shared row 2r + m; each lane's two words land in register slots 0 and 2.
gapped_frag = TileLayout(S[(2, 8, 4) : (2, 4 @ L, 1 @ L)])
gapped_rows = TileLayout(S[(32, 2, 1) : (1 @ L, 2, 1)])


@T.function
def interleaved_ldmatrix(Src: T.Tensor((16, 4), "uint32", align=16), Out: T.Tensor((2, 8, 4), "uint32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.thread_idx("x")
    sm = T.alloc_shared((16, 4), "uint32", align=16)
    stage = T.alloc_local((2,), "uint32")
    T.cuda.tile.apply(T.ptx["ld.global.v2.b32"], stage, Src.view(32, 2).sub[lane, :])
    T.cuda.tile.apply(T.ptx["st.shared.v2.b32"], sm.view(32, 2).sub[lane, :], stage)
    T.cuda.warp_sync()
    r = T.alloc_local((2, 8, 4), "uint32", layout=gapped_frag)
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"], r, sm.view(8, 2, 4).permute(1, 0, 2), scope="warp"
    )
    T.cuda.tile.apply(
        T.ptx["st.global.b32"], Out.permute(1, 2, 0).view(32, 2, 1), r.view(32, 2, 1, layout=gapped_rows), scope="warp"
    )
