"""TIR-schedule integration: tile calls that ``sch.tensorize`` puts into scheduled kernels.

* :mod:`.tensor_intrin` -- the tensor intrinsics (``import tvm_tirx.schedule.tensor_intrin``
  registers them); :mod:`.intrin_registry` -- their table;
* :mod:`.scheduled` -- the lowering of tensorized blocks (``LowerScheduledTileCalls``),
  with :mod:`.scheduled_registers` (``"warp"`` fragments as registers) and
  :mod:`.scheduled_accesses` (memory addresses the ``s_tir`` pipeline understands).
"""

# First: importing tvm runs its tvm.backends hook (tvm_tirx._plugin), which imports
# modules of this package; none of them may be half-imported when it does.
import tvm  # noqa: F401  pylint: disable=unused-import
