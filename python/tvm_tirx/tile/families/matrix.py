"""Warp matrix instructions: ``ldmatrix``, ``stmatrix`` and ``mma.sync``.

All three are warp-collective (``.sync.aligned``): the 32 lanes of a warp
issue them together, so the lane is part of the atom -- at ``scope="warp"``
the operands have no group axes, at wider scopes the group is the warps.

``ldmatrix/stmatrix .m8n8.x{1,2,4}[.trans].shared.b16`` (PTX ISA 9.7.14.5.15,
9.7.14.5.16): operands ``(registers, shared rows)`` / ``(shared rows,
registers)``, both ending in ``(count, 8, 4)`` b32 words -- ``count`` 8x8
matrices of 16-bit elements, rows of four words.  Lane ``8*m + r`` supplies
the address of row ``r`` of matrix ``m`` (for ``.x1``/``.x2`` the remaining
lanes repeat the rows of the first matrices; the ISA ignores their
addresses); word ``(m, r, w)`` lands in register ``m`` of lane ``4*r + w``.
Each row must be 16 contiguous, 16-byte aligned bytes; rows may be anywhere.

``mma.sync.aligned.m16n8k{8,16}.row.col.f32.{f16,bf16}.{f16,bf16}.f32``
(PTX ISA 9.7.14.5.8): operands ``D, A, B, C`` with atoms D/C ``(16, 8)``
float32, A ``(16, k/2)`` and B ``(8, k/2)`` b32 words (B is stored n-major,
the ``.col`` operand).  The calls' repeat axes are ``(M, N, K)``: D and C
carry ``(M, N)``, A ``(M, K)``, B ``(N, K)``; each ``(m, n, k)`` issues one
mma ``D[m, n] = A[m, k] B[n, k] + C[m, n]`` (pass ``C = D`` to accumulate
over K).  The lane owning each element is the ISA's fragment map below.
"""

from __future__ import annotations

from ..contract import Contract, register_role
from ..instruction import Instruction

MNEMONICS = ("ldmatrix", "stmatrix", "mma")

_COUNT = {"x1": 1, "x2": 2, "x4": 4}


# -- the ISA's lane maps, as named constants ---------------------------------


def ldmatrix_word_coords(count: int):
    """``lane -> [(m, r, w) for m in range(count)]``: the b32 word each lane
    receives in register ``m`` (PTX ISA 9.7.14.5.15: lane ``4*r + w``)."""
    return lambda lane: [(m, lane // 4, lane % 4) for m in range(count)]


def ldmatrix_row_address(count: int):
    """``lane -> [(m, r, 0)]``: the row whose address lane supplies (lane ``8*m + r``)."""
    return lambda lane: [((lane // 8) % count, lane % 8, 0)]


def mma_c_coords(lane):
    """C/D fragment of m16n8 (f32): ``[(row, col)]`` of c0..c3 (PTX ISA 9.7.14.5.8)."""
    g, t = lane // 4, lane % 4
    return [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]


def mma_a_coords(k_words: int):
    """A fragment of m16n8k{8,16} (16-bit types), ``[(row, word)]`` of a0..: rows
    ``g, g+8``, words ``t`` (and ``t+4`` for k16)."""

    def coords(lane):
        g, t = lane // 4, lane % 4
        out = [(g, t), (g + 8, t)]
        if k_words == 8:
            out += [(g, t + 4), (g + 8, t + 4)]
        return out

    return coords


def mma_b_coords(k_words: int):
    """B fragment (stored n-major, ``(n, word)``) of m16n8k{8,16}: column ``g``,
    words ``t`` (and ``t+4`` for k16)."""

    def coords(lane):
        g, t = lane // 4, lane % 4
        return [(g, t)] + ([(g, t + 4)] if k_words == 8 else [])

    return coords


# -- contracts ------------------------------------------------------------------


def _matrix_contract(instr: Instruction) -> Contract | str:
    if instr.modifiers.get("shape") != "m8n8" or instr.entry_name not in ("ldmatrix", "stmatrix"):
        return "only the .m8n8 .b16 forms of ldmatrix/stmatrix are tile forms"
    count = _COUNT[instr.modifiers["num"]]
    addr = next(op for op in instr.operands if op.kind == "addr")
    if addr.space not in ("shared", "shared::cta"):
        return f"{instr.mnemonic} tile forms name the state space .shared or .shared::cta (found generic addressing)"
    regs = next(op for op in instr.operands if op.kind == "reg")
    loads = instr.mnemonic == "ldmatrix"
    reg_role = register_role("dst" if loads else "src", regs)
    reg_role = _replace(reg_role, atom=(count, 8, 4), lane_coords=ldmatrix_word_coords(count))
    from ..contract import OperandRole  # pylint: disable=import-outside-toplevel

    mem_role = OperandRole(
        role="src" if loads else "dst",
        ptx=addr,
        kind="memory",
        atom=(count, 8, 4),
        dtypes=("uint32", "int32", "float32"),
        writes=not loads,
        scopes=("shared", "shared.dyn"),
        lane_coords=ldmatrix_row_address(count),
    )
    roles = (reg_role, mem_role) if loads else (mem_role, reg_role)
    return Contract(instruction=instr, roles=roles, collective=True)


def _mma_contract(instr: Instruction) -> Contract | str:
    m = instr.modifiers
    if (
        instr.entry_name != "mma"
        or m.get("shape") not in ("m16n8k8", "m16n8k16")
        or (m.get("alayout"), m.get("blayout")) != ("row", "col")
        or m.get("atype") not in ("f16", "bf16")
    ):
        return "tile forms of mma.sync: m16n8k8/m16n8k16 .row.col .f32 with .f16/.bf16 inputs"
    k_words = 4 if m["shape"] == "m16n8k8" else 8
    ops = {op.name: op for op in instr.operands}
    d = _replace(register_role("D", ops["d"]), atom=(16, 8), lane_coords=mma_c_coords, repeat_axes=(0, 1))
    a = _replace(register_role("A", ops["a"]), atom=(16, k_words), lane_coords=mma_a_coords(k_words), repeat_axes=(0, 2))
    b = _replace(register_role("B", ops["b"]), atom=(8, k_words), lane_coords=mma_b_coords(k_words), repeat_axes=(1, 2))
    c = _replace(register_role("C", ops["c"]), atom=(16, 8), lane_coords=mma_c_coords, repeat_axes=(0, 1))
    return Contract(instruction=instr, roles=(d, a, b, c), collective=True, repeat_rank=3)


def _replace(role, **changes):
    from dataclasses import replace  # pylint: disable=import-outside-toplevel

    return replace(role, **changes)


def contract(instr: Instruction) -> Contract | str:
    """The tile contract of an ldmatrix/stmatrix/mma form, or the reason it has none."""
    if instr.mnemonic == "mma":
        return _mma_contract(instr)
    return _matrix_contract(instr)
