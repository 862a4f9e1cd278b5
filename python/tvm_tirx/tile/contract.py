"""The operand contract of one instruction form, as data.

A family module (``families/*.py``) turns an :class:`~.instruction.Instruction`
into a :class:`Contract`: which call operand binds which PTX operand, whether it
is a register tensor or a memory tensor, its atom shape and accepted dtypes.
Lowering and the checks read only this; they never branch on a mnemonic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .instruction import Instruction, PtxOperand

__all__ = ["OperandRole", "Contract", "bits_of_ptx_type", "register_role", "memory_role"]


@dataclass(frozen=True)
class OperandRole:
    """What one ``T.cuda.tile.apply`` operand must be.

    Attributes
    ----------
    role : str
        Name used in error messages (``"dst"``, ``"src"``).
    ptx : PtxOperand
        The PTX operand it binds.
    kind : str
        ``"register"`` (an ``alloc_local`` tensor, or a scalar expression for a
        single-register read) or ``"memory"`` (a global/shared/local tensor view).
    atom : tuple[int, ...]
        Trailing shape one native instruction covers, in elements of the
        operand's dtype (= registers for register operands).
    dtypes : tuple[str, ...]
        Element dtypes accepted; all have the PTX type's bit width.
    writes : bool
        Whether the instruction writes this operand.
    scopes : tuple[str, ...]
        Buffer storage scopes accepted (``("local",)`` for registers,
        ``("global",)``, ``("shared", "shared.dyn")`` ... for memory).
    """

    role: str
    ptx: PtxOperand
    kind: str
    atom: tuple
    dtypes: tuple
    writes: bool
    scopes: tuple
    #: Which of the contract's repeat axes this operand carries (None: all of
    #: them, in order).  mma's A carries (M, K) of (M, N, K).
    repeat_axes: tuple | None = None
    #: Warp-collective operands: ``lane -> [atom coordinate, ...]``, the
    #: coordinates whose registers lane passes (register roles, PTX order) or
    #: whose address it passes (memory roles, one coordinate).  ``lane`` may
    #: be an int or an int32 expression.
    lane_coords: object = None

    @property
    def lanes(self) -> int:
        """Native registers one atom of this operand occupies."""
        return self.ptx.lanes


@dataclass(frozen=True)
class Contract:
    """The operand contract of one instruction form.

    Attributes
    ----------
    instruction : Instruction
        The resolved PTX form.
    roles : tuple[OperandRole, ...]
        Tensor/scalar operands of the call, in call order.
    params : dict[str, PtxOperand]
        Keyword parameters of the call that bind PTX operands (``cache_policy``).
    collective : bool
        Warp-collective form: no lane group axis at ``scope="warp"``.
    min_arch : str | None
        Oldest ``sm_XY`` whose ptxas accepts the form, when it is newer than
        sm_90 (the family states the ISA fact and its section).
    """

    instruction: Instruction
    roles: tuple
    params: dict = field(default_factory=dict)
    collective: bool = False
    min_arch: str | None = None
    #: Number of repeat axes when operands carry different subsets of them
    #: (``OperandRole.repeat_axes``); None: every operand carries all of its own.
    repeat_rank: int | None = None
    #: PTX operands the family fills itself: ``name -> fn(operands) -> value``
    #: (cp.async's ``cp_size`` immediate, from the atom's bytes).
    derived: dict = field(default_factory=dict)
    #: None: ``pred`` guards the instruction (``@p``).  Otherwise
    #: ``(operand, after)``: ``pred`` becomes PTX operand ``operand`` (value
    #: ``derived[operand](operands, pred)``), placed right after operand
    #: ``after`` -- the longer syntax line of the same instruction (cp.async's
    #: ``src-size``: a false predicate copies zero bytes and zero-fills).
    pred_operand: tuple | None = None
    #: Extra parse-time rule: ``fn(contract, operands) -> TileError | None``.
    check: object = None

    @property
    def opcode(self) -> str:
        """The canonical PTX text."""
        return self.instruction.opcode

    def ptx_order(self):
        """Yield ``("role", index)``, ``("param", name)``, ``("derived", name)`` or
        ``("pred", name)`` per PTX operand, in PTX order."""
        by_name = {r.ptx.name: i for i, r in enumerate(self.roles)}
        params = {p.name: k for k, p in self.params.items()}
        for op in self.instruction.operands:
            if op.name in by_name:
                yield "role", by_name[op.name]
            elif op.name in self.derived:
                yield "derived", op.name
            else:
                yield "param", params[op.name]
            if self.pred_operand is not None and op.name == self.pred_operand[1]:
                yield "pred", self.pred_operand[0]


def bits_of_ptx_type(token: str) -> int:
    """Bit width of a PTX type token (``"b32"`` -> 32, ``"f16x2"`` -> 32), per apache-tvm's table."""
    from tvm.backend.cuda.ptx.table import PTX_TYPE_DTYPES  # pylint: disable=import-outside-toplevel
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel

    return DataType(PTX_TYPE_DTYPES[token][0]).bits


def same_width_dtypes(token: str, accepted=None) -> tuple:
    """Dtypes of exactly the width of PTX type ``token`` (PTX ISA 5.2: a ``.bN`` type
    accepts any fundamental type of N bits; a concrete type only its own)."""
    from tvm.backend.cuda.ptx.table import PTX_TYPE_DTYPES  # pylint: disable=import-outside-toplevel

    own = PTX_TYPE_DTYPES[token]
    if accepted is None:
        return tuple(own)
    # An 8-bit integer result lives in a wider register (PTX ISA 5.2.2: the
    # narrowest register is 16 bits); the table lists the carriers it takes.
    return tuple(d for d in accepted if d in own) or tuple(accepted)


def register_role(role: str, op: PtxOperand) -> OperandRole:
    """A register-tensor role binding PTX operand ``op``: atom ``(op.lanes,)``."""
    return OperandRole(
        role=role,
        ptx=op,
        kind="register",
        atom=(op.lanes,),
        dtypes=same_width_dtypes(op.ptx_type, op.dtypes),
        writes=op.writes,
        scopes=("local",),
    )


_SPACE_SCOPES = {
    "global": ("global",),
    "shared": ("shared", "shared.dyn"),
    "shared::cta": ("shared", "shared.dyn"),
    "local": ("local",),
}


def memory_role(role: str, op: PtxOperand, data: PtxOperand, writes: bool) -> OperandRole:
    """A memory-tensor role for address operand ``op`` moving register operand ``data``.

    The atom is ``(data.lanes,)`` elements of ``data``'s PTX type: the values
    one native load/store touches.
    """
    return OperandRole(
        role=role,
        ptx=op,
        kind="memory",
        atom=(data.lanes,),
        dtypes=same_width_dtypes(data.ptx_type),
        writes=writes,
        scopes=_SPACE_SCOPES.get(op.space, ()),
    )


def arch_number(arch: str) -> int:
    """``"sm_90a"`` -> 90, ``"sm_100"`` -> 100 (the SM version, suffix dropped)."""
    digits = "".join(ch for ch in arch.split("_", 1)[-1] if ch.isdigit())
    return int(digits) if digits else 0
