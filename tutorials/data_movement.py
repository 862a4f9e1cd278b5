"""
Data movement: ``ld``, ``st`` and ``mov``
=========================================

This tutorial moves data between global memory, shared memory and registers
with three instruction families. Every call names one PTX instruction; the
operands are tensor views, and the destination always comes first:

==========  =====================  ==========================================
family      operands               moves
==========  =====================  ==========================================
``ld``      registers, memory      memory to the issuing thread's registers
``st``      memory, registers      registers to memory
``mov``     destination, source    register bits, inside one thread
==========  =====================  ==========================================

Run it with ``python tutorials/data_movement.py``. Without a GPU each kernel is
compiled for ``sm_90a``, its PTX is printed and ``ptxas`` assembles it; with a
GPU (and a CUDA build of torch) each kernel also runs and its result is checked.
"""

# %%
# Setup
# -----
# ``testing.compile_and_show`` compiles a kernel for ``ARCH`` (the GPU that is
# present, or ``sm_90a`` when there is none); prints the PTX lines of the
# instructions we care about; and assembles the kernel with the machine's
# ``nvcc``/``ptxas``.

from tvm.tirx.layout import S, TileLayout

from tvm_tirx import testing
from tvm_tirx.script import tirx as T

ON_GPU = testing.has_cuda()
ARCH = None if ON_GPU else "sm_90a"  # None: the GPU's own architecture


# %%
# A shared-memory exchange
# ------------------------
# Each of 64 threads loads its four-float row of ``A`` with one
# ``ld.global.v4.b32``, writes it to shared memory, waits at the barrier,
# reads the *next* thread's row and stores it to ``B``. Thread 63 reads row
# 0, so ``B`` is ``A`` rotated by one row.
#
# ``A.sub[tid, :]`` selects a row without reading it: a zero-copy view of
# shape ``(4,)``, exactly one ``.v4`` atom, so each call is one instruction.
# ``align=16`` promises 16-byte aligned base pointers; with the row stride of
# 16 bytes every atom is provably aligned, as a ``.v4.b32`` access requires.
# The barrier is written by hand: ``tile.apply`` never inserts one.


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
    T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], registers, shared.sub[(tid + 1) % 64, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], registers)


kernel = testing.compile_and_show(read_next_row, "ld.global", "st.shared", "ld.shared", "st.global", "bar.sync", arch=ARCH)

if ON_GPU:
    import torch

    a = torch.arange(256, dtype=torch.float32, device="cuda").reshape(64, 4)
    b = torch.empty_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, torch.roll(a, shifts=-1, dims=0))
    print("read_next_row: B == roll(A, -1, 0)")

# %%
# Repeat axes
# -----------
# Axes between the group and the atom are *repeats*: the call emits one
# instruction per repeat coordinate, in row-major order, as an unrolled loop.
# A row of 12 floats viewed as ``(3, 4)`` is three ``.v4`` atoms, so each
# thread issues three loads and three stores. The opcode stays the one you
# wrote: a ``(3, 4)`` view never turns into some other vector width.


@T.function
def twelve_floats(
    A: T.Tensor((64, 12), "float32", align=16),
    B: T.Tensor((64, 12), "float32", align=16),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((3, 4), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :].view(3, 4))
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :].view(3, 4), r)


# ``tvm_tirx.testing.lower`` runs only the expansion pass: the result shows
# the unrolled loops, each around exactly one PTX call.
print(testing.lower(twelve_floats).script())
kernel = testing.compile_and_show(twelve_floats, "ld.global", "st.global", arch=ARCH)

if ON_GPU:
    a = torch.randn(64, 12, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)
    print("twelve_floats: B == A")

# %%
# Register copies and initialisation
# ----------------------------------
# ``mov.b32`` copies one 32-bit register: its atom is ``(1,)``. Viewing the
# four loaded registers as ``(4, 1)`` exposes four *repeats*, so the call
# emits four moves. A typed scalar source (``T.float32(0)``) is reused at
# every repeat, which fills the tensor. ``mov`` copies bits within one
# thread; it never converts (that is ``cvt``) and never moves data between
# threads (that takes shared memory or a shuffle).
#
# Both results are stored with scalar ``st.global.b32`` over ``(4, 1)`` views
# of the output rows, so they can be checked.


@T.function
def save_and_zero(
    A: T.Tensor((64, 4), "float32", align=16),
    Saved: T.Tensor((64, 4), "float32", align=16),
    Zeros: T.Tensor((64, 4), "float32", align=16),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    registers = T.alloc_local((4,), "float32", layout="default")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], registers, A.sub[tid, :])
    saved = T.alloc_local((4, 1), "float32", layout="default")
    T.cuda.tile.apply(T.ptx["mov.b32"], saved, registers.view(4, 1))
    T.cuda.tile.apply(T.ptx["st.global.b32"], Saved.sub[tid, :].view(4, 1), saved)
    T.cuda.tile.apply(T.ptx["mov.b32"], saved, T.float32(0))
    T.cuda.tile.apply(T.ptx["st.global.b32"], Zeros.sub[tid, :].view(4, 1), saved)


kernel = testing.compile_and_show(save_and_zero, "mov.b32", "st.global", arch=ARCH)

if ON_GPU:
    a = torch.randn(64, 4, device="cuda")
    saved, zeros = torch.full_like(a, 7.0), torch.full_like(a, 7.0)
    kernel(a, saved, zeros)
    torch.cuda.synchronize()
    assert torch.equal(saved, a) and torch.equal(zeros, torch.zeros_like(a))
    print("save_and_zero: Saved == A, Zeros == 0")

# %%
# Gapped register layouts
# -----------------------
# A register tensor's layout says which storage slot holds each coordinate.
# ``S[(4, 1) : (2, 1)]`` puts the four values of ``b`` in slots 0, 2, 4 and 6;
# storage is the layout's span (7 registers), and the copy writes the gapped
# slots directly: no remap buffer, no extra moves.


gapped = TileLayout(S[(4, 1) : (2, 1)])


@T.function
def register_move(Out: T.Tensor((4, 1), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    a = T.alloc_local((4, 1), "uint32", layout="default")
    b = T.alloc_local((4, 1), "uint32", layout=gapped)
    T.cuda.tile.apply(T.ptx["mov.b32"], a, T.uint32(17))
    T.cuda.tile.apply(T.ptx["mov.b32"], b, a)
    T.cuda.tile.apply(T.ptx["st.global.b32"], Out, b)


kernel = testing.compile_and_show(register_move, "mov.b32", "st.global", arch=ARCH)

# The CUDA source shows the slots: the second copy writes b's storage at 0, 2, 4, 6.
print("--- register_move: CUDA excerpt")
for line in kernel.cuda_source.splitlines():
    if line.strip().startswith("tvm_builtin_ptx_mov_b32(") and "17" not in line:
        print("   ", line.strip())

if ON_GPU:
    out = torch.zeros(4, 1, dtype=torch.uint32, device="cuda")
    kernel(out)
    torch.cuda.synchronize()
    assert out.cpu().tolist() == [[17]] * 4
    print("register_move: Out == 17")

# %%
# Predication, preserved destinations and cache hints
# ---------------------------------------------------
# ``pred=`` guards every instruction the call emits. A predicated-off load
# leaves its destination undefined unless ``preserve_dst=True``, which keeps
# the value the registers held before (here -1, written by a ``mov``).
# ``.L2::cache_hint`` forms take the cache policy as the ``cache_policy``
# parameter; ``createpolicy`` makes one (PTX ISA 9.7.10.8 for ``ld``).


@T.function
def predicated(
    A: T.Tensor((64, 4), "float32", align=16),
    B: T.Tensor((64, 4), "float32", align=16),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    policy = T.alloc_local((1,), "uint64")
    r = T.alloc_local((4,), "float32")
    T.ptx["createpolicy.fractional.L2::evict_last.b64"](policy[0], T.float32(1.0))
    T.cuda.tile.apply(T.ptx["mov.b32"], r.view(4, 1), T.float32(-1))
    T.cuda.tile.apply(
        T.ptx["ld.global.L2::cache_hint.v4.b32"], r, A.sub[tid, :],
        pred=tid < 32, preserve_dst=True, cache_policy=policy[0],
    )
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)


kernel = testing.compile_and_show(predicated, "createpolicy", "ld.global", arch=ARCH)

if ON_GPU:
    a = torch.randn(64, 4, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b[:32], a[:32])
    assert torch.equal(b[32:], torch.full_like(b[32:], -1.0))
    print("predicated: rows 0..31 loaded, rows 32..63 kept -1")

print("data_movement: all kernels assembled")
