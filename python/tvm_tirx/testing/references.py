"""Reference results that tests and benchmarks of the shipped kernels compare against (torch, float32)."""

from __future__ import annotations

__all__ = ["block_scaled_product", "random_block_scaled"]


def random_block_scaled(m: int, n: int, k: int, device="cuda", seed: int = 0, block: int = 128) -> tuple:
    """Random float8 e4m3 operands quantized in blocks, for :func:`block_scaled_product`:
    ``(a8 (m, k), b8 (n, k), scales_a (m, ceil(k / block)), scales_b (ceil(n / block),
    ceil(k / block)))``, the scales float32 in ``[0.5, 1.5)``, made by torch's generator
    seeded with ``seed`` on ``device``."""
    import torch

    torch.manual_seed(seed)
    blocks = -(-k // block)
    a8 = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
    b8 = torch.randn(n, k, device=device).to(torch.float8_e4m3fn)
    return (a8, b8, torch.rand(m, blocks, device=device) + 0.5,
            torch.rand(-(-n // block), blocks, device=device) + 0.5)


def block_scaled_product(a8, b8, scales_a, scales_b, block: int = 128):
    """The float32 product of float8 operands quantized in blocks (the DeepGEMM format of
    :mod:`tvm_tirx.kernels.gemm.block_scales`): ``(a8 * SA) @ (b8 * SB)^T``.

    Parameters
    ----------
    a8, b8 : torch.Tensor
        ``(m, k)`` and ``(n, k)`` float8 tensors.
    scales_a : torch.Tensor
        ``(m, ceil(k / block))`` float32: one scale per row of A and ``block`` elements of K.
    scales_b : torch.Tensor
        ``(ceil(n / block), ceil(k / block))`` float32: one per ``block x block`` block of B.
    block : int
        Elements per scale along K (and rows of B per scale), 128.

    Returns
    -------
    torch.Tensor
        ``(m, n)`` float32, on the operands' device.
    """
    k, n = a8.shape[1], b8.shape[0]
    a = a8.float() * scales_a.repeat_interleave(block, dim=1)[:, :k]
    b = b8.float() * scales_b.repeat_interleave(block, dim=0)[:n].repeat_interleave(block, dim=1)[:, :k]
    return a @ b.t()
