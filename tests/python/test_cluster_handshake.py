"""The exit rule accepts the mbarrier handshake (issue 44 item 5): each CTA of a 2-CTA
cluster arrives on its peer's ``done`` barrier once it has everything it needs, and waits
on its own ``done`` for the peer's arrive before it exits -- no peer can still write or
signal a CTA that has left.  Twins: no wait, a wait only one CTA makes, a barrier its own
CTA may also complete."""

import re

import pytest

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T

LOAD2D = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
MULTICAST2D = LOAD2D + ".multicast::cluster"
EXPECT = "mbarrier.arrive.expect_tx.shared::cta.b64"
INIT = "mbarrier.init.shared::cta.b64"
FENCE_INIT = "fence.mbarrier_init.release.cluster"
REMOTE_ARRIVE = "mbarrier.arrive.release.cluster.shared::cluster.b64"
LOCAL_ARRIVE = "mbarrier.arrive.shared::cta.b64"


def handshake(wait=True, wait_on_rank_0_only=False, local_arrive=False):
    """CTA 0 multicasts a box into both CTAs; each CTA waits for its bytes, reads them,
    arrives on the peer's ``done`` and (``wait``) waits on its own ``done``; ``local_arrive``:
    it also arrives on its own ``done`` (count 2), so the wait does not wait for the peer alone."""

    @T.function
    def kernel(A: T.Tensor((8, 32), "float32", align=16), B: T.Tensor((2, 8, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=256, cluster=2, dynamic_smem_bytes=2048))
        tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        done = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        rank = T.cuda.cluster_ctaid("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx[INIT], bar, count=T.uint32(1))
            T.cuda.tile.apply(T.ptx[INIT], done, count=T.uint32(2 if local_arrive else 1))
            T.ptx[FENCE_INIT]()
        T.cuda.cluster_sync()
        if tid == 0:
            T.cuda.tile.apply(T.ptx[EXPECT], bar, tx=T.uint32(1024))
            if rank == 0:
                T.cuda.tile.apply(T.ptx[MULTICAST2D], tile, A, mbar=bar, coords=(0, 0), cta_mask=T.uint16(3))
        T.cuda.mbarrier_wait_phase(bar, 0)
        B[rank, tid // 32, tid % 32] = tile[tid // 32, tid % 32]
        T.cuda.cta_sync()
        if tid == 0:
            if local_arrive:  # the CTA's own arrive may complete the phase before the peer's
                T.cuda.tile.apply(T.ptx[LOCAL_ARRIVE], done)
            T.cuda.tile.apply(T.ptx[REMOTE_ARRIVE], done, remote_cta_id=T.uint32(1) - rank)
        if wait:
            if wait_on_rank_0_only:
                if rank == 0:
                    T.cuda.mbarrier_wait_phase(done, 0)
            else:
                T.cuda.mbarrier_wait_phase(done, 0)

    return kernel


def test_the_mbarrier_handshake_is_a_legal_exit():
    testing.lower(handshake())


@pytest.mark.parametrize(
    "kwargs",
    [dict(wait=False), dict(wait_on_rank_0_only=True), dict(local_arrive=True)],
    ids=["no wait", "only rank 0 waits", "own CTA arrives on done"],
)
def test_handshakes_that_do_not_hold_every_cta_are_refused(kwargs):
    with pytest.raises(TileError, match=re.escape("CTA may exit while a peer CTA still writes or signals it")):
        testing.lower(handshake(**kwargs))
