"""Raise a compiled kernel's dynamic shared memory limit on a device, for run-time sizes.

CUDA lets a kernel launch with at most 48 KiB of dynamic shared memory unless
the function's ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` is raised
first, up to the device's opt-in maximum less the kernel's static shared
memory (CUDA C++ Programming Guide, "Shared Memory" of compute capability 7.x
and later; 227 KiB on sm_90).

apache-tvm 0.27's CUDA launcher (``CUDAWrappedFunc::operator()``,
``src/backend/cuda/runtime/cuda_module.cc``) raises the attribute once per
device: at the first launch on that device it fetches the ``CUfunction`` and,
if that launch's size is 48 KiB or more, sets the attribute to that size
("Assumption: dyn_shmem_size doesn't change across different invocations").
The host code of a built library looks the launcher up once and keeps it
(a ``.tvm_func.<kernel>`` global filled by ``TVMFFIEnvModLookupFromImports``),
so a kernel whose size is an expression of its arguments fails with
``CUDA_ERROR_INVALID_VALUE`` as soon as a launch asks for more than its first
launch did (or more than 48 KiB after a first launch below it).  A static
size never changes, which is why it works.

:func:`raise_dynamic_smem_limit` sets the attribute itself, to the largest
value the device allows for the kernel.  The ``CUfunction`` is private to
apache-tvm's CUDA module; the one public way to it is to capture one launch
of the kernel into a CUDA graph (nothing runs): the graph's kernel node holds
the function (``cuGraphKernelNodeGetParams``), whose attribute is then set with
``cuFuncSetAttribute`` through the CUDA driver API (``ctypes``, ``libcuda``).
That capture also makes apache-tvm's own first launch on the device happen
(if it had not), so its once-only ``cuFuncSetAttribute`` can no longer lower
the value.  :class:`DynamicSmemLimit` does this once per kernel and device, for
:class:`tvm_tirx.Kernel`; a program that calls an exported library directly
calls :func:`raise_dynamic_smem_limit` once per device before its launches.
"""

from __future__ import annotations

import ctypes
import sys
import threading

__all__ = ["DEFAULT_LIMIT", "DynamicSmemLimit", "raise_dynamic_smem_limit", "device_index"]

#: Dynamic shared memory bytes a launch may use without raising the function's
#: attribute (CUDA C++ Programming Guide, "Shared Memory": 48 KB).
DEFAULT_LIMIT = 48 * 1024

# CUDA driver API enumerators (cuda.h, CUDA 12/13)
_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
_CU_STREAM_NON_BLOCKING = 1
_CU_STREAM_CAPTURE_MODE_RELAXED = 2
_CU_GRAPH_NODE_TYPE_KERNEL = 0


class _KernelNodeParams(ctypes.Structure):
    """``CUDA_KERNEL_NODE_PARAMS_v2`` (cuda.h)."""

    _fields_ = [
        ("func", ctypes.c_void_p),
        ("gridDimX", ctypes.c_uint),
        ("gridDimY", ctypes.c_uint),
        ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint),
        ("blockDimY", ctypes.c_uint),
        ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("kernelParams", ctypes.c_void_p),
        ("extra", ctypes.c_void_p),
        ("kern", ctypes.c_void_p),
        ("ctx", ctypes.c_void_p),
    ]


_DRIVER: list = []


def _driver():
    """``libcuda`` through ctypes (loaded once)."""
    if not _DRIVER:
        try:
            _DRIVER.append(ctypes.CDLL("libcuda.so.1"))
        except OSError as err:
            raise RuntimeError(f"tvm_tirx: the CUDA driver library (libcuda.so.1) cannot be loaded: {err}") from err
    return _DRIVER[0]


def _call(name: str, *args) -> None:
    """Call driver function ``name``; raise RuntimeError naming it and the CUDA error."""
    lib = _driver()
    result = getattr(lib, name)(*args)
    if result != 0:
        text = ctypes.c_char_p()
        lib.cuGetErrorName(result, ctypes.byref(text))
        raise RuntimeError(f"tvm_tirx: {name} failed with {(text.value or b'?').decode()} ({result})")


def device_index(args) -> int:
    """The CUDA device ordinal of a launch on ``args``: that of the first argument
    with a ``device`` (a torch or tvm tensor); 0 when none has one (apache-tvm's
    host code sets the device from the first tensor argument as well)."""
    for arg in args:
        device = getattr(arg, "device", None)
        if device is not None:
            index = getattr(device, "index", None)
            return int(index) if index is not None else 0
    return 0


def _attribute(func, attribute: int) -> int:
    value = ctypes.c_int()
    _call("cuFuncGetAttribute", ctypes.byref(value), attribute, ctypes.c_void_p(func))
    return value.value


def _captured_functions(launcher, args, device: int) -> list:
    """The ``CUfunction`` of every kernel that ``launcher(*args)`` launches, from a
    CUDA graph capture of the call on a private stream (the kernels do not run)."""
    import tvm_ffi  # pylint: disable=import-outside-toplevel

    stream = ctypes.c_void_p()
    _call("cuStreamCreate", ctypes.byref(stream), _CU_STREAM_NON_BLOCKING)
    graph = ctypes.c_void_p()
    try:
        _call("cuStreamBeginCapture_v2", stream, _CU_STREAM_CAPTURE_MODE_RELAXED)
        try:
            # tvm tensors launch on tvm-ffi's stream of the device; torch tensors on torch's
            with tvm_ffi.use_raw_stream(tvm_ffi.device("cuda", device), stream.value), _torch_stream(args, stream.value, device):
                launcher(*args)
        except Exception as err:
            _driver().cuStreamEndCapture(stream, ctypes.byref(graph))  # ends the capture; its error is this one
            raise RuntimeError(
                "tvm_tirx: the launch captured to find the kernel failed (it must be a launch the "
                "kernel can already take on this device: any size before its first launch there, "
                f"else one within the current limit, e.g. 48 KiB): {str(err).splitlines()[0] if str(err) else type(err).__name__}"
            ) from err
        _call("cuStreamEndCapture", stream, ctypes.byref(graph))
        return _kernel_functions(graph)
    finally:
        if graph.value:
            _call("cuGraphDestroy", graph)
        _call("cuStreamDestroy_v2", stream)


def _torch_stream(args, stream: int, device: int):
    """A context making the raw ``stream`` torch's current stream when ``args`` hold
    torch tensors (tvm-ffi takes a torch tensor's stream from torch); else a no-op."""
    import contextlib  # pylint: disable=import-outside-toplevel

    torch = sys.modules.get("torch")
    if torch is None or not any(isinstance(a, torch.Tensor) for a in args):
        return contextlib.nullcontext()
    return torch.cuda.stream(torch.cuda.ExternalStream(stream, device=torch.device("cuda", device)))


def _kernel_functions(graph) -> list:
    count = ctypes.c_size_t()
    _call("cuGraphGetNodes", graph, None, ctypes.byref(count))
    nodes = (ctypes.c_void_p * count.value)()
    _call("cuGraphGetNodes", graph, nodes, ctypes.byref(count))
    funcs = []
    for node in nodes[: count.value]:
        kind = ctypes.c_int()
        _call("cuGraphNodeGetType", ctypes.c_void_p(node), ctypes.byref(kind))
        if kind.value != _CU_GRAPH_NODE_TYPE_KERNEL:
            continue
        params = _KernelNodeParams()
        _call("cuGraphKernelNodeGetParams_v2", ctypes.c_void_p(node), ctypes.byref(params))
        func = params.func
        if not func and params.kern:
            out = ctypes.c_void_p()
            _call("cuKernelGetFunction", ctypes.byref(out), ctypes.c_void_p(params.kern))
            func = out.value
        if func:
            funcs.append(func)
    return funcs


def raise_dynamic_smem_limit(launcher, *args) -> int:
    """Let ``launcher``'s kernels take the device's largest dynamic shared memory size.

    For each CUDA kernel that ``launcher(*args)`` launches, set
    ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` on the device of
    ``args`` to the device's ``CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN``
    less the kernel's static shared memory (``CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES``),
    both read from the driver.  The kernels are found by capturing one call
    into a CUDA graph that is then discarded: nothing runs and no memory is
    touched.  Call it once per device, before launches of a run-time size
    above 48 KiB (see the module's documentation for why apache-tvm 0.27's
    launcher does not).  Its arguments must make a launch the kernel can
    already take there: the CUDA driver checks the captured launch's size
    (seen on the H200: a 64 KiB capture after a 1 KiB launch fails).  Before
    the kernel's first launch on the device any size does (apache-tvm's
    launcher raises the limit to it during the capture); after it, use a
    size of at most 48 KiB, or at most the first launch's size.

    Parameters
    ----------
    launcher : callable
        The kernel's host function: ``Kernel.executable[name]`` or, for an
        exported library, ``tvm.runtime.load_module(path)[name]``.
    *args
        Arguments of one valid call (the tensors decide the device; any sizes
        the call accepts will do).

    Returns
    -------
    int
        The new limit in bytes, the smallest over the kernels launched.

    Raises
    ------
    RuntimeError
        No CUDA driver, the captured call failed (the message gives the
        launcher's error; the original is chained), the call launched no
        kernel, or a driver call failed (the message names it and the CUDA
        error).
    """
    device = device_index(args)
    cu_device = ctypes.c_int()
    _call("cuInit", 0)
    _call("cuDeviceGet", ctypes.byref(cu_device), device)
    context = ctypes.c_void_p()
    _call("cuDevicePrimaryCtxRetain", ctypes.byref(context), cu_device)
    try:
        _call("cuCtxPushCurrent_v2", context)
        try:
            return _raise_in_context(launcher, args, device, cu_device)
        finally:
            _call("cuCtxPopCurrent_v2", ctypes.byref(ctypes.c_void_p()))
    finally:
        _call("cuDevicePrimaryCtxRelease_v2", cu_device)


def _raise_in_context(launcher, args, device: int, cu_device) -> int:
    funcs = _captured_functions(launcher, args, device)
    if not funcs:
        raise RuntimeError("tvm_tirx: raise_dynamic_smem_limit: the call launched no CUDA kernel")
    optin = ctypes.c_int()
    _call("cuDeviceGetAttribute", ctypes.byref(optin), _CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, cu_device)
    limits = []
    for func in funcs:
        limit = optin.value - _attribute(func, _CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        _call("cuFuncSetAttribute", ctypes.c_void_p(func), _CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, limit)
        limits.append(_attribute(func, _CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES))
    return min(limits)


class DynamicSmemLimit:
    """The dynamic shared memory limit of one kernel, raised once per device.

    :class:`tvm_tirx.Kernel` holds one for a kernel whose
    ``dynamic_smem_bytes`` is a run-time expression and calls :meth:`before`
    ahead of each launch: the first launch on a device raises the limit
    (:func:`raise_dynamic_smem_limit`, about a millisecond); later ones cost a
    dictionary lookup.
    """

    def __init__(self, name: str):
        self.name = name
        self._limits: dict = {}  # device ordinal -> bytes a launch may take
        self._errors: dict = {}  # device ordinal -> why raising failed
        self._lock = threading.Lock()

    def before(self, launcher, args, nbytes: int) -> None:
        """Make sure a launch of ``nbytes`` of dynamic shared memory on ``args``'s device may run.

        The first call per device raises the limit.  If that fails, launches of
        at most 48 KiB still go ahead (they need no raise) and a larger one
        tries again.

        Raises
        ------
        RuntimeError
            ``nbytes`` is over 48 KiB and the limit could not be raised (the
            message says why); or ``nbytes`` is over the raised limit.
        """
        device = device_index(args)
        limit = self._limits.get(device)
        if limit is not None and nbytes <= limit:
            return
        with self._lock:
            limit = self._limits.get(device)
            if limit is None or (nbytes > limit and device in self._errors):
                limit = self._raise(launcher, args, device)
        if nbytes > limit:
            why = self._errors.get(device)
            raise RuntimeError(
                f"{self.name}: {nbytes} bytes of dynamic shared memory on cuda:{device}, over the "
                f"{limit} bytes this kernel may use there"
                + (f" (raising CUDA's 48 KiB default failed: {why})" if why else "")
            )

    def _raise(self, launcher, args, device) -> int:
        try:
            limit = raise_dynamic_smem_limit(launcher, *args)
        except Exception as err:  # pylint: disable=broad-except
            self._errors[device] = str(err)
            limit = DEFAULT_LIMIT
        else:
            self._errors.pop(device, None)
        self._limits[device] = limit
        return limit
