"""ViewMap's own offset arithmetic agrees with apache-tvm's ``Layout.apply``, for
strided layouts and for swizzled ones (``ComposeLayout``), on views too."""

import random

import pytest
import tvm_ffi
from tvm import tirx
from tvm.tirx.layout import ComposeLayout, S, TileLayout

from tvm_tirx.script import tirx as T
from tvm_tirx.tile.ir.views import ViewMap, xor_swizzle


def _buffers(func):
    found = {}

    def visit(node):
        found[node.buffer.name] = node.buffer

    tvm_ffi.structural_walk(func.body, ((tirx.AllocBuffer, tirx.DeclBuffer), visit))
    return found


@T.function
def _views():
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    s = T.alloc_shared((2, 64, 64), "bfloat16", align=1024, layout=ComposeLayout(3, 3, 3, TileLayout(S[(2, 64, 64)])))
    k_step = s.sub[1, :, 16:32]
    rows = s.sub[0, 8:24, :]
    moved = s.sub[1].view(64, 4, 16).permute(1, 0, 2)
    f = T.alloc_shared((64, 32), "float32", align=512, layout=ComposeLayout(2, 2, 3, TileLayout(S[(64, 32)])))
    T.evaluate(k_step[0, 0] + rows[0, 0] + moved[0, 0, 0] + T.Cast("bfloat16", f[0, 0]))


@pytest.mark.parametrize("name", ["s", "k_step", "rows", "moved", "f"])
def test_swizzled_offsets_match_the_layout(name):
    buf = _buffers(_views)[name]
    view = ViewMap(buf)
    assert view._swizzle is not None  # pylint: disable=protected-access  # the fast path is taken
    rng = random.Random(0)
    shape = [int(n) for n in buf.shape]
    for _ in range(200):
        coord = tuple(rng.randrange(n) for n in shape)
        assert view.offset(coord) == int(buf.layout.apply(*view.coord(coord))["m"]), coord


def test_xor_swizzle_is_an_involution_on_its_bits():
    for a in range(4096):
        assert xor_swizzle(xor_swizzle(a, 3, 3, 3), 3, 3, 3) == a
    assert xor_swizzle(64 + 3, 3, 3, 3) == 64 + 8 + 3  # row 1: chunk 0 -> chunk 1
