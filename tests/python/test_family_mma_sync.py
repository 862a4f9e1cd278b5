"""mma.sync family: lowering Before/Expected over (M, N, K) repeat axes and its rules."""

import pytest
import tvm
from tvm.tirx.layout import Axis, S, TileLayout

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T

L = Axis.laneid
# the ISA's m16n8k16 fragments (PTX ISA 9.7.14.5.8.1), one tile each
a_frag = TileLayout(S[(2, 8, 2, 4) : (1, 4 @ L, 2, 1 @ L)])
b_frag = TileLayout(S[(8, 2, 4) : (4 @ L, 1, 1 @ L)])
c_frag = TileLayout(S[(2, 8, 4, 2) : (2, 4 @ L, 1 @ L, 1)])
OP = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"


def test_warp_scope_one_mma_per_k_step():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        a = T.alloc_local((1, 2, 16, 8), "uint32", layout=TileLayout(S[(2, 2, 8, 2, 4) : (4, 1, 4 @ L, 2, 1 @ L)]))
        b = T.alloc_local((1, 2, 8, 8), "uint32", layout=TileLayout(S[(2, 8, 2, 4) : (2, 4 @ L, 1, 1 @ L)]))
        c = T.alloc_local((1, 1, 16, 8), "float32", layout=c_frag)
        T.cuda.tile.apply(T.ptx[OP], c, a, b, c, scope="warp")

    lowered = testing.lower(before)
    assert testing.count_ptx(lowered, OP) == 2  # K = 2 steps, M = N = 1


def test_operands_disagreeing_on_an_axis_are_rejected():
    with pytest.raises(TileError, match="repeat shapes differ"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            d = T.alloc_local((2, 1, 16, 8), "float32")
            a = T.alloc_local((1, 1, 16, 8), "uint32")
            b = T.alloc_local((1, 1, 8, 8), "uint32")
            T.cuda.tile.apply(T.ptx[OP], d, a, b, d, scope="warp")
