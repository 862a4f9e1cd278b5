"""The peer in the GEMM table: a Triton matmul in the style of Triton's matmul tutorial
(grouped program order, one output tile per program, ``tl.dot`` over K tiles), C = A @ B^T.

Imported only where ``triton`` is installed (the GPU machine).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_CONFIGS = [
    triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP": 8}, num_stages=3, num_warps=8),
    triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP": 8}, num_stages=4, num_warps=4),
    triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP": 8}, num_stages=4, num_warps=8),
    triton.Config({"BM": 256, "BN": 128, "BK": 64, "GROUP": 8}, num_stages=3, num_warps=8),
    # small-M (decode) candidates: tl.dot's smallest M tile, and a 64-row one
    triton.Config({"BM": 16, "BN": 64, "BK": 128, "GROUP": 8}, num_stages=4, num_warps=4),
    triton.Config({"BM": 64, "BN": 64, "BK": 64, "GROUP": 8}, num_stages=4, num_warps=4),
]


@triton.autotune(configs=_CONFIGS, key=["M", "N", "K"])
@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   GROUP: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    per_group = GROUP * tiles_n
    first_m = (pid // per_group) * GROUP
    rows_in_group = min(tiles_m - first_m, GROUP)
    pm = first_m + (pid % per_group) % rows_in_group
    pn = (pid % per_group) // rows_in_group
    rm = (pm * BM + tl.arange(0, BM)) % M
    rn = (pn * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    a_tile = a_ptr + rm[:, None] * K + rk[None, :]
    b_tile = b_ptr + rn[None, :] * K + rk[:, None]  # B is (N, K): read it as (K, N)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(tl.load(a_tile), tl.load(b_tile), acc)
        a_tile += BK
        b_tile += BK
    cm = pm * BM + tl.arange(0, BM)
    cn = pn * BN + tl.arange(0, BN)
    mask = (cm[:, None] < M) & (cn[None, :] < N)
    tl.store(c_ptr + cm[:, None] * N + cn[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def matmul_tn(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``c = a @ b.T`` for row-major bf16 ``a`` (M, K) and ``b`` (N, K), K a multiple of 64;
    ``c`` (M, N) bf16 or float32.  The first call per shape autotunes."""
    m, k = a.shape
    n = b.shape[0]
    grid = lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)  # noqa: E731
    _matmul_kernel[grid](a, b, c, m, n, k)
    return c
