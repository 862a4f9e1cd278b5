"""Parse-time rules of the tile contract, and the choice of an opcode's form.

Every rule is a small pure function returning a :class:`~tvm_tirx.TileError`
or ``None``.  :func:`check_static` runs those that need only shapes, dtypes,
layouts and the opcode (the per-operand ones are in :mod:`.operand_rules`);
:func:`select_contract` picks, among the forms an
opcode names (:func:`..ir.registry.candidates`), the one the operands fit.  The
rules that need the kernel (alignment, bounds, ownership) are in
:mod:`..analysis.memory_proofs` and :mod:`..analysis.ownership`.
"""

from __future__ import annotations

from ...arch import parse_arch
from ...errors import TileError, operand_label
from ..ir.arch_floors import arch_key, satisfies, source_of
from ..ir.call_view import CallView
from .operand_rules import OPERAND_RULES, rule_contiguous_atom, rule_operand_count
from ..ir.operands import classify
from ..ir.ptx_types import binding_dtype, same_width_dtypes
from ..ir.registry import family_of
from ..ir.view_tables import fragment_points, slots_distinct
from ..ir.views import ViewMap, atom_of, coords, group_coords, repeat_rank, repeat_shape, role_axes

__all__ = ["check_static", "select_contract", "require_params", "param_error", "call_operands", "bind_call", "rule_arch"]


def rule_preserve_dst(opcode, contract, pred, preserve_dst):
    """``preserve_dst`` needs ``pred`` and a register destination."""
    if not preserve_dst:
        return None
    if pred is None:
        return TileError(
            opcode,
            "preserve_dst without pred",
            expected="pred=<runtime bool> together with preserve_dst=True",
            found="pred=None",
        )
    if not any(r.writes and r.kind == "register" for r in contract.roles):
        return TileError(
            opcode,
            "preserve_dst on an instruction without a register destination",
            expected="preserve_dst=False",
            found="preserve_dst=True",
        )
    return None


def rule_read_write_binding(opcode, role, op, preserve_dst):
    """A register destination bound read-write (``preserve_dst``, or an operand
    the instruction reads and writes) has a dtype inline asm binds in place:
    an 8-bit register travels as a 16-bit carrier and cannot be written back
    (apache-tvm's ``render.C_BINDING``)."""
    read_write = role.ptx.rw == "rw" or (preserve_dst and role.writes)
    if op.kind != "tensor" or role.kind != "register" or not read_write:
        return None
    if binding_dtype(role.ptx, op.value.dtype, read_write=True) is not None:
        return None
    usable = [d for d in role.dtypes if binding_dtype(role.ptx, d, read_write=True) is not None]
    return TileError(
        opcode,
        "register dtype cannot be bound read-write",
        operand=operand_label(role.role, op.index),
        expected=(
            f"{' / '.join(usable)} registers" if usable else "preserve_dst=False (no register dtype of this operand can be)"
        )
        + " (preserve_dst keeps the old value through an in-place binding, which 8-bit registers do not have)",
        found=f"{op.value.dtype} registers",
    )


def rule_pred_dtype(opcode, pred):
    """``pred`` is a boolean expression."""
    if pred is None:
        return None
    ty = getattr(getattr(pred, "ty", None), "dtype", type(pred).__name__)
    if ty != "bool":
        return TileError(opcode, "pred must be a bool expression", expected="bool", found=str(ty))
    return None


def rule_same_repeat(opcode, contract, operands, group):
    """Every tensor operand carries the same extent on each repeat axis it
    carries (``OperandRole.repeat_axes``; by default all of them, so every
    operand has the same repeat shape).  An operand that declares its axes
    may carry none of them (extent 1 on each)."""
    rank = repeat_rank(contract, operands, group)
    extents = {}  # axis -> (extent, label of the operand that set it)
    for role, op in zip(contract.roles, operands):
        if op.kind != "tensor":
            continue
        rep = repeat_shape(role, op, group)
        label = operand_label(role.role, op.index)
        axes = role_axes(role, rank)
        if not rep and role.repeat_axes is not None:
            rep = (1,) * len(axes)
        want = [extents[a] for a in axes if a in extents]
        mismatch = len(rep) != len(axes) or any(extents.get(a, (n,))[0] != n for a, n in zip(axes, rep))
        if mismatch:
            shown = tuple(extents[a][0] if a in extents else "?" for a in axes)
            return TileError(
                opcode,
                "repeat shapes differ",
                operand=label,
                expected=f"repeat {shown} like {want[0][1] if want else 'the other operands'}",
                found=f"repeat {rep}",
            )
        for axis, n in zip(axes, rep):
            extents.setdefault(axis, (n, label))
    return None


def rule_register_overlap(opcode, role, op, group, collective):
    """Distinct destination coordinates map to distinct register slots (of each
    thread: for a collective form, those of the thread's position in it)."""
    if op.kind != "tensor" or role.kind != "register" or not role.writes:
        return None
    view = ViewMap(op.value)
    rep = repeat_shape(role, op, group)
    if role.lane_coords is not None:
        per_thread = fragment_points(role.lane_coords, rep, collective.width)
    else:
        per_thread = [list(coords(rep, atom_of(role, op)))]
    leads = list(group_coords(group, full=not view.separable))
    if slots_distinct(op.value, leads, per_thread):
        return None
    # Each thread writes the coordinates of its own group position.
    for lead in leads:
        for mine in per_thread:
            seen = {}
            for c in mine:
                slot = view.offset((*lead, *c))
                if slot in seen:
                    return TileError(
                        opcode,
                        "overlapping register destinations",
                        operand=operand_label(role.role, op.index),
                        expected="one register slot per destination coordinate",
                        found=f"coordinates {seen[slot]} and {c} both map to slot {slot}",
                    )
                seen[slot] = c
    return None


def rule_arch(contract, arch):
    """The form is available on the target architecture ``arch`` (``"sm_90a"``, or None: unknown).

    ``arch`` is not older than the form's ``min_arch`` (its floor, measured
    with ptxas: :mod:`..ir.arch_floors`), is one of its ``archs`` when it names
    them (an arch-specific form: ``wgmma`` exists on sm_90a alone), and
    otherwise has the ``a``/``f`` suffix when the floor has one (``sm_90``
    lacks what ``sm_90a`` has).  The error names the opcode, the floor, its
    source (PTX ISA section, ptxas release) and the target.
    """
    if arch is None:
        return None
    floor = contract.min_arch
    if floor is not None and arch_key(arch)[0] < arch_key(floor)[0]:
        return _below_floor(contract, arch, floor)
    if contract.archs:
        if parse_arch(arch) in [parse_arch(a) for a in contract.archs]:
            return None
        return TileError(
            contract.opcode,
            "instruction is specific to another architecture",
            expected=f"target {' / '.join(contract.archs)} (the arch-specific feature set, suffix included)",
            found=arch,
        )
    if floor is not None and not satisfies(arch, floor):
        return _below_floor(contract, arch, floor)
    return None


def _isa_section(contract) -> str:
    family = family_of(contract.instruction.entry)
    return family.isa_section(contract.instruction.mnemonic) if family else ""


def _below_floor(contract, arch, floor):
    suffixed = arch_key(floor)[1] > 0
    return TileError(
        contract.opcode,
        f"needs {floor} or newer ({source_of(contract, _isa_section(contract))})",
        expected=f"a target of {floor} or newer" + (" with the a or f suffix (arch-specific features)" if suffixed else ""),
        found=arch,
    )


def check_static(contract, operands, group, pred=None, preserve_dst=False):
    """Run every parse-time rule; return the first TileError found, or None.

    Parameters
    ----------
    contract : Contract
        The instruction form's contract.
    operands : list[Operand]
        The call's operands, classified.
    group : tuple[int | None, ...]
        The group extents of the call (``()`` at ``scope="thread"``; None
        where only lowering knows the extent).
    pred : PrimExpr | None
        The call's predicate.
    preserve_dst : bool
        The call's ``preserve_dst``.
    """
    opcode, roles = contract.opcode, contract.roles
    err = rule_operand_count(opcode, roles, operands)
    if err:
        return err
    for rule in OPERAND_RULES:
        for role, op in zip(roles, operands):
            err = rule(opcode, role, op, group)
            if err:
                return err
    err = rule_same_repeat(opcode, contract, operands, group)
    if err is None and contract.check is not None:
        err = contract.check(CallView(tuple(operands), pred, contract=contract))
    if err:
        return err
    for role, op in zip(roles, operands):
        err = rule_contiguous_atom(opcode, role, op, group) or rule_register_overlap(
            opcode, role, op, group, contract.collective
        )
        if err:
            return err
    err = rule_pred_dtype(opcode, pred) or rule_preserve_dst(opcode, contract, pred, preserve_dst)
    for role, op in zip(roles, operands):
        err = err or rule_read_write_binding(opcode, role, op, preserve_dst)
    return err


def call_operands(contract, operands, params) -> tuple:
    """``(value, index)`` of every operand of the call in role order: the
    positional ones (1-based positions), then the keyword roles' values from
    ``params`` (index: the keyword)."""
    out = [(v, i + 1) for i, v in enumerate(operands)]
    out += [(params[r.keyword], r.keyword) for r in contract.roles if r.keyword is not None and r.keyword in params]
    return tuple(out)


def select_contract(forms, operands, group, pred, preserve_dst, params=None):
    """Pick the form (of ``forms``, an opcode's candidates) whose contract the
    operands and keyword parameters satisfy.

    ``mov.b64`` names a scalar, a pack and an unpack form; the operands'
    atoms tell them apart, as the assembler does.  ``mbarrier.arrive`` names
    a form with and one without the ``count`` operand; the keyword
    parameters tell them apart.

    Returns
    -------
    (Contract, list[Operand])
        The form and the classified operands (keyword roles' last).

    Raises
    ------
    TileError
        No form fits: the error of a form that takes as many positional
        operands as the call passes, if any (``atom`` with and without a
        destination: the one the call's operand count names); among those,
        the one with the highest ``error_priority`` (the first such form).
    """
    params = params or {}
    errors = []
    for contract in forms:
        err = rule_keyword_roles(contract, params)
        classified = []
        if err is None:
            classified = [classify(v, i, contract.opcode) for v, i in call_operands(contract, operands, params)]
            err = check_static(contract, classified, group, pred, preserve_dst) or param_error(contract, params)
        if err is None:
            return contract, classified
        counted = sum(r.keyword is None for r in contract.roles) == len(operands)
        errors.append((counted, contract.error_priority, len(errors), err))
    raise max(errors, key=lambda e: (e[0], e[1], -e[2]))[3]


def rule_keyword_roles(contract, params):
    """Every operand the form takes by keyword (``mbar=``) is given."""
    for role in contract.roles:
        if role.keyword is not None and role.keyword not in params:
            return TileError(
                contract.opcode,
                f"missing parameter {role.keyword!r} (the opcode names it)",
                expected=f"{role.keyword}=<a {' / '.join(role.dtypes)} view in {' / '.join(role.scopes)} memory>",
                found="nothing",
            )
    return None


def _check_param_value(contract, name, value):
    """A PTX-bound parameter is an expression of a dtype its PTX type accepts."""
    op = contract.params[name]
    accepted = same_width_dtypes(op.ptx_type, op.dtypes or None)
    dtype = getattr(getattr(value, "ty", None), "dtype", None)
    if dtype in accepted:
        return None
    return TileError(
        contract.opcode,
        "parameter of the wrong type",
        operand=f"parameter {name}",
        expected=f"a {' / '.join(accepted)} expression (PTX .{op.ptx_type})",
        found=f"{dtype} {value}" if dtype else f"{type(value).__name__} {value!r}",
    )


def param_error(contract, params):
    """Why the call's keyword parameters do not fit the form, or None: an
    unknown parameter, a missing one, a PTX-bound one of another dtype, or a
    family parameter its check refuses.  Operands passed by keyword
    (:attr:`~..ir.contract.OperandRole.keyword`) are checked as operands."""
    keywords = {r.keyword for r in contract.roles if r.keyword is not None}
    known = {**contract.params, **contract.options}
    for name in params:
        if name not in known and name not in keywords:
            return TileError(
                contract.opcode,
                f"unknown parameter {name!r}",
                expected=", ".join(sorted({*known, *keywords})) or "no family parameters for this form",
                found=name,
            )
    for name in known:
        required = name in contract.params or contract.options[name].required
        if name not in params and required:
            what = contract.params[name].ptx_type if name in contract.params else contract.options[name].doc
            return TileError(
                contract.opcode,
                f"missing parameter {name!r} (the opcode names it)",
                expected=f"{name}=<{what} expression>",
                found="nothing",
            )
    for name, value in params.items():
        if name in keywords:
            continue
        if name in contract.params:
            err = _check_param_value(contract, name, value)
        else:
            reason = contract.options[name].check(value) if contract.options[name].check else None
            err = reason and TileError(contract.opcode, f"invalid parameter {name!r}", expected=contract.options[name].doc, found=reason)
        if err:
            return err
    return None


def require_params(contract, params):
    """The call's keyword parameters are the form's, present, and valid.

    Raises
    ------
    TileError
        :func:`param_error`'s reason, or a missing keyword operand.
    """
    err = rule_keyword_roles(contract, params) or param_error(contract, params)
    if err:
        raise err


def bind_call(call):
    """The contract of one call given its keyword parameters (``Contract.bind``).

    ``call`` is the call's :class:`~..ir.call_view.CallView` whose ``contract`` is
    the form its operands fit (operands in role order, keyword roles last:
    :func:`call_operands`); at parse time its ``facts`` is None.

    Returns
    -------
    Contract
        ``call.contract``, or the family's refined copy of it.

    Raises
    ------
    TileError
        A rule over operands and parameters together that the call breaks.
    """
    contract = call.contract
    if contract.bind is None:
        return contract
    result = contract.bind(call)
    if isinstance(result, TileError):
        raise result
    return contract if result is None else result
