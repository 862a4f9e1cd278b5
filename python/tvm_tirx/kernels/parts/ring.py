"""A pipeline ring: ``stages`` shared buffers that a producer fills by TMA and consumers read.

Each stage has two mbarriers (PTX ISA 9.7.13.15): ``full[s]`` (one arrival, the
producer's ``arrive.expect_tx`` of the stage's bytes; the TMA's ``complete_tx`` finishes
the phase) and ``empty[s]`` (``arrivals`` arrivals, one per consumer warpgroup, times the
cluster's CTAs when a peer's producer also fills this CTA's buffer).  Ring iteration
``g`` uses stage ``g % stages`` in its phase ``g // stages``: consumers wait on ``full``
for parity ``(g // stages) % 2``, the producer waits on ``empty`` for the parity before
it, ``(g // stages + 1) % 2``, which a fresh barrier passes at once on the first lap (PTX
ISA, ``mbarrier.try_wait.parity``).  This is the protocol of CUTLASS's
``PipelineTmaAsync``; the tile checker's mbarrier rules check each use.

The macros take the stage ``s`` (``ring.slot(g)``, or a name the kernel bound it to) and
the iteration ``g`` separately, so a kernel that binds the stage once per iteration keeps
that binding.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from tvm.script import tirx as T

__all__ = ["Ring", "REMOTE_ARRIVE", "wait_phase", "release_stage"]

REMOTE_ARRIVE = "mbarrier.arrive.shared::cluster.b64"  # .release.cta, as CUTLASS arrives on a peer


@T.macro
def wait_phase(bar, phase, flag, spin):
    """Wait until the phase of parity ``phase`` of ``bar`` completes: apache-tvm's
    ``mbarrier_wait`` (``try_wait`` with a suspend-time hint), or with ``spin`` a loop of
    plain ``try_wait.parity`` (the hardware's own time limit), as CUTLASS waits."""
    if spin:
        flag[0] = T.uint32(0)
        while flag[0] == T.uint32(0):
            T.cuda.tile.apply(T.ptx["mbarrier.try_wait.parity.shared::cta.b64"], flag, bar, phase=T.Cast("uint32", phase))
    else:
        T.cuda.mbarrier_wait_phase(bar, phase)


@T.macro
def release_stage(empty, s, tid, cluster):
    """Thread 0 of a consumer warpgroup arrives on ``empty[s]``: of its own CTA, or
    with ``cluster=2`` of both CTAs (the peer's producer fills this CTA's buffer too)."""
    if tid % 128 == 0:
        if cluster == 2:
            for r in T.unroll(2):
                T.cuda.tile.apply(T.ptx[REMOTE_ARRIVE], empty.sub[s, :],
                                  remote_cta_id=r)
        else:
            T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], empty.sub[s, :])


@dataclass(frozen=True)
class Ring:
    """A ring of ``stages`` buffers (:mod:`.ring`).

    Attributes
    ----------
    stages : int
        Buffers in the ring.
    arrivals : int
        Arrivals that release a stage (``empty``'s count): consumer warpgroups times
        ``cluster``.
    cluster : int
        1, or 2 when each CTA of a pair releases the stage in both CTAs (the peer's
        producer multicasts into this CTA's buffer).
    spin : bool
        Wait with a loop of plain ``try_wait.parity`` instead of apache-tvm's
        ``mbarrier_wait`` (a suspend-time hint).
    """

    stages: int
    arrivals: int
    cluster: int = 1
    spin: bool = False

    def slot(self, g):
        """The stage of ring iteration ``g``: ``g % stages``."""
        return g % self.stages

    @cached_property
    def init(self):
        """The macro ``init(full, empty)``: one thread initialises every stage's barriers
        (``full`` count 1, ``empty`` count ``arrivals``).  The kernel adds the
        ``fence.mbarrier_init`` and the barrier that publishes them."""
        arrivals = self.arrivals

        @T.macro
        def init(full, empty):
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], full, count=T.uint32(1))
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], empty, count=T.uint32(arrivals))

        return init

    @cached_property
    def acquire(self):
        """The macro ``acquire(empty, s, g, flag)``: the producer waits until the consumers
        released stage ``s`` of iteration ``g`` (its previous lap); ``flag`` is a
        ``(1,)`` uint32 register array for ``spin`` (None otherwise)."""
        stages, spin = self.stages, self.spin

        @T.macro
        def acquire(empty, s, g, flag):
            wait_phase(empty.sub[s, :], (g // stages + 1) % 2, flag, spin)

        return acquire

    @cached_property
    def arm(self):
        """The macro ``arm(full, s, nbytes)``: the producer's arrival on ``full[s]`` with
        the stage's byte count (``mbarrier.arrive.expect_tx``), before its TMA loads."""

        @T.macro
        def arm(full, s, nbytes):
            T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], full.sub[s, :], tx=T.uint32(nbytes))

        return arm

    @cached_property
    def wait(self):
        """The macro ``wait(full, s, g, flag)``: a consumer waits until stage ``s`` of
        iteration ``g`` is loaded."""
        stages, spin = self.stages, self.spin

        @T.macro
        def wait(full, s, g, flag):
            wait_phase(full.sub[s, :], (g // stages) % 2, flag, spin)

        return wait

    @cached_property
    def release(self):
        """The macro ``release(empty, s, tid)``: thread 0 of a consumer warpgroup releases
        stage ``s`` (in both CTAs of a pair with ``cluster=2``)."""
        cluster = self.cluster

        @T.macro
        def release(empty, s, tid):
            release_stage(empty, s, tid, cluster)

        return release
