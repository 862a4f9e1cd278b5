"""The family registry: completeness of every family (docs/dev/adding_a_family.rst's
checklist), entry-keyed claims, and error messages free of internal file names."""

import ast
import pathlib
import re
import sys

import pytest

from tvm_tirx import TileError
from tvm_tirx.tile.ir import registry
from tvm_tirx.tile.ir.ptx_table import TableEntry

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


# -- a family is one object: every role it plays is a field of its registry.Family --------------

REMOVED = ("register_kernel_rule", "register_event_reader", "register_kind", "register_address_form")


def _family(name):
    return next(f for f in FAMILIES if f.name == name)


def test_the_mbarrier_familys_roles_are_fields_of_its_family():
    from tvm_tirx.tile.families import _cluster, _mbarrier_hangs, mbarrier  # pylint: disable=import-outside-toplevel

    family = _family("mbarrier")
    assert [r.__name__ for r in family.kernel_rules] == [
        "expect_tx_bytes", "arrivals_and_parity", "init_visible", "copies_and_reads"]
    assert family.events == (mbarrier.protocol_events,)
    assert family.instrument is _mbarrier_hangs.detect_hangs
    assert family.address_forms == {_cluster.PEER_ADDRESS: _cluster.peer_address}
    assert family.kinds == {}


def test_every_role_of_the_shared_modules_is_a_familys():
    from tvm_tirx.tile.kernel import kernel_rules, protocol  # pylint: disable=import-outside-toplevel
    from tvm_tirx.tile.rules import emit  # pylint: disable=import-outside-toplevel

    rules = [r for f in FAMILIES for r in f.kernel_rules]
    assert kernel_rules.kernel_rules() == kernel_rules.SHARED_RULES + tuple(rules)
    assert protocol.event_readers() == tuple(r for f in FAMILIES for r in f.events)
    assert {f.name for f in FAMILIES if f.events} == {"cp_async_bulk", "fence", "mbarrier", "named_barrier", "tma"}
    assert {k: f.name for f in FAMILIES for k in f.kinds} == {"descriptor": "wgmma", "tensor_map": "tma"}
    forms = {k: v for f in FAMILIES for k, v in f.address_forms.items()}
    assert emit.address_forms() == {**emit.BUILTIN_ADDRESS_FORMS, **forms}
    assert {f.name for f in FAMILIES if "peer_shared" in f.address_forms} == {"atomics", "cp_async_bulk", "mbarrier"}
    assert [f.name for f in FAMILIES if f.instrument is not None] == ["mbarrier"]


def test_kernel_rules_keep_their_order():
    # the combined errors of a kernel list the rules' errors in this order
    from tvm_tirx.tile.kernel import kernel_rules  # pylint: disable=import-outside-toplevel

    assert [r.__name__ for r in kernel_rules.kernel_rules()] == [
        "whole_cta_barriers", "cluster_exit", "bulk_store_read", "proxy_fenced", "expect_tx_bytes",
        "arrivals_and_parity", "init_visible", "copies_and_reads", "named_barrier_counts", "register_total",
        "registers_written_after_fence", "accumulators_in_flight", "stages_released_in_flight",
    ]  # fmt: skip


def _imports(path):
    """``(module, names)`` of every import of the file at ``path`` (relative ones resolved)."""
    inside = (ROOT / "python") in path.parents
    here = ".".join(path.relative_to(ROOT / "python").with_suffix("").parts[:-1]) if inside else ""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names = tuple(alias.name for alias in node.names)
            yield module, names
            yield from ((f"{module}.{n}", ()) for n in names)


def test_no_module_outside_the_families_imports_a_private_family_module():
    # build/debug.py runs the families' `instrument` hooks through the registry
    package = ROOT / "python" / "tvm_tirx"
    found = []
    for path in sorted(package.rglob("*.py")):
        if (package / "tile" / "families") in path.parents:
            continue
        for module, _ in _imports(path):
            if re.match(r"tvm_tirx\.tile\.families\._", module):
                found.append((str(path.relative_to(ROOT)), module))
    assert not found
    assert "tvm_tirx.tile.ir.registry" in {m for m, _ in _imports(package / "build" / "debug.py")}


def test_the_separate_registrations_are_gone():
    import tvm_tirx.tile as tile  # pylint: disable=import-outside-toplevel

    assert not set(REMOVED) & (set(tile.__all__) | set(dir(tile)))
    used = []
    for top in ("python", "tests", "docs", "tools", "bench", "tutorials"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == pathlib.Path(__file__).resolve():
                continue
            names = {n for _, ns in _imports(path) for n in ns}
            calls = {n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", None)
                     for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Call)}
            used += [(str(path.relative_to(ROOT)), name) for name in REMOVED if name in names | calls]
    assert not used


def _register(**roles):
    def contract(instr):  # pragma: no cover - never called
        return "unused"

    contract.__module__ = "fake_family"
    before = list(registry._FAMILIES)  # pylint: disable=protected-access
    try:
        registry.register_family(entries=("cp_async_ca",), **roles)(contract)
        registry._FAMILIES[:] = [f for f in registry._FAMILIES if f.name != "cp_async"]  # pylint: disable=protected-access
        registry._owners.cache_clear()  # pylint: disable=protected-access
        return registry.families()
    finally:
        registry._FAMILIES[:] = before  # pylint: disable=protected-access
        registry._owners.cache_clear()  # pylint: disable=protected-access


def test_a_role_registered_by_two_families_is_an_error():
    rule = _family("fence").kernel_rules[0]
    with pytest.raises(ValueError, match="kernel rule proxy_fenced is registered by families fence, fake_family"):
        _register(kernel_rules=(rule,))
    with pytest.raises(ValueError, match="operand kind 'descriptor' is registered by families"):
        _register(kinds={"descriptor": _family("wgmma").kinds["descriptor"]})
    with pytest.raises(ValueError, match="address form 'peer_shared' is registered by families"):
        _register(address_forms={"peer_shared": lambda call, buf, coord: None})
    # one name, one function: the families addressing a peer CTA share the mapa form
    assert _register(address_forms=dict(_family("mbarrier").address_forms))
    with pytest.raises(ValueError, match="not a function"):
        _register(events=("reader",))

    def rule(view):  # pragma: no cover - never run
        return []

    with pytest.raises(ValueError, match=r"kernel rule .*rule \(given twice\)"):
        _register(kernel_rules=(rule, rule))
