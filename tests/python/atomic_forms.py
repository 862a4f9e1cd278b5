"""Kernels issuing the forms of the atomics family, for its assembly test.

The family has about 12,600 tile forms: every op x type x vector x cache
qualifier of each state space, times the memory-order qualifiers ``.sem`` x
``.scope`` (25 combinations for ``atom``, 15 for ``red``).  Assembling all of
them takes minutes, so by default the test takes a covering set
(:func:`covering`): every form without ``.sem`` / ``.scope``, and every
``.sem`` x ``.scope`` combination of one form per table entry and state space.
``TVM_TIRX_ATOMICS_ALL_FORMS=1`` assembles every form (all of them assemble for
sm_90a with CUDA 13.0: measured when the family was written).
"""

import os

from tvm_tirx import testing
from tvm_tirx.tile.ir.forms import forms_of

#: Assemble every form rather than the covering set.
ALL_FORMS = os.environ.get("TVM_TIRX_ATOMICS_ALL_FORMS") == "1"
#: Element dtypes of the forms' memory operands: one global and one shared tensor each.
DTYPES = ("uint16", "float16", "bfloat16", "uint32", "int32", "float32", "uint64", "int64", "float64", "uint128")
#: A value for each keyword parameter of the family.
PARAMS = {"cache_policy": "T.uint64(0)", "remote_cta_id": "T.uint32(1)"}
#: The memory-order qualifiers, which the covering set varies on one form per entry and space.
ORDER_SLOTS = ("sem", "scope")


def _tensor(space_is_global: bool, dtype: str) -> str:
    return ("G_" if space_is_global else "S_") + dtype


#: Row ``i`` of every tensor belongs to the kernel's ``i``-th call (a shared row holds one
#: element: the vector forms are ``.global`` only, and 200 calls then stay within the 48 KB
#: of static shared memory ptxas allows for every target but the ``a`` ones); a 2-CTA
#: cluster of one thread each (the ``.shared::cluster`` forms name the other CTA).
HEAD = testing.KernelHead(
    params=", ".join(f'{_tensor(True, d)}: T.Tensor(({{n}}, 8), "{d}", align=16)' for d in DTYPES),
    launch="T.cuda.LaunchConfig(grid=2, block=1, cluster=2)",
    prologue=tuple(f'{_tensor(False, d)} = T.alloc_shared(({{n}}, 1), "{d}", align=16)' for d in DTYPES),
)


def call(form, i):
    """The lines issuing ``form`` as the kernel's ``i``-th call: register tensors of the
    roles' first dtype, row ``i`` of the memory tensor of the form's space and dtype."""
    c = form.contract
    lines, args = [], []
    for j, role in enumerate(c.roles):
        n = role.atom[0]
        if role.kind == "memory":
            args.append(f"{_tensor(role.scopes == ('global',), role.dtypes[0])}.sub[{i}, 0:{n}]")
        else:
            lines.append(f'r{i}_{j} = T.alloc_local(({n},), "{role.dtypes[0]}")')
            args.append(f"r{i}_{j}")
    args += [f"{k}={PARAMS[k]}" for k in (*c.params, *c.options)]
    lines.append(f'T.cuda.tile.apply(T.ptx["{form.opcode}"], {", ".join(args)})')
    return lines


def _shape(form):
    """The form without its memory-order qualifiers: entry and the other modifiers."""
    mods = form.contract.instruction.modifiers
    return (form.key.split(":", 1)[0], tuple((k, v) for k, v in mods.items() if k not in ORDER_SLOTS))


def covering(forms):
    """Every form without ``.sem`` / ``.scope``, and every ``.sem`` x ``.scope``
    combination of the first such form of each table entry and state space."""
    picked, first = [], {}
    for form in forms:
        mods = form.contract.instruction.modifiers
        entry, rest = _shape(form)
        first.setdefault((entry, mods["space"]), rest)
        if not any(mods.get(slot) for slot in ORDER_SLOTS) or first[(entry, mods["space"])] == rest:
            picked.append(form)
    return picked


def forms():
    """The forms the assembly test issues (:data:`ALL_FORMS`: all of them)."""
    every = forms_of("atomics")
    return every if ALL_FORMS else covering(every)


def kernels(selected):
    """``testing.form_kernels`` of ``selected`` with this module's head and calls."""
    return testing.form_kernels(selected, call, HEAD, name="atomic_forms")
