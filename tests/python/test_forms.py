"""Every ld/st form of the tile contract lowers to exactly its instruction, and ptxas accepts it.

The forms are enumerated from apache-tvm's PTX table through our family
registry: state spaces x vector lengths x every element type the table
offers, plus each cache qualifier the table allows on ``.v4.b32``.  One
kernel per state space holds all of its forms, so each space is assembled once.
"""

import importlib.util
import itertools
import re

import pytest

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.tile.registry import candidates as contracts

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


def forms(space, arch="sm_90a"):
    """(opcode, mnemonic, lanes, dtype) of every tile form in ``space`` available on ``arch``."""
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
        result.append((contract.opcode, contract.instruction.mnemonic, data.lanes, dtype))
    return result


def _kernel_source(space, space_forms):
    dtypes = sorted({d for *_, d in space_forms})
    params = ", ".join(f'M_{d}: T.Tensor((64, 4), "{d}", align=32)' for d in dtypes)
    lines = [
        "from tvm_tirx.script import tirx as T",
        "",
        "@T.function",
        f"def forms_kernel({params}):",
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))",
        '    tid = T.cuda.thread_idx("x")',
    ]
    for d in dtypes:
        if space == "global":
            lines.append(f"    mem_{d} = M_{d}")
        elif space == "local":
            lines.append(f'    mem_{d} = T.alloc_local((64, 4), "{d}", align=32)')
        else:
            lines.append(f'    mem_{d} = T.alloc_shared((64, 4), "{d}", align=32)')
    for i, (opcode, mnemonic, lanes, d) in enumerate(space_forms):
        lines.append(f'    r{i} = T.alloc_local(({lanes},), "{d}")')
        mem = f"mem_{d}.sub[tid, 0:{lanes}]"
        operands = f"r{i}, {mem}" if mnemonic == "ld" else f"{mem}, r{i}"
        lines.append(f'    T.cuda.tile.apply(T.ptx["{opcode}"], {operands})')
    return "\n".join(lines) + "\n"


def _load(tmp_path, space, space_forms):
    path = tmp_path / f"forms_{space.replace('::', '_')}.py"
    path.write_text(_kernel_source(space, space_forms))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.forms_kernel


def test_enumeration_covers_widths_vectors_and_qualifiers():
    names = [f[0] for f in forms("global")]
    for expected in ("ld.global.u8", "ld.global.s16", "ld.global.f64", "ld.global.v2.b64",
                     "ld.global.v4.b32", "ld.global.nc.v4.b32", "ld.global.cg.v4.b32",
                     "st.global.v4.f32", "st.global.cs.v4.b32", "st.global.b8"):
        assert expected in names, expected
    assert "ld.shared.nc.v4.b32" not in [f[0] for f in forms("shared")]  # .nc is .global only
    assert len(names) > 60


@pytest.mark.parametrize("space", SPACES)
def test_every_form_lowers_and_assembles(space, tmp_path):
    space_forms = forms(space)
    func = _load(tmp_path, space, space_forms)
    lowered = testing.lower(func)
    assert testing.count_ptx(lowered) == len(space_forms)
    if not testing.has_nvcc():
        pytest.skip("nvcc not on the PATH")
    kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
    ptx = kernel.ptx
    for opcode, *_ in space_forms:
        assert re.search(re.escape(opcode) + r"\s", ptx), opcode
    assert len(testing.assemble(kernel)) > 0


def test_256_bit_forms_are_rejected_for_sm90a_naming_sm100(tmp_path):
    wide = [f for f in forms("global", arch="sm_100a") if f not in forms("global")]
    assert {f[0] for f in wide} >= {"ld.global.v4.b64", "st.global.v4.f64"}
    func = _load(tmp_path, "global", wide[:1])
    with pytest.raises(TileError, match=r"needs a newer architecture: expected sm_100 or newer, found sm_90a"):
        tvm_tirx.compile(func, target="cuda", arch="sm_90a")
    if testing.has_nvcc():
        kernel = tvm_tirx.compile(func, target="cuda", arch="sm_100a")
        assert wide[0][0] in kernel.ptx
        assert len(testing.assemble(kernel)) > 0
