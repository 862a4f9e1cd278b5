"""The family registry: completeness of every family (docs/dev/adding_a_family.rst's
checklist), entry-keyed claims, and error messages free of internal file names."""

import ast
import pathlib
import re
import sys

import pytest

from tvm_tirx import TileError
from tvm_tirx.tile import registry
from tvm_tirx.tile.ptx_table import TableEntry

ROOT = pathlib.Path(__file__).resolve().parents[2]
SECTIONS = ("PTX ISA", "Forms", "Operand roles and atoms", "Legality", "Lowering emits", "Architectures")
FAMILIES = registry.families()


def _gen_errors():
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import gen_errors  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.pop(0)
    return gen_errors


def test_every_family_module_is_registered():
    modules = {p.stem for p in (ROOT / "python/tvm_tirx/tile/families").glob("*.py") if not p.stem.startswith("_")}
    assert modules == {f.name for f in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_family_docstring_follows_the_template(family):
    path = ROOT / "python" / (family.module.replace(".", "/") + ".py")
    doc = ast.get_docstring(ast.parse(path.read_text()))
    lines = [line.rstrip() for line in doc.splitlines()]
    positions = [lines.index(s) if s in lines else -1 for s in SECTIONS]
    assert -1 not in positions, f"{family.name}: missing sections {[s for s, p in zip(SECTIONS, positions) if p < 0]}"
    assert positions == sorted(positions), f"{family.name}: sections out of order"
    isa = lines[positions[0] + 1]
    assert re.search(r"\d+\.\d+", isa), f"{family.name}: the PTX ISA section names no section number"


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_family_has_a_test_module(family):
    assert (ROOT / "tests/python" / f"test_family_{family.name}.py").exists()


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_family_has_a_reference_page(family, tmp_path):
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import gen_reference  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.pop(0)
    text = gen_reference.family_page(family, {m: [] for m in family.mnemonics()})
    assert f".. _family-{family.name}:" in text and f".. automodule:: {family.module}" in text


def test_every_family_has_an_error_example():
    examples = _gen_errors().family_examples()
    assert set(examples) == {f.name for f in FAMILIES}
    assert all(examples.values()), {name: titles for name, titles in examples.items() if not titles}


def test_no_table_entry_has_two_families():
    owners = registry._owners()  # pylint: disable=protected-access
    assert owners  # and building it raised nothing
    # every entry is named "cp": each goes to the family that claims it
    assert registry.family_of(TableEntry("cp_async_bulk_g2s_cta", "cp")).name == "cp_async_bulk"
    assert registry.family_of(TableEntry("cp_async_ca", "cp")).name == "cp_async"


def test_a_second_claim_on_an_entry_is_an_error():
    before = list(registry._FAMILIES)  # pylint: disable=protected-access
    try:
        fake = registry.Family("fake", "fake_module", lambda instr: "none", frozenset({"cp_async_ca"}), None, {})
        registry._FAMILIES.append(fake)  # pylint: disable=protected-access
        registry._owners.cache_clear()  # pylint: disable=protected-access
        with pytest.raises(ValueError, match="cp_async_ca.*claimed by families cp_async, fake"):
            registry.families()
    finally:
        registry._FAMILIES[:] = before  # pylint: disable=protected-access
        registry._owners.cache_clear()  # pylint: disable=protected-access


def test_unclaimed_instruction_lists_the_families():
    with pytest.raises(TileError, match="no tile family") as info:
        registry.candidates("popc.b32")
    for family in FAMILIES:
        assert family.name in str(info.value)


def test_candidates_are_memoised_per_opcode_text():
    assert registry.candidates("ld.global.v4.b32") is registry.candidates("ld.global.v4.b32")


@pytest.mark.slow
def test_error_messages_name_no_internal_file():
    for case, kind, message in _gen_errors().run_cases():
        if kind != "TileError":
            continue
        assert "tvm_tirx/tile/" not in message, (case.title, message)
        others = [f for f in re.findall(r"[\w./-]+\.py\b", message) if not f.endswith("example.py")]
        assert not others, (case.title, message)
