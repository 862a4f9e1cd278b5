"""The register instructions: PTX mnemonics whose result is a function of their source
registers only (``mov``, ``cvt`` and the arithmetic).

One table for the family that checks and lowers them
(:mod:`.families.register_ops`) and for the uniformity rules, which let a value
stay uniform through them (:mod:`.uniform_sources`); it imports nothing, so
both can use it.
"""

from __future__ import annotations

__all__ = ["MNEMONICS"]

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
    "tanh",
    "abs",
    "neg",
)
