"""The protocol rules of issue 44 (item 3): where the rules used to stop -- at a CTA barrier
with no wait before it, at loops that reuse a ring stage, at the arrivals of a loop, at
register writes after ``wgmma.fence`` -- each wrong kernel refused with both sites named,
and its legal twin accepted.  Kernels: protocol_kernels.py (the ring), protocol_loop_kernels.py."""

import re

import pytest

from tvm_tirx import TileError, testing

import protocol_kernels as pk
import protocol_loop_kernels as plk


def _refused(func, rule):
    with pytest.raises(TileError, match=re.escape(rule)) as info:
        testing.lower(func)
    return str(info.value)


def _lines(message, module) -> list:
    """The line numbers of ``module``'s file that a message names, in order."""
    return [int(n) for n in re.findall(rf"{re.escape(module.__name__)}\.py:(\d+)", message)]


# -- (a) a copied tile read across a CTA barrier, no wait on its mbarrier --------------------------


ACROSS = {"ld.shared.f32": plk.read_across_barrier, "wgmma.mma_async": plk.wgmma_across_barrier}


@pytest.mark.parametrize("reader", sorted(ACROSS))
def test_a_tile_read_after_a_cta_barrier_with_no_wait_on_its_copy_is_refused(reader):
    message = _refused(ACROSS[reader](wait=False), "tile read before the wait on its copy's mbarrier")
    assert message.split(": ")[1].startswith(reader) or message.splitlines()[1].split(": ")[1].startswith(reader)
    assert "a wait on mbarrier bar" in message and "no wait on mbarrier bar" in message
    read_line, copy_line = _lines(message, plk)[0], _lines(message, plk)[1]
    assert copy_line < read_line


@pytest.mark.parametrize("reader", sorted(ACROSS))
def test_a_tile_read_after_a_cta_barrier_that_follows_the_wait_is_accepted(reader):
    testing.lower(ACROSS[reader](wait=True))


# -- (b) a ring stage waited on with a parity that does not flip per reuse --------------------------


def test_a_ring_consumer_waiting_on_parity_0_at_every_refill_is_refused():
    message = _refused(pk.ring(phase="constant"), "wait parity does not flip between uses of the mbarrier")
    assert "mbarrier full[0]" in message and "parity 0" in message
    assert len(set(re.findall(r"protocol_kernels\.py:(\d+)", message))) >= 2


def test_a_ring_consumer_whose_parity_flips_per_reuse_is_accepted():
    testing.lower(pk.ring(phase="counter"))
    testing.lower(pk.ring(phase="register"))  # a parity in a register: not followed, accepted


def test_a_ring_that_never_reuses_a_stage_may_wait_on_parity_0():
    testing.lower(pk.ring(phase="constant", tiles=3))


# -- (c) arrivals per phase against the init count ---------------------------------------------------


def test_an_empty_barrier_of_count_1_that_128_consumers_arrive_on_is_refused():
    rule = "more arrivals in one iteration than the mbarrier's init count"
    message = _refused(pk.ring(consumers=128, empty_count=1), rule)
    assert "mbarrier empty[" in message and "init count 1" in message and "128 arrival(s)" in message


def test_an_empty_barrier_of_count_128_for_128_consumers_is_accepted():
    testing.lower(pk.ring(consumers=128, empty_count=128))


# -- (d) accumulator registers written between wgmma.fence and the wgmma --------------------------


def test_accumulators_zeroed_after_wgmma_fence_are_refused():
    message = _refused(plk.zero_then_fence(fence_first=True), "registers written between wgmma.fence and the wgmma")
    assert message.split(": ")[1].startswith("wgmma.mma_async")
    assert "mov.b32" in message and len(set(_lines(message, plk))) == 3


def test_accumulators_zeroed_before_wgmma_fence_are_accepted():
    testing.lower(plk.zero_then_fence(fence_first=False))


# -- (e) a cluster-symmetric multicast: each CTA's barrier receives its peer's bytes too --------


def test_a_symmetric_multicast_announcing_only_the_ctas_own_half_is_refused():
    message = _refused(plk.symmetric_multicast(tx=512), "expect_tx bytes differ from the copies of the phase")
    assert "expect_tx of 512 bytes" in message and "the 1024 bytes the copies completing on mbarrier bar" in message
    assert "(multicast)" in message and "from CTA 1" in message


def test_a_symmetric_multicast_announcing_both_halves_is_accepted():
    testing.lower(plk.symmetric_multicast(tx=1024))
