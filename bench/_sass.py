"""What the assembler made of a kernel: ptxas resource use and a SASS opcode histogram."""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
import tempfile

#: SASS opcodes worth counting in the benchmark reports.
INTERESTING = ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "HMMA", "LDSM", "LDGSTS", "LDG", "STG", "LDS", "STS", "LDL", "STL", "BAR")


def report(kernel) -> str:
    """``ptxas -v`` registers/spills and SASS counts of ``kernel`` (a tvm_tirx.Kernel)."""
    arch = str(kernel.target.attrs["arch"])
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = f"{tmp}/k.cu", f"{tmp}/k.cubin"
        with open(src, "w", encoding="utf-8") as f:
            f.write(kernel.cuda_source)
        out = subprocess.run(
            ["nvcc", "-cubin", f"-arch={arch}", "-O3", "-w", "-Xptxas", "-v", "-o", cubin, src],
            capture_output=True, text=True, check=True,
        )
        usage = " | ".join(l.split(":", 1)[-1].strip() for l in out.stderr.splitlines() if "registers" in l or "spill" in l)
        tool = shutil.which("cuobjdump")
        if tool is None:
            return f"ptxas: {usage}\nSASS: cuobjdump not on PATH"
        sass = subprocess.run([tool, "-sass", cubin], capture_output=True, text=True, check=True).stdout
    counts = collections.Counter()
    for line in sass.splitlines():
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9]*)", line)
        if m and m.group(1) in INTERESTING:
            counts[m.group(1)] += 1
    hist = ", ".join(f"{k} {counts[k]}" for k in INTERESTING if counts[k])
    return f"ptxas: {usage}\nSASS (static counts): {hist}"
