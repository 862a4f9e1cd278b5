"""``elect.sync``: the lanes of a member mask elect one leader.

``T.cuda.tile.apply("elect.sync", leader, elected)`` (apache-tvm spells it
``T.ptx["elect_sync"]``): ``leader`` receives the elected lane's id in every
lane taking part, ``elected`` is 1 in that lane and 0 in the others -- the
lane that then issues a TMA copy or arrives on a barrier for its warp.

PTX ISA
    9.7.15.15 (``elect.sync``, "Parallel Synchronization and Communication
    Instructions", in the numbering of apache-tvm 0.27's table).
Forms
    ``elect.sync d|p, membermask`` (the one form: ptxas requires the
    predicate result; ``_`` for ``d`` is not offered).
Operand roles and atoms
    ``leader`` (``d``: a ``uint32``/``int32`` register, the elected lane id)
    and ``elected`` (``p``: a ``uint32`` register, 1 in the elected lane,
    else 0), per-thread registers, atom ``(1,)``.  Parameter ``membermask``
    (optional: the lanes that reach the call).
Legality
    Per thread, warp-synchronous: the member mask rules of ``_member_mask``
    (a constant mask is exactly the lanes of each warp that reach the call;
    a run-time mask has one value over the warp; ``pred=`` has one value
    over the warp).  Uniform result: ``leader`` holds one value in every lane
    when the whole warp takes part (a full mask, no ``pred=``); ``elected``
    never does.
Lowering emits
    One ``elect.sync`` per repeat coordinate per thread (a repeat elects again).
Architectures
    sm_90, and every target from it (measured with ptxas 13.0:
    ``tools/probe_arch_floors.py``, ``arch_floors.json``).
"""

from __future__ import annotations

from .. import Contract, Instruction, register_family, register_role
from ._member_mask import MEMBERMASK, mask_of, member_mask_rule, raw_spelling, warp_uniform_result

__all__ = ["contract"]


@register_family(entries=("elect_sync",), isa={"elect.sync": "9.7.15.15"}, raw=raw_spelling(("elect_sync",)))
def contract(instr: Instruction) -> Contract:
    """The tile contract of elect.sync."""
    ops = {op.name: op for op in instr.operands}
    return Contract(
        instruction=instr,
        roles=(register_role("leader", ops["d"]), register_role("elected", ops["p"])),
        options={"membermask": MEMBERMASK},
        derived={"membermask": mask_of},
        kernel_check=member_mask_rule(),
        uniform_result=warp_uniform_result(written=(0,)),
    )
