"""Execution scopes: which group axes lead each operand, and their thread bindings.

``scope="thread"`` has no group axes: each thread issues the instruction for
itself.  The wider scopes of the tile contract (``"warp"``: ``(lane,)``,
``"warpgroup"``: ``(warp_in_group, lane)``, ``"cta"``: ``(warp, lane)``,
``"cluster"``: CTA-in-cluster axes first) are named here so that a call that
uses one gets a clear error until they are supported.
"""

from __future__ import annotations

from ..errors import TileError

__all__ = ["SCOPES", "SUPPORTED_SCOPES", "group_shape"]

#: Every scope name of the tile contract.
SCOPES = ("thread", "warp", "warpgroup", "cta", "cluster")
#: Scopes this release lowers.
SUPPORTED_SCOPES = ("thread",)


def group_shape(opcode: str, scope) -> tuple:
    """The group axes' extents for ``scope`` (``()`` for ``"thread"``).

    Raises
    ------
    TileError
        ``scope`` is not a scope name, or names a scope not supported yet.
    """
    if scope not in SCOPES:
        raise TileError(
            opcode, "unknown execution scope", expected=" / ".join(SCOPES), found=repr(scope)
        )
    if scope not in SUPPORTED_SCOPES:
        raise TileError(
            opcode,
            "execution scope not supported yet",
            expected=" / ".join(SUPPORTED_SCOPES),
            found=repr(scope),
        )
    return ()
