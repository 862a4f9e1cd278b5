"""``LowerTileApply``: check each tile call against its contract and expand it.

For every ``T.cuda.tile.apply`` Call the pass

1. re-runs the parse-time rules (the IR may have been built without the
   parser) on the group of threads the call runs on (:mod:`..analysis.groups`),
2. proves what needs the kernel: memory alignment and bounds
   (:mod:`..analysis.memory_proofs`), register ownership (:mod:`..analysis.ownership`),
3. replaces the call by one unrolled ``for`` per repeat axis whose body is
   exactly one ``T.ptx[...]`` call (:mod:`..rules.emit`), and runs the form's host
   set-up hook, if any, around the kernel's device entry.

A raw ``T.ptx[...]`` call of an instruction whose family checks raw calls is
decoded into its tile form's view and checked by the same rules
(:mod:`..rules.raw_calls`), then left as written.

It never chooses an instruction: the opcode is the user's.
"""

from __future__ import annotations

from dataclasses import replace

import tvm_ffi
from tvm.tirx.layout import S, TileLayout

from ...errors import TileError, TileInternalError, combined
from ..kernel.barrier_rules import BARRIERS
from ..ir.call_view import CallView
from ..rules.emit import Emission, emit, kind_proof
from ..analysis.groups import check_uniform_pred, group_box
from ..kernel.kernel_facts import KernelFacts, is_checked_call
from ..kernel.kernel_rules import KernelView, run_kernel_rules
from ..analysis.memory_proofs import check_dtype_views, check_memory
from ..rules.op import is_tile_call
from ..analysis.ownership import check_ownership
from ..rules.raw_calls import check_raw, raw_positions
from ..rules.raw_tile import raw_tile_call, raw_tile_contract
from ..ir.registry import candidates
from ..ir.scope import group_exprs, scope_rank
from ..ir.scope import require_collective_scope
from ..kernel.sites import EMPTY_SITE, call_key, location_of
from ..rules.static_rules import bind_call, rule_arch, select_contract
from ..ir.views import call_repeat, int_or_none, repeat_shape

__all__ = ["LowerTileApply", "lower_tile_apply", "expand", "check_raw_tile", "LOWERED"]


def _group(tc, facts, guards, collective):
    """``(group, origin, members)`` of the threads that run decoded call ``tc``."""
    if tc.scope == "thread":
        return (), (), {(): (0, 0)}
    if facts.launch is None:
        raise TileError(
            tc.opcode,
            f"a {tc.scope}-scope call needs the kernel's launch",
            expected="T.device_entry(launch=T.cuda.LaunchConfig(...)) (or T.thread_id([...]))",
            found="no thread ids in the kernel",
        )
    require_collective_scope(tc.scope, collective, tc.opcode)
    return group_box(tc.scope, facts, guards, tc.opcode, collective)


def _select(tc, facts, site):
    """``(CallView, (group, origin, members))`` of decoded call ``tc`` at ``site``."""
    forms = candidates(tc.opcode)
    scope_rank(tc.scope, tc.opcode, 0)
    box = _group(tc, facts, site.guards, forms[0].collective)
    contract, ops = select_contract(forms, tc.operands, box[0], tc.pred, tc.preserve_dst, tc.params)
    call = CallView(tuple(ops), tc.pred, dict(tc.params), contract, tc.scope, site, facts, box[0])
    call = replace(call, contract=bind_call(call))
    contract = call.contract
    require_collective_scope(tc.scope, contract.collective, contract.opcode)
    err = rule_arch(contract, facts.arch)
    if err is None and contract.kernel_check is not None:
        err = contract.kernel_check(call)
    if err:
        raise err
    return call, box


def _prove(call, box):
    """The rules that need the kernel, per tensor operand; raises the first TileError."""
    facts, contract = call.facts, call.contract
    group, origin, members = box
    conds = call.site.facts
    check_uniform_pred(facts, call.pred, contract.collective, conds, contract.opcode)
    for index, (role, op) in enumerate(zip(contract.roles, call.operands)):
        if op.kind != "tensor":
            continue
        own_repeat = repeat_shape(role, op, group)
        if role.kind == "memory":
            skipped = call.pred is not None and role.pred_skips
            pred = facts.expand_scalars(call.pred) if skipped else None
            err = check_memory(facts, contract.opcode, role, op, group, own_repeat, pred, conds)
        elif role.kind == "register":
            err = check_dtype_views(facts, contract.opcode, call.label(index), op.value, conds)
            err = err or check_ownership(
                contract.opcode, role, op, group, origin, members, own_repeat, contract.collective
            )
        else:
            prove = kind_proof(role.kind)
            err = prove(call, index) if prove else None
        if err:
            raise err


def _coordinates(call, facts, origin):
    """``(group coordinate, position in the collective)`` of the issuing thread, as expressions."""
    if call.scope == "thread":
        return (), None
    width = call.contract.collective.width
    exprs = group_exprs(call.scope, facts.launch, width)
    position = call.contract.collective.position(facts.launch.linear_thread()) if width > 1 else None
    return tuple(e - o for e, o in zip(exprs, origin)), position


def expand(stmt, facts, site=EMPTY_SITE):
    """Check the tile call of statement ``stmt`` (an ``Evaluate`` of ``facts``' kernel,
    decoded once there: ``facts.calls``) at its :class:`~..kernel.sites.CallSite`; return
    ``(expansion Stmt, host hook or None, CallView)``.

    Raises
    ------
    TileError
        Any contract violation, pointing at the call's source line when known.
    """
    tc = facts.calls.tile_call(stmt)
    span = site.span if site.span is not None else stmt.value.span
    try:
        view, box = _select(tc, facts, site)
        _prove(view, box)
    except TileError as err:
        raise err.at(site.location or location_of(span)) from None
    emission = Emission(view, tc.preserve_dst, _coordinates(view, facts, box[1]))
    stmt = emit(emission, call_repeat(view.contract, view.operands, box[0]), span)
    return stmt, view.contract.host_setup, emission.call


def _row_major(buf) -> bool:
    """Whether ``buf`` is laid out row-major without strides (its default layout)."""
    if len(buf.strides):
        return False
    if buf.layout is None:
        return True
    try:
        return tvm_ffi.structural_equal(buf.layout, TileLayout(S[tuple(buf.shape)]))
    except (TypeError, ValueError):  # a shape the default layout cannot take
        return False


def _declare_view(facts, buf, indices, extent: int, dtype: str):
    """The view of ``extent`` elements of ``buf`` (read as ``dtype``, of the same width)
    from element ``indices`` on, declared in a scratch frame (the kernel's body is not
    changed), its parent recorded in ``facts`` so that the proofs find its root; None
    where no view names them: a tensor with a layout (a swizzle) at run-time indices.  A
    row-major tensor of static shape is taken whole (the vector may run on into the next
    row, as the address does); any other along its last axis.

    Raises
    ------
    ValueError
        The vector runs past a static extent.
    """
    from tvm.script.ir_builder import IRBuilder  # pylint: disable=import-outside-toplevel
    from tvm.script.ir_builder import tirx as builder  # pylint: disable=import-outside-toplevel

    shape = [int_or_none(n) for n in buf.shape]
    plain = _row_major(buf)
    if not plain and None in [int_or_none(i) for i in indices]:
        return None
    with IRBuilder():
        with builder.prim_func():
            base = buf if dtype == str(buf.dtype) else buf.view(dtype)
            if plain and None not in shape and len(shape) > 1:
                linear, stride = 0, 1
                for index, n in reversed(list(zip(indices, shape))):
                    linear, stride = linear + index * stride, stride * n
                view = base.view(stride, layout=TileLayout(S[(stride,)])).sub[linear : linear + extent]
            else:
                view = base.sub[tuple(indices[:-1]) + (slice(indices[-1], indices[-1] + extent),)]
    facts.parent[view] = buf
    return view


def _raw_label(err, contract) -> TileError:
    """``err`` pointing at the raw call's argument: ``"src (operand 2)"`` of the tile form
    becomes ``"src (operand 5)"``, the position of the address among the raw arguments."""
    positions = {r.role: raw_positions(contract)[r.ptx.name] for r in contract.roles}
    role = (err.operand or "").split(" (operand")[0].removeprefix("parameter ")
    if role not in positions:
        return err
    return TileError(err.opcode or contract.opcode, err.rule, operand=f"{role} (operand {positions[role]})",
                     expected=err.expected, found=err.found)


def check_raw_tile(stmt, facts, site=EMPTY_SITE):
    """Check the raw ``T.ptx`` call of ``stmt`` by the rules of the tile call it spells
    (:func:`~..rules.raw_tile.raw_tile_call`: the operands' state spaces and widths,
    bounds, alignment and ownership, the family's ``bind`` and ``kernel_check``); a raw
    call that spells no tile call is left alone.  The call is not changed.

    Raises
    ------
    TileError
        The first rule the call breaks, pointing at its source line and argument.
    """
    contract = raw_tile_contract(stmt.value)
    try:
        try:
            tc = raw_tile_call(stmt.value, contract, lambda *args: _declare_view(facts, *args))
            if tc is not None:
                _prove(*_select(tc, facts, site))
        except TileError as err:
            raise _raw_label(err, contract) from None
    except TileError as err:
        raise err.at(site.location or location_of(stmt.value.span)) from None


def _with_host_setup(body, hooks):
    """``body`` with each ``(hook, call)`` applied to its device entry (``T.device_entry``)."""
    import tvm_ffi  # pylint: disable=import-outside-toplevel
    from tvm import tirx  # pylint: disable=import-outside-toplevel

    def wrap(node):
        if node.attr_key != "tirx.device_entry":
            return node
        for hook, call in hooks:
            node = hook(call, node)
        return node

    return tvm_ffi.structural_map(body, (tirx.AttrStmt, wrap)) if hooks else body


#: The attribute of a PrimFunc this pass has lowered: a second run leaves it alone (its
#: expansions are raw calls the tile rules would read back without the views they came from).
LOWERED = "tvm_tirx.tile_lowered"


def lower_tile_apply(func):
    """Expand every tile call of PrimFunc ``func``; return the new PrimFunc, marked
    :data:`LOWERED` (a marked ``func`` is returned as it is).

    Raises
    ------
    TileError
        The contract violation found (the calls' own rules, then the kernel
        rules of :mod:`..kernel.kernel_rules`); :class:`~tvm_tirx.errors.TileErrors`
        when there are several.
    TileInternalError
        The lowering built a call the PTX table rejects (a bug of tvm_tirx).
    """
    import tvm_ffi  # pylint: disable=import-outside-toplevel
    from tvm import tirx  # pylint: disable=import-outside-toplevel

    if func.attrs is not None and LOWERED in func.attrs:
        return func
    found = []
    tvm_ffi.structural_walk(func.body, (tirx.Evaluate, lambda n: found.append(n) if _is_checked(n) else None))
    if not found:
        return func
    facts = KernelFacts(func)
    errors, hooks, calls = [], [], {}

    def rewrite(node):
        site = facts.sites.get(call_key(node), EMPTY_SITE)
        try:
            if not is_tile_call(node.value):
                # a raw T.ptx call a family checks: checked as its tile form, left as written
                raw = check_raw(node.value, facts, site)
                if raw is not None:
                    calls[call_key(node)] = raw
                else:
                    check_raw_tile(node, facts, site)
                return node
            stmt, hook, call = expand(node, facts, site)
        except (TileError, TileInternalError) as err:
            # An exception would cross the FFI boundary as a RuntimeError;
            # keep it and raise it from here, as what it is.
            errors.append(err)
            return node
        calls[call_key(node)] = call
        if hook is not None:
            hooks.append((hook, call))
        return stmt

    body = tvm_ffi.structural_map(func.body, (tirx.Evaluate, rewrite))
    if not errors:
        errors = run_kernel_rules(KernelView(facts, func.body, calls))
    if errors:
        raise combined(errors)
    return func.with_body(_with_host_setup(body, hooks)).with_attr(LOWERED, True)


def _is_checked(stmt) -> bool:
    """Whether statement ``stmt`` is one the lowering checks: a CTA barrier, or a call
    :func:`~..kernel.kernel_facts.is_checked_call` names."""
    op = getattr(getattr(stmt.value, "op", None), "name", None)
    return op in BARRIERS or is_checked_call(stmt)


def LowerTileApply():  # pylint: disable=invalid-name
    """The TIR pass (``tvm.transform.Pass``) that expands ``T.cuda.tile.apply`` calls.

    Returns
    -------
    tvm.transform.Pass
        A PrimFunc pass; functions without tile calls are returned unchanged.

    Raises
    ------
    TileError
        When run, for any contract violation (see :func:`expand`).
    """
    from tvm.tirx.transform import prim_func_pass  # pylint: disable=import-outside-toplevel

    @prim_func_pass(opt_level=0, name="tvm_tirx.LowerTileApply")
    def _pass(func, mod, ctx):  # pylint: disable=unused-argument
        return lower_tile_apply(func)

    return _pass
