"""Kernels (a 2-CTA cluster of one thread each) issuing every sm_90a form of a family
whose operands are shared/global views and mbarriers (mbarrier, cp_async_bulk), for
the assembly tests: every form is enumerated from apache-tvm's table through the
registry and written by ``testing.form_kernels``."""

from tvm_tirx import testing
from tvm_tirx.tile.ir.forms import forms_of
from tvm_tirx.tile.rules.static_rules import rule_arch

#: A value for each keyword parameter the families take.
PARAM_VALUES = {
    "count": "T.uint32(1)",
    "tx": "T.uint32(256)",
    "phase": "T.uint32(0)",
    "time_hint": "T.uint32(1000)",
    "cta_mask": "T.uint16(3)",
    "cache_policy": "T.uint64(0)",
    "remote_cta_id": "T.uint32(1)",
}

#: Row i of G, S and bars belongs to the kernel's i-th call.
HEAD = testing.KernelHead(
    params='G: T.Tensor(({n}, 64), "float32", align=16)',
    launch="T.cuda.LaunchConfig(grid=2, block=1, cluster=2)",
    prologue=(
        'bars = T.alloc_shared(({n}, 1), "uint64", align=8)',
        'S = T.alloc_shared(({n}, 64), "float32", align=16)',
    ),
)


def sm90a_forms(family):
    """The family's forms available on sm_90a (the arch rule lets them through)."""
    return [f for f in forms_of(family) if rule_arch(f.contract, "sm_90a") is None]


def _operand(role, i, lines):
    if role.kind == "register":
        lines.append(f'd{i} = T.alloc_local((1,), "{role.dtypes[0]}")')
        return f"d{i}"
    if role.dtypes == ("uint64",):
        return f"bars.sub[{i}, :]"
    return f"G.sub[{i}, :]" if role.scopes == ("global",) else f"S.sub[{i}, :]"


def call(form, i):
    """The lines issuing ``form`` as the kernel's ``i``-th call (row ``i`` of its tensors)."""
    c = form.contract
    lines = []
    args = [_operand(r, i, lines) for r in c.roles if r.keyword is None]
    args += [f"{r.keyword}={_operand(r, i, lines)}" for r in c.roles if r.keyword is not None]
    args += [f"{k}={PARAM_VALUES[k]}" for k in (*c.params, *c.options)]
    lines.append(f'T.cuda.tile.apply(T.ptx["{form.opcode}"], {", ".join(args)})')
    return lines


def kernels(forms, name="forms_kernel"):
    """``testing.form_kernels`` of ``forms`` with this module's head and calls."""
    return testing.form_kernels(forms, call, HEAD, name=name)
