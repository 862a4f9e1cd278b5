"""The protocol rules (issue 25): for each check a kernel it refuses and the legal twin
next to it, the hangs of the issue text, what is left unchecked, and the project's own
pipelines (a wgmma ring, the GEMM variants) accepted.  Kernels: protocol_kernels.py."""

import re
import sys
import pathlib

import pytest

from tvm_tirx import TileError, testing

import protocol_kernels as pk

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = r"protocol_kernels\.py:\d+"


def _refused(func, rule):
    with pytest.raises(TileError, match=re.escape(rule)) as info:
        testing.lower(func)
    return str(info.value)


def _lines(message) -> list:
    """The ``protocol_kernels.py`` line numbers a message names, in order."""
    return [int(n) for n in re.findall(r"protocol_kernels\.py:(\d+)", message)]


# -- expect_tx bytes ----------------------------------------------------------------------------


def test_expect_tx_of_4096_bytes_for_a_16384_byte_box_is_refused():
    message = _refused(pk.box_load(tx=4096), "expect_tx bytes differ from the copies of the phase")
    assert "expect_tx of 4096 bytes" in message and "the 16384 bytes the copies completing on mbarrier bar" in message
    assert "TMA load: 64 x 64 float32" in message
    expect_line, copy_line = sorted(set(_lines(message)))
    assert copy_line == expect_line + 1  # both sites: the expect_tx and the copy after it
    assert message.startswith(f"{pk.__file__}:{expect_line}: mbarrier.arrive.expect_tx")


def test_expect_tx_equal_to_the_box_is_accepted():
    testing.lower(pk.box_load(tx=16384))


def test_raw_ptx_expect_tx_and_bulk_copy_are_checked():
    message = _refused(pk.raw_bulk(tx=1024), "expect_tx bytes differ from the copies of the phase")
    assert "expect_tx of 1024 bytes" in message and "the 4096 bytes" in message
    testing.lower(pk.raw_bulk(tx=4096))


def test_a_ring_stage_announcing_too_few_bytes_is_refused():
    message = _refused(pk.ring(stage_tx=512), "expect_tx bytes differ from the copies of the phase")
    assert "expect_tx of 512 bytes" in message and "1024 bytes" in message and "mbarrier full[" in message


def test_a_multicast_counts_on_the_barrier_of_every_cta_of_its_mask():
    # CTA 0 multicasts the box into both CTAs: each barrier receives its 1024 bytes and expects them
    testing.lower(pk.multicast_pair())


# -- arrivals and parity ------------------------------------------------------------------------


def test_an_init_count_of_2_with_one_arrival_is_refused():
    message = _refused(pk.arrivals(count=2), "arrivals never reach the mbarrier's init count")
    assert "expected 2 arrivals on mbarrier bar" in message and "found 1 arrival(s)" in message
    init_line, wait_line, arrive_line = _lines(message)[1], _lines(message)[0], _lines(message)[-1]
    assert init_line < arrive_line < wait_line


def test_an_init_count_the_arrivals_reach_is_accepted():
    testing.lower(pk.arrivals(count=1))


def test_a_ring_whose_consumers_release_too_little_is_refused():
    # 32 lanes arrive on empty[s] per use, the count asks 64: the producer's third wait hangs
    message = _refused(pk.ring(empty_count=64), "arrivals never reach the mbarrier's init count")
    assert "mbarrier empty[" in message and "found 128 arrival(s)" in message


def test_a_ring_whose_producer_first_waits_on_parity_1_of_empty_is_accepted():
    testing.lower(pk.ring())


def test_a_consumer_first_waiting_on_parity_1_of_full_is_refused():
    message = _refused(pk.ring(consumer_parity=1), "first wait on parity 1 of a fresh mbarrier returns at once")
    assert "parity 0 for the first phase of mbarrier full[" in message


def test_arrivals_under_elect_sync_are_not_counted():
    testing.lower(pk.elected_arrivals(count=2))  # one per warp: two, but not proven


# -- init visibility ---------------------------------------------------------------------------


def test_other_threads_using_a_barrier_without_a_cta_barrier_after_its_init_is_refused():
    message = _refused(pk.init_then_use(barrier=False), "mbarrier used before its init is visible")
    assert "T.cuda.cta_sync()" in message and len(set(_lines(message))) == 2


def test_a_cta_barrier_after_the_init_is_accepted():
    testing.lower(pk.init_then_use(barrier=True))


def test_a_copy_right_after_the_init_needs_fence_mbarrier_init():
    message = _refused(pk.init_then_copy(fence=False), "mbarrier used before its init is visible")
    assert "the TMA unit completes on it" in message
    testing.lower(pk.init_then_copy(fence=True))


def test_a_peer_cta_using_the_barrier_needs_a_cluster_barrier_after_the_init():
    message = _refused(pk.multicast_pair(cluster_barriers=(False, True)), "mbarrier used before its init is visible")
    assert "T.cuda.cluster_sync()" in message
    _refused(pk.multicast_pair(fence=False), "mbarrier used before its init is visible")


# -- proxy fences --------------------------------------------------------------------------------


def test_a_tma_store_after_st_shared_without_fence_is_refused():
    message = _refused(pk.store_tile(fence=False, by_instruction=True), "generic-proxy write not fenced")
    assert "st.shared.f32 at" in message and "no fence.proxy.async between them" in message
    write_line, store_line = _lines(message)[1], _lines(message)[0]
    assert write_line < store_line


def test_a_fence_without_a_barrier_is_refused_when_other_threads_wrote():
    message = _refused(pk.store_tile(barrier=False), "generic-proxy write not fenced")
    assert "no barrier after it" in message


def test_a_fence_and_a_barrier_between_the_writes_and_the_store_are_accepted():
    testing.lower(pk.store_tile())
    testing.lower(pk.store_tile(by_instruction=True))


def test_a_wgmma_reading_tiles_written_by_stores_needs_the_fence():
    message = _refused(pk.wgmma_after_stores(fence=False), "generic-proxy write not fenced")
    assert message.split(": ")[1].startswith("wgmma.mma_async")
    testing.lower(pk.wgmma_after_stores(fence=True))


# -- bulk stores ---------------------------------------------------------------------------------


def test_a_tile_rewritten_before_its_store_has_read_it_is_refused():
    message = _refused(pk.store_loop(wait=None), "shared memory rewritten before the bulk store has read it")
    assert "store to tile" in message


def test_a_wait_group_read_that_leaves_the_store_pending_is_refused():
    _refused(pk.store_loop(wait=1), "shared memory rewritten before the bulk store has read it")


def test_wait_group_read_0_before_the_rewrite_is_accepted():
    testing.lower(pk.store_loop(wait=0))


# -- copied tiles --------------------------------------------------------------------------------


def test_a_tile_read_without_waiting_for_its_copy_is_refused():
    message = _refused(pk.read_after_copy(wait=False), "tile read before the wait on its copy's mbarrier")
    assert "a wait on mbarrier bar" in message
    testing.lower(pk.read_after_copy(wait=True))


def test_a_tile_refilled_while_threads_may_read_it_is_refused():
    message = _refused(pk.refill(barrier=False), "tile refilled while threads may still read it")
    assert "(256 threads)" in message
    testing.lower(pk.refill(barrier=True))


# -- clusters ------------------------------------------------------------------------------------


def test_a_cta_exiting_while_its_peer_multicasts_is_refused():
    message = _refused(pk.multicast_pair(cluster_barriers=(True, False)), "CTA may exit while a peer CTA")
    assert ".multicast::cluster" in message
    testing.lower(pk.multicast_pair())


# -- the project's pipelines ---------------------------------------------------------------------


def _tutorial(step):
    sys.path.insert(0, str(ROOT / "tutorials" / "hopper_gemm"))
    try:
        return __import__(step)
    finally:
        sys.path.pop(0)


def test_the_tutorials_wgmma_rings_are_accepted():
    testing.lower(_tutorial("step2_kloop").make_gemm_kloop(128, 256, 256))
    testing.lower(_tutorial("step3_pipeline").make_gemm_pipelined(256, 256, 512))
    testing.lower(_tutorial("step4_warp_specialized").make_gemm_warp_specialized(256, 256, 512))


@pytest.mark.parametrize(
    "options",
    [{}, {"cluster": 2}, {"persistent": False}, {"in_dtype": "float8_e4m3fn"}, {"out_dtype": "float32", "cluster": 2},
     {"wait_depth": 0, "spin": True}],
    ids=["default", "cluster2", "one-tile", "fp8", "fp32-cluster2", "wait0-spin"],
)  # fmt: skip
def test_the_hopper_gemm_variants_are_accepted(options):
    from tvm_tirx.kernels.gemm import make_gemm  # pylint: disable=import-outside-toplevel

    testing.lower(make_gemm(2048, 2048, 512, **options))
