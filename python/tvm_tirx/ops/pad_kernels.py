"""K padding for the GEMM operators: ``t (*, k)`` as a new ``(*, k + pad)`` tensor whose
appended columns are zero, by :func:`~tvm_tirx.kernels.pad.make_pad_rows` (one pass) on a
CUDA tensor, by ``torch.nn.functional.pad`` elsewhere (CPU and meta tensors, any tensor
inside :func:`tvm_tirx.ops.check`, and rows or padding that are not whole 16-byte vectors, or
no columns).

The kernels are kept per (words per row, words of padding, arch), compiled on first use
(the on-disk compile cache may serve them).
"""

from __future__ import annotations

import torch

from ..build.kernel import compile as _tirx_compile
from ..kernels.pad import VECTOR, make_pad_rows
from .check_mode import collected
from .gemm_kernels import on_clear_kernels
from .kernel_table import KernelTable
from .torch_checks import device_target

__all__ = ["pad_k"]

_TABLE = KernelTable(lambda key: _compile(key))
on_clear_kernels(_TABLE.clear)
_VECTOR_BYTES = 4 * VECTOR


def _compile(key):
    words, pad, arch = key
    return _tirx_compile(make_pad_rows(words, pad), target="cuda", arch=arch)


def pad_k(t: torch.Tensor, pad: int) -> torch.Tensor:
    """A new contiguous ``(*, k + pad)`` tensor: ``t (*, k)``'s columns, then ``pad`` zero
    columns (``t`` is not changed).

    Parameters
    ----------
    t : torch.Tensor
        ``(*, k)``, any dtype; on a CUDA device of :func:`~.torch_checks.device_target`'s
        arch, contiguous, 16-byte aligned, with rows and padding of whole 16-byte vectors,
        it takes the kernel, else ``torch.nn.functional.pad``.
    pad : int
        Columns to append (elements; a positive multiple of 16 bytes for the kernel).

    Raises
    ------
    tvm_tirx.ops.UnsupportedInput
        The CUDA device is not one the kernels are compiled for (``device_target``).
    """
    k, size = t.shape[-1], t.element_size()
    # ops.check (collected) lists the GEMM kernels a call takes, not this one
    usable = (t.device.type == "cuda" and collected() is None and t.is_contiguous() and k > 0 and pad > 0
              and (k * size) % _VECTOR_BYTES == 0 and (pad * size) % _VECTOR_BYTES == 0
              and t.data_ptr() % _VECTOR_BYTES == 0)
    if not usable:
        return torch.nn.functional.pad(t, (0, pad))
    out = t.new_empty(*t.shape[:-1], k + pad)
    rows = t.numel() // k
    if rows:
        words, extra = k * size // 4, pad * size // 4
        kernel = _TABLE.get((words, extra, device_target("pad_k", t.device)))
        kernel(t.reshape(rows, k).view(torch.uint32), out.view(rows, k + pad).view(torch.uint32))
    return out
