"""Seed-level TVMScript builders: ``T.function``, ``T.Tensor``, span-correct allocations."""

from __future__ import annotations

import functools

from tvm import tirx
from tvm.runtime import DataType
from tvm.script import tirx as T
from tvm.tirx.layout import Layout
from tvm.tirx.script.parser import entry

from . import flat_frames
from .launch import current_dyn_pool
from .param_shapes import check_parameter_shapes
from .parse_errors import backtrace_requested, parse_failure

__all__ = ["function", "Tensor", "dynamic", "alloc_local", "alloc_shared"]

_STOCK: dict = {}


def function(func=None, *, private: bool = False, check_well_formed: bool = True):
    """Parse a kernel written in TVMScript into a ``PrimFunc`` (like ``T.prim_func``).

    A kernel that fails to parse raises one error, without the parser's chain of
    re-raises (``TVM_BACKTRACE=1`` keeps it), so that an uncaught one prints its
    message, its ``file:line`` and a short traceback
    (:mod:`tvm_tirx.script.parse_errors`).

    Raises
    ------
    TileError
        A ``T.cuda.tile.apply`` call breaks its instruction's contract; the
        message starts with ``file:line`` of the call, the source excerpt is a note.
    tvm_tirx.script.parse_errors.ScriptError
        Any other parse error (a ``tvm.error.DiagnosticError``, with the
        parser's text: ``error: <message>``, `` --> file:line:col``, the excerpt).
    ValueError
        A parameter's shape uses a run-time size that no argument gives
        (``T.Tensor((n * 4,), ...)`` with no bare ``n`` elsewhere:
        :func:`~tvm_tirx.script.param_shapes.check_parameter_shapes`).
    """
    def decorate(f):
        try:
            # views leave frames open; apache-tvm exits them recursively (crash at ~250 views)
            with flat_frames.flat_frame_exits():
                parsed = entry.prim_func(f, private=private, check_well_formed=check_well_formed)
        except Exception as err:  # pylint: disable=broad-except
            shown = parse_failure(err)
            if shown is None:
                raise
            raise shown from (err if backtrace_requested() else None)
        if isinstance(parsed, tirx.PrimFunc):
            check_parameter_shapes(parsed, f)
        return parsed

    if func is None:
        setattr(decorate, "dispatch_token", "tirx")
        return decorate
    return decorate(func)


setattr(function, "dispatch_token", "tirx")


def Tensor(shape, dtype="float32", align: int = 0, scope: str = "global", layout=None):  # pylint: disable=invalid-name
    """A kernel parameter: ``A: T.Tensor((64, 4), "float32", align=16)``.

    Parameters
    ----------
    shape : tuple[int | Var, ...]
        Extents, in elements: ints, or symbolic extents made with
        :func:`dynamic` (the size is then the call's; the same variable is
        the same size wherever it appears).
    dtype : str
        Element dtype.
    align : int
        Promised alignment of the base pointer in bytes; ``0`` means the
        element size.  It is what alignment proofs start from, and the
        compiled ``Kernel`` checks it on every call.
    scope : str
        Storage scope (``"global"``).
    layout : TileLayout | None
        Optional layout of the tensor's elements.

    Raises
    ------
    ValueError
        ``align`` is negative or not a power of two.
    """
    if align < 0 or (align & (align - 1)) != 0:
        raise ValueError(f"T.Tensor: align must be 0 or a power of two in bytes, got {align}")
    if align == 0:
        align = max(DataType(dtype).bits // 8, 1)
    kwargs = {"align": align, "scope": scope}
    if layout is not None:
        kwargs["layout"] = layout
    return T.Buffer(tuple(shape), dtype, **kwargs)


def dynamic(name: str, dtype: str = "int32"):
    """A symbolic extent: ``N = T.dynamic("N")`` at module level, then
    ``T.Tensor((N, 4), "float32")`` in a kernel's signature.

    It is apache-tvm's ``tvm.tirx.Var(name, dtype)``; unlike ``T.int32()``,
    which TVMScript names ``v``, it keeps ``name`` in printed IR and in error
    messages.  In the kernel's body it is a run-time integer of that value
    (the compiled kernel receives it as an argument, and ``Kernel.__call__``
    takes it from the tensors' shapes), usable in indices, guards and
    ``LaunchConfig(grid=T.ceildiv(N, 64))``.

    Parameters
    ----------
    name : str
        A Python identifier, the name messages and the printed IR use.
    dtype : str
        ``"int32"`` (the default) or ``"int64"``.

    Raises
    ------
    ValueError
        ``name`` is not an identifier, or ``dtype`` is neither int32 nor int64.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"T.dynamic: name must be a Python identifier, got {name!r}")
    if dtype not in ("int32", "int64"):
        raise ValueError(f"T.dynamic: dtype must be 'int32' or 'int64', got {dtype!r}")
    return tirx.Var(name, dtype)


def _alloc(stock, shape, dtype, layout, kwargs):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if isinstance(layout, Layout):
        span = int(layout.span())
        count = functools.reduce(lambda a, b: a * b, shape, 1)
        if span != count:
            # apache-tvm 0.27 allocates prod(shape) elements; a gapped or
            # thread-distributed layout needs its span instead.
            storage = stock((span,), dtype, **kwargs)
            return storage.view(*shape, layout=layout)
    return stock(shape, dtype, layout=layout, **kwargs)


def alloc_local(shape, dtype="float32", *args, layout="default", **kwargs):
    """Per-thread registers: ``T.alloc_local((4,), "float32", layout="default")``.

    Parameters
    ----------
    shape : int | tuple[int, ...]
        Logical extents.
    dtype : str
        Element dtype (one register per 32-bit element; 64-bit dtypes take a pair).
    layout : "default" | TileLayout
        Where each coordinate lives: ``"default"`` is compact row-major; a
        ``TileLayout`` may be gapped (``S[(4, 1):(2, 1)]`` -> slots 0, 2, 4, 6).
        Storage is the layout's span, never fewer elements.

    Returns
    -------
    Buffer
        A ``local`` buffer (a view over span-sized storage for gapped layouts).
    """
    if args:
        return _STOCK["alloc_local"](shape, dtype, *args, layout=layout, **kwargs)
    return _alloc(_STOCK["alloc_local"], shape, dtype, layout, kwargs)


def alloc_shared(shape, dtype="float32", *args, layout="default", **kwargs):
    """CTA shared memory: ``T.alloc_shared((64, 4), "float32", align=16)``.

    With ``scope="shared.dyn"`` the tensor is carved out of the kernel's
    dynamic shared memory (``LaunchConfig(dynamic_smem_bytes=N)``):
    ``T.alloc_shared((64, 64), "bfloat16", scope="shared.dyn", align=1024,
    offset=None, alias=False)``; see
    :meth:`tvm_tirx.script.dyn_smem.DynamicSharedPool.carve`.

    Parameters
    ----------
    shape : int | tuple[int, ...]
        Logical extents.
    dtype : str
        Element dtype.
    align : int
        Alignment of the allocation in bytes (keyword).
    layout : "default" | TileLayout | None
        Layout of the elements; storage is its span.
    scope : str
        ``"shared"`` (static, the default) or ``"shared.dyn"``.
    offset, alias
        ``shared.dyn`` only: byte offset in the pool (None: the next free
        byte) and whether overlapping earlier carve-outs is intended.

    Returns
    -------
    Buffer
        A ``shared`` (or ``shared.dyn``) buffer.

    Raises
    ------
    TileError
        ``shared.dyn`` without ``dynamic_smem_bytes``, or a carve-out rule
        broken (size, alignment, offset, overlap).
    """
    if kwargs.get("scope") == "shared.dyn" and not args:
        kwargs.pop("scope")
        return current_dyn_pool().carve(shape, dtype, layout=layout, **kwargs)
    if args:
        return _STOCK["alloc_shared"](shape, dtype, *args, layout=layout, **kwargs)
    return _alloc(_STOCK["alloc_shared"], shape, dtype, layout, kwargs)
