"""The gated GEMM's weight: :func:`gate_up_weight` and the cache :func:`glu_linear` reads it from.

The gated kernel (``make_gemm(gated=True)``) reads one ``(2 n, k)`` weight whose rows
alternate between eight rows of ``w_gate`` and eight rows of ``w_up``.  That order is an
implementation detail: :func:`~tvm_tirx.ops.glu_linear` takes ``w_gate`` and ``w_up``
themselves and builds the interleaved copy with :func:`interleaved`, which keeps it per
pair of weights for as long as both live and neither is written in place (the tensors'
version counters).  Importing this module imports torch.
"""

from __future__ import annotations

import weakref

import torch

from ..kernels.gemm.config import GLU_ROWS

__all__ = ["gate_up_weight", "interleaved", "clear_interleaved"]


def gate_up_weight(w_gate, w_up):
    """The gated GEMM's weight: ``w_gate`` and ``w_up`` interleaved in groups of eight rows.

    :func:`~tvm_tirx.ops.glu_linear` makes (and caches) this itself; call it to feed a
    kernel of ``make_gemm(gated=True)`` directly.

    Parameters
    ----------
    w_gate, w_up : torch.Tensor
        ``(n, k)`` each, one dtype and device (``nn.Linear`` weights: k innermost);
        ``n`` a multiple of 8 (:data:`~tvm_tirx.kernels.gemm.config.GLU_ROWS`).

    Returns
    -------
    torch.Tensor
        ``(2 n, k)``, contiguous: rows ``16 q .. 16 q + 7`` are ``w_gate[8 q .. 8 q + 7]``,
        rows ``16 q + 8 .. 16 q + 15`` are ``w_up[8 q .. 8 q + 7]``.

    Raises
    ------
    ValueError
        The two are not 2-d of one shape, dtype and device, or ``n`` is not a multiple of 8.
    """
    if w_gate.dim() != 2 or w_gate.shape != w_up.shape or w_gate.dtype != w_up.dtype or w_gate.device != w_up.device:
        raise ValueError(f"gate_up_weight: w_gate and w_up must be 2-d (n, k) of one shape, dtype and device, got "
                         f"{tuple(w_gate.shape)} {w_gate.dtype} {w_gate.device} and {tuple(w_up.shape)} "
                         f"{w_up.dtype} {w_up.device}")
    n, k = w_gate.shape
    if n % GLU_ROWS:
        raise ValueError(f"gate_up_weight: n (rows of w_gate) must be a multiple of {GLU_ROWS}, got {n}: pad both "
                         f"weights with zero rows and slice the output")
    groups = (w_gate.reshape(n // GLU_ROWS, GLU_ROWS, k), w_up.reshape(n // GLU_ROWS, GLU_ROWS, k))
    return torch.stack(groups, dim=1).reshape(2 * n, k).contiguous()


#: (id of each weight's base tensor, each weight's geometry) -> _Entry
_CACHE: dict = {}
#: (id(w_gate), id(w_up)) of a recent call -> (weak refs to both, their _state, the weight):
#: a call with the same two objects, unchanged, skips the geometry of the cache's key
_LAST: dict = {}


class _Entry:
    """One cached interleaved weight: weak references to the two base tensors it was made
    from, their version counters then, and the weight."""

    def __init__(self, anchors, versions, weight):
        self.refs = tuple(weakref.ref(a, _sweep) for a in anchors)
        self.versions = versions
        self.weight = weight

    def matches(self, anchors, versions) -> bool:
        return all(r() is a for r, a in zip(self.refs, anchors)) and self.versions == versions

    def dead(self) -> bool:
        return any(r() is None for r in self.refs)


def _sweep(_ref=None) -> None:
    """Drop the entries whose weights are gone (a weak reference's callback: frees the copy
    when the model is freed)."""
    for key in [key for key, entry in list(_CACHE.items()) if entry.dead()]:
        _CACHE.pop(key, None)


def _anchor(t):
    """The tensor that owns ``t``'s memory: its base if ``t`` is a view (``w[:n]``, ``w.t()``
    make a new view object per call; the base is what the caller keeps)."""
    return t._base if t._base is not None else t  # pylint: disable=protected-access


def _geometry(t) -> tuple:
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype, str(t.device))


def interleaved(w_gate, w_up):
    """:func:`gate_up_weight` of ``(w_gate, w_up)``, made once and reused while it is valid.

    The copy is kept for this pair of weights (the same tensors, or views of the same
    base tensors with the same storage, offset, shape and strides) until either base
    tensor is freed or written in place (``copy_``, an optimizer step, ``load_state_dict``:
    anything that bumps torch's version counter).  Writes through ``w.data`` do not bump
    it (as for autograd); after such a write call :func:`clear_interleaved`.  Inference
    tensors (made under ``torch.inference_mode``) have no version counter and are
    interleaved on every call.

    Parameters
    ----------
    w_gate, w_up : torch.Tensor
        As :func:`gate_up_weight` takes them.

    Returns
    -------
    torch.Tensor
        ``(2 n, k)``, contiguous (the cached tensor itself: do not write to it).

    Raises
    ------
    ValueError
        As :func:`gate_up_weight`.
    """
    pair = (id(w_gate), id(w_up))
    state = _state(w_gate, w_up)
    last = _LAST.get(pair)
    if last is not None and last[0]() is w_gate and last[1]() is w_up and last[2] == state:
        return last[3]  # the same two tensor objects as a recent call, unchanged since
    weight = _interleaved(w_gate, w_up)
    if state is not None:
        forget = lambda _ref, pair=pair: _LAST.pop(pair, None)  # noqa: E731
        _LAST[pair] = (weakref.ref(w_gate, forget), weakref.ref(w_up, forget), state, weight)
    return weight


def _state(w_gate, w_up):
    """What a recent call's result depends on beyond the two objects: their version
    counters, data pointers and shapes (None for inference tensors: no version counter)."""
    if w_gate.is_inference() or w_up.is_inference():
        return None
    return (w_gate._version, w_up._version, w_gate.data_ptr(), w_up.data_ptr(),  # pylint: disable=protected-access
            w_gate.shape, w_up.shape)


def _interleaved(w_gate, w_up):
    """:func:`interleaved` without the recent-call memo: the cache keyed by base tensors."""
    if w_gate.is_inference() or w_up.is_inference():
        return gate_up_weight(w_gate, w_up)
    anchors = (_anchor(w_gate), _anchor(w_up))
    key = (id(anchors[0]), id(anchors[1]), _geometry(w_gate), _geometry(w_up))
    versions = (w_gate._version, w_up._version)  # pylint: disable=protected-access
    entry = _CACHE.get(key)
    if entry is not None and entry.matches(anchors, versions):
        return entry.weight
    weight = gate_up_weight(w_gate, w_up)
    stale = [k for k in _CACHE if k[:2] == key[:2]]  # same tensors, storage replaced (w.data = ...)
    for k in stale:
        _CACHE.pop(k, None)
    _CACHE[key] = _Entry(anchors, versions, weight)
    return weight


def clear_interleaved() -> None:
    """Forget every cached interleaved weight (after writing a weight through ``w.data``)."""
    _CACHE.clear()
    _LAST.clear()
