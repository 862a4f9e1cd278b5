"""The seed documents' kernels, written exactly as the documents show them."""

from tvm.tirx.layout import S, TileLayout

from tvm_tirx.script import tirx as T

gapped = TileLayout(S[(4, 1) : (2, 1)])


@T.function
def read_next_row(
    A: T.Tensor((64, 4), "float32", align=16),
    B: T.Tensor((64, 4), "float32", align=16),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    registers = T.alloc_local((4,), "float32", layout="default")
    shared = T.alloc_shared((64, 4), "float32", align=16)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], registers, A.sub[tid, :])
    T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], shared.sub[tid, :], registers)
    T.cuda.cta_sync()
    T.cuda.tile.apply(
        T.ptx["ld.shared.v4.b32"], registers, shared.sub[(tid + 1) % 64, :]
    )
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], registers)


@T.function
def save_and_zero(
    A: T.Tensor((64, 4), "float32", align=16),
    Saved: T.Tensor((64, 4), "float32", align=16),
    Zeros: T.Tensor((64, 4), "float32", align=16),
):
    # The guide's register-copy and zero-initialisation snippets, inserted
    # after the global load; both results are stored so they can be checked.
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    registers = T.alloc_local((4,), "float32", layout="default")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], registers, A.sub[tid, :])
    saved = T.alloc_local((4, 1), "float32", layout="default")
    T.cuda.tile.apply(T.ptx["mov.b32"], saved, registers.view(4, 1))
    T.cuda.tile.apply(T.ptx["st.global.b32"], Saved.sub[tid, :].view(4, 1), saved)
    T.cuda.tile.apply(T.ptx["mov.b32"], saved, T.float32(0))
    T.cuda.tile.apply(T.ptx["st.global.b32"], Zeros.sub[tid, :].view(4, 1), saved)


@T.function
def register_move(Out: T.Tensor((4, 1), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    a = T.alloc_local((4, 1), "uint32", layout="default")
    b = T.alloc_local((4, 1), "uint32", layout=gapped)
    T.cuda.tile.apply(T.ptx["mov.b32"], a, T.uint32(17))
    T.cuda.tile.apply(T.ptx["mov.b32"], b, a)
    T.cuda.tile.apply(T.ptx["st.global.b32"], Out, b)
