"""
Tile instructions from TIR schedules: ``sch.tensorize``
=======================================================

A PrimFunc written with ``s_tir`` blocks says *what* is computed; a
``tvm.s_tir.Schedule`` then decides *how*: ``split`` and ``bind`` give loops
to threads, ``cache_read`` / ``cache_write`` stage data in registers or shared
memory, and ``tensorize`` replaces a block by a hardware instruction.

``import tvm_tirx.schedule.tensor_intrin`` registers tensor intrinsics whose
implementation is one ``T.cuda.tile.apply`` call (their names start with
``tvm_tirx.``). A block tensorized with one of them becomes a checked tile
call, and ``tvm_tirx.compile`` (or ``tvm.compile(..., tir_pipeline="tvm_tirx")``)
checks the call's contract on the scheduled kernel before it expands it.

``Schedule.tensorize`` needs apache-tvm-ffi 0.1.14.post0 with
apache-tvm 0.27.0.post1 (with 0.1.15.post2 it crashes the process; see
:func:`tvm_tirx.schedule.tensor_intrin.tensorize_supported`). Where it does not work,
this script says so and stops.

Run it with ``python tutorials/tir_schedules.py``.
"""

# %%
# Setup
# -----

import sys

import tvm
from tvm.script import tirx as T

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.schedule import tensor_intrin

ON_GPU = testing.has_cuda()
ARCH = None if ON_GPU else "sm_90a"

if not tensor_intrin.tensorize_supported():
    print("tir_schedules: Schedule.tensorize does not work with the installed apache-tvm-ffi "
          "(it needs 0.1.14.post0); nothing to run")
    sys.exit(0)

print(len(tensor_intrin.list_intrinsics()), "intrinsics, e.g.", tensor_intrin.list_intrinsics()[:3])


def build(name, mod, *needles):
    """Compile the scheduled ``mod``, print its PTX lines holding a needle, assemble it."""
    kernel = tvm_tirx.compile(mod, target="cuda", arch=ARCH)
    arch = kernel.target.attrs["arch"]
    print(f"--- {name} ({arch}): PTX excerpt")
    for line in kernel.ptx.splitlines():
        if any(n in line for n in needles):
            print("   ", line.strip())
    print(f"assembled {name} for {arch}: {len(testing.assemble(kernel))}-byte cubin")
    return kernel


# %%
# The computation
# ---------------
# ``B = A + 1`` over a 256 x 4 float32 matrix, one ``s_tir`` block per
# element: nothing about threads or vectors yet.

ROWS, THREADS = 256, 64


@T.prim_func(s_tir=True)
def add_one(A: T.Buffer((ROWS, 4), "float32"), B: T.Buffer((ROWS, 4), "float32")):
    for i, j in T.grid(ROWS, 4):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)


# %%
# The schedule
# ------------
# One row per thread: the row loop is split over ``blockIdx.x`` x
# ``threadIdx.x``. ``cache_read`` puts the thread's row of ``A`` in registers
# (scope ``"local"``) and ``cache_write`` computes ``B``'s row there first.
# The two copy blocks are 4-element copies between global memory and
# registers: exactly what ``ld.global.v4.b32`` and ``st.global.v4.b32`` do, so
# ``tensorize`` turns their inner loops into tile calls.


def schedule(func):
    sch = tvm.s_tir.Schedule(func)
    block = sch.get_sblock("B")
    i, _ = sch.get_loops(block)
    bx, tx = sch.split(i, [None, THREADS])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    load = sch.cache_read(block, 0, "local")
    sch.compute_at(load, tx)
    store = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(store, tx)
    sch.tensorize(sch.get_loops(load)[-1], "tvm_tirx.ld_global_v4_f32")
    sch.tensorize(sch.get_loops(store)[-1], "tvm_tirx.st_global_v4_f32")
    return sch


sch = schedule(add_one)
# the tensorized blocks hold tile calls
print("\n".join(line for line in sch.mod.script().splitlines() if "tile.apply" in line))
kernel = build("add_one", sch.mod, "ld.global.v4", "st.global.v4")
if ON_GPU:
    import torch

    a = torch.randn(ROWS, 4, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a + 1)
    print("add_one: B == A + 1 on the GPU")

# %%
# Through ``tvm.compile``
# -----------------------
# The same module builds with apache-tvm's own entry point and the
# ``"tvm_tirx"`` TIR pipeline (``import tvm_tirx`` registers it); the vector
# instructions are in the CUDA source.

target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
exe = tvm.compile(sch.mod, target=target, tir_pipeline="tvm_tirx")
source = exe.mod.imports[0].inspect_source()
assert "ld.global.v4.b32" in source and "st.global.v4.b32" in source
print("tvm.compile: the CUDA source holds ld.global.v4.b32 and st.global.v4.b32")

# %%
# A schedule the contract rejects
# -------------------------------
# With rows of 5 floats, the row of thread ``t`` starts at byte ``20 t``: a
# 16-byte ``ld.global.v4`` is not aligned for odd rows. ``tensorize`` matches
# the block (it checks shapes and dtypes, not addresses); the build then
# proves alignment on the scheduled kernel and fails with a ``TileError`` that
# names the block and the intrinsic.


@T.prim_func(s_tir=True)
def add_one_padded(A: T.Buffer((ROWS, 5), "float32"), B: T.Buffer((ROWS, 4), "float32")):
    for i, j in T.grid(ROWS, 4):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)


try:
    tvm_tirx.compile(schedule(add_one_padded).mod, target="cuda", arch="sm_90a")
    raise AssertionError("a misaligned ld.global.v4 was accepted")
except tvm_tirx.TileError as err:
    assert "tvm_tirx.ld_global_v4_f32" in str(err)
    print("rejected as expected:", str(err).splitlines()[0])

print("tir_schedules: all kernels assembled")
