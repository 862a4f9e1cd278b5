"""Which attention kernel a call gets: the one decision the torch operator and the Relax
offload take (:func:`choose_attention`), visible and overridable.

A plan (:class:`AttentionPlan`) is :func:`~tvm_tirx.kernels.attention.make_attention`'s
schedule: the consumers' schedule (serial, ping-pong, overlapped, or ping-pong and
overlapped together), the ring's depth, the grid (one CTA per tile, or persistent), how
O is stored, the keys per block and the consumer warpgroups of 64 query rows (two: 128
rows per CTA; three, head_dim 64 only: 192; :class:`~.config.AttentionConfig`).  They
follow from ``head_dim``, as does the table of :func:`~.schedules.choose_schedule` the
plan comes from by default -- the fastest measured per head_dim, masking and row length
(H200 and H100).  :func:`override` replaces it where a
measurement says so; ``tvm_tirx.ops.check(tvm_tirx.ops.attention, q, k, v)`` on meta
tensors shows the plan a call gets (in its kernel key).
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import BM, HEAD_DIMS, AttentionConfig
from .staging import o_staging_error
from .schedules import OVERLAP_HEAD_DIMS, choose_schedule

__all__ = ["AttentionPlan", "choose_attention", "override", "clear_overrides"]


@dataclass(frozen=True)
class AttentionPlan:
    """One attention kernel's schedule: ``make_attention``'s options of the same names.

    Attributes
    ----------
    pingpong : bool
        The two consumer warpgroups take turns on named barriers (one's softmax under
        the other's products).
    overlap : bool
        A consumer issues block ``j + 1``'s ``Q K^T`` before block ``j``'s softmax (needs
        ``stages`` 3: head_dim 64 and 128 only; or 2 with ``v_ring``).
    stages : int
        Key/value blocks in the shared-memory ring (2 or 3).
    persistent : bool
        One CTA per SM walking the tiles (else one CTA per tile).
    persistent_rows : int | None
        With ``persistent``: rows (keys per query) longer than this launch one CTA per
        tile instead, chosen at launch (for a kernel of run-time length); None: the
        persistent grid at every length.
    tma_store : bool
        O stored through shared memory by TMA boxes (:mod:`.o_store`) instead of per
        thread; False (the default) keeps every plan's kernel as it was.
    block_n : int | None
        Keys per key/value block (``make_attention``'s ``block_n``); None: the head_dim's
        (:data:`~.config.HEAD_DIMS`).
    consumers : int
        Consumer warpgroups of 64 query rows each: 2 (the default, 128 rows per CTA) or 3
        (192 rows per CTA; head_dim 64 only, without ``pingpong``:
        :class:`~.config.AttentionConfig` refuses the rest, and so does :func:`override`;
        with packed sequences ``make_attention`` refuses 3 too, and the varlen operator
        runs its plan with 2).
    o_staging : str | None
        With ``tma_store``, where O is staged (``make_attention``'s ``o_staging``: ``"own"``,
        ``"kv"``, ``"q"``); None: the kernel's default.
    v_ring : bool
        K's and V's halves of a stage on barriers of their own (``make_attention``'s
        ``v_ring``): what lets ``overlap`` run on 2 stages.

    Raises
    ------
    ValueError
        ``stages`` not 2 or 3, ``overlap`` with fewer than 3 stages without ``v_ring``, ``persistent_rows``
        without ``persistent``, ``tma_store`` or ``v_ring`` not a bool, ``block_n`` neither None nor an
        int, ``consumers`` not the int 2 or 3, or an ``o_staging`` that
        :func:`~.staging.o_staging_error` refuses.
    """

    pingpong: bool
    overlap: bool
    stages: int
    persistent: bool
    persistent_rows: int | None = None
    tma_store: bool = False
    block_n: int | None = None
    consumers: int = 2
    o_staging: str | None = None
    v_ring: bool = False

    def __post_init__(self):
        error = o_staging_error(self.o_staging, self.tma_store)
        if error is not None:
            raise ValueError(f"AttentionPlan: {error}")
        if isinstance(self.consumers, bool) or not isinstance(self.consumers, int) or self.consumers not in (2, 3):
            raise ValueError(f"AttentionPlan: consumers must be 2 or 3 (consumer warpgroups of 64 query rows), "
                             f"found {self.consumers!r}")
        if self.block_n is not None and (isinstance(self.block_n, bool) or not isinstance(self.block_n, int)):
            raise ValueError(f"AttentionPlan: block_n must be None or an int (keys per block), found {self.block_n!r}")
        for name in ("tma_store", "v_ring"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"AttentionPlan: {name} must be a bool, found {getattr(self, name)!r}")
        if self.stages not in (2, 3):
            raise ValueError(f"AttentionPlan: stages must be 2 or 3, found {self.stages!r}")
        if self.overlap and self.stages < 3 and not self.v_ring:
            raise ValueError("AttentionPlan: the overlapped schedule needs stages=3 (block j + 1's scores in flight), "
                             "or v_ring=True")
        if self.persistent_rows is not None and not self.persistent:
            raise ValueError("AttentionPlan: persistent_rows applies to the persistent grid only (persistent=True)")

    @property
    def schedule(self) -> str:
        """The consumers' schedule by name: ``"serial"``, ``"pingpong"``, ``"overlapped"``
        or ``"pingpong+overlapped"``."""
        names = [n for n, on in (("pingpong", self.pingpong), ("overlapped", self.overlap)) if on]
        return "+".join(names) or "serial"

    def options(self) -> dict:
        """The plan as keyword arguments of ``make_attention``."""
        return {"pingpong": self.pingpong, "overlap": self.overlap, "stages": self.stages,
                "persistent": self.persistent, "persistent_rows": self.persistent_rows, "tma_store": self.tma_store,
                "block_n": self.block_n, "consumers": self.consumers, "o_staging": self.o_staging,
                "v_ring": self.v_ring}


#: (head_dim, causal, seq_len or None) -> the plan given by :func:`override`
_OVERRIDES: dict = {}


def _check(head_dim, causal, seq_len, who: str):
    if type(head_dim) is not int or head_dim not in HEAD_DIMS:  # noqa: E721  (not bool)
        raise ValueError(f"{who}: head_dim must be one of {sorted(HEAD_DIMS)}, found {head_dim!r}")
    if not isinstance(causal, bool):
        raise ValueError(f"{who}: causal must be a bool, found {causal!r}")
    if seq_len is not None and (type(seq_len) is not int or seq_len < 0):  # noqa: E721
        raise ValueError(f"{who}: seq_len must be None or a non-negative int, found {seq_len!r}")


def override(head_dim: int, causal: bool, plan: AttentionPlan, seq_len: int | None = None) -> None:
    """Give calls of ``head_dim`` and ``causal`` masking (of rows of ``seq_len`` keys; None:
    every length) ``plan`` instead of the table's.  Kernels already compiled keep theirs;
    later calls compile the plan's kernel on first use.

    Raises
    ------
    ValueError
        A ``head_dim``, ``causal`` or ``seq_len`` :func:`choose_attention` refuses, a
        ``plan`` that is no :class:`AttentionPlan`, an overlapped plan at a head_dim
        whose shared memory holds no third stage (256), or one whose blocks, stages or
        consumers :class:`~.config.AttentionConfig` refuses at that head_dim (shared
        memory, registers; three consumers anywhere but head_dim 64, or with
        ``pingpong``), with its message.
    """
    _check(head_dim, causal, seq_len, "override")
    if not isinstance(plan, AttentionPlan):
        raise ValueError(f"override: plan must be an AttentionPlan, found {plan!r}")
    if plan.stages == 3 and head_dim not in OVERLAP_HEAD_DIMS:
        raise ValueError(f"override: head_dim {head_dim} has room for 2 stages only (3: head_dim "
                         f"{' or '.join(map(str, OVERLAP_HEAD_DIMS))})")
    try:
        AttentionConfig(1, BM, 1, 1, head_dim, causal=causal, **plan.options())
    except ValueError as err:
        raise ValueError(f"override: the plan does not fit head_dim {head_dim}: {err}") from None
    _OVERRIDES[(head_dim, causal, seq_len)] = plan


def clear_overrides() -> None:
    """Forget every :func:`override` (kernels already compiled keep their plans)."""
    _OVERRIDES.clear()


def choose_attention(head_dim: int, causal: bool, seq_len: int | None = None) -> AttentionPlan:
    """The plan for attention of ``head_dim`` (64, 128 or 256 elements), ``causal`` masking
    and rows of ``seq_len`` keys (None: not known when the kernel is made): an
    :func:`override` for the length, else one for every length, else the table's
    (:func:`~.schedules.choose_schedule`).

    Raises
    ------
    ValueError
        ``head_dim`` not one of 64, 128, 256, ``causal`` not a bool, ``seq_len`` neither
        None nor a non-negative int.
    """
    _check(head_dim, causal, seq_len, "choose_attention")
    found = _OVERRIDES.get((head_dim, causal, seq_len), _OVERRIDES.get((head_dim, causal, None)))
    return found if found is not None else AttentionPlan(**choose_schedule(head_dim, causal, seq_len))
