"""Why the deterministic kernel in sections of one key/value head (head_dim 128, causal, run-time sizes) failed
the checker on an H100 (2026-12-07: "index arithmetic may overflow int32" at the order count's red.release)
while it compiles on the CPU: compile it with and without arch=, with the prover's Z3 budget at 1x, 4x and 16x,
and print whether apache-tvm has Z3 here."""

import tvm
import tvm_tirx
import tvm_tirx.tile.analysis.prover as prover
from tvm_tirx.kernels.attention_backward import make_attention_backward
from tvm_tirx.script import tirx as T

BASE = prover.Z3_RLIMIT
FACTORS = (1, 4)
ARCHES = ("sm_90a", None)
print("z3 enabled:", tvm.sym.Analyzer().is_z3_enabled, "rlimit", BASE)
for arch in ARCHES:
    for factor in FACTORS:
        prover.Z3_RLIMIT = BASE * factor
        func = make_attention_backward(T.dynamic("B"), T.dynamic("L"), 8, 128, kv_heads=2, causal=True,
                                       dq_split="columns", deterministic=True, overlap=True, longest_first=True,
                                       section=1)
        options = {"arch": arch} if arch else {}
        try:
            tvm_tirx.compile(func, target="cuda", options={"detect_hangs": True}, **options)
            print(arch, factor, "compiled")
        except Exception as err:  # noqa: BLE001  (a probe: print whatever it raises)
            print(arch, factor, type(err).__name__, str(err)[:200])
