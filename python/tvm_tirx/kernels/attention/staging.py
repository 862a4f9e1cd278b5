"""Where the attention kernel's TMA store may stage O, and the check of that choice that
needs no sizes (:attr:`.config.AttentionConfig.o_tile` and :mod:`.o_store` say what each
place means; the config checks what depends on the sizes)."""

from __future__ import annotations

__all__ = ["O_STAGINGS", "o_staging_error"]

#: where ``tma_store`` may stage O (:attr:`.config.AttentionConfig.o_tile`)
O_STAGINGS = ("own", "kv", "q")


def o_staging_error(staging, tma_store) -> str | None:
    """What is wrong with ``o_staging=staging`` next to ``tma_store`` before any size is
    known, or None: a value that is neither None nor one of :data:`O_STAGINGS`, or one set
    without ``tma_store`` (the staging tile is the TMA store's).
    :class:`~.config.AttentionConfig` and :class:`~.planner.AttentionPlan` raise it as a
    ValueError."""
    if staging is None:
        return None
    if staging not in O_STAGINGS:
        return f"o_staging: expected None or one of {O_STAGINGS}, found {staging!r}"
    if not tma_store:
        return f"o_staging={staging!r}: stages O for the TMA store, so it needs tma_store=True"
    return None
