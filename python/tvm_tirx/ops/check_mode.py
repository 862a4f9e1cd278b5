"""Check the torch operators' inputs on any device: :func:`check`.

On a machine without a Hopper GPU every operator call fails first on its device rule
("must be a CUDA tensor"), so the rules a kernel has for shapes, dtypes, layouts and
alignment stay hidden until the code reaches a GPU.  :func:`check` runs an operator call
on tensors of any device (``meta`` tensors cost nothing) as if they were on an H200:
compute capability 9.0 (``sm_90a``), :data:`~tvm_tirx.kernels.gemm.tiles.SMS` SMs.  Every
other rule runs as on the GPU and raises what the GPU call would raise; nothing is
compiled and nothing is launched; it returns the keys of the kernels the call would
launch.  This module does not import torch.
"""

from __future__ import annotations

import contextlib
import contextvars

__all__ = ["check", "checking", "collected", "ARCH"]

#: The architecture :func:`check` takes every device for.
ARCH = "sm_90a"

_COLLECTED: contextvars.ContextVar = contextvars.ContextVar("tvm_tirx_ops_check_mode", default=None)


def collected():
    """The list the current :func:`checking` block collects kernel keys into, or None
    outside one (the operators then run as usual)."""
    return _COLLECTED.get()


@contextlib.contextmanager
def checking():
    """A block in which the torch operators check and plan but neither compile nor
    launch; yields the list of the keys (:class:`~tvm_tirx.kernels.gemm.spec.GemmSpec`,
    :class:`~tvm_tirx.kernels.gemm.spec.SmallMSpec`,
    :class:`~tvm_tirx.ops.attention_kernels.AttentionKey`) of the kernels they would
    launch, in call order.  Outputs are allocated on the inputs' device and left
    uninitialised; launch plans made inside are not kept."""
    keys: list = []
    token = _COLLECTED.set(keys)
    try:
        yield keys
    finally:
        _COLLECTED.reset(token)


def check(op, *args, **kwargs) -> list:
    """Run ``op(*args, **kwargs)`` as on an H200 without a GPU: check every rule, launch nothing.

    Parameters
    ----------
    op : Callable
        A torch operator of :mod:`tvm_tirx.ops`: ``linear``, ``matmul``, ``glu_linear``
        or ``attention``.
    *args, **kwargs
        Its arguments, with tensors on any device (``device="meta"`` allocates nothing).
        Tensors that require grad are checked as the forward would check them.

    Returns
    -------
    list
        The keys of the kernels the call would launch (``[]`` when it would be computed
        by torch: ``fallback="torch"`` and an input the kernel does not take).

    Raises
    ------
    UnsupportedInput, ValueError, TypeError
        What the call on an H200 would raise, with the same message.

    Example
    -------
    ``ops.check(ops.linear, torch.empty(8, 12, dtype=torch.bfloat16, device="meta"),
    torch.empty(64, 12, dtype=torch.bfloat16, device="meta"))`` raises the
    ``UnsupportedInput`` of ``k = 12`` (rows of 24 bytes), as the GPU call would.
    """
    with checking() as keys:
        op(*args, **kwargs)
    return keys
