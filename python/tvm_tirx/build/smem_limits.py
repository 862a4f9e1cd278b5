"""Shared memory per CTA against the target's limit, checked when a kernel is compiled.

The limit per thread block is the row "Maximum amount of shared memory per
thread block" of the CUDA C++ Programming Guide's table "Technical
Specifications per Compute Capability" (1 KB = 1024 bytes).  A kernel's
static ``shared`` allocations and its ``tirx.dyn_smem_bytes`` (from
``LaunchConfig(dynamic_smem_bytes=N)``) count together against it.

A run-time ``dynamic_smem_bytes`` (an expression of the kernel's parameters)
cannot be checked here: only the static part is, and the sum is checked by
:class:`tvm_tirx.Kernel` before each launch, from the call's arguments
(:mod:`tvm_tirx.build.launch_sizes`).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.runtime import DataType
from tvm.target import Target

from ..errors import TileError

__all__ = ["MAX_SMEM_PER_BLOCK", "smem_limit", "static_smem_bytes", "require_smem_limit", "CheckSharedMemoryLimit"]

#: Compute capability ``(major, minor)`` -> bytes of shared memory one CTA may use.
MAX_SMEM_PER_BLOCK = {
    (7, 0): 96 * 1024,
    (7, 2): 96 * 1024,
    (7, 5): 64 * 1024,
    (8, 0): 163 * 1024,
    (8, 6): 99 * 1024,
    (8, 7): 163 * 1024,
    (8, 9): 99 * 1024,
    (9, 0): 227 * 1024,  # 232448 bytes
    (10, 0): 227 * 1024,
    (10, 3): 227 * 1024,
    (12, 0): 99 * 1024,
    (12, 1): 99 * 1024,
}

_DYN_ATTR = "tirx.dyn_smem_bytes"


def smem_limit(arch: str) -> int | None:
    """Bytes of shared memory per CTA on ``arch`` (``"sm_90a"`` -> 232448), or None
    for an architecture the table does not list."""
    digits = "".join(ch for ch in str(arch).split("_", 1)[-1] if ch.isdigit())
    if len(digits) < 2:
        return None
    return MAX_SMEM_PER_BLOCK.get((int(digits[:-1]), int(digits[-1])))


def _arch_of(func) -> str | None:
    target = func.attrs.get("target") if func.attrs is not None else None
    target = target or Target.current(allow_none=True)
    arch = target.attrs.get("arch") if target is not None else None
    return str(arch) if arch else None


def _smem_bytes(func) -> tuple[int, int]:
    """``(dynamic, static)`` shared memory bytes of PrimFunc ``func``."""
    sizes = {"dynamic": 0, "static": 0}

    def visit(node):
        if isinstance(node, tirx.AttrStmt) and node.attr_key == _DYN_ATTR:
            sizes["dynamic"] = max(sizes["dynamic"], int(node.value))
        elif isinstance(node, tirx.AllocBuffer) and node.buffer.scope() == "shared":
            buf = node.buffer
            count = 1
            for s in buf.shape:
                count *= int(s)
            try:
                count = max(count, int(buf.layout.span()))
            except (AttributeError, TypeError, ValueError):
                pass  # no layout, or one without a static span: prod(shape)
            sizes["static"] += (count * DataType(buf.dtype).bits + 7) // 8

    tvm_ffi.structural_walk(func.body, (object, visit))
    return sizes["dynamic"], sizes["static"]


def static_smem_bytes(func) -> int:
    """Bytes of static ``shared`` memory PrimFunc ``func`` allocates (not ``shared.dyn``)."""
    return _smem_bytes(func)[1]


def require_smem_limit(func, name: str = "") -> None:
    """Raise if PrimFunc ``func`` asks for more shared memory than its target allows.

    Raises
    ------
    TileError
        Dynamic plus static shared memory over :func:`smem_limit` of the
        function's target arch; the message names both sizes and the limit.
        Nothing is checked without an arch or for one the table does not list
        (the driver then refuses the launch); a run-time dynamic size counts
        0 here and is checked at launch (:mod:`tvm_tirx.build.launch_sizes`).
    """
    arch = _arch_of(func)
    limit = smem_limit(arch) if arch else None
    dynamic, static = _smem_bytes(func)
    if limit is None or dynamic + static <= limit:
        return
    raise TileError(
        "",
        "shared memory over the target's limit",
        expected=f"at most {limit} bytes ({limit // 1024} KB) per CTA on {arch} "
        "(CUDA C++ Programming Guide, technical specifications per compute capability)",
        found=f"{dynamic + static} bytes in kernel {name or '?'}: dynamic_smem_bytes={dynamic}"
        + (f" + {static} bytes of static shared memory" if static else ""),
    )


def CheckSharedMemoryLimit():  # pylint: disable=invalid-name
    """A module pass (``tvm.transform.Pass``) running :func:`require_smem_limit` on each PrimFunc.

    Raises
    ------
    TileError
        When run, for a kernel over its target's limit.
    """
    @tvm.transform.module_pass(opt_level=0, name="tvm_tirx.CheckSharedMemoryLimit")
    def _pass(mod, _ctx):
        for gv, func in mod.functions.items():
            if isinstance(func, tvm.tirx.PrimFunc):
                require_smem_limit(func, gv.name_hint)
        return mod

    return _pass
