"""tvm_tirx: CUDA kernels in TVMScript where every hardware instruction is explicit.

``T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], registers, A.sub[tid, :])``
repeats one named PTX instruction over tensor views; ``LowerTileApply`` checks
the instruction's contract and expands it; ``tvm_tirx.compile`` builds the
kernel with apache-tvm and returns a :class:`Kernel` callable on torch tensors.

This module is imported by apache-tvm's ``tvm.backends`` entry point while
``import tvm`` is still running (and in runtime-only mode), so it imports
nothing of the compiler at load time (only the hook, :mod:`._plugin`); its
public names load on first use.
"""

import importlib

from . import _plugin

_LAZY = {
    "__version__": ("_version", "__version__"),
    "TileError": ("errors", "TileError"),
    "compile": ("build.kernel", "compile"),
    "Kernel": ("build.kernel", "Kernel"),
    "LowerTileApply": ("tile.lower.lower", "LowerTileApply"),
    "debug_build": ("build.debug", "debug_build"),
}

_SUBMODULES = ("testing", "script", "tile", "build", "schedule", "ops", "errors", "demo")

__all__ = ["TileError", "compile", "Kernel", "LowerTileApply", "debug_build", "__version__"]


def __getattr__(name):
    if name in _LAZY:
        module_name, attr = _LAZY[name]
        if module_name not in ("errors", "_version"):
            _plugin.install()
        value = getattr(importlib.import_module(f"{__name__}.{module_name}"), attr)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'tvm_tirx' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
