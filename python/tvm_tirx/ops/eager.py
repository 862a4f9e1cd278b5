"""The torch operators' eager fast path: when a call may skip torch's dispatcher, and the
launch plans such a call reuses.

A call of a ``torch.library.custom_op`` from Python goes through torch's dispatcher and
its Python autograd and custom-op layers: on the H200's host that costs more than the
kernel launch itself (tens of microseconds per call).  Each operator here (``linear``,
``matmul``, ``glu_linear``, ``attention``) therefore calls its implementation directly
when nothing needs the dispatcher (:func:`direct`); where only autograd needs to record
the call, it runs under a ``torch.autograd.Function`` holding the op's own autograd
formula (:func:`path`, :class:`FastOp`); otherwise it goes through the registered op, so
``torch.compile``, ``opcheck``, FakeTensor and every other dispatcher feature see the op
exactly as before.

What an implementation needs besides the tensors' data -- the checks, the kernel, its
launcher, the output's shape -- depends only on the call's *signature*
(:func:`signature`: shapes, strides, dtypes, devices and the alignment of the base
pointers, plus the op's non-tensor arguments), so it is computed once per signature and
kept in a :class:`Plans` table.  A plan holds no pointer: a tensor freed and another
allocated at the same address has the same signature only if it has the same shape,
strides, dtype, device and alignment, and then the same plan is right for it.  The
tensor-map (TMA) descriptors are not part of a plan: apache-tvm's host code encodes them
from the tensors of each launch.
"""

from __future__ import annotations

import threading
import types
from typing import Callable

import torch

from .check_mode import collected

__all__ = ["direct", "path", "DISPATCHER", "IMPL", "AUTOGRAD", "typed", "signature", "FastOp", "Plans", "ALIGN"]

#: Bytes of base-pointer alignment a signature records (the kernels' largest rule: TMA).
ALIGN = 16

_Tensor = torch.Tensor
_functorch_active = torch._C._are_functorch_transforms_active  # pylint: disable=protected-access
_dispatch_modes = torch._C._len_torch_dispatch_stack  # pylint: disable=protected-access
_function_modes = torch._C._len_torch_function_stack  # pylint: disable=protected-access
_is_compiling = torch.compiler.is_compiling


#: :func:`path`'s answers: through the registered op (torch's dispatcher), the
#: implementation called directly, or the implementation under a ``torch.autograd.Function``
DISPATCHER, IMPL, AUTOGRAD = "dispatcher", "impl", "autograd"


def path(*tensors) -> str:
    """How a call on ``tensors`` may run: :data:`IMPL`, :data:`AUTOGRAD` or :data:`DISPATCHER`.

    :data:`IMPL` (the implementation, without torch's dispatcher) when every argument is
    ``None`` or a plain ``torch.Tensor`` on a CUDA device (not a subclass: FakeTensor,
    FunctionalTensor, DTensor, ... go through the dispatcher, and so do meta and CPU
    tensors, whose calls the fake implementation or the fallback serves), none needs a
    gradient (grad mode off, or no tensor ``requires_grad``), and no tracing or transform
    is active: not inside ``torch.compile``/``torch.export`` tracing
    (``torch.compiler.is_compiling()``), no ``TorchDispatchMode`` or ``TorchFunctionMode``
    (FakeTensorMode, ``make_fx``, the profiler's and debug modes), no functorch transform
    (``vmap``, ``grad``).  :data:`AUTOGRAD` where all of that holds but a tensor needs a
    gradient: autograd must record the call, which a ``torch.autograd.Function`` does at a
    fraction of the registered op's host cost (:class:`FastOp`).  :data:`DISPATCHER`
    otherwise.  Inside :func:`~.check_mode.check` every call of plain tensors is
    :data:`IMPL`, whatever their device or grad.

    Parameters
    ----------
    *tensors : torch.Tensor | None
        The op's tensor arguments.

    Returns
    -------
    str
        :data:`DISPATCHER` also for any argument that is not a tensor (the dispatcher then
        reports it).
    """
    if _is_compiling():  # first: under torch.compile nothing after it is traced
        return DISPATCHER
    if collected() is not None:  # ops.check: every plain tensor, any device, any grad
        return IMPL if all(t is None or t.__class__ is _Tensor for t in tensors) else DISPATCHER
    if _dispatch_modes() or _function_modes() or _functorch_active():
        return DISPATCHER
    grad, needs = torch.is_grad_enabled(), False
    for t in tensors:
        if t is None:
            continue
        if t.__class__ is not _Tensor or not _on_device(t):
            return DISPATCHER
        needs = needs or (grad and t.requires_grad)
    return AUTOGRAD if needs else IMPL


def direct(*tensors) -> bool:
    """Whether a call on ``tensors`` may run its implementation without torch's dispatcher
    and without autograd recording it: ``path(*tensors) == IMPL`` (:func:`path`)."""
    return path(*tensors) == IMPL


def _on_device(t) -> bool:
    """Whether ``t`` is on a device the fast path serves: CUDA (the tests also make it
    serve CPU tensors, to run the fast path on a machine without a GPU)."""
    return t.is_cuda


def typed(values, types) -> bool:
    """Whether each of ``values`` is ``None`` or has one of the classes its entry of
    ``types`` lists (a registered operator's schema types for its non-tensor arguments):
    a call whose arguments are not is left to the dispatcher, which reports them."""
    for value, classes in zip(values, types):
        if value is not None and value.__class__ not in classes:
            return False
    return True


class FastOp:
    """A registered operator and its implementation, called the cheap way when it may be.

    ``FastOp(op, impl, tensors, types, autograd)(*args)`` is, by :func:`path` of the first
    ``tensors`` arguments (every other argument ``None`` or of its schema's type):
    ``impl(*args)`` for :data:`IMPL`; for :data:`AUTOGRAD`, where ``autograd`` is given,
    ``impl(*args)`` recorded by a ``torch.autograd.Function`` whose ``setup_context`` and
    ``backward`` are the op's own formula; else ``op(*args)`` (torch's dispatcher).  All
    give the same result, gradients and errors: ``op``'s kernel is ``impl`` and its
    autograd formula is ``autograd`` (on the dispatcher's path a wrong argument type is
    reported by the dispatcher, as before).  The Function costs a fraction of the op's
    Python autograd and custom-op layers per call (on a 2-core CPU host, 2026-12-07, a
    trivial op saving its input: about 12 against 37 us for a forward whose input needs a
    gradient).

    Parameters
    ----------
    op : torch._ops.OpOverloadPacket
        The registered operator (``torch.ops.tvm_tirx.attention``).
    impl : Callable
        The function registered as its implementation.
    tensors : int
        How many leading arguments are tensors (``None`` for an optional one).
    types : tuple[tuple[type, ...], ...]
        The classes each remaining argument may have besides ``None``.
    autograd : tuple[Callable, Callable] | None
        ``(backward, setup_context)`` exactly as given to the op's ``register_autograd``;
        ``None``: calls that need a gradient go through ``op``.
    """

    __slots__ = ("op", "impl", "tensors", "types", "function")

    def __init__(self, op, impl: Callable, tensors: int, types: tuple, autograd: tuple | None = None):
        self.op, self.impl, self.tensors, self.types = op, impl, tensors, types
        self.function = None if autograd is None else _function(impl, *autograd)

    def __call__(self, *args):
        n = self.tensors
        if typed(args[n:], self.types):
            way = path(*args[:n])
            if way == IMPL:
                return self.impl(*args)
            if way == AUTOGRAD and self.function is not None:
                return self.function.apply(*args)
        return self.op(*args)


def _function(impl: Callable, backward: Callable, setup_context: Callable) -> type:
    """A ``torch.autograd.Function`` running ``impl`` with an op's autograd formula (the
    ``register_autograd`` form: ``setup_context(ctx, inputs, output)``, ``backward(ctx,
    *grads)``); named after ``impl``.  Its ``forward`` takes ``ctx`` and calls
    ``setup_context`` itself: a Function with its own ``setup_context`` binds every call's
    arguments by ``inspect.signature`` (30 against 8 us per call on a 2-core CPU host)."""
    def forward(ctx, *args):
        output = impl(*args)
        setup_context(ctx, args, output)
        return output

    # types.new_class, not type(): it resolves a base's __mro_entries__ (the docs build mocks torch)
    return types.new_class(f"{impl.__name__.strip('_')}_function", (torch.autograd.Function,), exec_body=lambda ns: (
        ns.update(forward=staticmethod(forward), backward=staticmethod(backward))))


def _tensor_signature(t):
    if t is None:
        return None
    return t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % ALIGN


def signature(*tensors) -> tuple:
    """What a launch plan may depend on in ``tensors``: per tensor its shape, strides
    (elements), dtype, device and base-pointer offset modulo :data:`ALIGN` bytes
    (``None`` stays ``None``).  Two calls of one signature get the same plan."""
    return tuple(map(_tensor_signature, tensors))


class Plans:
    """``{signature: plan}`` for one operator, each plan made once by ``make``.

    Parameters
    ----------
    make : Callable[..., object]
        Called as ``make(*args)`` on a signature's first call (the arguments of that call);
        returns the plan, or raises (then nothing is stored and the next call of that
        signature tries again, so an error is raised every time, not only the first).
    limit : int
        Most plans kept; the table is emptied when it would grow past this (a process
        calling with ever new shapes does not grow without bound).
    """

    def __init__(self, make: Callable, limit: int = 4096):
        self._make = make
        self._plans: dict = {}
        self._limit = limit
        self._lock = threading.Lock()

    def get(self, key, *args):
        """The plan of signature ``key`` (made from ``args`` on its first call).

        Raises
        ------
        Exception
            Whatever ``make(*args)`` raises.
        """
        if collected() is not None:  # ops.check: planned anew, kept nowhere
            return self._make(*args)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._make(*args)
            with self._lock:
                if len(self._plans) >= self._limit:
                    self._plans.clear()
                self._plans[key] = plan
        return plan

    def __len__(self) -> int:
        return len(self._plans)

    def clear(self) -> None:
        """Forget every plan (the compiled kernels are kept)."""
        with self._lock:
            self._plans.clear()
