"""The epilogue chain: register stages in order, then one store stage, and the kernel
parameters they read."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import cached_property

from ..sequence import then
from .activation import Activation
from .base import Geometry, Tensors
from .stages import Gate

__all__ = ["Epilogue"]


@dataclass(frozen=True)
class Epilogue:
    """A consumer's epilogue: register stages applied in order to its fp32 accumulators,
    then a store stage that writes the result into C.

    The kernel calls, per output tile, :attr:`prefetch` (if any) before its last
    ``wgmma.wait_group``, then :attr:`apply` (if any) and :attr:`store`; and
    :attr:`drain` (if any) once after its last tile.  Its signature is ``(A, B,
    *inputs, C, *trailing)`` with :attr:`inputs` and :attr:`trailing` the :attr:`params`
    that go before and after C; it passes them (in :attr:`params`' order) through
    :meth:`bind` to the macros.

    Parameters
    ----------
    geometry : Geometry
        C and the tile (:class:`~.base.Geometry`).
    stages : tuple
        Register stages (:class:`~.stages.Scale`, :class:`~.stages.Bias`,
        :class:`~.activation.Activation`, :class:`~.stages.Gate`,
        :class:`~.stages.Residual`), each at most once, in the order they apply; then
        one store stage (:class:`~.stores.TmaStore`, :class:`~.stores.ExactStore` or
        :class:`~.stores.GuardedStore`).

    Raises
    ------
    ValueError
        No store stage last, a store stage before the last, a stage twice, a gated
        geometry without a :class:`~.stages.Gate` (or an activation both alone and in
        the gate), and what the stages refuse of ``geometry`` (a :class:`TmaStore` for
        float32 output, an :class:`ExactStore` on tiles that do not cover C).
    """

    geometry: Geometry
    stages: tuple

    def __post_init__(self):
        stages = self.stages
        if not stages or not getattr(stages[-1], "stores", False):
            raise ValueError(f"Epilogue: the last stage must be a store stage (TmaStore, ExactStore, GuardedStore), "
                             f"found {stages[-1] if stages else 'no stage'!r}")
        if any(s.stores for s in stages[:-1]):
            raise ValueError(f"Epilogue: one store stage, the last; found {list(stages)}")
        kinds = [type(s).__name__ for s in stages]
        twice = sorted({k for k in kinds if kinds.count(k) > 1})
        if twice:
            raise ValueError(f"Epilogue: each stage at most once, found {twice} more than once in {list(stages)}")
        gates = [s for s in stages if isinstance(s, Gate)]
        if self.geometry.gated != bool(gates):
            raise ValueError(f"Epilogue: a Gate stage goes with a gated geometry (out_block_n = block_n / 2) and "
                             f"only with it; found block_n={self.geometry.block_n}, "
                             f"out_block_n={self.geometry.out_block_n} with stages {kinds}")
        if gates and gates[0].activation is not None and any(isinstance(s, Activation) for s in stages):
            raise ValueError("Epilogue: a gated chain applies its activation inside the Gate stage "
                             f"(Gate(Activation(...))), found both in {list(stages)}")
        self.store  # pylint: disable=pointless-statement  (the stages' own checks of the geometry)

    @cached_property
    def params(self) -> tuple:
        """The kernel parameters (:class:`~.base.Param`) the stages read: those before C in
        stage order, then those after C."""
        found = [p for s in self.stages for p in s.params(self.geometry)]
        return tuple(p for p in found if not p.after_output) + tuple(p for p in found if p.after_output)

    @property
    def inputs(self) -> tuple:
        """The :attr:`params` the kernel takes before C."""
        return tuple(p for p in self.params if not p.after_output)

    @property
    def trailing(self) -> tuple:
        """The :attr:`params` the kernel takes after C."""
        return tuple(p for p in self.params if p.after_output)

    def bind(self, tensors) -> Tensors:
        """The :class:`~.base.Tensors` the macros take: ``tensors`` are the kernel's
        parameters in :attr:`params`' order.

        Raises
        ------
        ValueError
            Not one tensor per parameter.
        """
        if len(tensors) != len(self.params):
            raise ValueError(f"Epilogue.bind: {len(self.params)} tensors expected "
                             f"({[p.name for p in self.params]}), found {len(tensors)}")
        return Tensors(**{p.name.lower(): t for p, t in zip(self.params, tensors)})

    @cached_property
    def apply(self):
        """The macro ``apply(regs, ext, at)`` of the register stages in order (``regs`` the
        :class:`~.base.Registers`, ``ext`` from :meth:`bind`, ``at`` the
        :class:`~.base.TilePlace`), or None when there are none."""
        macros = [s.make(self.geometry) for s in self.stages[:-1]]
        if not macros:
            return None
        return functools.reduce(then, macros)

    @cached_property
    def prefetch(self):
        """The macro ``prefetch(regs, ext, at)`` that loads what a stage reads ahead (the
        residual's pairs), or None."""
        found = [p for p in (s.prefetch(self.geometry) for s in self.stages) if p is not None]
        if len(found) > 1:  # no two stages prefetch yet: they would need a sequence like apply's
            raise ValueError(f"Epilogue: at most one stage may prefetch, found {len(found)} in {list(self.stages)}")
        return found[0] if found else None

    @cached_property
    def store(self):
        """The store stage's macro ``store(C, regs, so, at)``: ``regs.out`` into C
        (``so`` the shared tile of a TMA store)."""
        return self.stages[-1].make(self.geometry)

    @cached_property
    def drain(self):
        """The store stage's macro ``drain(tid)`` after the last tile, or None."""
        return self.stages[-1].drain(self.geometry)
