"""The warp-specialized Hopper GEMM (sm_90a): ``C (m, n) = A (m, k) @ B (n, k)^T``.

One CTA computes a 128 x ``block_n`` tile of C (``block_n`` 256 by default; 128 or 64 for
shapes with few tiles), or with ``block_m=256`` a 256 x ``block_n`` one (the cooperative
tile, ``block_n`` at most 192), with three warpgroups (384 threads); or with ``block_m=64``
a 64 x ``block_n`` one with two (256 threads: one consumer), decode's tile:

* warpgroup 0, the **producer** (:mod:`.producer`), gives up registers (``setmaxnreg.dec``
  to 40) and one of its threads streams the K tiles of A (``block_m`` x 64) and B
  (``block_n`` x 64) into a ring of ``stages`` shared buffers with TMA loads (128-byte swizzle), each stage
  guarded by two mbarriers: ``full[s]`` (armed with the stage's bytes, completed by the
  TMA) and ``empty[s]`` (one arrival per consumer warpgroup when it is done reading);
* warpgroups 1 and 2 (1 alone in a 64-row tile), the **consumers** (:mod:`.consumer`), take registers
  (``setmaxnreg.inc`` to 232) and each multiplies its 64 rows of A by all of B with
  ``wgmma.m64n{block_n}k16`` (four per K tile), keeping ``wait_depth`` wgmma batches in flight
  before releasing a stage; in a 256-row tile each takes 128 rows, two 64-row blocks with
  their own accumulators, and issues both blocks' wgmma (eight per K tile) in one batch;
* the **epilogue**, a chain of stages (:class:`~tvm_tirx.kernels.parts.epilogue.Epilogue`,
  built once by ``GemmConfig.epilogue``): in the fp32 registers it scales fp8 products,
  adds a bias, applies an activation, combines a gated GEMM's gate and up columns
  (``gated=True``) and adds a residual (``residual=True``); then bf16 output is converted
  to packed ``bf16x2``, written into a 128-byte-swizzled shared tile and stored by one TMA
  store per 64-column box (clipped at C's edge); float32 output, and bf16 output whose
  rows the TMA cannot address, is stored straight from the registers (a bound guard per
  store, unless the tiles cover C exactly).  The chain also gives the kernel's parameters
  besides A, B and C (``Bias``, ``Residual``, ``Scales``).  A 256-row tile's consumers
  run it once per 64-row block, the bf16 blocks stored through their one shared tile in
  turn.

``persistent=True`` launches ``ctas`` CTAs that walk the output tiles in the grouped
order of :mod:`.order`; ``cluster=2`` pairs CTAs on vertically adjacent tiles that each
load half of the B tile and multicast it to both (or, where C has one row tile, on
tiles side by side that share A the same way).  Any (m, n, k) whose A and B rows take
a multiple of 16 bytes (``k * sizeof(in_dtype)``): the TMA zero-fills the loads past the edges of A and B, so the
tails contribute zeros; ``m`` and ``k`` may be run-time extents (:mod:`.config`).

Hardware facts: PTX ISA 9.7.15 (wgmma, fragment map 9.7.15.5.1.1), 9.7.9.25.5.1 (TMA),
9.7.13.15 (mbarrier), 9.7.13.1 (named barriers), 9.7.19.5 (setmaxnreg).
"""

import tvm  # noqa: F401  pylint: disable=unused-import

from .config import (BK_BYTES, BLOCK_MS, BLOCK_NS, BM, BN, CONSUMERS, INPUTS, OUTPUTS, WG_M, GemmConfig, GemmOptions,
                     gemm_smem_bytes)
from .spec import CONFIG, GemmSpec, SmallMSpec, make_gemm
from .order import tile_order
from .tiles import choose_tile

__all__ = ["BM", "BN", "BLOCK_MS", "BLOCK_NS", "BK_BYTES", "WG_M", "CONSUMERS", "INPUTS", "OUTPUTS", "GemmConfig", "GemmOptions",
           "gemm_smem_bytes", "make_gemm", "tile_order", "choose_tile", "GemmSpec", "SmallMSpec", "CONFIG"]
