"""Checks of a kernel's call arguments, built once per kernel and cheap on every call.

:class:`~tvm_tirx.Kernel` checks every argument before it launches anything:
count, type, dtype, shape (with one size per symbolic extent across all
arguments), device, contiguity, the ``align`` promise of each ``T.Tensor``
parameter, and the range of integer scalars.  A call happens in loops
(decoding, per-layer ops), so the checks are compiled per parameter into one
condition each, joined into one function per kernel (:func:`build_checker`):
for a torch tensor of the right kind the condition reads a handful of
attributes and compares them with values computed at build time.  Anything else -- a wrong argument, a tvm tensor, a torch
subclass -- goes through the complete check (:meth:`ParamSpec.require`), which
builds its message only when it raises.
"""

from __future__ import annotations

import functools
import math
import numbers
import sys

from tvm import tirx
from tvm.runtime import DataType

from ..tile.analysis.machine_ints import INT32_ELEMENTS
from ..tile.ir.views import int_or_none

__all__ = ["ParamSpec", "build_checker", "arity_error"]


def _dtype_name(x) -> str:
    text = str(x)
    return text[len("torch.") :] if text.startswith("torch.") else text


def _static_or_name(extent):
    """An extent as an int, or the name of its variable when it is symbolic."""
    value = int_or_none(extent)
    return str(extent) if value is None else value


def _is_torch_tensor(x) -> bool:
    cls = type(x)
    return cls.__module__.startswith("torch") and hasattr(x, "data_ptr")


def _device_kind(dev) -> str:
    kind = getattr(dev, "type", None)
    if isinstance(kind, str):
        return kind
    dlpack_type = getattr(dev, "dlpack_device_type", None)
    code = dlpack_type() if callable(dlpack_type) else getattr(dev, "device_type", None)
    return {2: "cuda", 1: "cpu"}.get(int(code) if code is not None else -1, str(dev))


def _int_range(dtype: str) -> tuple[int, int]:
    """``[lo, hi)`` of an integer dtype (from apache-tvm's ``DataType``)."""
    bits = DataType(dtype).bits
    return (0, 2**bits) if dtype.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1))


def arity_error(kernel: str, specs, args) -> TypeError:
    """The TypeError for a call with the wrong number of arguments."""
    return TypeError(
        f"{kernel}: expected {len(specs)} argument(s) ({', '.join(p.name for p in specs)}), got {len(args)}"
    )


class ParamSpec:
    """What one kernel parameter accepts.

    Attributes
    ----------
    name : str
        The parameter's name.
    shape : tuple[int | str, ...] | None
        Static extents as ints, symbolic ones by their variable's name
        (None for a scalar parameter).
    dtype : str
        apache-tvm dtype (``"float32"``, ``"int32"``, ...).
    align : int
        The ``T.Tensor(align=...)`` promise on the base pointer, in bytes (1 for none).
    is_tensor : bool
        Whether the parameter is a ``T.Tensor`` (else a scalar).
    """

    def __init__(self, name, shape, dtype, align, is_tensor, int32_offsets=False):
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.align = align
        self.is_tensor = is_tensor
        #: whether the kernel computes this tensor's element offsets in int32 (its
        #: run-time extents are int32): it takes at most INT32_ELEMENTS elements
        self.int32_offsets = int32_offsets

    @classmethod
    def of(cls, param):
        """The spec of one PrimFunc parameter (a buffer or a scalar Var)."""
        if tirx.is_buffer_var(param):
            # a symbolic extent (``n = T.int32()``; ``T.Tensor((n, 4), ...)``) is kept
            # by name: any extent fits, the same one wherever the name appears
            shape = tuple(_static_or_name(s) for s in param.shape)
            int32 = not all(d.__class__ is int for d in shape) and all(str(s.ty.dtype) == "int32" for s in param.shape)
            return cls(param.name, shape, param.dtype, int(param.data_alignment), True, int32)
        return cls(param.name, None, str(param.ty.dtype), 1, False)

    @functools.cached_property
    def int_range(self) -> tuple[int, int]:
        """``[lo, hi)`` of an integer scalar parameter's dtype."""
        return _int_range(self.dtype)

    @property
    def scalar_kind(self) -> str:
        """``"bool"``, ``"float"`` or ``"int"``: the Python type a scalar parameter takes."""
        return "bool" if self.dtype == "bool" else "float" if self.dtype.startswith(("float", "bfloat")) else "int"

    # -- the complete check (slow path): builds a message only when it raises ---------------
    def require(self, kernel: str, arg, sizes: dict | None = None) -> None:
        """Raise TypeError/ValueError if ``arg`` does not fit; ``sizes`` collects the
        extents bound to symbolic dimensions across the call's arguments."""
        sizes = {} if sizes is None else sizes
        if not self.is_tensor:
            self._require_scalar(kernel, arg)
            return
        if _is_torch_tensor(arg):
            self._require_torch(kernel, arg, sizes)
        elif hasattr(arg, "shape") and hasattr(arg, "dtype") and hasattr(arg, "device"):
            self._require_common(kernel, tuple(arg.shape), str(arg.dtype), _device_kind(arg.device), sizes)
        else:
            raise TypeError(
                f"{self._where(kernel)}: expected a CUDA tensor of shape {self.shape} and dtype {self.dtype}, "
                f"got {type(arg).__name__}"
            )

    def _where(self, kernel: str) -> str:
        return f"{kernel}: argument {self.name!r}"

    def _require_scalar(self, kernel, arg):
        kind = self.scalar_kind
        accepted = {"bool": (bool,), "int": (numbers.Integral,), "float": (numbers.Real,)}[kind]
        if not isinstance(arg, accepted) or (kind == "int" and isinstance(arg, bool)):
            raise TypeError(
                f"{self._where(kernel)}: expected a Python {kind} for a {self.dtype} scalar, got {type(arg).__name__}"
            )
        if kind == "int":
            lo, hi = self.int_range
            if not lo <= int(arg) < hi:
                raise ValueError(f"{self._where(kernel)}: {int(arg)} does not fit {self.dtype} ([{lo}, {hi - 1}])")

    def bind_shape(self, shape, sizes: dict):
        """Check ``shape`` against the declared one and record symbolic sizes in ``sizes``.

        Returns None when it fits (``sizes`` then holds this argument's
        bindings too); ``(name, size)`` when the symbolic extent ``name`` is
        already bound to another ``size`` (by an earlier argument or
        dimension); ``()`` for a rank or static-extent mismatch; ``("*",
        count)`` for more than :data:`INT32_ELEMENTS` elements where the
        kernel's offsets are int32 (the bounds proofs take that as a fact:
        :mod:`tvm_tirx.tile.analysis.machine_ints`).  ``sizes`` is left unchanged on failure.
        """
        if len(shape) != len(self.shape):
            return ()
        bound = {}
        for want, got in zip(self.shape, shape):
            if want.__class__ is int:
                if want != got:
                    return ()
                continue
            seen = sizes.get(want, bound.get(want))
            if seen is not None and seen != got:
                return (want, seen)
            bound[want] = got
        if self.int32_offsets and math.prod(shape) > INT32_ELEMENTS:
            return ("*", math.prod(shape))
        sizes.update(bound)
        return None

    def _require_shape(self, kernel, shape, sizes):
        problem = self.bind_shape(shape, sizes)
        if problem is None:
            return
        expected = "(" + ", ".join(str(d) for d in self.shape) + ("," if len(self.shape) == 1 else "") + ")"
        if problem and problem[0] == "*":
            raise ValueError(
                f"{self._where(kernel)}: expected at most {INT32_ELEMENTS} elements (the kernel computes its "
                f"offsets in int32), got shape {tuple(shape)} ({problem[1]} elements)"
            )
        if problem:
            raise ValueError(
                f"{self._where(kernel)}: expected shape {expected} with {problem[0]} = {problem[1]} "
                f"(from an earlier dimension), got {tuple(shape)}"
            )
        raise ValueError(f"{self._where(kernel)}: expected shape {expected}, got {tuple(shape)}")

    def _require_common(self, kernel, shape, dtype, device, sizes):
        if dtype != self.dtype:
            raise ValueError(f"{self._where(kernel)}: expected dtype {self.dtype}, got {dtype}")
        self._require_shape(kernel, tuple(shape), sizes)
        if device != "cuda":
            raise ValueError(f"{self._where(kernel)}: expected a CUDA tensor, got one on {device}")

    def _require_torch(self, kernel, t, sizes):
        where = self._where
        if _dtype_name(t.dtype) != self.dtype:
            raise ValueError(f"{where(kernel)}: expected dtype {self.dtype}, got {_dtype_name(t.dtype)}")
        self._require_shape(kernel, tuple(t.shape), sizes)
        expected, stride = [], 1
        for extent in reversed(tuple(t.shape)):
            expected.append(stride)
            stride *= extent
        expected = tuple(reversed(expected))
        strides = tuple(t.stride())
        if any(e != s for e, s, n in zip(expected, strides, tuple(t.shape)) if n != 1):
            raise ValueError(
                f"{where(kernel)}: expected a contiguous row-major tensor (strides {expected}), got strides {strides}"
            )
        if t.data_ptr() % self.align != 0:
            raise ValueError(
                f"{where(kernel)}: the parameter is declared align={self.align} bytes, but the tensor's "
                f"data pointer is {t.data_ptr() % self.align} bytes past such a boundary"
            )
        if t.device.type != "cuda":
            raise ValueError(f"{where(kernel)}: expected a CUDA tensor, got one on {t.device.type}")


# -- the fast path: one function per kernel ---------------------------------------------------
#
# The checks of all parameters are compiled into one Python function (source
# generated from the specs, as ``dataclasses`` does for ``__init__``): one
# call, no loop, each parameter a single ``and`` chain of attribute reads
# compared with values bound at build time.  When a chain is false the
# complete check of that parameter runs: it raises, or accepts what the chain
# does not cover (a tvm tensor, a torch subclass, a float given as an int).


def _tensor_test(i: int, spec: ParamSpec, env: dict) -> str:
    """The fast-path condition of tensor parameter ``i`` (a Python expression)."""
    env[f"D{i}"] = None  # torch dtype, set once torch is imported (_refresh_torch)
    parts = [f"a{i}.__class__ is TENSOR", f"a{i}.dtype is D{i}", f"a{i}.is_cuda is CUDA"]
    if all(d.__class__ is int for d in spec.shape):
        env[f"S{i}"] = spec.shape
        parts.append(f"a{i}.shape == S{i}")
    else:
        env[f"BIND{i}"] = spec.bind_shape
        parts.append(f"BIND{i}(a{i}.shape, sizes) is None")
    parts.append(f"a{i}.is_contiguous()")
    if spec.align > 1:
        parts.append(f"not a{i}.data_ptr() % {int(spec.align)}")
    return " and ".join(parts)


def _scalar_test(i: int, spec: ParamSpec) -> str:
    """The fast-path condition of scalar parameter ``i`` (a Python expression)."""
    kind = spec.scalar_kind
    if kind == "int":
        lo, hi = spec.int_range
        return f"a{i}.__class__ is int and {lo} <= a{i} < {hi}"
    return f"a{i}.__class__ is {'bool' if kind == 'bool' else 'float'}"


def _refresh_torch(env: dict, specs) -> None:
    """Bind torch's Tensor class and each tensor parameter's torch dtype in ``env``."""
    torch = sys.modules.get("torch")
    if torch is None or env["TENSOR"] is not None:
        return
    for i, spec in enumerate(specs):
        if spec.is_tensor:
            dtype = getattr(torch, spec.dtype, None)
            env[f"D{i}"] = dtype if isinstance(dtype, torch.dtype) else None
    env["TENSOR"] = torch.Tensor


def build_checker(specs, kernel: str, *, cuda: bool = True):
    """A function ``check(args)`` that checks one call's arguments, or raises.

    Parameters
    ----------
    specs : list[ParamSpec]
        The kernel's parameters, in order.
    kernel : str
        The kernel's name, for messages.
    cuda : bool
        Whether a torch tensor must be on a CUDA device (``True``).  ``False``
        exists for timing the checks on a machine without a GPU
        (``bench/launch.py --cpu``); a kernel never uses it.

    Returns
    -------
    Callable[[tuple], None]
        ``check(args)`` raises TypeError (wrong number of arguments, wrong
        type) or ValueError (wrong dtype, shape, device, strides, alignment,
        scalar range) naming the parameter, as :meth:`ParamSpec.require` does.
    """
    specs = list(specs)
    env = {"TENSOR": None, "CUDA": bool(cuda), "KERNEL": kernel, "SPECS": specs, "arity_error": arity_error}
    symbolic = any(s.is_tensor and not all(d.__class__ is int for d in s.shape) for s in specs)
    names = ", ".join(f"a{i}" for i in range(len(specs)))
    lines = [
        "def check(args):",
        f"    if len(args) != {len(specs)}:",
        "        raise arity_error(KERNEL, SPECS, args)",
        f"    {names}{',' if len(specs) == 1 else ''} = args" if specs else "    pass",
        "    sizes = {}" if symbolic else "    sizes = None",
    ]
    for i, spec in enumerate(specs):
        test = _tensor_test(i, spec, env) if spec.is_tensor else _scalar_test(i, spec)
        lines += [f"    if not ({test}):", f"        slow({i}, a{i}, sizes)"]

    def slow(i, arg, sizes):
        _refresh_torch(env, specs)
        specs[i].require(kernel, arg, {} if sizes is None else sizes)

    env["slow"] = slow
    _refresh_torch(env, specs)
    exec("\n".join(lines), env)  # pylint: disable=exec-used
    return env["check"]
