"""Each tile call is decoded once per kernel (issue 44, deliverable 1).

The lowering, the uniformity rules, the write sets, the protocol and the family rules
all read a call through the kernel's :class:`~tvm_tirx.tile.kernel.kernel_calls.KernelCalls`;
none of them parses the call's IR again.
"""

import ast
import collections
import pathlib
import sys

import pytest

from tvm_tirx import testing
from tvm_tirx.kernels.gemm import make_gemm
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.rules import op
from tvm_tirx.tile.kernel.kernel_calls import KernelCalls

from test_uniformity_dataflow import _kernel, _ld_then_add

TILE = pathlib.Path(__file__).resolve().parents[2] / "python" / "tvm_tirx" / "tile"


@pytest.fixture
def decodes(monkeypatch):
    """``Counter`` of ``op.decode`` calls per Call, wherever a module imported it from."""
    seen = collections.Counter()
    original = op.decode

    def counting(call):
        seen[hash(call)] += 1
        return original(call)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("tvm_tirx.") and getattr(module, "decode", None) is original:
            monkeypatch.setattr(module, "decode", counting)
    return seen


KERNELS = {
    # uniformity through ld.shared and add, a guarded warp collective
    "ticket": lambda: _kernel(_ld_then_add),
    # TMA, mbarrier rings, wgmma, named barriers, the protocol rules
    "gemm": lambda: make_gemm(256, 256, 256),
}


@pytest.mark.parametrize("make", KERNELS.values(), ids=KERNELS.keys())
def test_each_tile_call_is_decoded_once_while_lowering(make, decodes):
    func = make()
    testing.lower(func)
    assert decodes, "the kernel has tile calls"
    twice = {k: n for k, n in decodes.items() if n > 1}
    assert not twice, f"{len(twice)} of {len(decodes)} calls decoded more than once (up to {max(twice.values())} times)"


def test_kernel_calls_keeps_one_decoding_per_statement(decodes):
    @T.function
    def two_movs(Out: T.Tensor((2,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        a = T.alloc_local((1,), "int32")
        b = T.alloc_local((1,), "int32")
        a[0] = 1
        T.cuda.tile.apply(T.ptx["mov.b32"], b, a)
        Out[0] = b[0]

    calls = KernelCalls()
    found = []
    import tvm_ffi  # pylint: disable=import-outside-toplevel
    from tvm import tirx  # pylint: disable=import-outside-toplevel

    tvm_ffi.structural_walk(two_movs.body, (tirx.Evaluate, found.append))
    stmt = next(s for s in found if op.is_tile_call(s.value))
    first, again = calls.tile_call(stmt), calls.tile_call(stmt)
    assert first is again and first.opcode == "mov.b32"
    view = calls.view(stmt)
    assert view is calls.view(stmt) and view.contract.register_function
    assert [b.name for b in calls.targets(stmt)] == ["b", "a"]
    assert sum(decodes.values()) == 1


def _imports_decode(path: pathlib.Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("op")
               and any(alias.name == "decode" for alias in node.names) for node in ast.walk(tree))


def test_only_the_call_table_decodes_tile_calls():
    """Readers ask the kernel's call table; ``op.decode`` is imported by it alone."""
    readers = sorted(p.relative_to(TILE).as_posix() for p in TILE.rglob("*.py") if _imports_decode(p))
    assert readers == ["kernel/kernel_calls.py"]


def test_shared_code_names_no_register_mnemonics():
    """Whether a call's result is a function of its sources is its contract's
    ``register_function``; the mnemonic table is the register family's own."""
    shared = [p for p in TILE.rglob("*.py") if "families" not in p.parts]
    assert not [p.name for p in shared if "MNEMONICS" in p.read_text(encoding="utf-8")]
