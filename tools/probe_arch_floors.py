"""Measure the architectures on which ptxas accepts every form of every tile family.

For every registered family (``tvm_tirx.tile.ir.registry.families``) and every
form of it (``tvm_tirx.tile.ir.forms.forms_of``) this builds kernels issuing the
forms through ``T.cuda.tile.apply`` (``tests/python/form_kernels.py``, a few
hundred forms per kernel), lowers them with the arch rule switched off, turns
each kernel's CUDA into PTX once with nvcc, and assembles that PTX with ptxas
for each target of :data:`TARGETS` (the ``.target`` line rewritten; the
generated CUDA is the same for every target).  Each ptxas error is charged to
the form whose opcode its line holds; an error on another line (a ``mapa`` the
family emits, a cluster launch) is charged to every form of the kernel, and a
kernel holds only forms of one table entry with the same parameters, which
share those.

It writes ``python/tvm_tirx/tile/families/arch_floors.json``, read by
:mod:`tvm_tirx.tile.ir.arch_floors`: per family and table entry, the floor of
each form (the oldest target of :data:`TARGETS` that accepts it) and, when the
targets accepting it are not every target from the floor on, that list --
compactly, a floor per opcode token and the forms that rule misses
(:func:`record`) -- and ptxas's message for each form no target accepts.
Run it again when apache-tvm's PTX table, a family or the CUDA toolkit changes
(about 15 minutes on two busy cores, most of it lowering the 56 000 ``ld``/``st`` forms)::

    python tools/probe_arch_floors.py                 # every family
    python tools/probe_arch_floors.py tma cp_async    # re-measure some, keep the rest
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from unittest import mock

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

import tvm_tirx  # noqa: E402
import tvm_tirx.tile.lower.lower as _lower  # noqa: E402
import tvm_tirx.tile.ir.registry as _registry  # noqa: E402
from tvm_tirx import testing  # noqa: E402
from tvm_tirx.tile.ir import arch_floors  # noqa: E402
from tvm_tirx.tile.ir.forms import forms_of  # noqa: E402
from tvm_tirx.tile.ir.ptx_table import cert_arch  # noqa: E402
from tvm_tirx.tile.ir.registry import families  # noqa: E402

import form_kernels  # noqa: E402  (tests/python)

#: Every real target the ptxas of CUDA 13.0 assembles for, oldest first
#: (``ptxas --help``, option ``--gpu-name``; sm_75 is its oldest).
TARGETS = arch_floors.TARGETS
#: Forms per kernel: TVMScript's parser recurses once per statement.
BATCH = 200
#: The arch the CUDA is generated for (any: the instructions are inline asm).
CODEGEN_ARCH = "sm_90a"
OUT = ROOT / "python/tvm_tirx/tile/families/arch_floors.json"


def _ptx_of(cuda: str, tmp: str) -> str:
    """PTX of ``cuda`` for :data:`CODEGEN_ARCH` (nvcc also runs ptxas; its verdict is ignored)."""
    src, out = f"{tmp}/k.cu", f"{tmp}/k.ptx"
    pathlib.Path(src).write_text(cuda)
    arch = CODEGEN_ARCH.replace("sm_", "compute_")
    proc = subprocess.run(
        ["nvcc", "--ptx", f"-arch={arch}", "-std=c++17", "-w", "-o", out, src], capture_output=True, text=True, check=False
    )
    if not pathlib.Path(out).exists():
        raise RuntimeError(f"nvcc made no PTX:\n{proc.stderr}")
    return pathlib.Path(out).read_text()


def _errors(ptx: str, target: str, tmp: str) -> list:
    """``[(line, message, line text)]`` that ptxas reports for ``ptx`` retargeted to ``target``."""
    text = re.sub(r"^\.target\s+\S+", f".target {target}", ptx, count=1, flags=re.M)
    path = f"{tmp}/{target}.ptx"
    pathlib.Path(path).write_text(text)
    proc = subprocess.run(
        ["ptxas", f"-arch={target}", "-O0", path, "-o", f"{tmp}/{target}.cubin"], capture_output=True, text=True, check=False
    )
    lines = text.splitlines()
    found = [
        (int(n), msg.strip(), lines[int(n) - 1].strip() if int(n) <= len(lines) else "")
        for n, msg in re.findall(r"line (\d+); error\s*:\s*(.*)", proc.stderr)
    ]
    if proc.returncode != 0 and not found:
        if "too much shared data" in proc.stderr:  # not the forms': the kernel's buffers (48 KB but on a targets)
            raise RuntimeError(f"{target}: a kernel of form_kernels.py declares too much shared memory:\n{proc.stderr}")
        found.append((0, proc.stderr.strip(), ""))
    return found


def _opcode_in(line: str, known) -> str:
    """The form opcode among the tokens of a PTX line, or ``""``."""
    for token in re.split(r"[\s{};,]+", line):
        if token in known:
            return token
    return ""


def _measure(forms, ptx: str) -> dict:
    """``{form key: (accepting targets, ptxas's message at the newest target or "")}``
    for the forms of one kernel."""
    by_opcode = defaultdict(list)
    for f in forms:
        by_opcode[f.opcode].append(f.key)
    accepts = {f.key: set() for f in forms}
    messages = {}
    with tempfile.TemporaryDirectory() as tmp:
        for target in TARGETS:
            rejected = set()
            for _, message, text in _errors(ptx, target, tmp):
                opcode = _opcode_in(text, by_opcode)
                keys = by_opcode[opcode] if opcode else list(accepts)
                rejected.update(keys)
                messages.update({k: message for k in keys})
            for key in accepts:
                if key not in rejected:
                    accepts[key].add(target)
    return {key: (targets, "" if targets else messages.get(key, "")) for key, targets in accepts.items()}


def _batches(forms):
    """Forms grouped by (table entry, parameters, options), at most :data:`BATCH` each."""
    groups = defaultdict(list)
    for f in forms:
        c = f.contract
        groups[(c.instruction.entry_name, tuple(sorted(c.params)), tuple(sorted(c.options)))].append(f)
    for group in groups.values():
        for i in range(0, len(group), BATCH):
            yield group[i : i + BATCH]


def probe_family(family, pool) -> dict:
    """``{form key: (accepting targets, ptxas message)}`` for every form of ``family``
    (its forms as the family states them: the recorded floors are not applied)."""
    with mock.patch.object(_registry, "with_floor", lambda contract: contract):
        _registry._contracts.cache_clear()  # pylint: disable=protected-access
        forms = forms_of(family)
    jobs = []
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(_lower, "rule_arch", lambda contract, arch: None):
        for n, batch in enumerate(_batches(forms)):
            name = f"{family.name}_{n}"
            func = testing.load_kernel(form_kernels.kernel_source(family.name, batch, name=name), tmp, name)
            cuda = tvm_tirx.compile(func, target="cuda", arch=CODEGEN_ARCH).cuda_source
            jobs.append(pool.submit(_job, batch, cuda))
    out = {}
    for job in jobs:
        out.update(job.result())
    return out


def _job(batch, cuda):
    """:func:`_measure` of one kernel's CUDA (run in the pool, beside the lowering)."""
    with tempfile.TemporaryDirectory() as tmp:
        ptx = _ptx_of(cuda, tmp)
    return _measure(batch, ptx)


def _value(targets, entry):
    """The recorded value of a form: its floor, or the list of its accepting
    targets (floor first) when they are not those ``satisfies`` admits from it;
    for a form no target accepts, the entry's ``cert_arch`` (None: none)."""
    ordered = [t for t in TARGETS if t in targets]
    if not ordered:
        return cert_arch(entry)
    admitted = [t for t in TARGETS if arch_floors.satisfies(t, ordered[0])]
    return ordered[0] if ordered == admitted else ordered


def record(measured) -> dict:
    """The JSON record of a family from ``{form key: (accepting targets, message)}``.

    Per table entry: ``forms`` (how many were measured), ``tokens`` (per opcode
    token, the oldest value among the measured forms holding it, by
    :func:`tvm_tirx.tile.ir.arch_floors.value_key`) and ``except`` (every form
    whose value the newest of its tokens' does not give, and every form no
    target accepts, listed whole), so that
    :func:`tvm_tirx.tile.ir.arch_floors.record_value` reproduces each measurement;
    ``unassembled``: ``{form key: ptxas's message}`` of the forms no target accepts.
    """
    by_entry = defaultdict(dict)
    unassembled = {}
    for key, (targets, message) in measured.items():
        entry, opcode = key.split(":", 1)
        by_entry[entry][opcode] = _value(targets, entry)
        if not targets:
            unassembled[key] = message
    entries = {}
    for entry, values in sorted(by_entry.items()):
        tokens = {}
        for opcode, value in values.items():
            if value is not None and f"{entry}:{opcode}" not in unassembled:
                for t in opcode.split(".")[1:]:
                    if t not in tokens or arch_floors.value_key(value) < arch_floors.value_key(tokens[t]):
                        tokens[t] = value
        exceptions = {}
        for opcode, value in values.items():
            covered, guess = arch_floors.record_value({"tokens": tokens, "except": {}}, opcode)
            if not covered or guess != value or f"{entry}:{opcode}" in unassembled:
                exceptions[opcode] = value
        entries[entry] = {"forms": len(values), "tokens": dict(sorted(tokens.items())), "except": dict(sorted(exceptions.items()))}
        for opcode, value in values.items():  # the record reproduces every measurement
            assert arch_floors.record_value(entries[entry], opcode) == (True, value), (entry, opcode)
    return {"entries": entries, "unassembled": dict(sorted(unassembled.items()))}


def _ptxas_version() -> str:
    """``"13.0 (V13.0.88)"``: the release of the ptxas on the PATH (``ptxas --version``)."""
    text = subprocess.run(["ptxas", "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"release (\S+), (V\S+)", text)
    return f"{match.group(1).rstrip(',')} ({match.group(2)})" if match else text.strip().splitlines()[-1]


def main(argv=None) -> int:
    """Probe the families named in ``argv`` (all by default) and write :data:`OUT`.

    Families not named keep their record.  Returns the exit status (0).

    Raises
    ------
    RuntimeError
        nvcc makes no PTX for a kernel, or ptxas finds it declares too much shared
        memory (a builder of ``form_kernels.py`` is wrong).
    AssertionError
        A record does not reproduce its measurements (a bug of :func:`record`).
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("families", nargs="*", help="only these families (default: all); the others keep their data")
    parser.add_argument("--jobs", type=int, default=2, help="nvcc/ptxas processes beside the lowering")
    args = parser.parse_args(argv)
    import tvm  # pylint: disable=import-outside-toplevel

    data = json.loads(OUT.read_text()) if OUT.exists() and args.families else {}
    if "families" not in data:  # nothing kept (or the old register-only format)
        data = {"families": {}}
    chosen = [f for f in families() if not args.families or f.name in args.families]
    unknown = set(args.families) - {f.name for f in chosen}
    if unknown:
        parser.error(f"no family {', '.join(sorted(unknown))}")
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for family in chosen:
            start = time.time()
            measured = probe_family(family, pool)
            data["families"][family.name] = record(measured)
            floors = defaultdict(int)
            for targets, _ in measured.values():
                floors[next((t for t in TARGETS if t in targets), "none")] += 1
            print(f"{family.name}: {len(measured)} forms in {time.time() - start:.0f} s, floors {dict(floors)}", flush=True)
    data["measured_with"] = {
        "ptxas": _ptxas_version(),
        "apache_tvm": tvm.__version__,
        "targets": list(TARGETS),
        "how": "tools/probe_arch_floors.py: each form assembled by ptxas for every target; floor = oldest accepting",
    }
    data["families"] = dict(sorted(data["families"].items()))
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"-> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
