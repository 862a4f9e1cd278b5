"""Kernel rule of the wgmma family: a ring stage is not released while a wgmma still reads it.

``wgmma.mma_async`` reads its shared-memory operands asynchronously, until a
``wgmma.wait_group`` retires its group (PTX ISA 9.7.15.7).  A consumer that
arrives on the stage's "empty" mbarrier before that lets the producer refill
the stage under the running wgmma, which then multiplies the next tile's
data: wrong results, silently.

Stages are matched through the ring's first axis: an operand viewing stage
``i`` of a shared tensor of shape ``(stages, ...)`` and an
``mbarrier.arrive`` on element ``i`` of a barrier tensor of shape
``(stages, ...)`` (the same ``stages``).  From each wgmma call the rule
follows program order like :mod:`._wgmma_groups` (within the same loop
iteration: an arrive of the next iteration names another stage) and refuses
an arrive whose stage index is provably the operand's while the group is
pending.  An index it cannot show equal (``(k - 1) % stages`` against
``k % stages``: the stage before, as a GEMM that keeps one batch in flight
releases it) is left alone.
"""

from __future__ import annotations

import math

from tvm import tirx

from .. import TileError
from ..kernel.order import element_of
from ..analysis.prover import proves
from ..ir.views import dtype_bytes, int_or_none
from ._wgmma_groups import Scan, follow, is_mma, paths

__all__ = ["stages_released_in_flight"]


def _stage(facts, buf):
    """``(stages, index)``: the ring stage view ``buf`` starts in (an expression), or
    None (not a view of a root of two or more static dims, or an unknown offset)."""
    found, start = element_of(facts, buf), None
    if found is not None:
        start = element_of(facts, found[0])  # the root's own first byte (a pool may hold it)
    if start is None:
        return None
    shape = [int_or_none(e) for e in found[0].shape]
    if len(shape) < 2 or None in shape or shape[0] < 2:
        return None
    stage_bytes = math.prod(shape[1:]) * dtype_bytes(found[0].dtype)
    return shape[0], tirx.floordiv(found[1] - start[1], stage_bytes)


def _arrives(instr) -> bool:
    """Whether PTX form ``instr`` arrives on an mbarrier (``mbarrier.arrive``,
    ``mbarrier.arrive_drop``; PTX ISA 9.7.15.16.12), read from its table modifiers."""
    return instr.mnemonic == "mbarrier" and instr.modifiers.get("action") in ("arrive", "arrive_drop")


class _ReleaseScan(Scan):  # pylint: disable=too-few-public-methods
    """The forward walk from one wgmma call, stopping at an arrive on one of its stages."""

    def __init__(self, facts, stages, origin, known):
        super().__init__(facts, set(), origin)
        self.stages, self.known = stages, known  # [(stages, index)] of the call's shared operands; its facts

    def touches(self, leaf) -> bool:
        call = self.facts.calls.view(leaf) if isinstance(leaf, tirx.Evaluate) else None
        if call is None or call.raw or not _arrives(call.contract.instruction):
            return False
        if not call.operands or not tirx.is_buffer_var(call.operands[0]):
            return False
        barrier = _stage(self.facts, call.operands[0])
        if barrier is None:
            return False
        return any(
            n == barrier[0] and proves(self.facts.analyzer, i == barrier[1], self.known) for n, i in self.stages
        )


def stages_released_in_flight(view):
    """No arrive on a ring stage's barrier while a wgmma reading that stage is pending (see the module)."""
    facts, errors = view.facts, []
    for key, call in view.calls.items():
        site = facts.sites.get(key)
        if not is_mma(call) or site is None or site.stmt is None:
            continue
        shared = [op.value for op in call.operands[1:3] if op.kind == "tensor" and "shared" in op.value.scope()]
        stages = [s for s in (_stage(facts, buf) for buf in shared) if s is not None]
        if not stages:
            continue
        bad = follow(_ReleaseScan(facts, stages, site.stmt, facts.known(site.facts)), paths(view.body, site.stmt), wrap=False)
        if bad is not None:
            where = next((x.location for x in facts.sites.values() if x.stmt is not None and x.stmt.same_as(bad)), None)
            errors.append(TileError(
                call.opcode, "ring stage released while the wgmma may still read it", operand=call.label(1),
                expected="wgmma.commit_group then a wgmma.wait_group retiring its group before the arrive that "
                "lets the producer refill the stage (PTX ISA 9.7.15.7)",
                found=f"an arrive on the stage's barrier at {where or 'a later statement'} with the group still pending",
            ).at(site.location))
    return errors
