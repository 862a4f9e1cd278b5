"""Measure which register-family forms need a newer architecture than sm_90a.

For every form of the register families (``tvm_tirx.tile.forms``) this builds
kernels, assembles them with ptxas for sm_90a, and for each instruction ptxas
rejects finds the oldest of a few newer targets that accepts it.  It writes
``python/tvm_tirx/tile/families/arch_floors.json``, which the register family
reads as data.  Run it again when apache-tvm's PTX table or CUDA changes:

    python tools/probe_arch_floors.py
"""

import json
import pathlib
import re
import sys
import tempfile
from collections import defaultdict

import tvm_tirx
from tvm.backend.cuda.ptx.table import TABLE
from tvm_tirx import testing
from tvm_tirx.build.nvcc import nvcc
from tvm_tirx.tile.families import register_ops as register
from tvm_tirx.tile.forms import forms_of

BASE = "sm_90a"
NEWER = ("sm_100a", "sm_103a", "sm_110a", "sm_120a")
OUT = pathlib.Path(__file__).resolve().parents[1] / "python/tvm_tirx/tile/families/arch_floors.json"


def _opcode_in(line: str, known) -> str:
    """The form's opcode among the instructions of a PTX line (an asm block may
    also hold boundary conversions such as ``cvt.u8.u16``)."""
    for token in re.split(r"[\s{};,]+", line):
        if token in known:
            return token
    return ""


def rejected(forms, arch, tmp):
    """Keys of ``forms`` whose instruction ptxas rejects for ``arch``."""
    by_opcode = defaultdict(list)
    for f in forms:
        by_opcode[f.opcode].append(f.key)
    func = testing.load_kernel(testing.forms_kernel_source(forms), tmp)
    kernel = tvm_tirx.compile(func, target="cuda", arch=arch)
    bad = set()
    ptx = nvcc(kernel.cuda_source, kernel.target, "ptx", check=False).decode()
    for _, message, text in testing.ptxas_errors(ptx, arch):
        opcode = _opcode_in(text, by_opcode)
        if opcode not in by_opcode:
            raise RuntimeError(f"cannot map ptxas error to a form: {message} ({text!r})")
        bad.update(by_opcode[opcode])
    return bad


def main() -> int:
    OUT.unlink(missing_ok=True)  # probe every form at sm_90a, floors ignored
    register.arch_floors.cache_clear()
    forms = forms_of("register_ops")
    by_entry = defaultdict(list)
    for f in forms:
        by_entry[f.key.split(":", 1)[0]].append(f)
    floors = {}
    with tempfile.TemporaryDirectory() as tmp:
        for entry, entry_forms in by_entry.items():
            bad = rejected(entry_forms, BASE, tmp)
            pending = [f for f in entry_forms if f.key in bad]
            for arch in NEWER:
                if not pending:
                    break
                still = rejected(pending, arch, tmp)
                for f in pending:
                    if f.key not in still:
                        floors[f.key] = arch
                pending = [f for f in pending if f.key in still]
            for f in pending:
                # No ptxas target tried here takes it: use the arch at which
                # apache-tvm's table certified the entry (e.g. sm_107f).
                floors[f.key] = TABLE[entry].cert_arch or "unassemblable"
            print(f"{entry}: {len(entry_forms)} forms, {len(bad)} rejected at {BASE}", flush=True)
    OUT.write_text(
        json.dumps(
            {
                "measured_with": (
                    f"ptxas of the CUDA on PATH: rejected at {BASE}; floor = the first of "
                    f"{', '.join(NEWER)} that assembles, else the table entry's cert_arch"
                ),
                "floors": dict(sorted(floors.items())),
            },
            indent=1,
        )
        + "\n"
    )
    print(f"{len(forms)} forms, {len(floors)} need a newer arch -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
