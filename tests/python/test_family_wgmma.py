"""wgmma family: Before/Expected of the ss and rs forms, descriptors derived from layouts,
one test per rule, every form assembled for sm_90a, and a GPU product against torch."""

import itertools
import os

import pytest
import tvm
from tvm.tirx.layout import Axis, ComposeLayout, S, TileLayout

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families import _matrix_descriptor as md
from tvm_tirx.tile.families.wgmma import a_fragment_layout, accumulator_coords, accumulator_layout
from tvm_tirx.tile.ir.ptx_table import entry_variants

W = Axis.tid_in_wg
OP16 = "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16"
SW128 = ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)]))
ACC16 = accumulator_layout(16, 1)


# ---------------------------------------------------------------- Before/Expected


def test_ss_one_descriptor_per_operand_and_a_constant_step_per_k():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        sa = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=SW128)
        sb = T.alloc_shared((16, 64), "bfloat16", align=1024, layout=ComposeLayout(3, 3, 3, TileLayout(S[(16, 64)])))
        acc = T.alloc_local((1, 64, 16), "float32", layout=ACC16)
        T.cuda.tile.apply(
            T.ptx[OP16],
            acc,
            sa.view(1, 64, 4, 16).permute(0, 2, 1, 3),
            sb.view(16, 4, 16).permute(1, 0, 2),
            scope="warpgroup",
            scale_d=False,
        )

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        sa = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=SW128)
        sb = T.alloc_shared((16, 64), "bfloat16", align=1024, layout=ComposeLayout(3, 3, 3, TileLayout(S[(16, 64)])))
        acc = T.alloc_local((1, 64, 16), "float32", layout=ACC16)
        av = sa.view(1, 64, 4, 16).permute(0, 2, 1, 3)
        bv = sb.view(16, 4, 16).permute(1, 0, 2)
        d = acc.local()
        a_desc = T.alloc_local((1,), "uint64")
        # K-major, 128-byte swizzle: LBO unused (1), SBO = 8 rows x 128 bytes = 64 x 16
        T.cuda.wgmma.encode_matrix_descriptor(T.address_of(a_desc[0]), av.ptr_to([0, 0, 0, 0]), 1, 64, 3)
        b_desc = T.alloc_local((1,), "uint64")
        T.cuda.wgmma.encode_matrix_descriptor(T.address_of(b_desc[0]), bv.ptr_to([0, 0, 0]), 1, 64, 3)
        for r0 in T.unroll(1):
            for r1 in T.unroll(4):
                # each K step of 16 bf16 moves both starts by 32 bytes (2 x 16)
                T.ptx[OP16](
                    d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7],
                    a_desc[0] + T.Cast("uint64", r1 * 2),
                    b_desc[0] + T.Cast("uint64", r1 * 2),
                    r1 != 0, 1, 1, 0, 0,
                )  # fmt: skip

    testing.assert_lowers_to(before, expected)


def test_rs_registers_of_a_and_a_run_time_scale_d():
    a_frag = a_fragment_layout(1, 1)

    @T.function
    def before(flag: T.int32):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        sb = T.alloc_shared((16, 16), "bfloat16", align=256, layout=ComposeLayout(3, 1, 3, TileLayout(S[(16, 16)])))
        acc = T.alloc_local((1, 64, 16), "float32", layout=ACC16)
        a = T.alloc_local((1, 1, 64, 8), "uint32", layout=a_frag)
        T.cuda.tile.apply(
            T.ptx[OP16], acc, a, sb.view(1, 16, 16), scope="warpgroup", scale_d=flag > 0, scale_b=-1
        )

    @T.function
    def expected(flag: T.int32):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        sb = T.alloc_shared((16, 16), "bfloat16", align=256, layout=ComposeLayout(3, 1, 3, TileLayout(S[(16, 16)])))
        acc = T.alloc_local((1, 64, 16), "float32", layout=ACC16)
        a = T.alloc_local((1, 1, 64, 8), "uint32", layout=a_frag)
        bv = sb.view(1, 16, 16)
        d = acc.local()
        al = a.local()
        b_desc = T.alloc_local((1,), "uint64")
        # K-major, 32-byte swizzle: rows of 32 bytes, SBO = 8 x 32 bytes = 16 x 16
        T.cuda.wgmma.encode_matrix_descriptor(T.address_of(b_desc[0]), bv.ptr_to([0, 0, 0]), 1, 16, 1)
        for r0 in T.unroll(1):
            for r1 in T.unroll(1):
                T.ptx[OP16](
                    d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7],
                    al[0], al[1], al[2], al[3],
                    b_desc[0],
                    T.Or(flag > 0, r1 != 0), 1, -1, 0,
                )  # fmt: skip

    testing.assert_lowers_to(before, expected)


def test_mn_major_view_sets_the_transpose_and_core_matrices_need_no_swizzle():
    # A: K-major without swizzle, core matrices of 8 rows x 16 bytes (128 contiguous
    # bytes); B: stored N-contiguous, a (K, N) = (16, 64) tile with the 128-byte
    # swizzle, passed as its transposed (N, K) view.
    a_inter = TileLayout(S[(8, 8, 2, 8) : (64, 8, 512, 1)])  # (m/8, m%8, k/8, k%8)
    bt = ComposeLayout(3, 3, 3, TileLayout(S[(16, 64)]))
    op = "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"

    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        sa = T.alloc_shared((64, 16), "bfloat16", align=16, layout=a_inter)
        sbt = T.alloc_shared((16, 64), "bfloat16", align=1024, layout=bt)
        acc = T.alloc_local((64, 64), "float32", layout=accumulator_layout(64))
        T.cuda.tile.apply(T.ptx[op], acc, sa, sbt.permute(1, 0), scope="warpgroup", scale_d=True)

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        sa = T.alloc_shared((64, 16), "bfloat16", align=16, layout=a_inter)
        sbt = T.alloc_shared((16, 64), "bfloat16", align=1024, layout=bt)
        acc = T.alloc_local((64, 64), "float32", layout=accumulator_layout(64))
        bv = sbt.permute(1, 0)
        d = acc.local()
        a_desc = T.alloc_local((1,), "uint64")
        # next core matrix along K at 1024 bytes (LBO 64), next 8 rows at 128 bytes (SBO 8)
        T.cuda.wgmma.encode_matrix_descriptor(T.address_of(a_desc[0]), sa.ptr_to([0, 0]), 64, 8, 0)
        b_desc = T.alloc_local((1,), "uint64")
        # MN-major: the next 8 K-rows at 1024 bytes (SBO 64); N fits one atom (LBO unused, 0)
        T.cuda.wgmma.encode_matrix_descriptor(T.address_of(b_desc[0]), bv.ptr_to([0, 0]), 0, 64, 3)
        for r0 in T.unroll(1):
            for r1 in T.unroll(1):
                T.ptx[op](
                    d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13],
                    d[14], d[15], d[16], d[17], d[18], d[19], d[20], d[21], d[22], d[23], d[24], d[25], d[26],
                    d[27], d[28], d[29], d[30], d[31],
                    a_desc[0], b_desc[0], T.bool(True), 1, 1, 0, 1,
                )  # fmt: skip

    testing.assert_lowers_to(before, expected)


# ---------------------------------------------------------------- every form assembles

#: input PTX type -> (tensor dtype, ComposeLayout per_element for 16-byte chunks)
_INPUT = {
    "f16": ("float16", 3),
    "bf16": ("bfloat16", 3),
    "tf32": ("float32", 2),
    "e4m3": ("float8_e4m3fn", 4),
    "e5m2": ("float8_e5m2", 4),
    "s8": ("int8", 4),
    "u8": ("uint8", 4),
}
#: table entry group -> the N of the default run (every N with TVM_TIRX_WGMMA_ALL_N=1)
_DEFAULT_N = {"f16": 256, "f16_f16acc": 8, "bf16": 64, "tf32": 128, "fp8": 32, "fp8_f16acc": 24, "int": 16}
_ALL_N = os.environ.get("TVM_TIRX_WGMMA_ALL_N") == "1"


def _shape_n(opcode):
    return int(opcode.split(".m64n")[1].split("k")[0])


def _forms(group):
    """Every opcode of an entry group (ss and rs share the text), one N per group by default."""
    texts = sorted(set(entry_variants(f"wgmma_{group}_ss")))
    return [t for t in texts if _ALL_N or _shape_n(t) == _DEFAULT_N[group]]


def _forms_head(opcodes):
    """One warpgroup; a (320, 32-byte) 32B-swizzled shared tile per input type the opcodes read."""
    prologue = ["T.ptx['wgmma.fence.sync.aligned']()"]
    for t in sorted({t for op in opcodes for t in op.split(".")[-2:]}):
        dtype, pe = _INPUT[t]
        k = 32 // (1 << (4 - pe))  # elements in 32 bytes
        prologue.append(
            f"s_{t} = T.alloc_shared((320, {k}), '{dtype}', align=256, "
            f"layout=ComposeLayout({pe}, 1, 3, TileLayout(S[(320, {k})])))"
        )
    return testing.KernelHead(
        launch="T.cuda.LaunchConfig(grid=1, block=128)",
        prologue=tuple(prologue),
        imports=(
            "from tvm.tirx.layout import ComposeLayout, S, TileLayout",
            "from tvm_tirx.tile.families.wgmma import a_fragment_layout, accumulator_layout",
        ),
        epilogue=("T.ptx['wgmma.commit_group.sync.aligned']()", "T.ptx['wgmma.wait_group.sync.aligned'](0)"),
    )


def _forms_call(op, i):
    """Opcode ``op`` issued once in the ss form and once in the rs form."""
    dtype_d, atype, btype = op.split(".")[-3:]
    n = _shape_n(op)
    packed = dtype_d == "f16"
    d_shape, d_dtype = ((64, n // 2), "uint32") if packed else ((64, n), "float32" if dtype_d == "f32" else "uint32")
    scale = ", scale_a=-1, scale_b=1" if dtype_d != "s32" else ""  # integer products take no scale
    return [
        f"d{i} = T.alloc_local({d_shape}, '{d_dtype}', layout=accumulator_layout({n}, packed={packed}))",
        f"a{i} = T.alloc_local((64, 8), 'uint32', layout=a_fragment_layout())",
        f"T.cuda.tile.apply(T.ptx['{op}'], d{i}, s_{atype}.sub[0:64, :], s_{btype}.sub[64:{64 + n}, :],"
        f" scope='warpgroup', scale_d=False{scale})",
        f"T.cuda.tile.apply(T.ptx['{op}'], d{i}, a{i}, s_{btype}.sub[64:{64 + n}, :],"
        f" scope='warpgroup', scale_d=True{scale})",
    ]


@testing.requires_nvcc
@pytest.mark.parametrize("group", sorted(_DEFAULT_N))
def test_every_form_assembles_for_sm90a(group, tmp_path):
    opcodes = _forms(group)
    assert opcodes
    kernels = testing.form_kernels(opcodes, _forms_call, _forms_head(opcodes))
    for built in testing.assemble_forms(kernels, tmp_path, arch="sm_90a"):
        for op in built.kernel.forms:
            assert built.issued[op] == 2, op  # its ss and its rs form
        assert built.assembled


# ---------------------------------------------------------------- one test per rule

OP64 = "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"
B64 = ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)]))


def _kernel(block=128, guard=None, a_layout=SW128, a_align=1024, acc_layout=None, scope="warpgroup", op=OP64,
            b_dtype="bfloat16", k_view=16):
    """One wgmma call over (64, 64) bf16 tiles; each argument breaks one rule when changed."""
    acc_layout = acc_layout if acc_layout is not None else accumulator_layout(64)
    k_tiles = 64 // k_view

    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=block))
        tid = T.cuda.thread_idx("x")
        sa = T.alloc_shared((64, 64), "bfloat16", align=a_align, layout=a_layout)
        sb = T.alloc_shared((64, 64), b_dtype, align=1024, layout=B64)
        acc = T.alloc_local((64, 64), "float32", layout=acc_layout)
        av = sa.view(1, 64, k_tiles, k_view).permute(0, 2, 1, 3)
        bv = sb.view(64, k_tiles, k_view).permute(1, 0, 2)
        if guard is None or tid < guard:
            T.cuda.tile.apply(T.ptx[op], acc, av, bv, scope=scope, scale_d=False)

    return kernel


def test_the_reference_call_lowers_and_compiles_for_sm90a():
    kernel = _kernel()
    assert testing.count_ptx(testing.lower(kernel), OP64) == 4
    assert testing.count_ptx(tvm_tirx.compile(kernel, target="cuda", arch="sm_90a"), OP64) == 4


def test_partial_warpgroup_is_rejected():
    with pytest.raises(TileError, match="warpgroup-collective instruction needs all 128 threads"):
        testing.lower(_kernel(guard=64))


def test_warpgroup_guard_not_on_a_warpgroup_boundary_is_rejected():
    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        w = T.cuda.warp_id()
        sa = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=SW128)
        sb = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=B64)
        acc = T.alloc_local((64, 64), "float32", layout=accumulator_layout(64))
        if w >= 2 and w < 6:  # four consecutive warps, but warps 2..5 straddle two warpgroups
            T.cuda.tile.apply(T.ptx[OP64], acc, sa.view(64, 4, 16).permute(1, 0, 2).view(1, 4, 64, 16),
                              sb.view(64, 4, 16).permute(1, 0, 2), scope="warpgroup", scale_d=False)

    with pytest.raises(TileError, match="needs all 128 threads.*found 64 threads of warpgroup 0"):
        testing.lower(kernel)


def test_warp_scope_is_rejected():
    with pytest.raises(TileError, match="warpgroup-collective instruction at warp scope"):
        testing.lower(_kernel(scope="warp"))


def test_block_of_partial_warpgroups_is_rejected():
    with pytest.raises(TileError, match="needs whole warpgroups"):
        testing.lower(_kernel(block=96))


def test_layout_without_descriptor_is_rejected_when_parsed():
    # rows of 128 bytes without a swizzle: no canonical layout has them
    with pytest.raises(TileError, match="A .*has no matrix descriptor: expected a canonical wgmma layout.*MN-major") as info:
        _kernel(a_layout=TileLayout(S[(64, 64)]))
    assert "closest canonical layout" in str(info.value)


def test_swizzle_of_another_width_is_rejected():
    with pytest.raises(TileError, match="has no matrix descriptor"):
        _kernel(a_layout=ComposeLayout(3, 2, 3, TileLayout(S[(64, 64)])))  # 64-byte swizzle on 128-byte rows


def test_k_steps_that_are_not_a_constant_offset_are_rejected():
    # K = 64 as two column blocks of 32 (64-byte swizzle): steps 0,1 then a jump
    blocks = ComposeLayout(3, 2, 3, TileLayout(S[(64, 2, 32) : (32, 2048, 1)]))
    with pytest.raises(TileError, match="not a constant step per repeat axis"):
        testing.lower(_kernel(a_layout=blocks))


def test_swizzled_tile_off_its_pattern_boundary_is_rejected():
    with pytest.raises(TileError, match="matrix tile not provably aligned for its descriptor: expected a tile "
                                        "starting on a 1024-byte boundary"):
        testing.lower(_kernel(a_align=128))


def test_accumulator_layout_other_than_the_fragment_map_is_rejected():
    # the ISA's register slots, but row g / column pair t on thread g + 8 t instead of 4 g + t
    swapped = TileLayout(S[(4, 2, 8, 8, 4, 2) : (32 @ W, 2, 1 @ W, 4, 8 @ W, 1)])
    with pytest.raises(TileError, match="D .*register value owned by another thread"):
        testing.lower(_kernel(acc_layout=swapped))


def test_wrong_input_dtype_is_rejected():
    with pytest.raises(TileError, match="B .*dtype not accepted.*bfloat16.*found float16"):
        _kernel(b_dtype="float16")


def test_illegal_type_pair_is_rejected_by_the_table():
    with pytest.raises(TileError, match="illegal opcode"):
        _kernel(op="wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.bf16")


def test_n_not_in_the_table_is_rejected():
    with pytest.raises(TileError, match="illegal opcode|unknown or illegal opcode spelling"):
        _kernel(op="wgmma.mma_async.sync.aligned.m64n40k32.s32.s8.s8")


def test_mn_major_is_refused_for_8_bit_inputs():
    with pytest.raises(TileError, match=r"B .*no matrix descriptor.*MN-major only for 16-bit types"):

        @T.function
        def kernel():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
            sa = T.alloc_shared((64, 32), "int8", align=1024, layout=ComposeLayout(4, 1, 3, TileLayout(S[(64, 32)])))
            sbt = T.alloc_shared((32, 64), "int8", align=1024, layout=ComposeLayout(4, 2, 3, TileLayout(S[(32, 64)])))
            acc = T.alloc_local((64, 64), "uint32", layout=accumulator_layout(64))
            T.cuda.tile.apply(T.ptx["wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8"], acc, sa, sbt.permute(1, 0),
                              scope="warpgroup", scale_d=False)


@pytest.mark.parametrize("arch", ["sm_90", "sm_100a", "sm_120a"])
def test_targets_other_than_sm90a_are_rejected(arch):
    with pytest.raises(TileError, match=f"instruction is specific to another architecture: expected target sm_90a.*found {arch}"):
        tvm_tirx.compile(_kernel(), target="cuda", arch=arch)


def test_scale_parameters():
    with pytest.raises(TileError, match="missing parameter 'scale_d'"):

        @T.function
        def no_scale_d():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
            sa = T.alloc_shared((64, 16), "bfloat16", align=256, layout=ComposeLayout(3, 1, 3, TileLayout(S[(64, 16)])))
            acc = T.alloc_local((64, 64), "float32", layout=accumulator_layout(64))
            T.cuda.tile.apply(T.ptx[OP64], acc, sa, sa, scope="warpgroup")

    with pytest.raises(TileError, match="invalid parameter 'scale_a'.*found 2"):

        @T.function
        def two():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
            sa = T.alloc_shared((64, 16), "bfloat16", align=256, layout=ComposeLayout(3, 1, 3, TileLayout(S[(64, 16)])))
            acc = T.alloc_local((64, 64), "float32", layout=accumulator_layout(64))
            T.cuda.tile.apply(T.ptx[OP64], acc, sa, sa, scope="warpgroup", scale_d=True, scale_a=2)


def test_b1_forms_are_not_tile_forms():
    with pytest.raises(TileError, match="unsupported form.*single-bit"):
        _kernel(op="wgmma.mma_async.sync.aligned.m64n64k256.s32.b1.b1.and.popc")


def test_cta_scope_counts_warpgroups():
    # two warpgroups: each its own accumulator tile (wgid) and its own 64 rows of A;
    # B is shared by both, a view whose group axis has stride 0
    t, g = W, Axis.wgid
    acc2 = TileLayout(S[(2, 4, 2, 8, 2, 4, 2) : (1 @ g, 32 @ t, 2, 4 @ t, 4, 1 @ t, 1)])
    a_sw = ComposeLayout(3, 3, 3, TileLayout(S[(128, 64)]))
    b_sw = ComposeLayout(3, 3, 3, TileLayout(S[(16, 64)]))
    b_both = ComposeLayout(3, 3, 3, TileLayout(S[(2, 4, 16, 16) : (0, 16, 64, 1)]))

    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        tid = T.cuda.thread_idx("x")
        sa = T.alloc_shared((128, 64), "bfloat16", align=1024, layout=a_sw)
        sb = T.alloc_shared((16, 64), "bfloat16", align=1024, layout=b_sw)
        acc = T.alloc_local((2, 64, 16), "float32", layout=acc2)
        T.cuda.tile.apply(
            T.ptx[OP16], acc, sa.view(2, 1, 64, 4, 16).permute(0, 1, 3, 2, 4), sb.view(2, 4, 16, 16, layout=b_both),
            scope="cta", scale_d=False,
        )  # fmt: skip

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        tid = T.cuda.thread_idx("x")
        sa = T.alloc_shared((128, 64), "bfloat16", align=1024, layout=a_sw)
        sb = T.alloc_shared((16, 64), "bfloat16", align=1024, layout=b_sw)
        acc = T.alloc_local((2, 64, 16), "float32", layout=acc2)
        av = sa.view(2, 1, 64, 4, 16).permute(0, 1, 3, 2, 4)
        bv = sb.view(2, 4, 16, 16, layout=b_both)
        d = acc.local()
        a_desc = T.alloc_local((1,), "uint64")
        # each thread encodes the tile of its own warpgroup (group coordinate tid // 128)
        T.cuda.wgmma.encode_matrix_descriptor(T.address_of(a_desc[0]), av.ptr_to([tid // 128, 0, 0, 0, 0]), 1, 64, 3)
        b_desc = T.alloc_local((1,), "uint64")
        T.cuda.wgmma.encode_matrix_descriptor(T.address_of(b_desc[0]), bv.ptr_to([tid // 128, 0, 0, 0]), 1, 64, 3)
        for r0 in T.unroll(1):
            for r1 in T.unroll(4):
                T.ptx[OP16](
                    d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7],
                    a_desc[0] + T.Cast("uint64", r1 * 2), b_desc[0] + T.Cast("uint64", r1 * 2),
                    r1 != 0, 1, 1, 0, 0,
                )  # fmt: skip

    testing.assert_lowers_to(before, expected)
    assert testing.count_ptx(tvm_tirx.compile(before, target="cuda", arch="sm_90a"), OP16) == 4


def test_accumulator_map_covers_the_tile_once():
    for n, packed in ((8, False), (256, False), (16, True), (256, True)):
        seen = [c for p in range(128) for c in accumulator_coords(n, packed)(p)]
        cols = n // 2 if packed else n
        assert sorted(seen) == sorted(itertools.product(range(64), range(cols)))


# ---------------------------------------------------------------- the GPU product

#: name -> (N, layout of A over (1, 4, 64, 16) = (m tile, k tile, m, k),
#:          layout of B over (4, N, 16) = (k tile, n, k)); bf16, K = 64
_GPU_CASES = {
    # rows of 128 bytes, the 128-byte swizzle (a TMA box of 64 x 64 bf16 with SWIZZLE_128B)
    "k_major_sw128": (
        64,
        ComposeLayout(3, 3, 3, TileLayout(S[(1, 4, 64, 16) : (4096, 16, 64, 1)])),
        ComposeLayout(3, 3, 3, TileLayout(S[(4, 64, 16) : (16, 64, 1)])),
    ),
    # core matrices of 8 rows x 16 bytes: (row/8, k-tile, row%8, k/8, k%8)
    "k_major_no_swizzle": (
        128,
        TileLayout(S[(1, 4, 8, 8, 2, 8) : (4096, 128, 512, 8, 64, 1)]),
        TileLayout(S[(4, 16, 8, 2, 8) : (128, 512, 8, 64, 1)]),
    ),
    # A stored M-contiguous in two 32-row atoms (64-byte swizzle), B stored N-contiguous
    # (128-byte swizzle): both transposed by the instruction
    "mn_major": (
        64,
        ComposeLayout(3, 2, 3, TileLayout(S[(1, 4, 2, 32, 16) : (4096, 512, 2048, 1, 32)])),
        ComposeLayout(3, 3, 3, TileLayout(S[(4, 64, 16) : (1024, 1, 64)])),
    ),
}


def _gpu_kernel(n, a_layout, b_layout):
    """One warpgroup: C (64, n) = A (64, 64) @ B (n, 64)^T from shared tiles whose storage
    images (``Ai``, ``Bi``, laid out by the host) are copied in 16-byte chunks."""
    op = f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16"
    sa_n, sb_n = 64 * 64, n * 64
    acc_rows = TileLayout(S[(4, 8, 4, n // 8, 2, 2) : (32 @ W, 4 @ W, 1 @ W, 4, 2, 1)])  # (w, lane, j, h, e)

    @T.function
    def kernel(
        Ai: T.Tensor((sa_n,), "bfloat16", align=16),
        Bi: T.Tensor((sb_n,), "bfloat16", align=16),
        C: T.Tensor((64, n), "float32", align=16),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        fa = T.alloc_shared((sa_n,), "bfloat16", align=1024)
        fb = T.alloc_shared((sb_n,), "bfloat16", align=1024)
        acc = T.alloc_local((1, 64, n), "float32", layout=accumulator_layout(n, 1))
        # 16-byte chunk 128 r + t of each image is copied by thread t
        T.cuda.tile.apply(T.ptx["cp.async.cg.shared.global"], fa.view(sa_n // 1024, 4, 32, 8).permute(1, 2, 0, 3),
                          Ai.view(sa_n // 1024, 4, 32, 8).permute(1, 2, 0, 3), scope="cta")
        T.cuda.tile.apply(T.ptx["cp.async.cg.shared.global"], fb.view(sb_n // 1024, 4, 32, 8).permute(1, 2, 0, 3),
                          Bi.view(sb_n // 1024, 4, 32, 8).permute(1, 2, 0, 3), scope="cta")
        T.ptx["cp.async.commit_group"]()
        T.ptx["cp.async.wait_group"](0)
        T.ptx["fence.proxy.async.shared::cta"]()  # generic-proxy writes -> wgmma's async proxy
        T.cuda.cta_sync()
        T.ptx["wgmma.fence.sync.aligned"]()
        T.cuda.tile.apply(T.ptx[op], acc, fa.view(1, 4, 64, 16, layout=a_layout), fb.view(4, n, 16, layout=b_layout),
                          scope="warpgroup", scale_d=False)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        T.ptx["wgmma.wait_group.sync.aligned"](0)
        # thread 32 w + 4 g + t holds (16 w + 8 h + g, 8 j + 2 t + e) in register 4 j + 2 h + e
        T.cuda.tile.apply(T.ptx["st.global.v2.f32"], C.view(4, 2, 8, n // 8, 4, 2).permute(0, 2, 4, 3, 1, 5).view(4, 32, n // 8, 2, 2),
                          acc.view(4, 32, n // 8, 2, 2, layout=acc_rows), scope="warpgroup")  # fmt: skip

    return kernel


def _image(matrix, layout, shape, tile_of):
    """The storage image of ``matrix`` under ``layout`` (apache-tvm's ``Layout.apply``,
    independent of the descriptor derivation): element ``tile_of(coord)`` of the
    matrix at offset ``layout(coord)``, for every coordinate of ``shape``."""
    import torch  # pylint: disable=import-outside-toplevel

    flat = torch.full((int(layout.span()),), float("nan"), dtype=matrix.dtype)
    for coord in itertools.product(*(range(s) for s in shape)):
        flat[int(layout.apply(*coord, shape=list(shape))["m"])] = matrix[tile_of(coord)]
    assert not torch.isnan(flat.float()).any()  # every element placed once
    return flat


def _images(n, a_layout, b_layout, a, b):
    ia = _image(a, a_layout, (1, 4, 64, 16), lambda c: (c[2], 16 * c[1] + c[3]))
    ib = _image(b, b_layout, (4, n, 16), lambda c: (c[1], 16 * c[0] + c[2]))
    return ia, ib


@pytest.mark.parametrize("case", sorted(_GPU_CASES))
def test_gpu_case_compiles_and_places_every_element(case):
    torch = pytest.importorskip("torch")
    n, a_layout, b_layout = _GPU_CASES[case]
    kernel = tvm_tirx.compile(_gpu_kernel(n, a_layout, b_layout), target="cuda", arch="sm_90a")
    assert testing.count_ptx(kernel, f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16") == 4
    a = torch.arange(64 * 64, dtype=torch.float32).view(64, 64).to(torch.bfloat16)
    b = torch.arange(n * 64, dtype=torch.float32).view(n, 64).to(torch.bfloat16)
    _images(n, a_layout, b_layout, a, b)


@testing.requires_arch("sm_90a")
@pytest.mark.parametrize("case", sorted(_GPU_CASES))
def test_gpu_tile_product_matches_torch(case):
    import torch

    n, a_layout, b_layout = _GPU_CASES[case]
    kernel = tvm_tirx.compile(_gpu_kernel(n, a_layout, b_layout), target="cuda")
    torch.manual_seed(0)
    a = torch.randn(64, 64, dtype=torch.bfloat16)
    b = torch.randn(n, 64, dtype=torch.bfloat16)
    ia, ib = _images(n, a_layout, b_layout, a, b)
    c = torch.zeros(64, n, dtype=torch.float32, device="cuda")
    kernel(ia.cuda(), ib.cuda(), c)
    torch.cuda.synchronize()
    ref = a.float() @ b.float().T
    err = (c.cpu() - ref).abs().max() / ref.abs().max()
    assert err <= 1e-2, f"{case}: max relative error {err}"


def _guide_kernel(tmp_path):
    """The ``wgmma_tile.py`` example of docs/guides/wgmma.rst, compiled for sm_90a."""
    import pathlib
    import re
    import textwrap

    page = (pathlib.Path(__file__).resolve().parents[2] / "docs/guides/wgmma.rst").read_text()
    block = next(b for b in re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", page) if "# wgmma_tile.py" in b)
    func = testing.load_kernel(textwrap.dedent(block), tmp_path, name="wgmma_tile")
    return tvm_tirx.compile(func, target="cuda", arch="sm_90a")


def test_the_guides_tile_product_compiles_and_assembles(tmp_path):
    kernel = _guide_kernel(tmp_path)
    assert testing.count_ptx(kernel, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16") == 4
    if testing.has_nvcc():
        assert testing.assemble(kernel)


@testing.requires_arch("sm_90a")
def test_gpu_the_guides_tile_product_matches_torch(tmp_path):
    import torch

    kernel = _guide_kernel(tmp_path)
    torch.manual_seed(1)
    a = torch.randn(64, 64, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(64, 64, dtype=torch.bfloat16, device="cuda")
    c = torch.zeros(64, 64, dtype=torch.float32, device="cuda")
    kernel(a, b, c)
    torch.cuda.synchronize()
    ref = a.float() @ b.float().T
    assert ((c - ref).abs().max() / ref.abs().max()).item() <= 1e-2


def test_pred_divergent_within_the_warpgroup_is_rejected():
    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        tid = T.cuda.thread_idx("x")
        sa = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=SW128)
        sb = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=B64)
        acc = T.alloc_local((64, 64), "float32", layout=accumulator_layout(64))
        T.cuda.tile.apply(T.ptx[OP64], acc, sa.view(1, 64, 4, 16).permute(0, 2, 1, 3),
                          sb.view(64, 4, 16).permute(1, 0, 2), scope="warpgroup", scale_d=False, pred=tid < 64)

    with pytest.raises(TileError, match="pred"):
        testing.lower(kernel)


# -- accumulators in flight (issue 25): not touched before a wait_group retires the group ------


def _epilogue_after(waits):
    """One wgmma, its commit, then ``waits`` (wait_group depths), then a store of the accumulators."""

    @T.function
    def kernel(C: T.Tensor((64, 64), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        sa = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=SW128)
        sb = T.alloc_shared((64, 64), "bfloat16", align=1024, layout=B64)
        acc = T.alloc_local((1, 64, 64), "float32", layout=accumulator_layout(64, 1))
        T.ptx["wgmma.fence.sync.aligned"]()
        T.cuda.tile.apply(T.ptx[OP64], acc, sa.view(1, 64, 4, 16).permute(0, 2, 1, 3),
                          sb.view(64, 4, 16).permute(1, 0, 2), scope="warpgroup", scale_d=False)
        T.ptx["wgmma.commit_group.sync.aligned"]()
        if len(waits) > 0:  # (Python conditions: decided while parsing)
            T.ptx["wgmma.wait_group.sync.aligned"](waits[0])
        if len(waits) > 1:
            T.ptx["wgmma.wait_group.sync.aligned"](waits[1])
        T.cuda.tile.apply(T.ptx["st.global.v2.f32"],
                          C.view(4, 2, 8, 8, 4, 2).permute(0, 2, 4, 3, 1, 5).view(4, 32, 8, 2, 2),
                          acc.view(4, 32, 8, 2, 2, layout=TileLayout(S[(4, 8, 4, 8, 2, 2) : (32 @ W, 4 @ W, 1 @ W, 4, 2, 1)])),
                          scope="warpgroup")

    return kernel


def test_accumulators_stored_after_their_group_retires_are_accepted():
    testing.lower(_epilogue_after([0]))
    testing.lower(_epilogue_after([1, 0]))


@pytest.mark.parametrize("waits", [[], [1]], ids=["no wait", "wait_group 1 leaves it pending"])
def test_accumulators_stored_while_the_wgmma_may_write_them_are_refused(waits):
    with pytest.raises(TileError, match=r"accumulators used while the wgmma may still write them: .*"
                       r"found acc used at .*test_family_wgmma.py:\d+ with the group still pending"):
        testing.lower(_epilogue_after(waits))


def _ring_release(wait):
    """A 2-stage ring of A and B tiles: per K step one wgmma on stage ``k % 2``, its commit,
    ``wait_group wait`` (None: no wait), then thread 0 arrives on ``empty[k % 2]`` -- the
    release that lets a producer refill the stage."""
    from tvm_tirx.tile.families.tma import swizzled_layout

    @T.function
    def kernel(C: T.Tensor((64, 64), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        sa = T.alloc_shared((2, 64, 64), "bfloat16", align=1024, layout=swizzled_layout((2, 64, 64), "bfloat16", 3))
        sb = T.alloc_shared((2, 64, 64), "bfloat16", align=1024, layout=swizzled_layout((2, 64, 64), "bfloat16", 3))
        empty = T.alloc_shared((2, 1), "uint64", align=8)
        acc = T.alloc_local((1, 64, 64), "float32", layout=accumulator_layout(64, 1))
        tid = T.cuda.thread_idx("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], empty, count=T.uint32(1))
        T.cuda.cta_sync()
        for k in T.serial(4):
            s = k % 2
            T.ptx["wgmma.fence.sync.aligned"]()
            T.cuda.tile.apply(T.ptx[OP64], acc, sa.sub[s].view(1, 64, 4, 16).permute(0, 2, 1, 3),
                              sb.sub[s].view(64, 4, 16).permute(1, 0, 2), scope="warpgroup", scale_d=k > 0)
            T.ptx["wgmma.commit_group.sync.aligned"]()
            if wait is not None:  # (a Python condition: decided while parsing)
                T.ptx["wgmma.wait_group.sync.aligned"](wait)
            if tid == 0:
                T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], empty.sub[s, :])
        T.ptx["wgmma.wait_group.sync.aligned"](0)

    return kernel


@pytest.mark.parametrize("wait", [None, 1], ids=["no wait", "wait_group 1 leaves it pending"])
def test_a_stage_released_while_its_wgmma_may_read_it_is_refused(wait):
    with pytest.raises(TileError, match=r"ring stage released while the wgmma may still read it: .*"
                       r"found an arrive on the stage's barrier at .*test_family_wgmma.py:\d+ with the group still pending"):
        testing.lower(_ring_release(wait))


def test_a_stage_released_after_its_group_retires_is_accepted():
    testing.lower(_ring_release(0))


def test_the_gemm_ring_with_one_batch_in_flight_is_accepted():
    # tvm_tirx.kernels.gemm: wait_group 1 inside the K loop (the next wgmma on the same
    # accumulators is allowed), wait_group 0 after it, then the epilogue
    from tvm_tirx.kernels.gemm import make_gemm

    testing.lower(make_gemm(2048, 2048, 512, persistent=False, group_m=16, wait_depth=1))
