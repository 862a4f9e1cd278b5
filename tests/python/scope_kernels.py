"""Kernels that spread one tile call over a warp, a warpgroup, a CTA and a cluster."""

from tvm.tirx.layout import Axis, S, TileLayout

from tvm_tirx.script import tirx as T

# 64 threads x 12 floats: thread (warp w, lane l) holds row 32*w + l in 12 registers.
cta_regs = TileLayout(S[(2, 32, 3, 4) : (1 @ Axis.warpid, 1 @ Axis.laneid, 4, 1)])
# one warp's 32 x 4 tile: lane l holds row l
warp_regs = TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)])
half_warp_regs = TileLayout(S[(16, 4) : (1 @ Axis.laneid, 1)])
# a warpgroup's 4 x 32 x 2 x 4 tile: warp w of the group, lane l
wg_regs = TileLayout(S[(4, 32, 2, 4) : (1 @ Axis.wid_in_wg, 1 @ Axis.laneid, 4, 1)])
# a cluster of 2 CTAs x 2 warps x 32 lanes x 4 values
cluster_regs = TileLayout(S[(2, 2, 32, 4) : (1 @ Axis.cbx, 1 @ Axis.warpid, 1 @ Axis.laneid, 1)])


@T.function
def cta_twelve(A: T.Tensor((64, 12), "float32", align=16), B: T.Tensor((64, 12), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    r = T.alloc_local((2, 32, 3, 4), "float32", layout=cta_regs)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 32, 3, 4), scope="cta")
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.view(2, 32, 3, 4), r, scope="cta")


@T.function
def warp_rows(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
    # each warp moves its own 32 x 4 block: one coalesced 512-byte row per instruction
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    w = T.cuda.warp_id()
    r = T.alloc_local((32, 4), "float32", layout=warp_regs)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[w * 32 : w * 32 + 32, :], scope="warp")
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[w * 32 : w * 32 + 32, :], r, scope="warp")


@T.function
def half_warp(A: T.Tensor((2, 16, 4), "float32", align=16), B: T.Tensor((2, 16, 4), "float32", align=16)):
    # a guarded call: lanes 0..15 of each warp take part, so the group is (16,)
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    w = T.cuda.warp_id()
    r = T.alloc_local((16, 4), "float32", layout=half_warp_regs)
    if T.cuda.lane_id() < 16:
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[w], scope="warp")
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[w], r, scope="warp")


@T.function
def producer_warp(A: T.Tensor((32, 4), "float32", align=16), B: T.Tensor((32, 4), "float32", align=16)):
    # warp specialisation: only warp 1 of 2 runs the warp-scope call
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    r = T.alloc_local((32, 4), "float32", layout=warp_regs)
    if T.cuda.warp_id() == 1:
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")
        T.cuda.warp_sync()
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B, r, scope="warp")


@T.function
def warpgroup_tile(A: T.Tensor((4, 32, 8), "float32", align=16), B: T.Tensor((4, 32, 8), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    r = T.alloc_local((4, 32, 2, 4), "float32", layout=wg_regs)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(4, 32, 2, 4), scope="warpgroup")
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.view(4, 32, 2, 4), r, scope="warpgroup")


@T.function
def cluster_pair(A: T.Tensor((2, 64, 4), "float32", align=16), B: T.Tensor((2, 64, 4), "float32", align=16)):
    # a cluster of 2 CTAs; CTA c of the cluster moves rows A[c]
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64, cluster=2))
    r = T.alloc_local((2, 2, 32, 4), "float32", layout=cluster_regs)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 2, 32, 4), scope="cluster")
    T.cuda.cluster_sync()
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.view(2, 2, 32, 4), r, scope="cluster")
