"""The ring's two synchronisation steps: wait on a stage's barrier, release a stage."""

from __future__ import annotations

from tvm.script import tirx as T

__all__ = ["REMOTE_ARRIVE", "wait_phase", "release_stage"]

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
