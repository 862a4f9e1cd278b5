"""An epilogue chain (:class:`Epilogue`): what a GEMM consumer does with its fp32
accumulators after the main loop -- ``scale``, ``bias``, ``activation``, ``gate``,
``residual`` in registers, then one store into C (through shared memory and a TMA store,
one tile-wide store, or guarded per-thread stores at C's edges) -- built from small stage
objects, each owning its macro and declaring the kernel parameters it reads, so that the
chain also yields the kernel's extra parameters in order.

* :mod:`.base` -- :class:`Geometry`, :class:`Param`, the named tuples the macros take
  (:class:`Registers`, :class:`Tensors`, :class:`TilePlace`);
* :mod:`.stages` and :mod:`.activation` -- :class:`Scale`, :class:`Bias`,
  :class:`Activation`, :class:`Gate`, :class:`Residual`;
* :mod:`.stores` -- :class:`TmaStore`, :class:`ExactStore`, :class:`GuardedStore`;
* :mod:`.chain` -- :class:`Epilogue`.
"""

from .activation import ACTIVATIONS, Activation
from .base import Geometry, Param, Registers, Stage, Store, Tensors, TilePlace
from .chain import Epilogue
from .stages import BIAS_DTYPES, Bias, Gate, Residual, Scale
from .stores import ExactStore, GuardedStore, TmaStore

__all__ = ["ACTIVATIONS", "BIAS_DTYPES", "Activation", "Bias", "Epilogue", "ExactStore", "Gate", "Geometry",
           "GuardedStore", "Param", "Registers", "Residual", "Scale", "Stage", "Store", "Tensors", "TilePlace",
           "TmaStore"]
