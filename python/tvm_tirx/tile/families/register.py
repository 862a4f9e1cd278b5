"""Register families: ``mov``, ``cvt`` and the arithmetic instructions.

Every operand is a register of the issuing thread (PTX ISA 9.7.1 integer,
9.7.3 floating point, 9.7.4 half precision, 9.7.10.3/9.7.10.4 ``mov`` (scalar / pack-unpack), 9.7.10.24
``cvt``).  Operands, in call order, are the PTX operands: ``dst`` first, then
the sources under the ISA's names (``a``, ``b``, ``c``); a one-source form calls
its source ``src``, and the packed conversions ``cvt.rn.f16x2.f32 d, a, b``
call theirs ``hi`` and ``lo`` (``a`` fills the upper half).

Each operand's atom is ``(n,)``, ``n`` = registers in its PTX group (1, or the
group length of ``mov``'s pack/unpack forms).  A typed scalar may stand in
for any one-register source and is reused at every repeat.  Rounding,
saturation, packing and types come from the opcode only; the element width
equals the PTX type's (a packed ``f16x2`` value is one ``uint32``, ``f32x2``
one ``uint64``).

Some forms need a newer architecture than sm_90 (``add.f32x2``, three-input
``min``/``max``, the narrow ``cvt`` formats ...); ``arch_floors.json``,
measured with ptxas by ``tools/probe_arch_floors.py``, lists them.
"""

from __future__ import annotations

import functools
import json
import pathlib

from ..contract import Contract, register_role
from ..instruction import Instruction

MNEMONICS = (
    "mov",
    "cvt",
    "add",
    "sub",
    "mul",
    "fma",
    "min",
    "max",
    "div",
    "rcp",
    "sqrt",
    "ex2",
    "lg2",
    "abs",
    "neg",
)


def _role_names(instr: Instruction) -> list:
    sources = [op for op in instr.operands if not op.writes]
    names = {}
    if len(sources) == 1:
        names[sources[0].name] = "src"
    elif instr.mnemonic == "cvt" and [op.name for op in sources] == ["a", "b"]:
        names.update(a="hi", b="lo")  # PTX ISA 9.7.10.24: d = {cvt(a), cvt(b)}
    return [("dst" if op.writes else names.get(op.name, op.name)) for op in instr.operands]


@functools.cache
def arch_floors() -> dict:
    """``{"<entry>:<opcode>": "sm_XY"}`` for forms ptxas rejects at sm_90a."""
    path = pathlib.Path(__file__).with_name("arch_floors.json")
    if not path.exists():  # a broken install: refusing nothing would let sm_100 forms through
        raise RuntimeError(f"tvm_tirx: {path} is missing; reinstall the package (setup.py package_data)")
    return json.loads(path.read_text())["floors"]


def contract(instr: Instruction) -> Contract | str:
    """The tile contract of a register-family form, or the reason it has none."""
    if any(op.kind != "reg" for op in instr.operands):
        return "only register operands are tile operands in this family"
    if any(op.ptx_type == "pred" for op in instr.operands):
        return ".pred operands are not tile operands"
    roles = tuple(register_role(name, op) for name, op in zip(_role_names(instr), instr.operands))
    floor = arch_floors().get(f"{instr.entry_name}:{instr.opcode}")
    return Contract(instruction=instr, roles=roles, min_arch=floor)
