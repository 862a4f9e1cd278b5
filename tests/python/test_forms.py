"""Every ld/st form of the tile contract lowers to exactly its instruction, and ptxas accepts it.

The forms are enumerated from apache-tvm's PTX table through our family
registry: state spaces x vector lengths x every element type the table
offers, plus each cache qualifier the table allows on ``.v4.b32``.  The forms of
a state space go into as few kernels as the script parser takes
(``testing.form_kernels``: one per space today), each assembled once.
"""

import itertools
import re
from collections import namedtuple

import pytest

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.tile.ir.registry import candidates as contracts

SPACES = ("global", "shared", "shared::cta", "local")
VECS = ("", "v2", "v4")
# 128-bit scalar types have no TVM buffer dtype a register tensor could use.
SKIP_TYPES = ("b128",)


def _table_types(mnemonic, vec):
    from tvm.backend.cuda.ptx.table import TABLE

    name = f"{mnemonic}_vec" if vec else mnemonic
    slot = next(s for s in TABLE[name].slots if s.name == "type")
    return [t for t in slot.choices if t not in SKIP_TYPES]


def _qualifiers(mnemonic):
    from tvm.backend.cuda.ptx.table import TABLE

    entry = TABLE[f"{mnemonic}_vec"]
    out = []
    for slot in entry.slots:
        if slot.name in ("cop", "nc", "l1ev"):
            out += list(slot.choices)
    return out


#: One ld/st form: its opcode, ``ld`` or ``st``, the register count and the element type.
LdStForm = namedtuple("LdStForm", "opcode mnemonic lanes dtype")


def forms(space, arch="sm_90a"):
    """The :data:`LdStForm` of every tile form in ``space`` available on ``arch``."""
    from tvm_tirx.arch import arch_number

    from tvm.backend.cuda.ptx.table import PTX_TYPE_DTYPES

    out = []
    for mnemonic, vec in itertools.product(("ld", "st"), VECS):
        for ty in _table_types(mnemonic, vec):
            out.append(".".join(p for p in (mnemonic, space, vec, ty) if p))
        for q in _qualifiers(mnemonic) if vec == "v4" else ():
            out.append(".".join((mnemonic, space, q, vec, "b32")))
    result = []
    for opcode in out:
        try:
            (contract,) = [c for c in contracts(opcode)]
        except TileError:
            continue  # the table (PTX ISA) forbids this combination in this space
        if contract.min_arch and arch_number(contract.min_arch) > arch_number(arch):
            continue
        data = next(r for r in contract.roles if r.kind == "register")
        dtype = PTX_TYPE_DTYPES[data.ptx.ptx_type][0]
        result.append(LdStForm(contract.opcode, contract.instruction.mnemonic, data.lanes, dtype))
    return result


def _head(space, space_forms):
    """One tensor per element type the forms use: a parameter, or a local or shared tensor."""
    dtypes = sorted({f.dtype for f in space_forms})
    prologue = ['tid = T.cuda.thread_idx("x")']
    for d in dtypes:
        if space == "global":
            prologue.append(f"mem_{d} = M_{d}")
        elif space == "local":
            prologue.append(f'mem_{d} = T.alloc_local((64, 4), "{d}", align=32)')
        else:
            prologue.append(f'mem_{d} = T.alloc_shared((64, 4), "{d}", align=32)')
    return testing.KernelHead(
        params=", ".join(f'M_{d}: T.Tensor((64, 4), "{d}", align=32)' for d in dtypes),
        launch="T.cuda.LaunchConfig(grid=1, block=64)",
        prologue=tuple(prologue),
    )


def _call(form, i):
    mem = f"mem_{form.dtype}.sub[tid, 0:{form.lanes}]"
    operands = f"r{i}, {mem}" if form.mnemonic == "ld" else f"{mem}, r{i}"
    return [f'r{i} = T.alloc_local(({form.lanes},), "{form.dtype}")', f'T.cuda.tile.apply(T.ptx["{form.opcode}"], {operands})']


def _kernels(space, space_forms):
    name = "forms_" + space.replace("::", "_")
    return testing.form_kernels(space_forms, _call, _head(space, space_forms), name=name)


def test_enumeration_covers_widths_vectors_and_qualifiers():
    names = [f.opcode for f in forms("global")]
    for expected in ("ld.global.u8", "ld.global.s16", "ld.global.f64", "ld.global.v2.b64",
                     "ld.global.v4.b32", "ld.global.nc.v4.b32", "ld.global.cg.v4.b32",
                     "st.global.v4.f32", "st.global.cs.v4.b32", "st.global.b8"):
        assert expected in names, expected
    assert "ld.shared.nc.v4.b32" not in [f.opcode for f in forms("shared")]  # .nc is .global only
    assert len(names) > 60


@pytest.mark.parametrize("space", SPACES)
def test_every_form_lowers_and_assembles(space, tmp_path):
    space_forms = forms(space)
    kernels = _kernels(space, space_forms)
    for generated in kernels:
        lowered = testing.lower(generated.load(tmp_path))
        assert testing.count_ptx(lowered) == len(generated.forms)
    if not testing.has_nvcc():
        pytest.skip("nvcc not on the PATH")
    for built in testing.assemble_forms(kernels, tmp_path, arch="sm_90a"):
        assert len(built.assembled) > 0
        ptx = built.build.ptx
        for form in built.kernel.forms:
            assert re.search(re.escape(form.opcode) + r"\s", ptx), form.opcode


def test_256_bit_forms_are_rejected_for_sm90a_naming_sm100(tmp_path):
    wide = [f for f in forms("global", arch="sm_100a") if f not in forms("global")]
    assert {f.opcode for f in wide} >= {"ld.global.v4.b64", "st.global.v4.f64"}
    (generated,) = _kernels("global", wide[:1])
    func = generated.load(tmp_path)
    with pytest.raises(TileError, match=r"needs sm_100 or newer \(.*ptxas.*\): expected a target of sm_100 or newer, found sm_90a"):
        tvm_tirx.compile(func, target="cuda", arch="sm_90a")
    if testing.has_nvcc():
        kernel = tvm_tirx.compile(func, target="cuda", arch="sm_100a")
        assert wide[0].opcode in kernel.ptx
        assert len(testing.assemble(kernel)) > 0
