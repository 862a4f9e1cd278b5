"""tvm_tirx: CUDA kernels in TVMScript where every hardware instruction is explicit.

``T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], registers, A.sub[tid, :])``
repeats one named PTX instruction over tensor views; ``LowerTileApply`` checks
the instruction's contract and expands it; ``tvm_tirx.compile`` builds the
kernel with apache-tvm and returns a :class:`Kernel` callable on torch tensors.

This module is imported by apache-tvm's ``tvm.backends`` entry point while
``import tvm`` is still running, so it imports nothing at load time; its
public names load on first use.
"""

__version__ = "0.1.0"

_LAZY = {
    "TileError": ("errors", "TileError"),
    "compile": ("kernel", "compile"),
    "Kernel": ("kernel", "Kernel"),
    "LowerTileApply": ("tile.lower", "LowerTileApply"),
}

_SUBMODULES = ("testing", "script", "tile", "errors", "demo", "relax")

__all__ = ["TileError", "compile", "Kernel", "LowerTileApply", "__version__"]


def __getattr__(name):
    if name in _LAZY:
        import importlib  # pylint: disable=import-outside-toplevel

        module_name, attr = _LAZY[name]
        if module_name != "errors":
            from .script import install  # pylint: disable=import-outside-toplevel

            install.install()
        value = getattr(importlib.import_module(f"{__name__}.{module_name}"), attr)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        import importlib  # pylint: disable=import-outside-toplevel

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'tvm_tirx' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
