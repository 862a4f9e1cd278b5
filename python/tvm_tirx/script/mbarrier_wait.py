"""``T.cuda.mbarrier_wait_phase``: wait until a phase of an mbarrier completes.

``mbarrier.try_wait.parity`` polls once (the tile form returns the result
in a register); the common loop around it is apache-tvm's
``T.cuda.mbarrier_wait`` intrinsic (``mbarrier.try_wait.parity.acquire.cta``
in a branch loop, inline PTX) and its cluster-acquire twin.  This helper
checks the barrier view as the ``mbarrier`` tile family does and calls them.
"""

from __future__ import annotations

import tvm
from tvm.tirx.script.builder import ir as _ir

from ..errors import TileError
from ..tile.ir.registry import candidates
from ..tile.ir.views import int_or_none

__all__ = ["mbarrier_wait_phase", "WAIT_OPCODES"]

#: The instruction each acquire scope loops on (PTX ISA 9.2, 9.7.15.16, mbarrier.try_wait).
WAIT_OPCODES = {
    "cta": "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64",
    "cluster": "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64",
}


def _bar_error(opcode, bar):
    """Why ``bar`` is not one mbarrier of this CTA, or None (the mbarrier family's
    ``bar`` role: a ``uint64`` shared view of shape ``(1,)``)."""
    if not tvm.tirx.is_buffer_var(bar):
        return TileError(opcode, "barrier is not a tensor view", operand="bar (operand 1)",
                         expected="a uint64 shared view such as bars.sub[s, :]", found=type(bar).__name__)  # fmt: skip
    role = next(r for r in candidates(opcode)[0].roles if r.role == "bar")
    shape = tuple(int_or_none(s) for s in bar.shape)
    found = None
    if bar.dtype not in role.dtypes or bar.scope() not in role.scopes:
        found = f"a {bar.dtype} view in {bar.scope()!r} memory"
    elif shape != (1,):
        found = f"shape {shape}"
    elif int(bar.data_alignment) % role.align:
        found = f"a tensor declared with align={int(bar.data_alignment)}"
    if found is None:
        return None
    return TileError(
        opcode,
        "not one mbarrier",
        operand="bar (operand 1)",
        expected=f"a uint64 view of shape (1,) in {' / '.join(role.scopes)} memory, {role.align}-byte aligned",
        found=found,
    )


def mbarrier_wait_phase(bar, phase, *, scope: str = "cta"):
    """Spin until the phase of parity ``phase`` of mbarrier ``bar`` has completed.

    ``T.cuda.mbarrier_wait_phase(full.sub[s, :], phase)`` is the loop
    ``while not try_wait.parity(bar, phase): pass`` with acquire semantics,
    emitted as apache-tvm's ``T.cuda.mbarrier_wait`` (``scope="cta"``) or
    ``T.cuda.mbarrier_wait_acquire_cluster`` (``scope="cluster"``: the
    barrier's arrivals come from other CTAs of the cluster, whose writes the
    waiter must see).  Every thread that calls it waits; nothing else is
    inserted (PTX ISA 9.2, 9.7.15.16, ``mbarrier.try_wait``).

    Parameters
    ----------
    bar : buffer view
        One mbarrier of this CTA: a ``uint64`` view of shape ``(1,)`` in
        ``shared`` / ``shared.dyn`` memory of a tensor aligned to 8 bytes.
    phase : int | PrimExpr
        The parity (0 or 1) of the phase to wait for: 0 for the first phase
        after ``init``, then alternating.
    scope : str
        ``"cta"`` or ``"cluster"``: the acquire scope.

    Returns
    -------
    PrimExpr
        The void call (an expression statement in TVMScript).

    Raises
    ------
    TileError
        ``bar`` is not one such barrier, or ``scope`` is neither name.
    """
    if scope not in WAIT_OPCODES:
        raise TileError(WAIT_OPCODES["cta"], "unknown wait scope", expected=" or ".join(map(repr, WAIT_OPCODES)), found=repr(scope))
    err = _bar_error(WAIT_OPCODES[scope], bar)
    if err:
        raise err
    wait = _ir.cuda.mbarrier_wait if scope == "cta" else _ir.cuda.mbarrier_wait_acquire_cluster
    return wait(bar.ptr_to([0]), phase)
