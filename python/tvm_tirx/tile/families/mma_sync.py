"""``mma.sync``: warp-collective matrix multiply-accumulate of m16n8k8 / m16n8k16 tiles.

PTX ISA
    9.7.14.5.8 (``mma``), 9.7.14.5.8.1 (fragment layouts of m16n8k8 / m16n8k16).
Forms
    ``mma.sync.aligned.m16n8k{8,16}.row.col.f32.{f16,bf16}.{f16,bf16}.f32``.
Operand roles and atoms
    ``D, A, B, C``: D/C ``(16, 8)`` float32, A ``(16, k/2)`` and B ``(8, k/2)``
    b32 words (B stored n-major, the ``.col`` operand).  The call's repeat axes
    are ``(M, N, K)``: D and C carry ``(M, N)``, A ``(M, K)``, B ``(N, K)``; each
    ``(m, n, k)`` issues one ``D[m, n] = A[m, k] B[n, k] + C[m, n]`` (pass
    ``C = D`` to accumulate over K).
Legality
    Warp-collective (the lane is in the atom; a guard keeps whole warps).
    The lane owning each element is the ISA's fragment map below; the
    register layouts must place each element on that lane, in the same
    register slot on every lane.
Lowering emits
    One ``mma`` per ``(m, n, k)`` per warp, K innermost.
Architectures
    sm_80; m16n8k8 with f16 inputs: sm_75 (measured with ptxas 13.0
    (``tools/probe_arch_floors.py``, ``arch_floors.json``)).
"""

from __future__ import annotations

from .. import WARP, Contract, Instruction, register_family, register_role


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


@register_family(claims=lambda entry: entry.mnemonic == "mma", isa={"mma": "9.7.14.5.8"})
def contract(instr: Instruction) -> Contract | str:
    """The tile contract of an mma.sync form, or the reason it has none."""
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
    roles = (
        register_role("D", ops["d"], atom=(16, 8), lane_coords=mma_c_coords, repeat_axes=(0, 1)),
        register_role("A", ops["a"], atom=(16, k_words), lane_coords=mma_a_coords(k_words), repeat_axes=(0, 2)),
        register_role("B", ops["b"], atom=(8, k_words), lane_coords=mma_b_coords(k_words), repeat_axes=(1, 2)),
        register_role("C", ops["c"], atom=(16, 8), lane_coords=mma_c_coords, repeat_axes=(0, 1)),
    )
    return Contract(instruction=instr, roles=roles, collective=WARP, repeat_rank=3)
