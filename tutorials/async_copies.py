"""
Asynchronous copies: ``cp.async``
=================================

``cp.async`` copies 4, 8 or 16 bytes per thread from global to shared memory
without passing through registers (PTX ISA 9.7.9.25.3). The copy is
*asynchronous*: nothing waits for it unless you say so. The tile operation
never inserts the waiting for you -- the kernel writes, explicitly:

1. ``T.ptx["cp.async.commit_group"]()`` -- close the group of copies issued so far;
2. ``T.ptx["cp.async.wait_group"](n)`` -- wait until at most ``n`` groups are pending;
3. a barrier (``T.cuda.cta_sync()``) before other threads read what a thread copied.

The operands are ``(shared, global)``. Their last axis is the chunk, and its
extent times the element size is the copy size in bytes: ``.ca`` copies 4, 8
or 16 bytes, ``.cg`` only 16.

Run it with ``python tutorials/async_copies.py``.
"""

# %%
# Setup
# -----

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.script import tirx as T

ON_GPU = testing.has_cuda()
ARCH = None if ON_GPU else "sm_90a"


# %%
# A tile through shared memory
# ----------------------------
# 128 threads stage a 128 x 8 bfloat16 tile: each thread copies its 16-byte
# row with one ``cp.async.cg``, then every thread waits for its own group,
# the barrier makes all rows visible, and each thread reads back the row of
# its neighbour (thread 127 reads row 0).

@T.function
def stage_rows(A: T.Tensor((128, 8), "bfloat16", align=16), B: T.Tensor((128, 8), "bfloat16", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.thread_idx("x")
    smem = T.alloc_shared((128, 8), "bfloat16", align=16)
    T.cuda.tile.apply(T.ptx["cp.async.cg.shared.global"], smem.sub[tid, :], A.sub[tid, :])
    T.ptx["cp.async.commit_group"]()
    T.ptx["cp.async.wait_group"](0)
    T.cuda.cta_sync()
    r = T.alloc_local((4,), "uint32")
    T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], r, smem.view("uint32").sub[(tid + 1) % 128, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.view("uint32").sub[tid, :], r)


kernel = testing.compile_and_show(stage_rows, "cp.async", "ld.shared", arch=ARCH)
if ON_GPU:
    import torch

    a = torch.randn(128, 8, device="cuda").to(torch.bfloat16)
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, torch.roll(a, shifts=-1, dims=0))
    print("stage_rows: B == roll(A, -1) on the GPU")

# %%
# A predicate that zero-fills
# ---------------------------
# ``pred=`` on ``cp.async`` does not skip the instruction: it becomes the ISA's
# ``src-size`` operand -- the whole chunk when true, 0 when false -- and a copy
# of 0 source bytes fills the 16 destination bytes with zeros. Threads past a
# ragged edge therefore leave zeros, not stale data, in shared memory. Here only
# the first 100 rows exist; the other 28 rows of the tile read as zeros.
# (``T.min`` clamps the address of the rows that do not exist: a predicated-off
# thread still forms an address.)

@T.function
def ragged_rows(A: T.Tensor((100, 4), "float32", align=16), B: T.Tensor((128, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.thread_idx("x")
    smem = T.alloc_shared((128, 4), "float32", align=16)
    T.cuda.tile.apply(
        T.ptx["cp.async.ca.shared.global"], smem.sub[tid, :], A.sub[T.min(tid, 99), :], pred=tid < 100
    )
    T.ptx["cp.async.commit_group"]()
    T.ptx["cp.async.wait_group"](0)
    T.cuda.cta_sync()
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], r, smem.sub[tid, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)


# The generated helper carries the src-size operand; there is no ``@p`` guard.
print([line.strip() for line in tvm_tirx.compile(ragged_rows, target="cuda", arch="sm_90a").cuda_source.splitlines() if "cp.async.ca" in line and "asm" in line])
kernel = testing.compile_and_show(ragged_rows, "cp.async", arch=ARCH)
if ON_GPU:
    import torch

    a = torch.randn(100, 4, device="cuda")
    b = torch.full((128, 4), float("nan"), device="cuda")
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b[:100], a) and torch.equal(b[100:], torch.zeros(28, 4, device="cuda"))
    print("ragged_rows: rows 100..127 are zero on the GPU")

# %%
# The contract's checks
# ---------------------
# ``.cg`` only copies 16 bytes; an 8-byte chunk is rejected while the kernel
# is parsed, with the rule and the section of the ISA.

try:

    @T.function
    def wrong_chunk(A: T.Tensor((32, 4), "bfloat16", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        smem = T.alloc_shared((32, 4), "bfloat16", align=16)
        T.cuda.tile.apply(T.ptx["cp.async.cg.shared.global"], smem.sub[tid, :], A.sub[tid, :])

    raise AssertionError("an 8-byte .cg chunk was accepted")
except tvm_tirx.TileError as err:
    print("rejected as expected:", str(err).split(": ", 1)[1])

print("async_copies: all kernels assembled")
