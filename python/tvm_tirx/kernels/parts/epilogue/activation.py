"""The activation stage of an epilogue chain, on a consumer thread's fp32 registers.

Activations (PTX ISA 9.7.4 and 9.7.3, the ``.approx`` forms):

* ``"relu"``: ``max(x, 0)``;
* ``"silu"``: ``x * sigmoid(x) = x * rcp(1 + ex2(-x * log2(e)))`` (``ex2.approx.ftz.f32``,
  ``rcp.approx.ftz.f32``: about 2 ulp; ``x`` very negative gives ``ex2 = inf``, ``rcp = 0``,
  ``-0``);
* ``"gelu_tanh"``: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, torch's
  ``gelu(approximate="tanh")``, with ``tanh.approx.f32`` (absolute error about 2^-11: use it
  for bf16 output; float32 output carries that error).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tvm.script import tirx as T

from .base import Geometry, Stage

__all__ = ["ACTIVATIONS", "Activation"]

#: the activations a stage may apply
ACTIVATIONS = ("relu", "silu", "gelu_tanh")
LOG2E = 1.0 / math.log(2.0)
GELU_C0 = math.sqrt(2.0 / math.pi)
GELU_C1 = GELU_C0 * 0.044715


def _macros(regs: int) -> dict:
    """The macros ``activate(x, tmp)`` over ``regs`` f32 registers ``x`` (a ``.local()``
    view), ``tmp`` ``regs`` scratch registers, by name."""

    @T.macro
    def relu(x, tmp):
        for r in T.unroll(regs):
            x[r] = T.max(x[r], T.float32(0.0))

    @T.macro
    def silu(x, tmp):
        for r in T.unroll(regs):
            tmp[r] = x[r] * T.float32(-LOG2E)
        T.cuda.tile.apply(T.ptx["ex2.approx.ftz.f32"], tmp.view(regs, 1), tmp.view(regs, 1))
        for r in T.unroll(regs):
            tmp[r] = tmp[r] + T.float32(1.0)
        T.cuda.tile.apply(T.ptx["rcp.approx.ftz.f32"], tmp.view(regs, 1), tmp.view(regs, 1))
        for r in T.unroll(regs):
            x[r] = x[r] * tmp[r]

    @T.macro
    def gelu_tanh(x, tmp):
        for r in T.unroll(regs):
            tmp[r] = x[r] * (T.float32(GELU_C0) + T.float32(GELU_C1) * x[r] * x[r])
        T.cuda.tile.apply(T.ptx["tanh.approx.f32"], tmp.view(regs, 1), tmp.view(regs, 1))
        for r in T.unroll(regs):
            x[r] = T.float32(0.5) * x[r] * (T.float32(1.0) + tmp[r])

    return {"relu": relu, "silu": silu, "gelu_tanh": gelu_tanh}


@dataclass(frozen=True)
class Activation(Stage):
    """Apply an activation to the output registers (module docstring), in place.

    Parameters
    ----------
    name : str
        One of :data:`ACTIVATIONS`.

    Raises
    ------
    ValueError
        ``name`` not in :data:`ACTIVATIONS`.
    """

    name: str

    def __post_init__(self):
        if self.name not in ACTIVATIONS:
            raise ValueError(f"Activation: name must be one of {list(ACTIVATIONS)}, found {self.name!r}")

    def macro(self, regs: int):
        """The macro ``activate(x, tmp)`` over ``regs`` f32 registers ``x`` (a ``.local()``
        view, in place) with ``regs`` scratch registers ``tmp`` (``(regs,)`` float32)."""
        return _macros(regs)[self.name]

    def make(self, geometry: Geometry):
        """The macro ``apply(regs, ext, at)``: the activation over the thread's
        ``out_block_n / 2`` output registers ``regs.out``, scratch ``regs.tmp``."""
        activate = self.macro(geometry.out_block_n // 2)

        @T.macro
        def activation(regs, ext, at):  # pylint: disable=unused-argument
            y = regs.out.local()
            activate(y, regs.tmp)

        return activation
