"""The ``setmaxnreg`` family: its register count, its target and the register cap it needs.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import COLLECTIVE, OPCODE, PRED, Case, example


CASES = [
    Case(
        OPCODE,
        r"instruction is specific to another architecture",
        "Arch-specific instruction compiled for another target",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, min_blocks_per_sm=1))
                T.cuda.tile.apply(T.ptx["setmaxnreg.inc.sync.aligned.u32"], scope="warpgroup", nreg=232)
        '''),
        "compile-sm100a",
        "``wgmma`` and ``setmaxnreg`` belong to sm_90a's arch-specific feature set: "
        "ptxas refuses them for sm_90 (no ``a``), and ``wgmma`` for every newer "
        "architecture (sm_100a has ``tcgen05`` instead); the ``setmaxnreg`` family "
        "is written for sm_90a's warpgroups and names it alone. A form that ptxas "
        "assembles for some targets only (a TMA's ``.cta_group``: the sm_100, sm_103 "
        "and sm_110 ``a``/``f`` targets) lists them the same way.",
        'Compile this kernel for ``arch="sm_90a"``.',
    ),
    Case(
        COLLECTIVE,
        r"setmaxnreg without a register cap at the kernel's entry",
        "setmaxnreg in a kernel without launch bounds",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
                if T.cuda.warp_id() < 4:
                    T.cuda.tile.apply(T.ptx["setmaxnreg.dec.sync.aligned.u32"], scope="warpgroup", nreg=40)
                else:
                    T.cuda.tile.apply(T.ptx["setmaxnreg.inc.sync.aligned.u32"], scope="warpgroup", nreg=232)
        '''),
        "lower",
        "ptxas applies ``setmaxnreg`` only when it knows the register count at the "
        "kernel's entry; otherwise it drops the instruction with warning C7508 and "
        "the warpgroups keep their registers.",
        "Cap the registers at entry: ``T.cuda.LaunchConfig(..., min_blocks_per_sm=1)`` "
        "(``__launch_bounds__(threads, 1)``) or ``max_registers=``.",
    ),
    Case(
        PRED,
        r"invalid parameter 'nreg'",
        "A family parameter its check refuses",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, min_blocks_per_sm=1))
                T.cuda.tile.apply(T.ptx["setmaxnreg.dec.sync.aligned.u32"], scope="warpgroup", nreg=36)
        '''),
        "parse",
        "A keyword parameter the instruction family owns has its own rule: "
        "``setmaxnreg``'s register count is 24 to 256 in steps of 8 (PTX ISA).",
        "Pass a value the message allows (``nreg=40``).",
    ),
    Case(
        COLLECTIVE,
        r"setmaxnreg asks for more registers than the register file holds",
        "Warpgroups asking for more registers than the SM has",
        example('''
            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384, min_blocks_per_sm=1))
                if T.cuda.warp_id() < 4:
                    T.cuda.tile.apply(T.ptx["setmaxnreg.dec.sync.aligned.u32"], scope="warpgroup", nreg=40)
                else:
                    T.cuda.tile.apply(T.ptx["setmaxnreg.inc.sync.aligned.u32"], scope="warpgroup", nreg=240)
        '''),
        "lower",
        "``setmaxnreg.inc`` waits until the CTA's register pool can give the warpgroup "
        "its new count. 128 threads x (40 + 240 + 240) registers is more than the 64 K "
        "32-bit registers of an SM, so the second consumer's ``inc`` waits forever.",
        "Ask for counts that add up to at most 512 per thread over the warpgroups "
        "(the GEMM's 40 + 232 + 232), or fewer consumer warpgroups.",
    ),
]
