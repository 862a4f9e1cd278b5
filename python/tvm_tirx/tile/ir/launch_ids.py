"""The launch ids of a kernel as apache-tvm's IR binds them: ``T.cta_id`` /
``T.thread_id`` scope bindings (``ScopeIdDef``) and, in s_tir schedules,
thread-binding loops (``sch.bind(loop, "threadIdx.x")``)."""

from __future__ import annotations

from tvm import tirx
from tvm.tirx.exec_scope import _SCOPE_BINDING_TO_PARENT_CUR

__all__ = ["CUDA_ID_NAMES", "scope_pairs", "binding", "thread_tag", "thread_binding_ids"]

#: CUDA's name of the ids each ScopeIdDef binding defines (parent, current).
CUDA_ID_NAMES = {("kernel", "cta"): "blockIdx", ("cta", "thread"): "threadIdx", ("cluster", "cta"): "cluster_ctaid"}


def scope_pairs() -> dict:
    """apache-tvm's ScopeBinding enum: ``ScopeIdDef.scope`` value -> ``(parent, current)`` scope names."""
    return dict(_SCOPE_BINDING_TO_PARENT_CUR)


def binding(parent, cur):
    """``ScopeIdDef.scope`` value (apache-tvm's ScopeBinding enum) of ``parent -> cur`` ids."""
    return next(k for k, v in scope_pairs().items() if v == (parent, cur))


def thread_tag(node):
    """``"threadIdx.x"`` ... of a thread-binding ``For`` (an s_tir schedule's
    ``bind``), else None."""
    bound = getattr(node, "thread_binding", None)
    if node.kind != tirx.ForKind.THREAD_BINDING or bound is None:
        return None
    return str(bound.thread_tag)


def thread_binding_ids(ids):
    """Turn the ``threadIdx`` thread-binding loops into the ``block`` launch ids.

    apache-tvm's ``UnifyThreadBinding`` leaves one loop var per tag; the axes
    must start at ``x`` with no gap and have constant extents, or the launch
    stays unknown (a collective call then says it needs one).
    """
    found = ids.pop("thread_bindings", None)
    if not found or "block" in ids:
        return
    axes = [found.get(a) for a in "xyz"]
    n = len([a for a in axes if a is not None])
    if any(a is None for a in axes[:n]) or any(ext is None for _, ext in axes[:n]):
        return
    ids["block"] = (tuple(v for v, _ in axes[:n]), tuple(ext for _, ext in axes[:n]))
