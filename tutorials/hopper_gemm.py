"""
A Hopper GEMM, step by step
===========================

This tutorial grows a bf16 GEMM for Hopper (sm_90a), ``C = A @ B^T`` with A
``(M, K)``, B ``(N, K)`` and fp32 accumulation, from one tile product to the
kernel of ``tvm_tirx.kernels.gemm``, which runs about as fast as ``torch.matmul``
(cuBLAS) on an H200. Each stage is a script of its own in
``tutorials/hopper_gemm/``, written with tile operations -- TMA loads,
mbarriers, ``wgmma``, ``setmaxnreg``, conversions and stores are
``T.cuda.tile.apply`` calls whose contracts are checked when the kernel is
lowered; fences, ``commit_group``/``wait_group`` and CTA barriers are raw
``T.ptx`` calls, because nothing is ever inserted for you.

1. :ref:`gemm_tile <tutorial-hopper-gemm-step1-tile>`: one TMA load per
   operand, one ``wgmma.m64n256k16`` tile product, a store;
2. :ref:`gemm_kloop <tutorial-hopper-gemm-step2-kloop>`: the K loop over one
   shared buffer;
3. :ref:`gemm_pipelined <tutorial-hopper-gemm-step3-pipeline>`: a ring of
   stages guarded by ``full`` and ``empty`` mbarriers, a 128 x 256 tile;
4. :ref:`gemm_warp_specialized <tutorial-hopper-gemm-step4-warp-specialized>`:
   a producer warpgroup and two consumer warpgroups, ``setmaxnreg``,
   ``wgmma.wait_group 1``;
5. :ref:`hopper_gemm <tutorial-hopper-gemm-step5-full>`: ``tvm_tirx.kernels.gemm``
   -- grouped tile order, TMA-store epilogue, persistent grid, 2-CTA clusters.

Every step compiles and assembles its kernel for ``sm_90a`` without a GPU; on
a GPU it also checks the result against an fp32 product (max ``|C - ref|`` /
max ``|ref|`` at most 1e-2) and prints its TFLOP/s next to ``torch.matmul``'s.
Run one with ``python tutorials/hopper_gemm/step3_pipeline.py [--size M N K]``,
or all of them with ``python tutorials/hopper_gemm.py``.

A little arithmetic frames every step. An H200 does about 990 dense bf16
TFLOP/s, 7.5 per SM. One 128 x 256 x 64 tile product is 4.2 MFLOP: about
0.56 µs of an SM's tensor cores, for which it needs 48 KiB of A and B --
about 88 GB/s per SM, 11.6 TB/s for the chip. That is far more than HBM's
4.8 TB/s: most of it must come from L2, where the tiles that neighbouring
CTAs loaded are found (step 5's tile order and clusters are about that). A
TMA load takes on the order of a microsecond from issue to arrival, so by
Little's law an SM must keep roughly 88 GB/s x 1 µs = 88 KB -- about two
stages -- in flight *while* it computes. Each step below removes one reason why that is not happening.
"""

# %%
# Running the steps
# -----------------
# Each step runs as its own process, as you would run it. Without a GPU only
# compiling and assembling matters, and the steps run side by side; with one
# they run one after the other, so that their timings do not disturb each
# other.

import os
import subprocess
import sys

from tvm_tirx import testing

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hopper_gemm")
STEPS = ["step1_tile", "step2_kloop", "step3_pipeline", "step4_warp_specialized", "step5_full"]
_procs = {}


def start(step):
    """Launch ``tutorials/hopper_gemm/<step>.py`` (with this script's arguments)."""
    _procs[step] = subprocess.Popen([sys.executable, os.path.join(HERE, step + ".py"), *sys.argv[1:]],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def show(step):
    """Wait for ``step``, print what it printed; raises if it failed."""
    if step not in _procs:
        start(step)
    proc = _procs.pop(step)
    out, _ = proc.communicate()
    print(f"=== {step}\n{out.rstrip()}")
    if proc.returncode != 0:
        raise RuntimeError(f"{step} failed with exit status {proc.returncode}")


if not testing.has_cuda():
    for step in STEPS:
        start(step)

# %%
# Step 1: one tile
# ----------------
# A warpgroup's accumulators (128 fp32 registers per thread for a 64 x 256
# tile) are filled by one ``wgmma`` call that expands into four instructions,
# one per 16 columns of K. Both operands come straight from the shared tiles
# the TMA wrote: the matrix descriptors are derived from the tiles' 128-byte
# swizzled layouts, and the epilogue's views are checked register by register
# against the ISA's fragment map. Nothing overlaps with anything: load, wait,
# multiply, wait, store.

show("step1_tile")

# %%
# Step 2: the K loop
# ------------------
# Looping over K with one buffer makes it a GEMM, but each 0.28 µs of tensor
# work (a 64 x 256 x 64 product) waits for a load of about a microsecond.
# The only overlap is between the CTAs an SM holds, three of them: 128
# threads of 154 registers each (ptxas's count here) leave no room for a
# fourth. Most of the time the tensor cores idle.

show("step2_kloop")

# %%
# Step 3: a ring of stages
# ------------------------
# With four 48 KiB stages, three K tiles are loading while one is
# multiplied: 144 KiB in flight, above the ~88 KB the arithmetic above asks
# for. The tile grows to 128 x 256 (two warpgroups), so each byte of B feeds
# twice the math. But thread 0 refills a stage only after both warpgroups
# have released it, and its own warpgroup stalls meanwhile: the warpgroups
# run in lockstep, and a refill starts only once the math of its stage is
# complete.

show("step3_pipeline")

# %%
# Step 4: warp specialization
# ---------------------------
# A producer warpgroup that does nothing but wait on ``empty`` and issue
# loads keeps the ring full without stopping a consumer; ``setmaxnreg`` gives
# it 40 registers and the consumers 232, so the accumulators and the
# epilogue's words fit without spills in one 384-thread CTA per SM; and
# ``wgmma.wait_group 1`` keeps one product queued on the tensor cores while a
# consumer waits, releases and loops. This is the structure of the fastest
# Hopper GEMMs.

show("step4_warp_specialized")

# %%
# Step 5: around the K loop
# -------------------------
# What remains is outside the K loop: storing C (a TMA store from a swizzled
# shared tile, overlapped with the next tile's loads), the order in which the
# tiles run (grouped, so that the CTAs running together share their B tiles
# in L2), and optionally a persistent grid and 2-CTA clusters that multicast
# B. On the H200, ``make_gemm`` with one tile per CTA and ``group_m=16``
# measured 805 TFLOP/s at 8192^3 (``torch.matmul``: 799) and 750 at 4096^3
# (773).

show("step5_full")
print("hopper_gemm: all kernels assembled")
