"""tvm_tirx.tile.fragments: accumulator tiles viewed by the ISA's fragment maps.

The views the helper makes are compared element by element (every coordinate's
offset and thread) with the hand-written views the GEMM and the tutorials used
before it, and each (memory, register) pair is checked against the fragment
maps the families check (``accumulator_coords``, ``mma_c_coords``).
"""

import itertools

import pytest
from tvm.tirx.layout import Axis, S, TileLayout

from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.mma_sync import mma_c_coords
from tvm_tirx.tile.families.tma import swizzled_layout
from tvm_tirx.tile.families.wgmma import accumulator_coords
from tvm_tirx.tile.fragments import (
    accumulator_layout, accumulator_registers, accumulator_tile, mma_accumulator_layout,
)  # fmt: skip
from tvm_tirx.tile.ir.views import ViewMap

_t, _l = Axis.tid_in_wg, Axis.laneid
BN = 256
# the incantations the helper replaces (tvm_tirx.kernels.gemm, gemm_mma_sync.py, the tutorials)
ACC_ROWS = TileLayout(S[(4, 8, 4, BN // 8, 2, 2) : (32 @ _t, 4 @ _t, 1 @ _t, 4, 2, 1)])
WORD_ROWS = TileLayout(S[(4, 8, 4, BN // 8, 2, 1) : (32 @ _t, 4 @ _t, 1 @ _t, 2, 1, 1)])
MMA_ROWS = TileLayout(S[(8, 4, 4, 4, 2, 2) : (4 @ _l, 1 @ _l, 16, 4, 2, 1)])
C_ROWS = TileLayout(S[(32, 2, 2) : (1 @ _l, 2, 1)])


def _by_thread_rows(tile):
    return tile.view(4, 2, 8, BN // 8, 4, 2).permute(0, 2, 4, 3, 1, 5).view(4, 32, BN // 8, 2, 2)


def _by_thread_words(tile):
    return tile.view(4, 2, 8, BN // 8, 4, 1).permute(0, 2, 4, 3, 1, 5).view(4, 32, BN // 8, 2, 1)


def _by_thread_boxes(out):
    return out.view(4, 4, 2, 8, 8, 4, 1).permute(1, 3, 5, 0, 4, 2, 6).view(4, 32, BN // 8, 2, 1)


VIEWS = {}


def _keep(name, *views):
    VIEWS[name] = views


@T.function
def _wgmma_views(C: T.Tensor((128, 512), "float32", align=16), D: T.Tensor((128, 512), "bfloat16", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    acc = T.alloc_local((64, BN), "float32", layout=accumulator_layout(BN))
    words = T.alloc_local((64, BN // 2), "uint32", layout=accumulator_layout(BN, packed=True))
    tiles = T.alloc_local((2, 64, 64), "float32", layout=accumulator_layout(64, 2))
    out = T.alloc_shared((4, 64, 32), "uint32", align=1024, layout=swizzled_layout((4, 64, 32), "uint32", 3))
    m1, r1 = accumulator_tile(C.sub[64:128, 256:512], acc, "wgmma")
    _keep("f32", m1, r1, _by_thread_rows(C.sub[64:128, 256:512]), acc.view(4, 32, BN // 8, 2, 2, layout=ACC_ROWS))
    m2, r2 = accumulator_tile(D.view("uint32").sub[64:128, 128:256], words, "wgmma")
    _keep("words", m2, r2, _by_thread_words(D.view("uint32").sub[64:128, 128:256]),
          words.view(4, 32, BN // 8, 2, 1, layout=WORD_ROWS))
    m3, r3 = accumulator_tile(D.sub[64:128, 256:512], words, "wgmma")
    _keep("bf16 seen as words", m3, r3, m2, r2)
    m4, r4 = accumulator_tile(out.permute(1, 0, 2), words, "wgmma")
    _keep("swizzled boxes", m4, r4, _by_thread_boxes(out), r2)
    m5, r5 = accumulator_tile(C.sub[0:128, 0:64], tiles, "wgmma", vector=1)
    _keep("m tiles, vector 1", m5, r5)


@T.function
def _mma_views(C: T.Tensor((256, 256), "float32", align=16), D: T.Tensor((16, 8), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    acc = T.alloc_local((4, 4, 16, 8), "float32", layout=mma_accumulator_layout(4, 4))
    c = T.alloc_local((16, 8), "float32", layout=mma_accumulator_layout())
    warp_tile = C.view(2, 128, 2, 128).sub[1, :, 0, :].view(2, 4, 2, 8, 4, 4, 4, 2).sub[1, :, :, :, 2, :, :, :]
    m1, r1 = accumulator_tile(C.view(2, 128, 2, 128).sub[1, :, 0, :].view(2, 64, 4, 32).sub[1, :, 2, :], acc, "mma.sync")
    _keep("mma tiles", m1, r1, warp_tile.permute(2, 4, 0, 3, 1, 5).view(32, 4, 4, 2, 2),
          acc.view(32, 4, 4, 2, 2, layout=MMA_ROWS))
    m2, r2 = accumulator_tile(D, c, "mma.sync")
    _keep("mma one", m2, r2, D.view(2, 8, 4, 2).permute(1, 2, 0, 3).view(32, 2, 2), c.view(32, 2, 2, layout=C_ROWS))


def _table(view):
    """``{coordinate: {axis: value}}`` of every coordinate of ``view``, plus its start."""
    vm = ViewMap(view)
    table = {c: {k: int(v) for k, v in vm.apply(c).items()} for c in itertools.product(*(range(int(n)) for n in view.shape))}
    return str(view.elem_offset), table


@pytest.mark.parametrize("name", ["f32", "words", "bf16 seen as words", "swizzled boxes", "mma tiles", "mma one"])
def test_views_equal_the_hand_written_ones(name):
    helper_mem, helper_regs, hand_mem, hand_regs = VIEWS[name]
    assert tuple(helper_mem.shape) == tuple(hand_mem.shape) == tuple(helper_regs.shape) == tuple(hand_regs.shape)
    assert _table(helper_mem) == _table(hand_mem)
    assert _table(helper_regs) == _table(hand_regs)


def _pairs(mem, regs, row_len, thread_axis):
    """``(thread, register slot) -> (row, col)`` of the tile for every coordinate of the pair."""
    vm, vr = ViewMap(mem), ViewMap(regs)
    start = int(mem.elem_offset)
    out = {}
    for c in itertools.product(*(range(int(n)) for n in mem.shape)):
        offset = start + int(vm.apply(c)["m"])  # the view's offsets count from its start
        at = {k: int(v) for k, v in vr.apply(c).items()}
        out[(at[thread_axis], at["m"])] = divmod(offset, row_len)
    return start, out


def test_wgmma_pairs_follow_the_isa_map():
    # f32 (64, 256) of C (128, 512) at rows 64.., columns 256..: thread p's register r
    # holds element accumulator_coords(256)(p)[r] of the tile
    start, pairs = _pairs(*VIEWS["f32"][:2], 512, "tid_in_wg")
    assert start == 64 * 512 + 256 and len(pairs) == 128 * 128
    coords = accumulator_coords(BN, False)
    assert all(pairs[(p, r)] == (64 + coords(p)[r][0], 256 + coords(p)[r][1]) for p, r in pairs)
    # packed words (64, 128) of D seen as (128, 256) words at rows 64.., words 128..
    start, pairs = _pairs(*VIEWS["words"][:2], 256, "tid_in_wg")
    words = accumulator_coords(BN, True)
    assert len(pairs) == 128 * 64 and all(pairs[(p, r)] == (64 + words(p)[r][0], 128 + words(p)[r][1]) for p, r in pairs)
    # two m tiles of (64, 64), one element per instruction: tile i's registers follow tile 0's
    _, pairs = _pairs(*VIEWS["m tiles, vector 1"][:2], 512, "tid_in_wg")
    small = accumulator_coords(64, False)
    assert len(pairs) == 128 * 64
    assert all(pairs[(p, 32 * i + r)] == (64 * i + small(p)[r][0], small(p)[r][1]) for p in range(128) for i in (0, 1) for r in range(32))


def test_mma_pairs_follow_the_isa_map():
    start, pairs = _pairs(*VIEWS["mma one"][:2], 8, "laneid")
    assert len(pairs) == 32 * 4 and all(pairs[(lane, r)] == mma_c_coords(lane)[r] for lane, r in pairs)
    # (4, 4) tiles of 16 x 8: register 4 (4 i + j) + r of tile (i, j)
    _, pairs = _pairs(*VIEWS["mma tiles"][:2], 256, "laneid")
    origin = (128 + 64, 2 * 32)
    for (lane, slot), (row, col) in pairs.items():
        i, j, r = slot // 16, slot // 4 % 4, slot % 4
        assert (row - origin[0], col - origin[1]) == (16 * i + mma_c_coords(lane)[r][0], 8 * j + mma_c_coords(lane)[r][1])


def _parse_error(body):
    """The exception raised when a kernel whose body is ``body(C, acc)`` is parsed."""
    with pytest.raises(Exception) as info:

        @T.function
        def kernel(C: T.Tensor((64, 64), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
            acc = T.alloc_local((64, 64), "float32", layout=accumulator_layout(64))
            words = T.alloc_local((64, 32), "uint32", layout=accumulator_layout(64, packed=True))
            odd = T.alloc_local((64, 64), "float32", layout="default")
            body(C, acc, words, odd)

    return str(info.value)


@pytest.mark.parametrize("body, words", [
    (lambda C, acc, words, odd: accumulator_registers(odd, "wgmma"), "allocate it with layout=accumulator_layout"),
    (lambda C, acc, words, odd: accumulator_registers(acc, "mma.sync"), "is not a mma.sync accumulator"),
    (lambda C, acc, words, odd: accumulator_registers(acc, "wmma"), "expected 'wgmma' or 'mma.sync'"),
    (lambda C, acc, words, odd: accumulator_registers(words, "wgmma", vector=2), "vector=2: expected one of (1,)"),
    (lambda C, acc, words, odd: accumulator_tile(C.sub[0:32, :], acc, "wgmma"), "expected (64, 64) 32-bit elements"),
    (lambda C, acc, words, odd: accumulator_tile(C.view("uint8"), acc, "wgmma"), "expected (64, 64) 32-bit elements"),
])  # fmt: skip
def test_mismatches_are_value_errors(body, words):
    assert words in _parse_error(body)


# -- the fragment map's coordinates (tile/fragments.py), as the kernels' epilogues use them ------


@pytest.mark.parametrize("n", [8, 64])
def test_accumulator_row_and_col_invert_the_wgmma_fragment_layout(n):
    from tvm_tirx.tile.fragments import accumulator_col, accumulator_layout, accumulator_row

    layout = accumulator_layout(n)
    for tid in range(128, 256):  # a second warpgroup: only the thread's place in its own counts
        for b in range(n // 8):
            for h in range(2):
                for e in range(2):
                    row, col = accumulator_row(0, tid, h), accumulator_col(0, tid, b, e)
                    got = layout.apply(row, col, shape=(64, n))
                    assert (int(got["m"]), int(got["tid_in_wg"])) == (4 * b + 2 * h + e, tid - 128), (tid, b, h, e)
