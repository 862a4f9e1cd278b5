"""Before/Expected tests of ``LowerTileApply``: :func:`assert_lowers_to`."""

from __future__ import annotations

import difflib

import tvm

from ..build.stages import lower
from ..tile.lower.lower import LOWERED

__all__ = ["lower", "assert_lowers_to"]


def assert_lowers_to(before, expected) -> None:
    """Assert that ``LowerTileApply`` turns PrimFunc ``before`` into ``expected``.

    The comparison is apache-tvm's structural equality with free variables
    mapped (``map_free_vars=True``); ``expected`` is compared under
    ``before``'s ``global_symbol``, so the two functions may have different
    Python names, and with the pass's mark (:data:`~tvm_tirx.tile.lower.lower.LOWERED`)
    when the pass set it.

    Parameters
    ----------
    before : tvm.tirx.PrimFunc
        The kernel as written (``@T.function``), with tile calls.
    expected : tvm.tirx.PrimFunc
        What the pass must produce.

    Raises
    ------
    AssertionError
        The lowered function differs; the message holds apache-tvm's report of
        the first difference and a unified diff of the two scripts.
    TileError
        ``before`` breaks a tile contract (raised by the pass).
    """
    lowered = lower(before)
    if before.attrs is not None and "global_symbol" in before.attrs:
        expected = expected.with_attr("global_symbol", before.attrs["global_symbol"])
    if lowered.attrs is not None and LOWERED in lowered.attrs:
        expected = expected.with_attr(LOWERED, lowered.attrs[LOWERED])
    try:
        tvm.ir.assert_structural_equal(lowered, expected, map_free_vars=True)
    except ValueError as err:
        diff = difflib.unified_diff(
            expected.script().splitlines(), lowered.script().splitlines(), "expected", "lowered", lineterm=""
        )
        raise AssertionError(f"LowerTileApply's output differs from the expected function:\n{err}\n"
                             + "\n".join(diff)) from None
