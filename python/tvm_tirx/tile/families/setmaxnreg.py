"""``setmaxnreg``: a warpgroup raises or lowers its per-thread register count (sm_90a).

``T.cuda.tile.apply(T.ptx["setmaxnreg.dec.sync.aligned.u32"], scope="warpgroup", nreg=40)``

Why a tile family and not a ``T.cuda`` helper: the instruction is a
collective of a warpgroup (``.sync.aligned``: the 128 threads execute it
together), and the rule that makes it useful -- each warpgroup's role is a
branch on the warpgroup index, so a guard keeps whole warpgroups -- is the
group check every collective tile form already gets (:mod:`..analysis.groups`).  A
helper would have to re-derive that from the guards; as a zero-operand tile
form it costs one small module.

PTX ISA
    9.7.19.5 (``setmaxnreg``; 9.7.21.5 in the numbering of apache-tvm 0.27's table).
Forms
    ``setmaxnreg.inc.sync.aligned.u32`` and ``setmaxnreg.dec.sync.aligned.u32``.
Operand roles and atoms
    No tensor operands.  Parameter ``nreg``: the new register count per
    thread, an integer in ``[24, 256]``, a multiple of 8 (the ISA's range).
Legality
    A collective of the 128 threads of a warpgroup: at ``scope="warpgroup"``
    (or ``"cta"``), under guards that keep whole, aligned warpgroups (a branch
    on the warpgroup index).  The kernel needs a register cap at entry:
    ``LaunchConfig(min_blocks_per_sm=...)`` (``__launch_bounds__(T, n)``) or
    ``max_registers=``; without one ptxas ignores ``setmaxnreg`` (measured
    with CUDA 13.0: "C7508 ... 'setmaxnreg' ignored; unable to determine
    register count at entry").  Whether ``inc`` raises and ``dec`` lowers the
    count the warpgroup has is the author's (the ISA leaves other uses undefined).
Lowering emits
    One ``setmaxnreg`` per thread of each executing warpgroup.
Architectures
    sm_90a only (arch-specific: ptxas refuses plain sm_90). ptxas 13.0 also
    assembles it for the ``a``/``f`` targets from sm_100 on; this family is
    written for sm_90a's warpgroups and names sm_90a alone (measured with ptxas
    13.0 (``tools/probe_arch_floors.py``, ``arch_floors.json``)).
"""

from __future__ import annotations

from .. import WARPGROUP, Contract, Instruction, Param, RawSpelling, TileError, reaching, register_family

#: Register counts the ISA allows (PTX ISA 9.7.19.5): 24 to 256 in steps of 8.
NREG_RANGE = range(24, 257, 8)
#: 32-bit registers of an SM's register file on sm_90 (CUDA C++ Programming Guide,
#: "Technical Specifications per Compute Capability": 64 K per SM and per CTA).
REGISTER_FILE = 65536
WARPGROUP_THREADS = 128
#: Kernel attributes (``T.device_entry``'s launch bounds) that cap the registers at entry.
_CAPS = ("tirx.launch_bounds_min_blocks_per_sm", "tirx.max_registers")


def _check_nreg(value):
    try:
        n = int(value)
    except (TypeError, ValueError):
        return f"{value} (an integer constant)"
    return None if n in NREG_RANGE else f"{n} (the ISA's range is 24..256 in steps of 8)"


def _register_cap(opcode):
    """``kernel_check`` of setmaxnreg: a register cap among the kernel's entry attributes."""

    def check(call):
        if any(key in call.facts.entry_attrs for key in _CAPS):
            return None
        return TileError(
            opcode,
            "setmaxnreg without a register cap at the kernel's entry",
            expected="T.cuda.LaunchConfig(..., min_blocks_per_sm=1) (or max_registers=...): "
            "ptxas ignores setmaxnreg otherwise (C7508)",
            found="a launch without min_blocks_per_sm or max_registers",
        )

    return check


def contract(instr: Instruction) -> Contract:
    """The tile contract of a setmaxnreg form (every form is one)."""
    return Contract(
        instruction=instr,
        roles=(),
        options={"nreg": Param("the register count per thread (24..256, a multiple of 8)", _check_nreg)},
        collective=WARPGROUP,
        archs=("sm_90a",),
        derived={"nreg": lambda call: int(call.params["nreg"])},
        kernel_check=_register_cap(instr.opcode),
    )


def _entry_registers(facts) -> int | None:
    """Registers per thread a warpgroup has at entry, when the kernel caps them: the
    ``max_registers`` cap, or what ``min_blocks_per_sm`` CTAs leave (rounded down to 8)."""
    cap = getattr(facts.entry_attrs.get("tirx.max_registers"), "value", None)
    blocks = getattr(facts.entry_attrs.get("tirx.launch_bounds_min_blocks_per_sm"), "value", None)
    if cap is not None:
        return int(cap)
    if blocks:
        return min(255, REGISTER_FILE // (facts.launch.threads * int(blocks)) // 8 * 8)
    return None


def register_total(view):
    """The register counts the warpgroups of a CTA end with fit the register file.

    ``setmaxnreg.inc`` waits until the CTA's pool has the registers it asks for
    (PTX ISA 9.7.19.5): if the counts the warpgroups ask for add up to more than
    the register file (:data:`REGISTER_FILE` 32-bit registers, 128 threads per
    warpgroup), the last ``inc`` waits forever.  A warpgroup that reaches no
    ``setmaxnreg`` keeps its entry count (the kernel's cap).
    """
    facts = view.facts
    calls = [c for c in view.calls.values() if c.contract.instruction.entry_name == "setmaxnreg"]
    if not calls or facts.launch is None:
        return []
    asked, where = {}, {}
    for call in calls:
        nreg = int(call.params["nreg"])
        for t, _ in reaching(call, "warpgroup"):
            group = t // WARPGROUP_THREADS
            if nreg > asked.get(group, 0):
                asked[group], where[group] = nreg, call.site.location
    entry = _entry_registers(facts) or 0
    groups = facts.launch.threads // WARPGROUP_THREADS
    counts = [asked.get(g, entry) for g in range(groups)]
    total = sum(counts) * WARPGROUP_THREADS
    if total <= REGISTER_FILE:
        return []
    parts = ", ".join(f"warpgroup {g}: {n}" + (f" ({where[g]})" if g in where else " (entry)") for g, n in enumerate(counts))
    return [TileError(
        calls[0].opcode, "setmaxnreg asks for more registers than the register file holds",
        expected=f"at most {REGISTER_FILE} registers per CTA: 128 x (sum of the warpgroups' counts) (PTX ISA 9.7.19.5)",
        found=f"128 x ({' + '.join(map(str, counts))}) = {total}: {parts}",
    ).at(calls[-1].site.location)]


# The family: its contract and every role it plays (one registry.Family).
register_family(
    entries=("setmaxnreg",),
    isa={"setmaxnreg": "9.7.19.5"},
    kernel_rules=(register_total,),
    # a raw T.ptx["setmaxnreg.inc.sync.aligned.u32"](232) is checked as its tile form
    # (nreg=232): the count, the register cap, the warpgroups' total
    raw=RawSpelling(("setmaxnreg",), {"nreg": "nreg"}),
)(contract)
