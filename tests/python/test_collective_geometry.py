"""Group geometry of collective forms (Contract.collective), for the widths the
families use now (1, 32) and the warpgroup width (128) wgmma will use."""

import pytest

from tvm_tirx import TileError
from tvm_tirx.tile.ir.contract import THREAD, WARP, WARPGROUP
from tvm_tirx.tile.ir.scope import LaunchFacts, full_group, require_collective_scope, rule_collective_scope, scope_rank


def _launch(threads):
    return LaunchFacts(block=(threads, 1, 1), thread_vars=())


@pytest.mark.parametrize(
    "scope, width, rank",
    [("warp", 1, 1), ("warp", 32, 0), ("warpgroup", 1, 2), ("warpgroup", 32, 1), ("warpgroup", 128, 0),
     ("cta", 1, 2), ("cta", 32, 1), ("cta", 128, 1), ("thread", 32, 0)],
)
def test_rank_counts_collectives(scope, width, rank):
    assert scope_rank(scope, width=width) == rank


def test_cta_of_warpgroups():
    extents, coord, instance = full_group("cta", _launch(256), width=128)
    assert extents == (2,)
    assert [coord(t, 0) for t in (0, 127, 128, 255)] == [(0,), (0,), (1,), (1,)]
    assert instance(200, 0) == (0,)


def test_warpgroup_of_warps():
    extents, coord, _ = full_group("warpgroup", _launch(256), width=32)
    assert extents == (4,)
    assert [coord(t, 0) for t in (0, 32, 96, 128)] == [(0,), (1,), (3,), (0,)]


def test_positions_inside_the_collective():
    assert [WARP.position(t) for t in (0, 31, 33)] == [0, 31, 1]
    assert [WARPGROUP.position(t) for t in (5, 130)] == [5, 2]
    assert WARPGROUP.first(130) == 128 and THREAD.position(7) == 0


def test_collective_wider_than_the_scope_is_rejected():
    require_collective_scope("warpgroup", WARPGROUP)
    with pytest.raises(TileError, match="warpgroup-collective instruction at warp scope"):
        require_collective_scope("warp", WARPGROUP)
    with pytest.raises(TileError, match="warp-collective instruction at thread scope"):
        require_collective_scope("thread", WARP)


def test_the_collective_scope_rule_returns_what_require_raises():
    assert rule_collective_scope("warpgroup", WARPGROUP) is None
    err = rule_collective_scope("thread", WARP, "ldmatrix.sync.aligned.m8n8.x1.shared.b16")
    assert isinstance(err, TileError) and err.rule == "warp-collective instruction at thread scope"
