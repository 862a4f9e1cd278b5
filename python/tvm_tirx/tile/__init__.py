"""The tile layer: the ``T.cuda.tile.apply`` op, instruction families, and its lowering."""

# First: importing tvm runs its tvm.backends hook (tvm_tirx._plugin), which imports
# modules of this package; none of them may be half-imported when it does.
import tvm  # noqa: F401  pylint: disable=unused-import
