"""view_tables: the tabulated layout equals ViewMap.apply at every coordinate, and the
rules that read the table (register overlap, collective ownership, matrix descriptors)
decide exactly as their element-by-element paths: same lowered IR, same error."""

import itertools

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import tirx
from tvm.tirx.layout import Axis, ComposeLayout, S, TileLayout

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.ir import view_tables
from tvm_tirx.tile.families import _matrix_descriptor as md
from tvm_tirx.tile.families.wgmma import accumulator_layout
from tvm_tirx.tile.rules.op import decode, is_tile_call
from tvm_tirx.tile.ir.views import ViewMap

W, G = Axis.tid_in_wg, Axis.wgid
N = 64
OP = f"wgmma.mma_async.sync.aligned.m64n{N}k16.f32.bf16.bf16"


def _sw(rows):
    return ComposeLayout(3, 3, 3, TileLayout(S[(rows, 64)]))


def _warpgroup(acc_layout=None):
    acc_layout = acc_layout if acc_layout is not None else accumulator_layout(N, 2)

    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        sa = T.alloc_shared((128, 64), "bfloat16", align=1024, layout=_sw(128))
        sb = T.alloc_shared((N, 64), "bfloat16", align=1024, layout=_sw(N))
        acc = T.alloc_local((2, 64, N), "float32", layout=acc_layout)
        av = sa.view(2, 64, 4, 16).permute(0, 2, 1, 3)
        T.cuda.tile.apply(T.ptx[OP], acc, av, sb.view(N, 4, 16).permute(1, 0, 2), scope="warpgroup", scale_d=False)

    return kernel


def _cta():
    acc_layout = TileLayout(S[(2, 2, 4, 2, 8, N // 8, 4, 2) : (1 @ G, N // 2, 32 @ W, 2, 4 @ W, 4, 1 @ W, 1)])
    b_both = ComposeLayout(3, 3, 3, TileLayout(S[(2, 4, N, 16) : (0, 16, 64, 1)]))

    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        sa = T.alloc_shared((256, 64), "bfloat16", align=1024, layout=_sw(256))
        sb = T.alloc_shared((N, 64), "bfloat16", align=1024, layout=_sw(N))
        acc = T.alloc_local((2, 2, 64, N), "float32", layout=acc_layout)
        av = sa.view(2, 2, 64, 4, 16).permute(0, 1, 3, 2, 4)
        T.cuda.tile.apply(T.ptx[OP], acc, av, sb.view(2, 4, N, 16, layout=b_both), scope="cta", scale_d=False)

    return kernel


def _resplit():
    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        x = T.alloc_local((4, 2), "float32", layout=TileLayout(S[(4, 2) : (1, 4)]))
        y = T.alloc_local((8,), "float32")
        T.cuda.tile.apply(T.ptx["mov.b32"], x.view(2, 4, 1), y.view(2, 4, 1), scope="thread")

    return kernel


def _operands(kernel):
    found = []
    tvm_ffi.structural_walk(kernel.body, (tirx.Evaluate, lambda n: found.append(n) if is_tile_call(n.value) else None))
    return [op for call in found for op in decode(call.value).operands if isinstance(op, tirx.Buffer)]


@pytest.mark.parametrize("make", [_warpgroup, _cta, _resplit])
def test_table_equals_apply_at_every_coordinate(make):
    for buf in _operands(make()):
        view, table = ViewMap(buf), view_tables.axis_table(buf)
        assert table is not None
        for coord in itertools.product(*(range(n) for n in view.shape)):
            want = view.apply(coord)
            assert set(want) == set(table), coord
            assert all(int(v) == int(table[axis][coord]) for axis, v in want.items()), coord


def test_gather_refuses_points_outside_the_view():
    values = np.arange(12).reshape(3, 4)
    assert view_tables.gather(values, (1,), np.array([[[3]]])).tolist() == [[7]]
    assert view_tables.gather(values, (1,), np.array([[[4]]])) is None
    assert view_tables.gather(values, (3,), np.array([[[0]]])) is None
    assert view_tables.as_points([[(0, 1)], [(0, 1), (1, 1)]]) is None


def _outcome(make):
    """The lowered PrimFunc, or the TileError's text."""
    try:
        return testing.lower(make())
    except TileError as err:
        return str(err)


def _clear():
    view_tables._cached.cache_clear()  # pylint: disable=protected-access
    md.analyse.cache_clear()
    md.canonical_at_origin.cache_clear()


# the ISA's register slots, row g / column pair t on thread g + 8 t instead of 4 g + t
_SWAPPED = TileLayout(S[(2, 4, 2, 8, N // 8, 4, 2) : (N // 2, 32 @ W, 2, 1 @ W, 4, 8 @ W, 1)])
# the register axis j has stride 0: two columns share a slot
_OVERLAP = TileLayout(S[(2, 4, 2, 8, N // 8, 4, 2) : (N // 2, 32 @ W, 2, 4 @ W, 0, 1 @ W, 1)])


@pytest.mark.parametrize(
    "make, error",
    [
        (_warpgroup, None),
        (_cta, None),
        (lambda: _warpgroup(_SWAPPED), "register value owned by another thread"),
        (lambda: _warpgroup(_OVERLAP), "overlapping register destinations"),
    ],
)
def test_tabulated_and_element_by_element_paths_agree(make, error, monkeypatch):
    _clear()
    fast = _outcome(make)
    monkeypatch.setattr(view_tables, "TABLE_LIMIT", 0)
    _clear()
    slow = _outcome(make)
    _clear()
    if error is None:
        tvm.ir.assert_structural_equal(fast, slow)
        assert testing.count_ptx(fast, OP) == 8
    else:
        assert isinstance(fast, str) and error in fast
        assert fast == slow
