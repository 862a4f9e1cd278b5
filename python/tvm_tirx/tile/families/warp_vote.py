"""``vote.sync``, ``match.sync`` and ``activemask``: what the lanes of a warp hold in common.

``T.cuda.tile.apply("vote.sync.ballot.b32", ballot, value > 0)``,
``T.cuda.tile.apply("match.any.sync.b32", peers, key)``,
``T.cuda.tile.apply("activemask.b32", active)`` (apache-tvm spells the first
``T.ptx["vote_sync.ballot.b32"]``).

PTX ISA
    9.7.15.10 (``vote.sync``), 9.7.15.11 (``match.sync``), 9.7.15.12
    (``activemask``), in the numbering of apache-tvm 0.27's table.
Forms
    ``vote.sync.{all,any,uni}.pred d, a, membermask``,
    ``vote.sync.ballot.b32 d, a, membermask``;
    ``match.any.sync.{b32,b64} d, a, membermask``,
    ``match.all.sync.{b32,b64} d[|p], a, membermask`` (a call with the
    ``all_equal`` register has the ``p`` result); ``activemask.b32 d``.  The
    non-sync ``vote`` and the negated ``!a`` are not in apache-tvm's table.
Operand roles and atoms
    Per-thread registers, atom ``(1,)``.  ``vote``: ``dst`` (``.pred``: a
    ``uint32`` 1/0; ``.ballot``: a 32-bit lane mask) and ``src``, the
    predicate: a ``uint32``/``int32`` register (true when not zero) or a
    ``bool``/``uint32``/``int32`` scalar expression (``value > 0``).
    ``match``: ``dst`` (the lane mask of the lanes whose ``src`` equals this
    lane's, ``.any``; all of them or 0, ``.all``: ``uint32``/``int32``),
    [``all_equal`` (``p``: 1 when every lane of the mask holds the same
    value)], ``src`` (32 or 64 bits).  ``activemask``: ``dst`` only.
    Parameter ``membermask`` (optional: the lanes that reach the call; not on
    ``activemask``).
Legality
    ``vote`` and ``match`` are warp-synchronous: the member mask rules of
    ``_member_mask`` (a constant mask is exactly the lanes of each warp that
    reach the call; a run-time mask has one value over the warp; ``pred=``
    has one value over the warp).  Uniform results when the whole warp takes
    part (a full mask, no ``pred=``): every ``vote`` result and both results
    of ``match.all``; ``match.any`` differs between lanes.  ``activemask``
    reads which lanes are executing now (they need not be converged): its
    result is per lane and is no member mask the rules can check.
Lowering emits
    One instruction per repeat coordinate per thread.
Architectures
    sm_75, every target of ptxas 13.0 (the ISA: ``vote.sync`` and ``activemask``
    from sm_30, ``match.sync`` from sm_70).  Measured with ptxas 13.0
    (``tools/probe_arch_floors.py``, ``arch_floors.json``).
"""

from __future__ import annotations

from .. import Contract, Instruction, register_family, register_role
from ._member_mask import MEMBERMASK, mask_of, member_mask_rule, raw_spelling, warp_uniform_result

__all__ = ["contract"]

_ENTRIES = ("vote_sync", "vote_sync_ballot", "match_any_sync", "match_all_sync", "match_all_sync_p", "activemask")


def _roles(instr: Instruction) -> tuple:
    ops = {op.name: op for op in instr.operands}
    roles = [register_role("dst", ops["d"])]
    if "p" in ops:
        roles.append(register_role("all_equal", ops["p"]))
    if "a" in ops:
        roles.append(register_role("src", ops["a"]))
    return tuple(roles)


@register_family(
    entries=_ENTRIES,
    isa={"vote.sync": "9.7.15.10", "match": "9.7.15.11", "activemask": "9.7.15.12"},
    raw=raw_spelling(_ENTRIES),  # T.ptx["vote_sync.ballot.b32"](d, a, membermask)
)
def contract(instr: Instruction) -> Contract:
    """The tile contract of a vote.sync, match.sync or activemask form (every form is one)."""
    roles = _roles(instr)
    if instr.entry_name == "activemask":
        return Contract(instruction=instr, roles=roles)
    # every lane of the mask gets the same answer, but match.any's lane mask of equal values
    written = None if instr.entry_name != "match_any_sync" else ()
    return Contract(
        instruction=instr,
        roles=roles,
        options={"membermask": MEMBERMASK},
        derived={"membermask": mask_of},
        kernel_check=member_mask_rule(),
        uniform_result=warp_uniform_result(written),
    )
