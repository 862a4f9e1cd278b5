"""The member mask of the warp-synchronous instructions, and its rules.

Used by the families of ``shfl.sync``, ``vote.sync``, ``match.sync``,
``redux.sync`` and ``elect.sync`` (not a family itself: the leading ``_`` keeps
it out of the registry's module scan).

PTX ISA 9.7.10.6 (``shfl.sync``), 9.7.15.10 (``vote.sync``), 9.7.15.11
(``match.sync``), 9.7.15.13 (``redux.sync``), 9.7.15.15 (``elect.sync``), in
the numbering apache-tvm 0.27's table cites: the operand ``membermask`` names,
one bit per lane id, the lanes that execute the instruction together.  Every
lane in the mask must execute the same instruction (a lane named but absent
leaves the others waiting, or reading garbage), and the behaviour is undefined
for an executing lane that the mask does not name.  Since sm_70 lanes need not
be converged before: the instruction waits for the lanes of the mask.

So the mask must be exactly the lanes that reach the call.  The rules:

* a constant mask equals, in every warp that reaches the call, the lanes of
  that warp that reach it (:func:`~tvm_tirx.tile.reaching`: the guards around
  the call, evaluated lane by lane); it may also name lanes a CTA's last,
  partial warp does not have (PTX waits for the non-exited lanes of the mask);
* a mask computed at run time (``vote.sync.ballot`` of a condition, a kernel
  argument) has one value over the warp (``facts.uniformity``): which lanes
  reach the call then cannot be checked, and is the author's;
* without ``membermask=`` the mask is the constant of the lanes that reach the
  call, which must then be the same lanes in every warp;
* ``pred=`` has one value over the warp (a lane whose predicate is false does
  not execute the instruction).

The families that use it check raw ``T.ptx[...]`` calls of their
instructions by the same rules, the ``membermask`` operand read as
``membermask=`` (:func:`raw_spelling`).
"""

from __future__ import annotations

from tvm import tirx

from .. import Param, RawSpelling, TileError, int_or_none, reaching

__all__ = [
    "FULL", "MEMBERMASK", "check_u32", "u32", "constant", "lanes_text", "mask_of", "member_mask_rule",
    "full_mask", "warp_uniform_result", "u32_param", "raw_spelling",
]  # fmt: skip

#: Every lane of a warp.
FULL = 0xFFFFFFFF
#: Lanes per warp (PTX ISA 2.2).
WARP = 32


def check_u32(value, bits: int = FULL):
    """A 32-bit operand given as a parameter: an integer constant that sets no bit
    outside ``bits`` (``0xffffffff`` or ``T.uint32(...)``), or a uint32/int32 expression."""
    if isinstance(value, bool):
        return f"{value} (a bool; expected a 32-bit integer)"
    number = value if isinstance(value, int) else int_or_none(value) if isinstance(value, tirx.IntImm) else None
    if number is not None:
        number &= FULL
        return None if number & ~bits == 0 else f"{number:#x} (the instruction reads the bits {bits:#x} only)"
    dtype = getattr(getattr(value, "ty", None), "dtype", None)
    if dtype in ("uint32", "int32"):
        return None
    return f"{dtype or type(value).__name__} {value!r} (expected a uint32/int32 expression or an integer constant)"


def u32_param(doc: str, bits: int = FULL, required: bool = True) -> Param:
    """A family parameter bound to a ``.u32`` PTX operand (checked by :func:`check_u32`)."""
    return Param(doc, (lambda value: check_u32(value, bits)), required)


#: ``membermask=``: the lanes that execute the instruction together.
MEMBERMASK = u32_param(
    "the lanes that execute the instruction together, one bit per lane id (default: the lanes that reach the call)",
    required=False,
)


def raw_spelling(entries, params=None) -> RawSpelling:
    """The :class:`~tvm_tirx.tile.RawSpelling` of a warp-synchronous family: raw
    calls of ``entries`` are checked by its rules, their ``membermask`` operand
    read as ``membermask=`` (and each PTX operand of ``params`` as its keyword)."""
    return RawSpelling(entries, {"membermask": "membermask", **(params or {})})


def constant(value) -> int | None:
    """``value`` (a Python int, an ``IntImm`` or an expression) as an unsigned 32-bit constant, or None."""
    number = value if isinstance(value, int) else int_or_none(value)
    return None if number is None else number & FULL


def u32(value):
    """``value`` as a uint32 PrimExpr (a constant wraps to 32 bits, an int32 is cast)."""
    number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if number is None and isinstance(value, tirx.IntImm):
        number = int(value.value)
    if number is not None:
        return tirx.const(number & FULL, "uint32")
    return value if value.ty.dtype == "uint32" else tirx.Cast("uint32", value)


def lanes_text(mask: int) -> str:
    """``"lanes 0-15, 20"``: the lanes a mask names, as ranges."""
    lanes = [lane for lane in range(WARP) if mask >> lane & 1]
    if not lanes:
        return "no lane"
    runs, start = [], lanes[0]
    for prev, lane in zip(lanes, lanes[1:] + [None]):
        if lane != prev + 1:
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            start = lane
    return ("lane " if len(lanes) == 1 else "lanes ") + ", ".join(runs)


def reaching_masks(call) -> dict:
    """``{(cluster rank, warp): mask}`` of the lanes of each warp that reach ``call``.

    Raises
    ------
    TileError
        A guard is neither over thread ids nor uniform over the warp.
    """
    if call.facts.launch is None:  # a kernel without thread ids runs one thread
        return {(0, 0): 1}
    out = {}
    for t, c in reaching(call, "warp"):
        out[(c, t // WARP)] = out.get((c, t // WARP), 0) | 1 << (t % WARP)
    return out


def _launched(call, warp: int) -> int:
    """The lanes of ``warp`` that the launch has (all 32 but in a CTA's last, partial warp)."""
    threads = call.facts.launch.threads if call.facts.launch is not None else 1
    left = threads - warp * WARP
    return FULL if left >= WARP else (1 << max(left, 0)) - 1


def _default_mask(call):
    """The mask of the lanes that reach ``call``, or the TileError when they differ between warps."""
    masks = reaching_masks(call)
    values = sorted(set(masks.values()))
    if len(values) <= 1:
        return values[0] if values else FULL
    shown = "; ".join(f"warp {w}: {lanes_text(m)}" for (_, w), m in list(masks.items())[:4])
    return TileError(
        call.opcode,
        "lanes that reach the call differ between warps",
        operand="parameter membermask",
        expected="the same lanes in every warp (the default member mask is one constant), "
        "or membermask= a value computed in each warp (vote.sync.ballot)",
        found=shown,
    )


def mask_of(call):
    """The member mask of ``call`` (a lowering :class:`~tvm_tirx.tile.CallView`): its
    ``membermask=`` as a uint32 expression, else the constant of the lanes that reach it.

    Raises
    ------
    TileError
        No ``membermask=`` and the lanes that reach the call differ between warps.
    """
    if "membermask" in call.params:
        return u32(call.params["membermask"])
    mask = _default_mask(call)
    if isinstance(mask, TileError):
        raise mask
    return tirx.const(mask, "uint32")


def full_mask(call) -> bool:
    """Whether every lane of each warp that reaches ``call`` executes it: all the
    lanes the launch has reach it, and the member mask names them all."""
    try:
        masks = reaching_masks(call)
    except TileError:  # a guard the lanes cannot be told from: not provably full
        return False
    if any(lanes != _launched(call, warp) for (_, warp), lanes in masks.items()):
        return False
    if "membermask" not in call.params:
        return True
    mask = constant(call.facts.expand_scalars(call.params["membermask"]))
    return mask is not None and all(mask & _launched(call, w) == _launched(call, w) for _, w in masks)


def _rule_pred(call):
    """``pred=`` has one value over the warp."""
    if call.pred is None:
        return None
    why = call.facts.uniformity.why_not(call.pred, "warp")
    if why is None:
        return None
    return TileError(
        call.opcode,
        "pred not uniform over the warp",
        operand="pred",
        expected="a predicate with one value for all lanes of each warp (a lane whose predicate is false "
        "does not execute the instruction, yet the member mask names it)",
        found=f"pred={call.facts.display(call.pred)}: {why}",
    )


def _rule_mask(call):
    """The member mask is the lanes that reach the call (module docstring); returns
    ``(error, mask)``: the constant mask (None when it is computed at run time)."""
    if "membermask" not in call.params:
        mask = _default_mask(call)
        return (mask, None) if isinstance(mask, TileError) else (None, mask)
    given = call.params["membermask"]
    mask = constant(call.facts.expand_scalars(given))
    if mask is None:
        why = call.facts.uniformity.why_not(given, "warp")
        if why is None:
            return None, None
        return TileError(
            call.opcode,
            "member mask not uniform over the warp",
            operand="parameter membermask",
            expected="a constant, or a value with one value over the warp (every lane of the mask passes the same mask)",
            found=f"membermask={call.facts.display(given)}: {why}",
        ), None
    for (_, warp), lanes in reaching_masks(call).items():
        # lanes past the CTA's last thread never run: a mask may name them (PTX
        # waits for the non-exited lanes of the mask only)
        if lanes != mask & _launched(call, warp):
            return TileError(
                call.opcode,
                "member mask differs from the lanes that reach the call",
                operand="parameter membermask",
                expected=f"{lanes:#010x} ({lanes_text(lanes)} of warp {warp} reach it; every lane of the "
                "mask must execute the instruction, and no other lane may)",
                found=f"{mask:#010x} ({lanes_text(mask)})",
            ), None
    return None, mask


def member_mask_rule(extra=None):
    """The ``kernel_check`` of a warp-synchronous form: ``pred=`` uniform over the
    warp, the member mask rules of the module docstring, then
    ``extra(call, mask) -> TileError | None`` with the constant mask (None when
    it is computed at run time)."""

    def check(call):
        err = _rule_pred(call)
        if err is not None:
            return err
        err, mask = _rule_mask(call)
        if err is None and extra is not None:
            err = extra(call, mask)
        return err

    return check


def warp_uniform_result(written=None):
    """A ``uniform_result`` hook: ``"warp"`` for the registers of the operands at
    ``written`` (indices; None: every written operand) when every lane of the
    warp executes the call (a full member mask, no ``pred=``), else None (per lane)."""

    def result(call, index):
        if written is not None and index not in written:
            return None
        return "warp" if call.pred is None and full_mask(call) else None

    return result
