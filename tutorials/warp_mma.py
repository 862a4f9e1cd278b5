"""
Warp matrix multiply: ``ldmatrix``, ``mma.sync``, ``stmatrix``
==============================================================

Tensor-core instructions are *warp-collective*: the 32 lanes of a warp issue
them together and each lane holds a fixed piece of each matrix -- the ISA's
fragment map (PTX ISA 9.7.14.5.8 for ``mma.m16n8k16``, 9.7.14.5.15 for
``ldmatrix``). With ``T.cuda.tile.apply`` the operands are whole matrices,
e.g. ``C`` is ``(16, 8)`` float32, and the register tensors' layouts say which
lane holds which element (``Axis.laneid``) in which register. The lowering
checks every element against the fragment map; it never moves data between
lanes for you.

Run it with ``python tutorials/warp_mma.py``. ``bench/gemm.py`` builds a full
bf16 GEMM from the same pieces.
"""

# %%
# Setup and fragment layouts
# --------------------------
# With ``g = lane / 4`` and ``t = lane % 4`` the m16n8k16 fragments are:
#
# * A, 16 rows x 8 b32 words (two f16 each): word ``(8h + g, 4q + t)`` is
#   register ``h + 2q`` of lane ``4g + t``;
# * B, stored n-major as 8 x 8 words: word ``(g, 4q + t)`` is register ``q``;
# * C, 16 x 8 float32: element ``(8h + g, 2t + e)`` is register ``2h + e``
#   (``mma_accumulator_layout()`` of ``tvm_tirx.tile.fragments``).
#
# ``ldmatrix .x4`` fills A's four registers from four 8 x 8 matrices; the
# same registers seen as ``(matrix, row, word)`` use layout ``a_ldm``.

from tvm.tirx.layout import Axis, S, TileLayout

from tvm_tirx import testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.fragments import accumulator_tile, mma_accumulator_layout

ON_GPU = testing.has_cuda()
ARCH = None if ON_GPU else "sm_90a"
L = Axis.laneid

a_frag = TileLayout(S[(2, 8, 2, 4) : (1, 4 @ L, 2, 1 @ L)])
a_ldm = TileLayout(S[(4, 8, 4) : (1, 4 @ L, 1 @ L)])
b_frag = TileLayout(S[(8, 2, 4) : (4 @ L, 1, 1 @ L)])
b_ldm = TileLayout(S[(2, 8, 4) : (1, 4 @ L, 1 @ L)])
c_frag = mma_accumulator_layout()  # TileLayout(S[(2, 8, 4, 2) : (2, 4 @ L, 1 @ L, 1)])


# %%
# One warp, one mma: C = A @ B^T
# ------------------------------
# A (16 x 16) and B (8 x 16) f16 are staged in shared memory with ``cp.async``;
# ``ldmatrix`` brings them into fragments -- lane ``8m + r`` gives the address of
# row ``r`` of matrix ``m``, so the shared views list the rows in that order --
# one ``mma.sync`` multiplies, and each lane stores its two pairs of C
# (``accumulator_tile`` views C and the registers by the fragment map).

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
    # matrix m = h + 2q of A is rows 8h.., words 4q..: list the rows in that order
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
        a.view(4, 8, 4, layout=a_ldm),
        sa.view("uint32").view(2, 8, 2, 4).permute(2, 0, 1, 3).view(4, 8, 4),
        scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"],
        b.view(2, 8, 4, layout=b_ldm),
        sb.view("uint32").view(8, 2, 4).permute(1, 0, 2),
        scope="warp",
    )
    T.cuda.tile.apply(T.ptx["mov.b32"], c.local().view(4, 1), T.float32(0))  # each lane's 4 registers
    T.cuda.tile.apply(T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"], c, a, b, c, scope="warp")
    # each lane stores its pairs (8h + g, 2t + e = 0, 1): C and c seen lane by lane as (32, h, e)
    T.cuda.tile.apply(T.ptx["st.global.v2.f32"], *accumulator_tile(C, c, "mma.sync"), scope="warp")


kernel = testing.compile_and_show(warp_mma, "ldmatrix", "mma.sync", "cp.async.ca", arch=ARCH)
if ON_GPU:
    import torch

    a = torch.randn(16, 16, device="cuda", dtype=torch.float16)
    b = torch.randn(8, 16, device="cuda", dtype=torch.float16)
    c = torch.full((16, 8), float("nan"), device="cuda")
    kernel(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a.float() @ b.float().t(), rtol=1e-3, atol=1e-3)
    print("warp_mma: C == A @ B^T on the GPU")

# %%
# stmatrix: fragments back to shared memory
# -----------------------------------------
# ``stmatrix`` is ``ldmatrix`` in reverse, with the same lane maps: loading
# four 8 x 8 matrices and storing them to another shared tile with the same
# row addresses copies the tile, whatever the lanes hold in between.

@T.function
def ld_st_matrix(Src: T.Tensor((32, 4), "uint32", align=16), Out: T.Tensor((32, 4), "uint32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.thread_idx("x")
    s_in = T.alloc_shared((32, 4), "uint32", align=16)
    s_out = T.alloc_shared((32, 4), "uint32", align=16)
    row = T.alloc_local((4,), "uint32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], row, Src.sub[lane, :])
    T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], s_in.sub[lane, :], row)
    T.cuda.warp_sync()
    frag = T.alloc_local((4, 8, 4), "uint32", layout=a_ldm)
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"], frag, s_in.view(4, 8, 4), scope="warp")
    T.cuda.tile.apply(T.ptx["stmatrix.sync.aligned.m8n8.x4.shared.b16"], s_out.view(4, 8, 4), frag, scope="warp")
    T.cuda.warp_sync()
    T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], row, s_out.sub[lane, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out.sub[lane, :], row)


kernel = testing.compile_and_show(ld_st_matrix, "ldmatrix", "stmatrix", arch=ARCH)
if ON_GPU:
    import torch

    src = torch.randint(0, 2**31, (32, 4), device="cuda", dtype=torch.int64).to(torch.uint32)
    out = torch.zeros_like(src)
    kernel(src, out)
    torch.cuda.synchronize()
    assert torch.equal(out, src)
    print("ld_st_matrix: Out == Src on the GPU")

print("warp_mma: all kernels assembled")
