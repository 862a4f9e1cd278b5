"""
Execution scopes: warp, warpgroup, CTA and cluster
==================================================

By default (``scope="thread"``) a tile call describes what *one* thread does
with its own operands. A wider scope describes the operands of a whole warp,
warpgroup, CTA or cluster in one call: every operand then starts with
**group axes** that are bound to the threads' ids instead of being looped.

=============  ===============================  ==============================
scope          group axes                       one call covers
=============  ===============================  ==============================
``thread``     none                             each thread's own operands
``warp``       ``(32,)`` lanes                  each warp
``warpgroup``  ``(4, 32)``                      each group of four warps
``cta``        ``(threads / 32, 32)``           the CTA
``cluster``    cluster CTAs, then ``(w, 32)``   the cluster
=============  ===============================  ==============================

The scope never makes threads cooperate: each thread still issues the
instructions for its own group coordinate, and register values never move
between threads. What the scope adds is a check: register tensors must be
laid out so that the thread issuing a coordinate is the thread that holds
it (``Axis.laneid``, ``Axis.warpid`` ... in the layout).

Run it with ``python tutorials/scopes.py``.
"""

# %%
# Setup
# -----

from tvm.tirx.layout import Axis, S, TileLayout

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.script import tirx as T

ON_GPU = testing.has_cuda()
ARCH = None if ON_GPU else "sm_90a"


def check_copy(kernel, shape):
    """On a GPU: run the copy kernel on random data and check B == A."""
    if not ON_GPU:
        return
    import torch

    a = torch.randn(*shape, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)
    print(f"{kernel.name}: B == A")


# %%
# Warp scope
# ----------
# Each warp of a 64-thread CTA moves its own 32 x 4 block. The operands have
# shape ``(32, 4)``: group axis ``(32,)`` (the lane) and the ``(4,)`` atom.
# The register layout ``S[(32, 4) : (1 @ Axis.laneid, 1)]`` places row ``l`` on
# lane ``l``, so each thread holds four registers. One instruction per thread
# loads 512 contiguous bytes per warp.

warp_regs = TileLayout(S[(32, 4) : (1 @ Axis.laneid, 1)])


@T.function
def warp_rows(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    w = T.cuda.warp_id()
    r = T.alloc_local((32, 4), "float32", layout=warp_regs)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[w * 32 : w * 32 + 32, :], scope="warp")
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[w * 32 : w * 32 + 32, :], r, scope="warp")


# The lowered IR binds the group coordinate to the lane id and emits one
# instruction per thread: no loop over the 32 lanes.
print(testing.lower(warp_rows).script())
kernel = testing.compile_and_show(warp_rows, "ld.global.v4", "st.global.v4", arch=ARCH)
check_copy(kernel, (64, 4))

# %%
# CTA scope, with repeats
# -----------------------
# At ``scope="cta"`` the group axes are ``(warps, 32)``: ``(2, 32)`` for 64
# threads. Each thread owns a row of 12 floats, which the ``(3, 4)`` tail
# splits into three repeats of a ``(4,)`` atom: three loads per thread.

cta_regs = TileLayout(S[(2, 32, 3, 4) : (1 @ Axis.warpid, 1 @ Axis.laneid, 4, 1)])


@T.function
def cta_twelve(A: T.Tensor((64, 12), "float32", align=16), B: T.Tensor((64, 12), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    r = T.alloc_local((2, 32, 3, 4), "float32", layout=cta_regs)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 32, 3, 4), scope="cta")
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.view(2, 32, 3, 4), r, scope="cta")


print("loads per thread:", testing.count_ptx(testing.lower(cta_twelve), "ld.*"))
kernel = testing.compile_and_show(cta_twelve, "ld.global.v4", "st.global.v4", arch=ARCH)
check_copy(kernel, (64, 12))

# %%
# Warpgroup scope
# ---------------
# A warpgroup is four consecutive warps (PTX ISA 9.7.15). Its group axes are
# ``(4, 32)``: the warp within the group (``Axis.wid_in_wg``) and the lane.

wg_regs = TileLayout(S[(4, 32, 2, 4) : (1 @ Axis.wid_in_wg, 1 @ Axis.laneid, 4, 1)])


@T.function
def warpgroup_tile(A: T.Tensor((4, 32, 8), "float32", align=16), B: T.Tensor((4, 32, 8), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    r = T.alloc_local((4, 32, 2, 4), "float32", layout=wg_regs)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(4, 32, 2, 4), scope="warpgroup")
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.view(4, 32, 2, 4), r, scope="warpgroup")


kernel = testing.compile_and_show(warpgroup_tile, "ld.global.v4", "st.global.v4", arch=ARCH)
check_copy(kernel, (4, 32, 8))

# %%
# Cluster scope
# -------------
# A thread-block cluster (sm_90) groups CTAs; the launch declares it with
# ``cluster=2``. The leading group axis is the CTA's position in its cluster
# (``Axis.cbx`` in the layout; read from a PTX special register at run time),
# followed by the CTA's ``(warps, 32)``. The cluster barrier between the calls
# is explicit.

cluster_regs = TileLayout(S[(2, 2, 32, 4) : (1 @ Axis.cbx, 1 @ Axis.warpid, 1 @ Axis.laneid, 1)])


@T.function
def cluster_pair(A: T.Tensor((2, 64, 4), "float32", align=16), B: T.Tensor((2, 64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64, cluster=2))
    r = T.alloc_local((2, 2, 32, 4), "float32", layout=cluster_regs)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 2, 32, 4), scope="cluster")
    T.cuda.cluster_sync()
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.view(2, 2, 32, 4), r, scope="cluster")


kernel = testing.compile_and_show(cluster_pair, "%cluster_cta", "barrier.cluster", "ld.global.v4", "st.global.v4", arch=ARCH)
check_copy(kernel, (2, 64, 4))

# %%
# Guarded calls
# -------------
# Inside an ``if`` over thread ids, only the threads that pass the guard take
# part, and the group is the box of coordinates they cover. Under
# ``T.cuda.lane_id() < 16`` a warp-scope call has the group ``(16,)``: the
# operands are ``(16, 4)``, one row per participating lane.

half_warp_regs = TileLayout(S[(16, 4) : (1 @ Axis.laneid, 1)])


@T.function
def half_warp(A: T.Tensor((2, 16, 4), "float32", align=16), B: T.Tensor((2, 16, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    w = T.cuda.warp_id()
    r = T.alloc_local((16, 4), "float32", layout=half_warp_regs)
    if T.cuda.lane_id() < 16:
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[w], scope="warp")
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[w], r, scope="warp")


kernel = testing.compile_and_show(half_warp, "ld.global.v4", "st.global.v4", arch=ARCH)
check_copy(kernel, (2, 16, 4))

# %%
# A guard can also pick whole warps -- warp specialisation. Only warp 1 of
# the CTA runs this warp-scope copy; ``T.cuda.warp_sync()`` is written by hand
# like every other synchronisation.


@T.function
def producer_warp(A: T.Tensor((32, 4), "float32", align=16), B: T.Tensor((32, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    r = T.alloc_local((32, 4), "float32", layout=warp_regs)
    if T.cuda.warp_id() == 1:
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A, scope="warp")
        T.cuda.warp_sync()
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B, r, scope="warp")


kernel = testing.compile_and_show(producer_warp, "ld.global.v4", "st.global.v4", "bar.warp.sync", arch=ARCH)
check_copy(kernel, (32, 4))

# %%
# What the checks catch
# ---------------------
# A layout that puts a coordinate on the wrong thread is rejected when the
# kernel is lowered, before any code is generated. Here lane ``l``'s row is
# placed on lane ``2 * l``:

wrong = TileLayout(S[(2, 32, 4) : (1 @ Axis.warpid, 2 @ Axis.laneid, 1)])


@T.function
def wrong_owner(A: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    r = T.alloc_local((2, 32, 4), "float32", layout=wrong)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 32, 4), scope="cta")


try:
    tvm_tirx.compile(wrong_owner, target="cuda", arch="sm_90a")
    raise AssertionError("the wrong layout was accepted")
except tvm_tirx.TileError as err:
    print("rejected as expected:", str(err).split(": ", 1)[1])

print("scopes: all kernels assembled")
