"""The apache-tvm ``Target`` a kernel is compiled for: CUDA, with an ``sm_`` arch."""

from __future__ import annotations

import tvm

from ..arch import gpu_arch as _gpu_arch

__all__ = ["resolve_target"]


def resolve_target(target="cuda", arch: str | None = None):
    """The apache-tvm ``Target`` for ``target`` and ``arch``.

    Parameters
    ----------
    target : str | dict | tvm.target.Target
        ``"cuda"``, a target dict, or a Target.
    arch : str | None
        ``"sm_90a"`` and the like.  Defaults to GPU 0's own arch
        (:func:`tvm_tirx.arch.gpu_arch`: ``sm_90a`` on Hopper, with the ``a``
        that wgmma and setmaxnreg need).

    Raises
    ------
    ValueError
        No GPU is present and ``arch`` was not given, or the target is not CUDA.
    """
    if isinstance(target, tvm.target.Target):
        if arch is None:
            return target
        target = dict(target.export())
    if isinstance(target, str):
        if target != "cuda":
            raise ValueError(f"tvm_tirx.compile: target must be 'cuda', got {target!r}")
        target = {"kind": "cuda"}
    target = dict(target)
    if target.get("kind") != "cuda":
        raise ValueError(f"tvm_tirx.compile: target kind must be 'cuda', got {target.get('kind')!r}")
    if arch is None:
        arch = target.get("arch") or _gpu_arch()
    if arch is None:
        raise ValueError(
            "tvm_tirx.compile: no CUDA GPU is present, so the architecture cannot be "
            "detected; pass arch=, e.g. tvm_tirx.compile(func, target='cuda', arch='sm_90a')"
        )
    target["arch"] = arch
    return tvm.target.Target(target)
