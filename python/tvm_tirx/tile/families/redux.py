"""``redux.sync``: reduce one 32-bit value over the lanes of a member mask.

``T.cuda.tile.apply("redux.sync.add.u32", total, count)`` (apache-tvm spells
it ``T.ptx["redux_sync.add.u32"]``): every lane taking part receives the sum,
minimum, maximum, and, or, xor of the lanes' values.

PTX ISA
    9.7.15.13 (``redux.sync``, in the numbering of apache-tvm 0.27's table).
Forms
    ``redux.sync.{add,min,max}.{u32,s32}``, ``redux.sync.{and,or,xor}.b32``
    and ``redux.sync.{min,max}[.abs][.NaN].f32``.
Operand roles and atoms
    ``dst`` and ``src`` (``d``, ``a``): per-thread registers, atom ``(1,)``,
    of the instruction's type (``uint32`` for ``.u32``, ``int32`` for
    ``.s32``, ``uint32``/``int32`` for ``.b32``, ``float32`` for ``.f32``); a
    typed scalar may stand for ``src``.  Parameter ``membermask`` (optional:
    the lanes that reach the call).
Legality
    Warp-synchronous: the member mask rules of ``_member_mask`` (a constant
    mask is exactly the lanes of each warp that reach the call; a run-time
    mask has one value over the warp; ``pred=`` has one value over the warp).
    Uniform result: every lane taking part gets the same value, so ``dst`` is
    uniform over the warp when the whole warp takes part (a full mask, no
    ``pred=``).
Lowering emits
    One ``redux.sync`` per repeat coordinate per thread.
Architectures
    The integer forms: sm_80.  The ``.f32`` forms: sm_100f, sm_100a, sm_103f
    and sm_103a only (ptxas: "Instruction 'redux.f32' not supported on .target
    'sm_90a'", and on sm_100, sm_103, sm_110f/a, sm_120f/a, sm_121f/a;
    apache-tvm's table certifies them at sm_100a).  Measured with ptxas 13.0
    (``tools/probe_arch_floors.py``, ``arch_floors.json``).
"""

from __future__ import annotations

from .. import Contract, Instruction, register_family, register_role
from ._member_mask import MEMBERMASK, mask_of, member_mask_rule, raw_spelling, warp_uniform_result

__all__ = ["contract"]


_ENTRIES = ("redux_sync", "redux_sync_bitwise", "redux_sync_f32")


@register_family(entries=_ENTRIES, isa={"redux.sync": "9.7.15.13"}, raw=raw_spelling(_ENTRIES))
def contract(instr: Instruction) -> Contract:
    """The tile contract of a redux.sync form (every form is one)."""
    ops = {op.name: op for op in instr.operands}
    return Contract(
        instruction=instr,
        roles=(register_role("dst", ops["d"]), register_role("src", ops["a"])),
        options={"membermask": MEMBERMASK},
        derived={"membermask": mask_of},
        kernel_check=member_mask_rule(),
        uniform_result=warp_uniform_result(),
    )
