"""The operand contract of one instruction form, as data.

A family module (``families/*.py``) turns a :class:`~.ptx_table.Instruction`
into a :class:`Contract`: which call operand binds which PTX operand, its kind,
atom shape, accepted dtypes, alignment and address form, which threads issue
the instruction together (:class:`Collective`), and the hooks for what the
family owns (derived operands, predicate placement, parameters, host set-up).
Every default fits ``ld``/``st``; the shared modules read only this data and
never branch on a mnemonic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from .hooks import Bind, ContractCheck, Derived, HostSetup, KernelCheck, LaneCoords, ParamCheck, UniformResult
from .ptx_table import Instruction, PtxOperand
from .ptx_types import register_dtypes, same_width_dtypes

if TYPE_CHECKING:
    from .call_view import CallView

__all__ = [
    "Collective",
    "THREAD",
    "WARP",
    "WARPGROUP",
    "KINDS",
    "OperandRole",
    "Param",
    "Contract",
    "register_role",
    "memory_role",
    "LOCAL_WINDOW",
    "replace",
]


@dataclass(frozen=True)
class Collective:
    """The threads that issue one instruction together.

    ``width`` threads with consecutive linear thread ids, the first a multiple
    of ``width`` (PTX ``.sync.aligned``: all of them execute the same
    instruction, PTX ISA 9.7.14.5 for warps, 9.7.15 for warpgroups).  The
    collective is part of the atom: a call's group axes count collectives, not
    threads, and a guard must keep each collective whole.

    Attributes
    ----------
    width : int
        Threads per collective: 1 (a thread alone), 32 (a warp), 128 (a warpgroup).
    name : str
        Its name in messages and docs (``"warp"``).
    member : str
        What one of its threads is called (``"lane"``, ``"thread"``).
    position_axes : tuple[str, ...]
        Layout thread axes (``tvm.tirx.layout.Axis`` names) that give a
        thread's position inside the collective; a register operand of a
        collective form must place its values on one of them.
    """

    width: int = 1
    name: str = "thread"
    member: str = "thread"
    position_axes: tuple = ()

    def position(self, t):
        """Position ``0 .. width-1`` of linear thread ``t`` (int or int32 expression)."""
        return t % self.width

    def first(self, t: int) -> int:
        """Linear id of the first thread of ``t``'s collective."""
        return t - t % self.width


#: One thread issues the instruction (every non-collective form).
THREAD = Collective()
#: The 32 lanes of a warp (``ldmatrix``, ``stmatrix``, ``mma.sync``; PTX ISA 9.7.14.5).
WARP = Collective(32, "warp", "lane", ("laneid", "tx", "tid_in_wg"))
#: The 128 threads of a warpgroup (``wgmma``; PTX ISA 9.7.15).
WARPGROUP = Collective(128, "warpgroup", "thread", ("tid_in_wg", "tx"))

#: Operand kinds.  ``register``: an ``alloc_local`` tensor (or a scalar for a
#: one-register read).  ``memory``: a global/shared/local tensor view whose
#: atom address the role's ``address`` form gives.  ``descriptor``: a 64-bit
#: matrix descriptor value (wgmma), ``tensor_map``: a ``CUtensorMap`` (TMA);
#: both pass one value per instruction, which the kind's emitter builds (an
#: :class:`~..rules.emit.OperandKind` of a family's ``Family.kinds``).
KINDS = ("register", "memory", "descriptor", "tensor_map")


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
        One of :data:`KINDS`.
    atom : tuple[int | None, ...]
        Trailing shape one native instruction covers, in elements of the
        operand's dtype (= registers for register operands); ``None``: any
        extent, read from the operand (cp.async's chunk).
    dtypes : tuple[str, ...]
        Element dtypes accepted; all have the PTX type's bit width.
    writes : bool
        Whether the instruction writes this operand.
    scopes : tuple[str, ...]
        Buffer storage scopes accepted (``("local",)`` for registers,
        ``("global",)``, ``("shared", "shared.dyn")`` ... for memory).
    repeat_axes : tuple[int, ...] | None
        Which of the call's repeat axes this operand carries (None: all of
        them, in order).  mma's A carries (M, K) of (M, N, K).  An operand that
        declares them may also carry none (extent 1 on each).
    lane_coords : callable | None
        Collective forms: ``position -> [atom coordinate, ...]``, the
        coordinates whose registers the thread at ``position`` of the
        collective passes (register roles, PTX order) or whose address it
        passes (memory roles, one coordinate).  ``position`` may be an int or
        an int32 expression.
    align : int | None
        Memory roles: bytes each thread's atom address must be aligned to.
        None: the byte size of the atom's contiguous last axis (PTX ISA 5.4.6,
        vector accesses are naturally aligned).  A bulk copy sets 16, an mbarrier 8.
    address : str
        Memory roles: how the address operand is formed from the view, a name
        of :func:`..rules.emit.address_forms` (``"generic"``: ``ptr_to``; a family's
        ``Family.address_forms`` give others, such as the ``.local`` window address).
    pred_skips : bool
        Whether a false ``pred`` leaves this operand untouched, so the bounds
        rule holds only where the predicate is true.  cp.async's destination
        is still written (zero-filled) and keeps the rule unconditionally.
    keyword : str | None
        None: the operand is passed by position.  Otherwise the call passes it
        as the keyword parameter of this name (a bulk copy's or a TMA's
        ``mbar=``); it is checked and emitted like any other operand.  Keyword
        roles come after the positional ones in :attr:`Contract.roles`.
    image : bool
        Memory roles: the atom is an image one instruction moves as a whole
        (a TMA box) rather than a vector: only its first element's address is
        passed and must be aligned (``align``), and its elements need not be
        contiguous (the family checks the atom's layout); the bounds rule
        covers every element.
    run_time_extents : bool
        The operand's extents may be run-time values: its shape sets no repeat
        or atom (a TMA's global tensor, whose map the host encodes from the
        call's tensor; the family checks what it needs of the extents).
    async_proxy : bool
        Shared-memory roles: the instruction accesses the operand through the
        async proxy (a TMA image, a bulk copy's run, a wgmma matrix), not the
        generic proxy of ``ld``/``st`` (PTX ISA 8.6, "Proxies"): a generic write
        it reads must be made visible with ``fence.proxy.async`` first (the
        kernel rules of :mod:`..kernel.kernel_rules` pair them).
    """

    role: str
    ptx: PtxOperand
    kind: str
    atom: tuple
    dtypes: tuple
    writes: bool
    scopes: tuple
    repeat_axes: tuple | None = None
    lane_coords: LaneCoords | None = None
    align: int | None = None
    address: str = "generic"
    pred_skips: bool = True
    keyword: str | None = None
    image: bool = False
    run_time_extents: bool = False
    async_proxy: bool = False

    @property
    def lanes(self) -> int:
        """Native registers one atom of this operand occupies."""
        return self.ptx.lanes


@dataclass(frozen=True)
class Param:
    """A keyword parameter a family owns that binds no PTX operand of its own
    (a future ``count=``, ``tx=``, ``box=``): it reaches derived operands and
    the host set-up hook through :class:`CallView` ``params``.

    Attributes
    ----------
    doc : str
        One line for the reference and for messages (``"bytes the barrier expects"``).
    check : callable | None
        ``fn(value) -> str | None``: why ``value`` is not acceptable, or None.
        Runs when the call is parsed.
    required : bool
        Whether a call must pass it.
    """

    doc: str = ""
    check: ParamCheck | None = None
    required: bool = True


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
    options : dict[str, Param]
        Keyword parameters the family owns that bind no PTX operand.
    collective : Collective
        Which threads issue one instruction together (default: one thread).
    min_arch : str | None
        Oldest ``sm_XY[a|f]`` whose ptxas accepts the form: the registry sets
        it from the measured floors (:mod:`.arch_floors`) for every form.
    archs : tuple[str, ...]
        Non-empty: the only targets the form exists on, suffix included (an
        arch-specific feature such as sm_90a's ``wgmma``, which neither
        ``sm_90`` nor ``sm_100a`` has): set by the family, or from the
        measured floors when ptxas accepts the form for some targets only.
    repeat_rank : int | None
        Number of repeat axes when operands carry different subsets of them
        (``OperandRole.repeat_axes``); None: that of the first tensor operand.
    derived : dict[str, callable]
        PTX operands the family fills itself: ``name -> fn(CallView) -> PrimExpr``
        (cp.async's ``cp_size`` immediate, from the atom's bytes), or a list of
        them for an operand of several registers (a TMA's coordinates); the
        CallView's ``repeat`` is the instruction's repeat coordinate.
    pred_operand : tuple[str, str] | None
        None: ``pred`` guards the instruction (``@p``).  Otherwise
        ``(operand, after)``: ``pred`` becomes PTX operand ``operand`` (value
        ``derived[operand](call)``), placed right after operand ``after``
        (cp.async's ``src-size``: a false predicate copies zero bytes).
    check : callable | None
        Extra parse-time rule: ``fn(CallView) -> TileError | None`` (the
        CallView's ``facts`` is None, its ``contract`` this form).
    bind : callable | None
        ``fn(CallView) -> Contract | TileError | None``: the
        contract of one call given its keyword parameters, for rules and role
        data that depend on them (a TMA's ``swizzle=`` fixes the shared image's
        layout and alignment).  Returns a refined copy, the TileError the call
        breaks, or None (unchanged).  Runs when the call is parsed
        (``CallView.facts`` None) and again when it is lowered.
    kernel_check : callable | None
        Rule on one call and the kernel it is lowered in:
        ``fn(CallView) -> TileError | None``.  Runs once per call when it is
        lowered, after the target-arch rule passed.  The CallView holds the
        call's operands, ``pred``, keyword ``params``, ``contract``, ``scope``,
        ``group`` and ``site`` (guards, facts; :func:`..analysis.threads.reaching` gives
        the threads that reach the call); its ``facts``
        (:class:`~..kernel.kernel_facts.KernelFacts`) gives the kernel's facts:
        ``facts.launch`` (:class:`~.scope.LaunchFacts`: thread/block/cluster
        shape; None when the kernel defines no thread ids), ``facts.arch``
        (the target's ``sm_XY``, or None) and ``facts.entry_attrs`` (the
        attributes of ``T.device_entry``: launch bounds, register caps).
        E.g. a form addressing other CTAs needs a cluster launch; setmaxnreg
        needs a register cap at the kernel's entry.
    host_setup : callable | None
        ``fn(CallView, stmt) -> Stmt``: wraps the kernel's device entry
        ``stmt`` (``T.device_entry``) in host-side statements the form needs
        (a TMA tensor map's encoding); runs once per call when it is lowered.
    error_priority : int
        When no form of an opcode fits the operands, the error of the form
        with the highest priority is reported (ties: table order).  A family
        ranks the form a user most likely meant (``mov``'s scalar form).
    completes_tx : callable | None
        ``fn(CallView) -> int | None``: the bytes the call completes on the
        mbarrier it names by ``mbar=`` (``.mbarrier::complete_tx::bytes``), or
        None when they are not known where the call is (a multicast lands
        bytes a peer CTA sends too); the mbarrier family pairs them with
        ``expect_tx``.
    uniform_result : callable | None
        ``fn(CallView, index) -> str | None``: the widest scope (``"warp"``,
        ...) over which the registers the call writes in operand ``index``
        hold one value, or None (per thread, the default).  ``shfl.sync.idx``
        from a uniform source lane with a full member mask returns ``"warp"``;
        ``elect.sync`` says so of its lane id, not of its per-lane predicate.
        The CallView holds the call's decoded operands (views and scalars, not
        classified), ``pred``, ``params``, ``scope``, ``site`` (the guards:
        :func:`..analysis.threads.reaching`) and ``facts`` (``facts.uniformity`` judges
        a parameter); read by :mod:`..analysis.uniformity`, for the operands the form
        writes.
    register_function : bool
        The registers the form writes are a function of the operands it reads
        and nothing else (no memory, no other thread, no clock): ``mov``, ``cvt``
        and the arithmetic.  A value computed so from uniform sources under a
        uniform predicate is uniform (:mod:`..analysis.uniform_sources`).
    """

    instruction: Instruction
    roles: tuple
    params: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    collective: Collective = THREAD
    min_arch: str | None = None
    archs: tuple = ()
    repeat_rank: int | None = None
    derived: dict[str, Derived | list[Derived]] = field(default_factory=dict)
    pred_operand: tuple | None = None
    check: ContractCheck | None = None
    bind: Bind | None = None
    kernel_check: KernelCheck | None = None
    host_setup: HostSetup | None = None
    error_priority: int = 0
    completes_tx: Callable[[CallView], int | None] | None = None
    uniform_result: UniformResult | None = None
    register_function: bool = False

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


def register_role(role: str, op: PtxOperand, **changes) -> OperandRole:
    """A register-tensor role binding PTX operand ``op``: atom ``(op.lanes,)``;
    ``changes`` override any field (``atom=``, ``lane_coords=`` ...)."""
    base = OperandRole(
        role=role,
        ptx=op,
        kind="register",
        atom=(op.lanes,),
        dtypes=register_dtypes(op),
        writes=op.writes,
        scopes=("local",),
    )
    return replace(base, **changes) if changes else base


#: The CUDA function that turns the generic address of a ``.local`` element into its
#: ``.local`` window address (PTX ISA 6.4.1.1: a ``.local`` address is an offset in the
#: thread's window): the ld/st family's address form emits it, and the raw-call reader
#: (:mod:`..rules.raw_tile`) takes it for a raw call's ``.local`` address.
LOCAL_WINDOW = "__cvta_generic_to_local"

#: Buffer storage scopes of each PTX state space.
SPACE_SCOPES = {
    "global": ("global",),
    "shared": ("shared", "shared.dyn"),
    "shared::cta": ("shared", "shared.dyn"),
    "local": ("local",),
}


def memory_role(role: str, op: PtxOperand, data: PtxOperand, writes: bool, **changes) -> OperandRole:
    """A memory-tensor role for address operand ``op`` moving register operand ``data``.

    The atom is ``(data.lanes,)`` elements of ``data``'s PTX type: the values
    one native load/store touches; ``changes`` override any field.
    """
    base = OperandRole(
        role=role,
        ptx=op,
        kind="memory",
        atom=(data.lanes,),
        dtypes=same_width_dtypes(data.ptx_type),
        writes=writes,
        scopes=SPACE_SCOPES.get(op.space, ()),
    )
    return replace(base, **changes) if changes else base
