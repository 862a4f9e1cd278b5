"""
Step 5: the full kernel
=======================

``tvm_tirx.kernels.gemm``'s ``make_gemm`` is step 4 plus what happens around
the K loop. Its options, each one a change you can time on its own
(``python bench/gemm.py --sweep`` does):

``out_dtype`` (``"bfloat16"`` or ``"float32"``)
    With bf16 output the epilogue is a **TMA store**: each consumer rounds its
    accumulators to ``bf16x2`` words, writes them into a 128-byte-swizzled
    shared tile (the swizzle makes the ``st.shared.b32`` of a warp hit 32
    different banks) and one thread issues four ``cp.async.bulk.tensor`` stores
    of 64 x 64 elements. Whole 128-byte lines go to memory, and the warpgroup
    does not wait for them: it only waits (``cp.async.bulk.wait_group.read``)
    before writing the shared tile again. fp32 output is stored straight from
    the registers (``st.global.v2.f32``).
``group_m``
    The **tile order**. Output tile ``t`` is row tile ``t % group_m`` of its
    group and column tile ``(t % (group_m * tiles_n)) // group_m``: the CTAs
    that run at the same time cover a ``group_m``-row block of C column by
    column, so each B tile they need is read from HBM once and then found in
    L2 by the other ``group_m - 1`` CTAs. When ``m`` is not a multiple of
    ``128 * group_m`` the last group is shorter (see the package's
    ``tile_order``).
``persistent``, ``ctas``
    A **persistent grid**: ``ctas`` CTAs (one per SM) each walk the output tiles
    ``bx, bx + ctas, ...`` in that order. The producer does not stop at a tile's
    end: the ring's phases carry over, so it loads the next tile's first stages
    while the consumers run the epilogue of the current one.
``cluster``
    With ``cluster=2`` two CTAs of a **cluster** compute vertically adjacent
    tiles, which need the same B tile. Each loads half of it with
    ``.multicast::cluster``, which writes both CTAs' shared memory and
    completes both CTAs' ``full`` barriers; a consumer releases a stage on the
    ``empty`` barriers of both CTAs, since the peer's producer writes into it
    too. B's L2-to-SM traffic halves.
``stages``, ``wait_depth``, ``spin``
    The ring's depth (48 KiB a stage; with bf16 output the epilogue's tiles
    take 64 KiB, so at most 3), the wgmma batches left in flight (1 as in step
    4, or 0), and whether mbarriers are waited for by a loop of plain
    ``try_wait.parity`` instead of ``try_wait`` with a suspend-time hint.

Run it with ``python tutorials/hopper_gemm/step5_full.py [--size M N K]``.
"""

# %%
# The kernel and its options
# --------------------------
# ``make_gemm`` returns the ``T.function`` for one problem size and one set
# of options; it raises ``ValueError`` for a row stride the TMA cannot use or
# options that do not fit (``stages=4`` with bf16 output needs more than
# 227 KiB of shared memory).

import inspect
from typing import Any

import _harness

from tvm_tirx.kernels.gemm import gemm_smem_bytes, make_gemm

print("make_gemm" + str(inspect.signature(make_gemm)))
for out_dtype, stages in (("bfloat16", 3), ("float32", 4)):
    print(f"  {out_dtype} output, {stages} stages: {gemm_smem_bytes(stages, out_dtype) // 1024} KiB shared memory")
try:
    make_gemm(4096, 4096, 4096, stages=4)
except ValueError as err:
    print("  refused:", err)

# %%
# Configurations
# --------------
# On the H200 the first one is the fastest at 8192^3 (805 TFLOP/s against
# ``torch.matmul``'s 799 in the same run). Without a GPU only that one is
# compiled and assembled; with one, each is checked and timed.

CONFIGS: dict[str, dict[str, Any]] = {
    "one tile per CTA, group_m 16": dict(persistent=False, group_m=16),
    "one tile per CTA, group_m 16, wait_depth 0": dict(persistent=False, group_m=16, wait_depth=0),
    "one tile per CTA, group_m 8, 2-CTA clusters, spin": dict(persistent=False, cluster=2, spin=True),
    "persistent (132 CTAs), group_m 16": dict(persistent=True, group_m=16),
    "persistent (132 CTAs), 2-CTA clusters, spin": dict(persistent=True, cluster=2, spin=True),
}

if __name__ == "__main__":
    M, N, K = _harness.size((2048, 1024, 1024), (8192, 8192, 8192))
    for name, options in CONFIGS.items():
        print(f"-- {name}: {options}")
        kernel = _harness.build(make_gemm(M, N, K, **options))
        if not _harness.ON_GPU:
            break
        _harness.check_and_time(kernel, M, N, K)
