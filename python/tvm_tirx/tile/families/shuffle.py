"""``shfl.sync``: each lane reads a register of another lane of its warp.

``T.cuda.tile.apply("shfl.sync.bfly.b32", partner, value, b=1)`` (the PTX text
as a string; apache-tvm spells the same instruction ``T.ptx["shfl_sync.bfly.b32"]``,
its namespace reading the first word of an opcode as the instruction family).

PTX ISA
    9.7.10.6 (``shfl.sync``, "Data Movement and Conversion Instructions", in
    the numbering of apache-tvm 0.27's table; 9.7.8.6 in older editions).
Forms
    ``shfl.sync.{up,down,bfly,idx}.b32`` in both shapes, ``d, a, b, c, membermask``
    and ``d|p, a, b, c, membermask`` (the operands choose: a call with three
    register operands has the ``p`` result).  The non-sync ``shfl`` is not in
    apache-tvm's table (removed for sm_70 and later).
Operand roles and atoms
    ``dst`` (``d``), [``in_range`` (``p``: 1 where the source lane was in
    range, else 0, a ``uint32`` register)], ``src`` (``a``): per-thread
    registers, atom ``(1,)``; dtypes of 32 bits (``float32``, ``int32``,
    ``uint32``); repeat axes shuffle many registers, one instruction each, with
    the same ``b``/``c``/mask.  A typed scalar may stand for ``src``.
    Parameters (uint32/int32 expressions or integer constants): ``b``, the
    source lane (``idx``), the lane offset (``up``/``down``) or the lane mask
    XORed with the lane id (``bfly``), 0..31; ``c`` (optional), the clamp
    value in bits 0-4 and the segment mask in bits 8-12 (default: the whole
    warp, ``0`` for ``up`` and ``0x1f`` for the others; a sub-warp of ``w``
    lanes is ``((32 - w) << 8) | clamp``); ``membermask`` (optional), the lanes
    taking part.
Legality
    Per thread (no group axes at ``scope="thread"``; a warp's lanes are the
    group at ``scope="warp"``), but warp-synchronous: the member mask rules of
    ``_member_mask`` (a constant mask is exactly the lanes of each warp that
    reach the call under its guards; a run-time mask has one value over the
    warp; without ``membermask=`` the mask is those lanes; ``pred=`` has one
    value over the warp).  With a constant ``b``, ``c`` and mask, every lane of
    the mask reads a lane of the mask (the ISA: a value read from a lane that
    does not take part is undefined); the source lane of each lane is the
    ISA's: ``j = lane - b`` (up), ``lane + b`` (down), ``lane ^ b`` (bfly), the
    segment's lane ``b`` (idx), and the lane's own when ``j`` is past the clamp.
    Uniform result: ``idx`` from a lane ``b`` uniform over the warp, ``c =
    0x1f`` and every lane taking part writes one value in every lane (a
    broadcast may then guard a warp collective).
    Row reductions over the lanes that share a row of a fragment are
    ``T.cuda.tile.reduce_lanes`` (:mod:`tvm_tirx.script.lane_reduce`):
    butterfly shuffles and the combining instruction, each a checked tile call.
Raw calls
    ``T.ptx["shfl_sync.bfly.b32"](d, a, b, c, membermask)`` (and the ``d|p``
    shape) is checked by the same rules, its ``b``, ``c`` and ``membermask``
    operands read as the keywords (:mod:`tvm_tirx.tile.rules.raw_calls`), and left
    as written; ``d`` (and ``p``) must be elements of ``T.alloc_local`` tensors.
Lowering emits
    One ``shfl.sync`` per repeat coordinate per thread, the member mask a
    constant (the default's value) or the given expression.
Architectures
    sm_75, every target of ptxas 13.0 (the ISA: ``shfl.sync`` from sm_30).
    Measured with ptxas 13.0 (``tools/probe_arch_floors.py``, ``arch_floors.json``).
"""

from __future__ import annotations

from .. import Contract, Instruction, TileError, register_family, register_role
from ._member_mask import (
    MEMBERMASK,
    constant,
    lanes_text,
    mask_of,
    member_mask_rule,
    full_mask,
    raw_spelling,
    u32,
    u32_param,
)

__all__ = ["contract", "source_lane", "DEFAULT_C"]

#: ``c`` of a shuffle over the whole warp, per mode (CUDA's ``__shfl_*_sync`` with
#: width 32): no segments, clamp at lane 0 going up and at lane 31 otherwise.
DEFAULT_C = {"up": 0x0, "down": 0x1F, "bfly": 0x1F, "idx": 0x1F}
_B_DOC = {
    "up": "the lane offset: lane i reads lane i - b (0..31)",
    "down": "the lane offset: lane i reads lane i + b (0..31)",
    "bfly": "the lane mask: lane i reads lane i ^ b (0..31)",
    "idx": "the source lane within the segment (0..31)",
}


def source_lane(mode: str, lane: int, b: int, c: int) -> int:
    """The lane whose ``a`` lane ``lane`` reads (PTX ISA 9.7.10.6, "Semantics"):
    ``j`` of the mode within the lane's segment, or ``lane`` itself when ``j``
    lies past the clamp (``p`` is then 0)."""
    bval, cval, segmask = b & 0x1F, c & 0x1F, (c >> 8) & 0x1F
    max_lane = (lane & segmask) | (cval & ~segmask)
    min_lane = lane & segmask
    if mode == "up":
        j, in_range = lane - bval, lane - bval >= max_lane
    elif mode == "down":
        j, in_range = lane + bval, lane + bval <= max_lane
    elif mode == "bfly":
        j = lane ^ bval
        in_range = j <= max_lane
    else:
        j = min_lane | (bval & ~segmask & 0x1F)
        in_range = j <= max_lane
    return j if in_range else lane


def _source_rule(mode: str):
    """With constant ``b``, ``c`` and member mask: every lane of the mask reads a lane of the mask."""

    def rule(call, mask):
        b = constant(call.params["b"])
        c = constant(call.params.get("c", DEFAULT_C[mode]))
        if mask is None or b is None or c is None:
            return None
        for lane in range(32):
            j = source_lane(mode, lane, b, c)
            if mask >> lane & 1 and not mask >> j & 1:
                return TileError(
                    call.opcode,
                    "source lane outside the member mask",
                    operand="parameter b",
                    expected=f"every lane of the mask reading a lane of the mask ({lanes_text(mask)}): "
                    "the value read from a lane that does not take part is undefined",
                    found=f"lane {lane} reads lane {j} (b={b}, c={c:#x})",
                )
        return None

    return rule


def _uniform_result(mode: str):
    """``idx`` from a warp-uniform lane, ``c = 0x1f``, every lane taking part: one value per warp."""

    def result(call, index):  # pylint: disable=unused-argument
        if mode != "idx" or call.pred is not None or not full_mask(call):
            return None
        if constant(call.params.get("c", DEFAULT_C[mode])) != 0x1F:
            return None
        lane = call.params.get("b")
        return "warp" if lane is not None and call.facts.uniformity.why_not(lane, "warp") is None else None

    return result


@register_family(
    entries=("shfl_sync", "shfl_sync_p"),
    isa={"shfl.sync": "9.7.10.6"},
    # T.ptx["shfl_sync.bfly.b32"](d, a, b, c, membermask): the operands the form derives, by keyword
    raw=raw_spelling(("shfl_sync", "shfl_sync_p"), {"b": "b", "c": "c"}),
)
def contract(instr: Instruction) -> Contract:
    """The tile contract of a shfl.sync form (every form is one)."""
    mode = instr.modifiers["mode"]
    ops = {op.name: op for op in instr.operands}
    roles = [register_role("dst", ops["d"])]
    if "p" in ops:
        roles.append(register_role("in_range", ops["p"]))
    roles.append(register_role("src", ops["a"]))
    return Contract(
        instruction=instr,
        roles=tuple(roles),
        options={
            "b": u32_param(_B_DOC[mode], bits=0x1F),
            "c": u32_param("clamp (bits 0-4) and segment mask (bits 8-12); default: the whole warp", 0x1F1F, False),
            "membermask": MEMBERMASK,
        },
        derived={
            "b": lambda call: u32(call.params["b"]),
            "c": lambda call: u32(call.params.get("c", DEFAULT_C[mode])),
            "membermask": mask_of,
        },
        kernel_check=member_mask_rule(_source_rule(mode)),
        uniform_result=_uniform_result(mode),
    )
