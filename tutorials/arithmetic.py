"""
Arithmetic and type conversion
==============================

Register instructions (``fma``, ``max``, ``add``, ``cvt`` ...) take register
tensors of the issuing thread, destination first, then the sources in the
PTX ISA's order. Every operand's atom is ``(1,)`` (one register), so the
axes in front of it are repeats: one instruction per coordinate. A typed
scalar may stand in for any one-register source and is reused at every
repeat.

Nothing is converted implicitly. Rounding, saturation and packing come from
the opcode, and element widths must equal the PTX type's: a packed
``f16x2`` value is one 32-bit register, so it lives in a ``uint32`` tensor.

For code that needs no particular instruction, ``T.cuda.tile.ewise`` applies
an ordinary scalar expression at every register coordinate and lets the
CUDA compiler pick the instructions.

Run it with ``python tutorials/arithmetic.py``.
"""

# %%
# Setup
# -----
# As in the data-movement tutorial, ``testing.compile_and_show`` compiles for
# the GPU present or for ``sm_90a``, prints PTX lines, assembles with ``ptxas``.

import numpy as np
from tvm.tirx.layout import Axis, S, TileLayout

from tvm_tirx import testing
from tvm_tirx.script import tirx as T

ON_GPU = testing.has_cuda()
ARCH = None if ON_GPU else "sm_90a"


def run(kernel, inputs, outputs):
    """Run ``kernel`` on NumPy ``inputs``; return the ``outputs`` ((shape, dtype) pairs) as NumPy."""
    import torch

    args = [torch.from_numpy(np.ascontiguousarray(x)).cuda() for x in inputs]
    outs = [torch.zeros(shape, dtype=getattr(torch, dtype), device="cuda") for shape, dtype in outputs]
    kernel(*args, *outs)
    torch.cuda.synchronize()
    return [o.cpu().numpy() for o in outs]


rng = np.random.default_rng(0)

# %%
# ``fma`` with broadcast scalars
# ------------------------------
# ``fma.rn.f32 d, a, b, c`` computes ``a * b + c`` with one rounding (PTX ISA
# 9.7.3.6). Each thread loads four floats as ``(4,)`` and views them as
# ``(4, 1)``: four repeats of a one-register atom. The scalars ``2`` and
# ``1`` are reused for all four instructions.


@T.function
def two_a_plus_one(
    A: T.Tensor((64, 4), "float32", align=16),
    Out: T.Tensor((64, 4), "float32", align=16),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    a = T.alloc_local((4, 1), "float32")
    d = T.alloc_local((4, 1), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], a.view(4), A.sub[tid, :])
    T.cuda.tile.apply(T.ptx["fma.rn.f32"], d, a, T.float32(2), T.float32(1))
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out.sub[tid, :], d.view(4))


lowered = testing.lower(two_a_plus_one)
print("fma instructions per thread:", testing.count_ptx(lowered, "fma.*"))
kernel = testing.compile_and_show(two_a_plus_one, "fma.rn.f32", arch=ARCH)

if ON_GPU:
    a = rng.standard_normal((64, 4)).astype("float32")
    (out,) = run(kernel, [a], [((64, 4), "float32")])
    assert np.array_equal(out, 2 * a + 1)
    print("two_a_plus_one: Out == 2 * A + 1")

# %%
# ``max`` at CTA scope
# --------------------
# The same computation followed by a ReLU (``max.f32`` with a scalar 0),
# written once for the whole CTA. At ``scope="cta"`` every operand starts
# with the group axes ``(warps, 32)`` -- here ``(2, 32)`` for 64 threads --
# and the register layout places coordinate ``(w, l, ...)`` on lane ``l`` of
# warp ``w`` (``Axis.warpid``, ``Axis.laneid``). Each thread still issues four
# ``fma`` and four ``max``: the group axes are not looped.

cta_regs = TileLayout(S[(2, 32, 4) : (1 @ Axis.warpid, 1 @ Axis.laneid, 1)])


@T.function
def relu_2a1_cta(
    A: T.Tensor((64, 4), "float32", align=16),
    Out: T.Tensor((64, 4), "float32", align=16),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    a = T.alloc_local((2, 32, 4), "float32", layout=cta_regs)
    d = T.alloc_local((2, 32, 4), "float32", layout=cta_regs)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], a, A.view(2, 32, 4), scope="cta")
    T.cuda.tile.apply(
        T.ptx["fma.rn.f32"], d.view(2, 32, 4, 1), a.view(2, 32, 4, 1),
        T.float32(2), T.float32(1), scope="cta",
    )
    T.cuda.tile.apply(
        T.ptx["max.f32"], d.view(2, 32, 4, 1), d.view(2, 32, 4, 1), T.float32(0), scope="cta"
    )
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out.view(2, 32, 4), d, scope="cta")


kernel = testing.compile_and_show(relu_2a1_cta, "fma.rn.f32", "max.f32", arch=ARCH)

if ON_GPU:
    a = rng.standard_normal((64, 4)).astype("float32")
    (out,) = run(kernel, [a], [((64, 4), "float32")])
    assert np.array_equal(out, np.maximum(2 * a + 1, 0))
    print("relu_2a1_cta: Out == max(2 * A + 1, 0)")

# %%
# Packing two floats into ``f16x2``: ``cvt.rn.f16x2.f32``
# -------------------------------------------------------
# ``cvt.rn.f16x2.f32 d, a, b`` rounds two floats to half precision and packs
# them into one 32-bit register, ``a`` in the upper half (PTX ISA 9.7.10.24).
# tvm_tirx calls these operands ``hi`` and ``lo``. The destination is a
# ``uint32`` tensor: one register per packed pair. Here ``hi`` is column 1
# and ``lo`` column 0 of a ``(4, 2)`` register tensor.


@T.function
def pack_f16x2(A: T.Tensor((8,), "float32", align=16), Out: T.Tensor((4,), "uint32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    a = T.alloc_local((4, 2), "float32")
    d = T.alloc_local((4, 1), "uint32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], a.view(2, 4), A.view(2, 4))
    T.cuda.tile.apply(T.ptx["cvt.rn.f16x2.f32"], d, a.sub[:, 1:2], a.sub[:, 0:1])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out, d.view(4))


kernel = testing.compile_and_show(pack_f16x2, "cvt.rn.f16x2.f32", arch=ARCH)

if ON_GPU:
    x = np.linspace(-2, 2, 8).astype("float32")
    (out,) = run(kernel, [x], [((4,), "uint32")])
    halves = x.astype(np.float16).view(np.uint16).astype(np.uint32)
    assert np.array_equal(out, (halves[1::2] << 16) | halves[0::2])
    print("pack_f16x2: Out[i] == f16(A[2i+1]) << 16 | f16(A[2i])")

# %%
# Packed half-precision arithmetic: ``add.rn.f16x2``
# --------------------------------------------------
# ``add.rn.f16x2`` adds two pairs of halves at once (PTX ISA 9.7.4). The
# float16 inputs are reinterpreted as ``uint32`` with ``.view("uint32")``: a
# bit view, not a conversion, that exposes each pair as one register.


@T.function
def add_f16x2(
    A: T.Tensor((8,), "float16", align=16),
    B: T.Tensor((8,), "float16", align=16),
    Out: T.Tensor((8,), "float16", align=16),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    a = T.alloc_local((4, 1), "uint32")
    b = T.alloc_local((4, 1), "uint32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], a.view(4), A.view("uint32"))
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], b.view(4), B.view("uint32"))
    T.cuda.tile.apply(T.ptx["add.rn.f16x2"], a, a, b)
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out.view("uint32"), a.view(4))


kernel = testing.compile_and_show(add_f16x2, "add.rn.f16x2", arch=ARCH)

if ON_GPU:
    h1 = rng.standard_normal(8).astype("float16")
    h2 = rng.standard_normal(8).astype("float16")
    (out,) = run(kernel, [h1, h2], [((8,), "float16")])
    assert np.array_equal(out, h1 + h2)
    print("add_f16x2: Out == A + B")

# %%
# Packing registers: ``mov.b64`` with register groups
# ---------------------------------------------------
# ``mov.b64 d, {lo, hi}`` packs two 32-bit registers into one 64-bit register
# and ``mov.b64 {lo, hi}, d`` splits it again (PTX ISA 9.7.10.4). The same
# opcode names the scalar, pack and unpack forms; the operands' atoms select
# one: a ``(2,)`` word group against a ``(1,)`` 64-bit register. ``mov`` only
# moves bits: the first word becomes the low half.


@T.function
def pack_unpack_b64(
    A: T.Tensor((4,), "uint32", align=16),
    Out: T.Tensor((4,), "uint32", align=16),
    Wide: T.Tensor((2,), "uint64", align=16),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    w = T.alloc_local((2, 2), "uint32")
    p = T.alloc_local((2, 1), "uint64")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], w.view(4), A)
    T.cuda.tile.apply(T.ptx["mov.b64"], p, w)  # pack: (2, 1) <- (2, 2)
    T.cuda.tile.apply(T.ptx["st.global.v2.b64"], Wide, p.view(2))
    T.cuda.tile.apply(T.ptx["mov.b64"], w, p)  # unpack: (2, 2) <- (2, 1)
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out, w.view(4))


kernel = testing.compile_and_show(pack_unpack_b64, "mov.b64", arch=ARCH)

if ON_GPU:
    words = rng.integers(0, 2**32, 4, dtype=np.uint64).astype(np.uint32)
    out, wide = run(kernel, [words], [((4,), "uint32"), ((2,), "uint64")])
    assert np.array_equal(out, words)
    expected = words[0::2].astype(np.uint64) | (words[1::2].astype(np.uint64) << np.uint64(32))
    assert np.array_equal(wide, expected)
    print("pack_unpack_b64: Wide == lo | hi << 32, Out == A")

# %%
# Elementwise functions: ``tile.ewise`` (SiLU)
# --------------------------------------------
# ``T.cuda.tile.ewise(fn, dst, *inputs)`` writes ``dst[c] = fn(inputs[c])``
# at every coordinate of the register tensors, as unrolled code. It names no
# PTX instruction: apache-tvm's code generator and nvcc choose them. The
# result's dtype must equal ``dst``'s.


@T.function
def silu(A: T.Tensor((64, 4), "float32", align=16), Out: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    x = T.alloc_local((4,), "float32")
    y = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], x, A.sub[tid, :])
    T.cuda.tile.ewise(lambda v: v * T.sigmoid(v), y, x)
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out.sub[tid, :], y)


kernel = testing.compile_and_show(silu, "ex2.approx", "rcp.approx", "div.", arch=ARCH)

if ON_GPU:
    a = rng.standard_normal((64, 4)).astype("float32")
    (out,) = run(kernel, [a], [((64, 4), "float32")])
    reference = a.astype(np.float64) / (1 + np.exp(-a.astype(np.float64)))
    assert np.allclose(out, reference, rtol=1e-6, atol=1e-7)
    print("silu: Out == A * sigmoid(A)")

print("arithmetic: all kernels assembled")
