"""Arch floors (issue 23 item 3): every form of every family carries the oldest
target ptxas accepts it for (``arch_floors.json``, measured by
``tools/probe_arch_floors.py``), and compiling it for an older target is a
TileError when the kernel is lowered, before nvcc runs.

Per family, one form of each distinct floor: refused by the arch rule just
below its floor, and compiled for the floor and assembled by ptxas (one kernel
per family and floor target, from ``form_kernels.py``).
"""

import functools
import json
import subprocess
from collections import defaultdict

import pytest

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.ir import arch_floors
from tvm_tirx.tile.ir.arch_floors import TARGETS, arch_key, floor_of, satisfies
from tvm_tirx.tile.ir.forms import forms_of
from tvm_tirx.tile.ir.registry import candidates, families
from tvm_tirx.tile.rules.static_rules import rule_arch

import form_kernels

DATA = json.loads(arch_floors.PATH.read_text())

TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
BULK_LOAD = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"


def _contract(entry, opcode):
    try:
        return next(c for c in candidates(opcode) if c.instruction.entry_name == entry)
    except (TileError, StopIteration):
        return None


@functools.cache
def _forms(family):
    """Every form of ``family`` (enumerated once per session: ``ld_st`` has 56 000)."""
    return forms_of(family)


def _representatives():
    """``{family: [Form]}``: one assembled form per distinct (floor, only targets) of each family."""
    out = defaultdict(list)
    for family in families():
        seen = set()
        for form in _forms(family.name):
            c, record = form.contract, floor_of(*form.key.split(":", 1))
            if record is None or record.refused or (c.min_arch, c.archs) in seen:
                continue  # not measured: test_every_family_is_measured... says so
            seen.add((c.min_arch, c.archs))
            out[family.name].append(form)
    return dict(out)


REPRESENTATIVES = _representatives()


def _target_at(contract):
    """The oldest target the form may be compiled for: its floor, or the first of its only targets."""
    return contract.archs[0] if contract.archs else contract.min_arch


def _below(contract):
    """The newest target older than the form's floor (sm_70 below sm_75)."""
    floor = contract.min_arch
    older = [t for t in TARGETS if arch_key(t) < arch_key(floor) and not satisfies(t, floor)]
    return older[-1] if older else "sm_70"


# -- the data ----------------------------------------------------------------------------------


def test_every_family_is_measured_and_every_claimed_form_has_a_floor():
    assert set(DATA["families"]) == {f.name for f in families()}  # a new family must be probed
    for family in families():
        record = DATA["families"][family.name]
        counts = defaultdict(int)
        for form in _forms(family.name):
            entry, opcode = form.key.split(":", 1)
            assert floor_of(entry, opcode) is not None, f"{form.key}: no floor (run tools/probe_arch_floors.py)"
            counts[entry] += 1
        # every claimed form was measured: the forms of each entry are those the probe saw,
        # less those no target assembles and the table certifies nowhere (no forms now)
        refused = defaultdict(int)
        for key in record["unassembled"]:
            if floor_of(*key.split(":", 1)).floor is None:
                refused[key.split(":", 1)[0]] += 1
        measured = {entry: r["forms"] - refused[entry] for entry, r in record["entries"].items()}
        assert dict(counts) == {e: n for e, n in measured.items() if n}, family.name


def test_recorded_floors_are_targets_of_the_probe():
    assert DATA["measured_with"]["targets"] == list(TARGETS)
    assert "13.0" in DATA["measured_with"]["ptxas"]
    for record in DATA["families"].values():
        for entry, r in record["entries"].items():
            for value in [*r["tokens"].values(), *r["except"].values()]:
                if value is None:
                    continue
                targets = [value] if isinstance(value, str) else value
                if not set(targets) <= set(TARGETS):  # apache-tvm's certification arch
                    assert any(k.startswith(entry + ":") for k in record["unassembled"]), (entry, value)


def test_forms_no_target_assembles_are_refused_saying_why():
    with pytest.raises(TileError, match=r"unsupported form.*assembles it for no target: Modifier '\.volatile' cannot be applied to '\.local' space"):
        candidates("ld.volatile.local.b32")


def test_the_floors_the_isa_states():
    """Spot checks against the PTX ISA's target notes (ptxas agrees)."""
    expected = {
        ("cp_async_ca", "cp.async.ca.shared.global"): "sm_80",
        ("ldmatrix", "ldmatrix.sync.aligned.m8n8.x4.shared.b16"): "sm_75",
        ("stmatrix", "stmatrix.sync.aligned.m8n8.x4.shared.b16"): "sm_90",
        ("mma", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"): "sm_80",
        ("mma", "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"): "sm_75",
        ("mbarrier_init", "mbarrier.init.shared::cta.b64"): "sm_80",
        ("mbarrier_try_wait_parity_no_hint", "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64"): "sm_90",
        ("cp_async_bulk_g2s_cluster", BULK_LOAD): "sm_90",
        ("cp_async_bulk_tensor_g2s_cluster", TMA_LOAD): "sm_90",
        ("setmaxnreg", "setmaxnreg.inc.sync.aligned.u32"): "sm_90a",
        ("wgmma_bf16_ss", "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"): "sm_90a",
        ("ld_vec256", "ld.global.v8.b32"): "sm_100",
        ("shfl_sync", "shfl.sync.bfly.b32"): "sm_75",  # sm_30: ptxas 13.0's oldest target
        ("redux_sync", "redux.sync.add.u32"): "sm_80",
        ("elect_sync", "elect.sync"): "sm_90",
        ("atom", "atom.global.add.L2::cache_hint.u32"): "sm_80",
        ("atom_cas", "atom.shared::cta.cas.b128"): "sm_90",
        ("red_half", "red.global.add.noftz.bf16"): "sm_90",
        ("fence_proxy", "fence.proxy.async.shared::cta"): "sm_90",
        ("fence_mbarrier_init", "fence.mbarrier_init.release.cluster"): "sm_90",
    }
    for (entry, opcode), floor in expected.items():
        assert floor_of(entry, opcode).floor == floor, (entry, opcode)
        assert _contract(entry, opcode).min_arch == floor, (entry, opcode)
    # redux.sync's .f32 forms: four targets only (not sm_100, not sm_110f/a, sm_120f/a ...)
    f32 = _contract("redux_sync_f32", "redux.sync.max.f32")
    assert f32.min_arch == "sm_100f" and f32.archs == ("sm_100f", "sm_100a", "sm_103f", "sm_103a")


# -- the rule ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "form", [f for forms in REPRESENTATIVES.values() for f in forms], ids=lambda f: f.key.replace("::", "_")
)
def test_rule_refuses_below_the_floor_and_accepts_at_it(form):
    c = form.contract
    assert rule_arch(c, _target_at(c)) is None
    below = _below(c)
    err = rule_arch(c, below)
    assert err is not None and c.opcode in str(err) and f"found {below}" in str(err)
    if arch_key(below)[0] < arch_key(c.min_arch)[0] or not c.archs:
        assert f"needs {c.min_arch} or newer" in str(err) and "ptxas 13.0" in str(err)
    else:  # same version, plain target: not one of the form's only targets
        assert "specific to another architecture" in str(err)


def test_sm90_is_not_sm90a():
    wgmma = candidates("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16")[0]  # ss (rs: same text)
    assert "specific to another architecture" in str(rule_arch(wgmma, "sm_90"))
    assert rule_arch(wgmma, "sm_90a") is None
    assert "specific to another architecture" in str(rule_arch(wgmma, "sm_100a"))
    (setmaxnreg,) = candidates("setmaxnreg.inc.sync.aligned.u32")
    assert "specific to another architecture" in str(rule_arch(setmaxnreg, "sm_90"))
    # a suffixed floor without an "only" list: a plain target of the same version lacks it
    suffixed = next(
        f.contract
        for forms in REPRESENTATIVES.values()
        for f in forms
        if arch_key(f.contract.min_arch)[1] and not f.contract.archs
    )
    plain = f"sm_{arch_key(suffixed.min_arch)[0]}"
    assert "with the a or f suffix" in str(rule_arch(suffixed, plain))
    assert rule_arch(suffixed, suffixed.min_arch) is None


def test_a_form_missing_from_the_targets_it_skips_is_refused():
    """TMA ``.cta_group``: ptxas accepts it for the sm_100/sm_103/sm_110 a and f targets only."""
    (c,) = candidates(TMA_LOAD + ".cta_group::1")
    assert c.min_arch == "sm_100f" and "sm_100a" in c.archs
    assert "needs sm_100f or newer" in str(rule_arch(c, "sm_90a"))
    assert "specific to another architecture" in str(rule_arch(c, "sm_120a"))
    assert "specific to another architecture" in str(rule_arch(c, "sm_100"))


# -- compiling: refused before nvcc, accepted and assembled at the floor ------------------------


@pytest.fixture
def no_compiler(monkeypatch):
    """A compile (nvcc, ptxas, anything but a ``--version`` query for the cache key)
    started from here on fails the test."""
    run, popen = subprocess.run, subprocess.Popen

    def guard(real):
        def call(argv, *args, **kwargs):
            if "--version" not in list(argv):
                raise AssertionError(f"a compiler ran: {argv}")
            return real(argv, *args, **kwargs)

        return call

    monkeypatch.setattr(subprocess, "run", guard(run))
    monkeypatch.setattr(subprocess, "Popen", guard(popen))


def test_tma_load_for_sm80_is_refused_before_nvcc(no_compiler):
    @T.function
    def k(A: T.Tensor((8, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=2048))
        tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        if T.cuda.thread_idx("x") == 0:
            T.cuda.tile.apply(T.ptx[TMA_LOAD], tile, A, mbar=bar, coords=(0, 0))

    with pytest.raises(TileError) as err:
        tvm_tirx.compile(k, target="cuda", arch="sm_80")
    text = str(err.value)
    assert f"{TMA_LOAD}: needs sm_90 or newer (PTX ISA 9.7.9.25.5.1" in text
    assert "ptxas 13.0" in text and text.endswith("expected a target of sm_90 or newer, found sm_80")


def test_bulk_copy_for_sm80_is_refused_before_nvcc(no_compiler):
    @T.function
    def k(A: T.Tensor((64,), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        s = T.alloc_shared((64,), "float32", align=16)
        bar = T.alloc_shared((1,), "uint64", align=8)
        if T.cuda.thread_idx("x") == 0:
            T.cuda.tile.apply(T.ptx[BULK_LOAD], s, A, mbar=bar)

    with pytest.raises(TileError, match=r"needs sm_90 or newer \(PTX ISA 9\.7\.10\.28\.4\.1.*found sm_80(?:\n|$)"):
        tvm_tirx.compile(k, target="cuda", arch="sm_80")


def _family_floor_groups():
    """``[(family, target, forms)]``: the representatives of a family by the target they compile for."""
    out = []
    for name, forms in sorted(REPRESENTATIVES.items()):
        by_target = defaultdict(list)
        for f in forms:
            by_target[_target_at(f.contract)].append(f)
        out += [(name, target, group) for target, group in sorted(by_target.items(), key=lambda kv: arch_key(kv[0]))]
    return out


@pytest.mark.parametrize("family", sorted(REPRESENTATIVES))
def test_each_family_refuses_a_form_below_its_floor_when_compiled(family, tmp_path):
    """The form of the family's newest floor up to sm_90a, in a kernel lowered for the target below it."""
    forms = sorted(REPRESENTATIVES[family], key=lambda f: arch_key(f.contract.min_arch))
    form = [f for f in forms if arch_key(f.contract.min_arch) <= arch_key("sm_90a")][-1]
    below = _below(form.contract)
    func = testing.load_kernel(form_kernels.kernel_source(family, [form]), tmp_path)
    with pytest.raises(TileError, match=rf"{form.contract.opcode.replace('.', '[.]')}.*found {below}(?:\n|$)"):
        tvm_tirx.compile(func, target="cuda", arch=below)


@testing.requires_nvcc
@pytest.mark.parametrize("family, target, forms", _family_floor_groups(), ids=lambda v: v if isinstance(v, str) else "")
def test_forms_compile_and_assemble_at_their_floor(family, target, forms, tmp_path):
    func = testing.load_kernel(form_kernels.kernel_source(family, forms), tmp_path)
    kernel = tvm_tirx.compile(func, target="cuda", arch=target)
    assert len(testing.assemble(kernel)) > 0
