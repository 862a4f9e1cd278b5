"""A dynamic persistent tile scheduler (issue 24): CTAs take tiles from a global counter
at run time; the tile index reaches every thread through shared memory after a CTA
barrier, so the loop around the warp collectives is uniform by construction.

``copy_tiles`` copies ``n_tiles`` 16 x 16 float16 tiles from ``A`` to ``B`` through
shared memory and registers with ``ldmatrix`` (a warp collective) and stores each
CTA's tile count in ``Taken``; ``copy_tiles_per_thread`` is its refused twin, whose
loop reads a per-thread value from global memory.
"""

from tvm.tirx.layout import Axis, S, TileLayout

from tvm_tirx.script import tirx as T

L = Axis.laneid
#: ldmatrix .x4 of a 16 x 16 f16 tile: four 8 x 8 matrices, lane 4 r + w holds word w of row r
FRAG = TileLayout(S[(4, 8, 4) : (1, 4 @ L, 1 @ L)])
ROWS = TileLayout(S[(32, 4) : (1 @ L, 1)])
TILES = T.dynamic("tiles")


@T.macro
def _copy_tile(A, B, stage, words, r, t, lane):
    """The CTA's warp: tile ``t`` of A -> shared -> registers (ldmatrix) -> B."""
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], words, A.view(TILES * 32, 4).sub[t * 32 + lane, :])
    T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], stage.view(32, 4).sub[lane, :], words)
    T.cuda.warp_sync()
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"], r,
        stage.view(2, 8, 2, 4).permute(2, 0, 1, 3).view(4, 8, 4), scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["st.global.b32"],
        B.view(TILES, 2, 8, 2, 4).sub[t].permute(1, 3, 2, 0).view(32, 4, 1),
        r.view(32, 4, 1, layout=TileLayout(S[(32, 4, 1) : (1 @ L, 1, 1)])), scope="warp",
    )


@T.function
def copy_tiles(A: T.Tensor((TILES, 16, 8), "int32", align=16), B: T.Tensor((TILES, 16, 8), "int32", align=16),
               Counter: T.Tensor((1,), "uint32", align=4), Taken: T.Tensor((64,), "uint32", align=4)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=64, block=32))
    lane = T.cuda.thread_idx("x")
    stage = T.alloc_shared((16, 8), "uint32", align=16)
    slot = T.alloc_shared((1,), "uint32", align=4)
    r = T.alloc_local((4, 8, 4), "uint32", layout=FRAG)
    words = T.alloc_local((4,), "uint32")
    got = T.alloc_local((1,), "uint32")
    n = T.alloc_local((1,), "uint32")
    n[0] = T.uint32(0)
    if lane == 0:
        T.ptx["atom.global.add.u32"](got[0], Counter.ptr_to([0]), T.uint32(1))
        slot[0] = got[0]
    T.cuda.cta_sync()
    t = slot[0]
    T.cuda.cta_sync()
    # compared as uint32: a ticket of 2**31 or more would be negative as an int32 (issue 44)
    while t < T.Cast("uint32", TILES):
        _copy_tile(A, B, stage, words, r, T.Cast("int32", t), lane)
        n[0] = n[0] + T.uint32(1)
        if lane == 0:
            T.ptx["atom.global.add.u32"](got[0], Counter.ptr_to([0]), T.uint32(1))
            slot[0] = got[0]
        T.cuda.cta_sync()
        t = slot[0]
        T.cuda.cta_sync()
    if lane == 0:
        Taken[T.cuda.block_idx("x")] = n[0]


@T.function
def copy_tiles_per_thread(A: T.Tensor((TILES, 16, 8), "int32", align=16), B: T.Tensor((TILES, 16, 8), "int32", align=16),
                          Counter: T.Tensor((1,), "uint32", align=4)):
    # every lane takes its own ticket: the lanes of the warp would run different tiles
    T.device_entry(launch=T.cuda.LaunchConfig(grid=64, block=32))
    lane = T.cuda.thread_idx("x")
    stage = T.alloc_shared((16, 8), "uint32", align=16)
    r = T.alloc_local((4, 8, 4), "uint32", layout=FRAG)
    words = T.alloc_local((4,), "uint32")
    got = T.alloc_local((1,), "uint32")
    T.ptx["atom.global.add.u32"](got[0], Counter.ptr_to([0]), T.uint32(1))
    t = got[0]
    while T.Cast("int32", t) < TILES:
        _copy_tile(A, B, stage, words, r, T.Cast("int32", t), lane)
        T.ptx["atom.global.add.u32"](got[0], Counter.ptr_to([0]), T.uint32(1))
        t = got[0]
