"""TMA family (cp.async.bulk.tensor / cp.reduce.async.bulk.tensor): lowering Before/Expected
(with the host-side tensor-map encoding: the host_setup hook), the forms the table offers
assembled for sm_90a, one test per rule, and GPU tests against torch."""

import itertools
import pathlib

import pytest
import tvm
from tvm.tirx.layout import S, TileLayout

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.tma import REDUCE_DTYPES, swizzled_layout
from tvm_tirx.tile.ir.forms import forms_of
from tvm_tirx.tile.ir.registry import candidates
from tvm_tirx.tile.rules.static_rules import rule_arch

import tma_kernels as K

LOAD2D, STORE2D, LOAD3D = K.LOAD2D, K.STORE2D, K.LOAD3D


def _count(func, name):
    import tvm_ffi  # pylint: disable=import-outside-toplevel

    found = []
    tvm_ffi.structural_walk(
        testing.lower(func).body,
        (tvm.ir.Call, lambda c: found.append(c) if getattr(c.op, "name", "") == name else None),
    )
    return len(found)


# -- Before / Expected -----------------------------------------------------------------------


def test_load_and_store_encode_one_map_per_tensor_on_the_host():
    @T.function
    def before(A: T.Tensor((8, 32), "float32", align=16), B: T.Tensor((8, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=2048))
        tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        if tid == 0:
            T.cuda.tile.apply(T.ptx[LOAD2D], tile, A, mbar=bar, coords=(0, tid))
            T.cuda.tile.apply(T.ptx[STORE2D], B, tile, coords=(0, 0))

    @T.function
    def expected(A: T.Tensor((8, 32), "float32", align=16), B: T.Tensor((8, 32), "float32", align=16)):
        a_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(a_map, A.data, 32, 8, 128, 32, 8, 1, 1, descriptor_dtype="float32", rank=2,
                                 interleave=0, swizzle=0, l2_promotion=0, oob_fill=0, force_cu_dtype=-1)
        b_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(b_map, B.data, 32, 8, 128, 32, 8, 1, 1, descriptor_dtype="float32", rank=2,
                                 interleave=0, swizzle=0, l2_promotion=0, oob_fill=0, force_cu_dtype=-1)
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=2048))
        tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        if tid == 0:
            # coordinates innermost first
            T.ptx[LOAD2D](tile.ptr_to([0, 0]), T.address_of(a_map), tid, T.int32(0), bar.ptr_to([0]))
            T.ptx[STORE2D](T.address_of(b_map), T.int32(0), T.int32(0), tile.ptr_to([0, 0]))

    testing.assert_lowers_to(before, expected)


STEPS = ((2, 0, 0), (0, 8, 0))


def test_repeat_axes_step_the_coordinates_and_the_image():
    @T.function
    def before(A: T.Tensor((4, 16, 64), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=16384 + 128))
        tiles = T.alloc_shared((2, 2, 2, 8, 32), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        if T.cuda.thread_idx("x") == 0:
            T.cuda.tile.apply(T.ptx[LOAD3D], tiles, A, mbar=bar, coords=(0, 0, 32), coord_steps=STEPS)

    @T.function
    def expected(A: T.Tensor((4, 16, 64), "float32", align=16)):
        a_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(a_map, A.data, 64, 16, 4, 256, 4096, 32, 8, 2, 1, 1, 1, descriptor_dtype="float32",
                                 rank=3, interleave=0, swizzle=0, l2_promotion=0, oob_fill=0, force_cu_dtype=-1)
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=16384 + 128))
        tiles = T.alloc_shared((2, 2, 2, 8, 32), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        if T.cuda.thread_idx("x") == 0:
            for r0 in T.unroll(2):
                for r1 in T.unroll(2):
                    T.ptx[LOAD3D](tiles.ptr_to([r0, r1, 0, 0, 0]), T.address_of(a_map), T.int32(32), r1 * 8, r0 * 2,
                                  bar.ptr_to([0]))

    testing.assert_lowers_to(before, expected)


L128 = swizzled_layout((2, 64, 64), "bfloat16", 3)
HINTED = LOAD2D + ".multicast::cluster.L2::cache_hint"


def test_swizzle_view_multicast_and_cache_hint():
    # a strided view of a parameter is encoded from the parameter (base + offset);
    # swizzle= and l2_promotion= reach the encoding, cta_mask and cache_policy the PTX
    @T.function
    def before(A: T.Tensor((256, 128), "bfloat16", align=16), policy: T.uint64):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32, cluster=2, dynamic_smem_bytes=16384 + 1024))
        t = T.alloc_shared((2, 64, 64), "bfloat16", scope="shared.dyn", align=1024, layout=L128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        if T.cuda.thread_idx("x") == 0:
            T.cuda.tile.apply(T.ptx[HINTED], t, A.sub[64:256, 0:128], mbar=bar, coords=(0, 0), coord_steps=((0, 64),),
                              swizzle=3, l2_promotion=3, cta_mask=T.uint16(3), cache_policy=policy)

    @T.function
    def expected(A: T.Tensor((256, 128), "bfloat16", align=16), policy: T.uint64):
        a_map: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(a_map, A.ptr_to([64, 0]), 128, 192, 256, 64, 64, 1, 1, descriptor_dtype="bfloat16",
                                 rank=2, interleave=0, swizzle=3, l2_promotion=3, oob_fill=0, force_cu_dtype=-1)
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32, cluster=2, dynamic_smem_bytes=16384 + 1024))
        t = T.alloc_shared((2, 64, 64), "bfloat16", scope="shared.dyn", align=1024, layout=L128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        if T.cuda.thread_idx("x") == 0:
            A.sub[64:256, 0:128]  # the view the call names (declared, unused)
            for r0 in T.unroll(2):
                T.ptx[HINTED](t.ptr_to([r0, 0, 0]), T.address_of(a_map), r0 * 64, T.int32(0), bar.ptr_to([0]),
                              T.uint16(3), policy)

    testing.assert_lowers_to(before, expected)


def test_identical_maps_are_encoded_once_and_different_boxes_twice():
    @T.function
    def k(A: T.Tensor((64, 64), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=8192 + 128))
        t = T.alloc_shared((8, 64), "float32", scope="shared.dyn", align=128)
        u = T.alloc_shared((16, 32), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        if T.cuda.thread_idx("x") == 0:
            T.cuda.tile.apply(T.ptx[LOAD2D], t, A, mbar=bar, coords=(0, 0))
            T.cuda.tile.apply(T.ptx[LOAD2D], t, A, mbar=bar, coords=(8, 0))
            T.cuda.tile.apply(T.ptx[STORE2D], A, t, coords=(16, 0))
            T.cuda.tile.apply(T.ptx[LOAD2D], u, A, mbar=bar, coords=(0, 32))

    assert _count(k, "tirx.tensormap_encode_tiled") == 2
    assert _count(k, "tirx.tvm_stack_alloca") == 2


def test_a_caller_encoded_map_is_passed_as_is():
    @T.function
    def before(A: T.Tensor((8, 32), "float32", align=16)):
        m: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(m, A.data, 32, 8, 128, 32, 8, 1, 1, descriptor_dtype="float32", rank=2,
                                 interleave=0, swizzle=0, l2_promotion=0, oob_fill=0, force_cu_dtype=-1)
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=2048))
        tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        if T.cuda.thread_idx("x") == 0:
            T.cuda.tile.apply(T.ptx[LOAD2D], tile, T.address_of(m), mbar=bar, coords=(0, 0))

    @T.function
    def expected(A: T.Tensor((8, 32), "float32", align=16)):
        m: T.let[T.TensorMap()] = T.tvm_stack_alloca("tensormap", 1)
        T.tensormap_encode_tiled(m, A.data, 32, 8, 128, 32, 8, 1, 1, descriptor_dtype="float32", rank=2,
                                 interleave=0, swizzle=0, l2_promotion=0, oob_fill=0, force_cu_dtype=-1)
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=2048))
        tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        if T.cuda.thread_idx("x") == 0:
            T.ptx[LOAD2D](tile.ptr_to([0, 0]), T.address_of(m), T.int32(0), T.int32(0), bar.ptr_to([0]))

    testing.assert_lowers_to(before, expected)


def test_mbar_is_passed_by_keyword_only():
    # mbar is a keyword role (as for the non-tensor bulk copies): by position it
    # is a missing keyword, not a third positional operand
    with pytest.raises(TileError, match="missing parameter 'mbar' .*expected mbar=<a uint64 / int64 view"):

        @T.function
        def by_position(A: T.Tensor((8, 32), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=2048))
            tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
            bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
            T.cuda.tile.apply(T.ptx[LOAD2D], tile, A, bar, coords=(0, 0))


@pytest.mark.parametrize("name", sorted(K.KERNELS))
def test_kernels_print_and_reparse(name):
    func = K.KERNELS[name]
    text = func.script()
    assert "T.cuda.tile.apply(" in text
    tvm.ir.assert_structural_equal(func, tvm.script.from_source(text), map_free_vars=True)


def test_swizzled_layout_is_the_tma_image():
    # 128B swizzle of bf16 rows: 16-byte chunk c of row r is stored at chunk c ^ (r % 8)
    layout = swizzled_layout((16, 64), "bfloat16", 3)
    for r, c in itertools.product(range(16), range(64)):
        chunk = (c // 8) ^ (r % 8)
        assert int(layout.apply(r, c)["m"]) == r * 64 + chunk * 8 + c % 8
    # 32B swizzle of f32 rows of 8: bit 4 of the byte address XOR bit 7
    layout = swizzled_layout((8, 8), "float32", 1)
    for r, c in itertools.product(range(8), range(8)):
        b = (r * 8 + c) * 4
        assert int(layout.apply(r, c)["m"]) * 4 == b ^ (((b >> 7) & 1) << 4)
    assert str(swizzled_layout((8, 32), "float32", 0)) == str(TileLayout(S[(8, 32)]))


# -- every form of the table, assembled for sm_90a -----------------------------------------------


def _form_call(form, i):  # pylint: disable=unused-argument
    contract = form.contract
    mods = contract.instruction.modifiers
    rank = int(mods["dim"][0])
    extra = ""
    if "cta_mask" in contract.params:
        extra += ", cta_mask=T.uint16(3)"
    if "cache_policy" in contract.params:
        extra += ", cache_policy=policy"
    coords = "(" + ", ".join(["0"] * rank) + ",)"
    name = f"G{rank}"
    if "dst_mem" in {r.ptx.name for r in contract.roles}:
        return [f'T.cuda.tile.apply(T.ptx["{form.opcode}"], s{rank}, {name}, mbar=bar, coords={coords}{extra})']
    assert mods.get("redop", "add") in REDUCE_DTYPES
    return [f'T.cuda.tile.apply(T.ptx["{form.opcode}"], {name}, s{rank}, coords={coords}{extra})']


#: uint32 everywhere: every reduction operation takes it; boxes (2, ..., 2, 4) of
#: 16-byte rows in tensors (4, ..., 4, 8) of 32-byte rows.
FORMS_HEAD = testing.KernelHead(
    params=", ".join(f'G{n}: T.Tensor({(4,) * (n - 1) + (8,)}, "uint32", align=16)' for n in range(1, 6))
    + ", policy: T.uint64",
    launch="T.cuda.LaunchConfig(grid=2, block=32, cluster=2, dynamic_smem_bytes=4096)",
    prologue=('bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)',)
    + tuple(
        f's{n} = T.alloc_shared({(2,) * (n - 1) + (4,)}, "uint32", scope="shared.dyn", align=128)'
        for n in range(1, 6)
    ),
    guard='T.cuda.thread_idx("x") == 0',
)


def _sm90_forms():
    return [f for f in forms_of("tma") if rule_arch(f.contract, "sm_90a") is None]


def test_the_table_forms_are_loads_stores_and_eight_reductions_per_rank():
    forms = _sm90_forms()
    entries = {f.contract.instruction.entry_name for f in forms}
    assert entries == {
        "cp_async_bulk_tensor_g2s_cluster",
        "cp_async_bulk_tensor_g2s_cta",
        "cp_async_bulk_tensor_s2g",
        "cp_reduce_async_bulk_tensor",
    }
    ops = {f.contract.instruction.modifiers.get("redop") for f in forms} - {None}
    assert ops == set(REDUCE_DTYPES)
    assert {f.contract.instruction.modifiers["dim"] for f in forms} == {"1d", "2d", "3d", "4d", "5d"}
    floored = [f for f in forms_of("tma") if rule_arch(f.contract, "sm_90a") is not None]
    assert floored and all("cta_group" in f.opcode for f in floored)
    assert {f.contract.min_arch for f in forms} == {"sm_90"}  # measured: TMA needs sm_90, not sm_90a


@testing.requires_nvcc
def test_every_sm90_form_assembles(tmp_path):
    forms = _sm90_forms()
    kernels = testing.form_kernels(forms, _form_call, FORMS_HEAD)
    issued = []
    for built in testing.assemble_forms(kernels, tmp_path, arch="sm_90a", fmt="ptx"):
        assert len(testing.assemble(built.build)) > 0
        issued += [
            line.split()[0] for line in built.assembled.splitlines()
            if line.strip().startswith(("cp.async.bulk.tensor", "cp.reduce.async.bulk.tensor"))
        ]  # fmt: skip
    assert len(issued) == len(forms)


@pytest.mark.parametrize("group", ["cta_group::1", "cta_group::2"])
def test_cta_group_forms_need_sm100(group):
    @T.function
    def k(A: T.Tensor((8, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=2048))
        tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
        bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
        T.cuda.tile.apply(T.ptx[LOAD2D + "." + group], tile, A, mbar=bar, coords=(0, 0))

    with pytest.raises(TileError, match="needs sm_100f or newer .*: expected a target of sm_100f or newer with the a or f suffix.*, found sm_90a"):
        tvm_tirx.compile(k, target="cuda", arch="sm_90a")


@pytest.mark.parametrize(
    "opcode, why",
    [
        ("cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes", "four rows"),
        ("cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes", "im2col"),
        (LOAD2D + ".multicast::cluster::16b", "16b/32b"),
    ],
)
def test_forms_that_are_not_tile_forms(opcode, why):
    with pytest.raises(TileError, match=f"unsupported form: .*{why}"):
        candidates(opcode)


# -- the family's rules, one test each -------------------------------------------------------------


def _kernel(call, *, tile="(8, 32)", dtype="float32", gshape="(8, 32)", gdtype=None, galign=16, talign=128, layout="None", block=32):
    """A kernel whose only tile call is ``call`` (``s``: the shared tile, ``A``: the
    global tensor, ``bar``: the mbarrier), from a source text (rules fire at parse time)."""
    src = "\n".join(
        [
            "from tvm_tirx.script import tirx as T",
            "from tvm_tirx.tile.families.tma import swizzled_layout",
            "@T.function",
            f'def k(A: T.Tensor({gshape}, "{gdtype or dtype}", align={galign})):',
            f"    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={block}, dynamic_smem_bytes=65536))",
            f'    s = T.alloc_shared({tile}, "{dtype}", scope="shared.dyn", align={talign}, layout={layout})',
            '    bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)',
            "    " + call,
        ]
    )
    return _load(src, "k")


_SOURCES = []


def _load(src, name):
    """``name`` from a module written with ``src`` (``@T.function`` reads its source file)."""
    import importlib.util  # pylint: disable=import-outside-toplevel
    import tempfile  # pylint: disable=import-outside-toplevel

    folder = pathlib.Path(tempfile.mkdtemp(prefix="tma_kernel_"))
    _SOURCES.append(folder)
    path = folder / f"kernel_{len(_SOURCES)}.py"
    path.write_text(src + "\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


LOAD = f'T.cuda.tile.apply(T.ptx["{LOAD2D}"], s, A, mbar=bar, coords=(0, 0)'


@pytest.mark.parametrize(
    "kwargs, call, rule",
    [
        ({}, LOAD + ", box=(8, 16))", "box differs from the shared image"),
        ({}, LOAD.replace("(0, 0)", "(0, 0, 0)") + ")", "coordinate count"),
        ({"tile": "(2, 8, 32)"}, LOAD + ")", "coord_steps do not match the repeat axes"),
        ({"tile": "(300, 4)", "gshape": "(300, 4)"}, LOAD + ")", "box extent out of range"),
        ({"tile": "(8, 3)", "gshape": "(8, 4)"}, LOAD + ")", "inner box row not a multiple of 16 bytes"),
        ({}, LOAD + ", swizzle=1)", "inner box row wider than the swizzle span"),
        # a tile laid out for one swizzle, copied with another (or none): the layout and
        # the parameter disagree, whatever the box's width
        ({"talign": 1024, "layout": "swizzled_layout((8, 32), 'float32', 3)"}, LOAD + ", swizzle=1)",
         r"shared layout and swizzle= disagree: expected swizzle=3, .*found swizzle=1 \(32B\)"),
        ({"talign": 1024, "layout": "swizzled_layout((8, 32), 'float32', 3)"}, LOAD + ")",
         r"shared layout and swizzle= disagree: expected swizzle=3, .*found swizzle=0 \(none\)"),
        ({"tile": "(8, 16)", "gshape": "(8, 16)", "talign": 1024, "layout": "swizzled_layout((8, 16), 'float32', 2)"},
         LOAD + ", swizzle=3)", "shared layout and swizzle= disagree: expected swizzle=2"),
        ({"tile": "(8, 32)", "talign": 1024}, LOAD + ", swizzle=3)",
         r"shared layout is not the TMA image: .* \(the layout has no swizzle; allocate the tile with swizzled_layout"),
        ({"gdtype": "int32"}, LOAD + ")", "element types differ"),
        ({"gshape": "(8, 6)", "tile": "(8, 4)"}, LOAD + ")", "global stride not a multiple of 16 bytes"),
        ({"galign": 8}, LOAD + ")", "tensor map base not 16-byte aligned"),
        ({}, LOAD + ", swizzle=5)", "invalid parameter 'swizzle'"),
        ({}, LOAD.replace("coords=(0, 0)", "coords=((0, 1), 2)") + ")", "invalid parameter 'coords'"),
    ],
)
def test_parse_time_rules(kwargs, call, rule):
    with pytest.raises(TileError, match=rule):
        _kernel(call, **kwargs)


def test_inner_axis_of_the_global_view_must_be_contiguous():
    with pytest.raises(TileError, match="global tensor not strided with a contiguous inner axis"):
        _kernel(f'T.cuda.tile.apply(T.ptx["{LOAD2D}"], s, A.permute(1, 0), mbar=bar, coords=(0, 0))', tile="(8, 8)", gshape="(8, 8)")


def test_a_view_starting_off_16_bytes_is_refused():
    with pytest.raises(TileError, match="tensor map base not 16-byte aligned.*element offset 1"):
        _kernel(f'T.cuda.tile.apply(T.ptx["{LOAD2D}"], s, A.sub[:, 1:33], mbar=bar, coords=(0, 0))', gshape="(8, 64)")


def test_reduction_types_follow_the_isa():
    call = 'T.cuda.tile.apply(T.ptx["cp.reduce.async.bulk.tensor.2d.global.shared::cta.{op}.bulk_group"], A, s, coords=(0, 0))'
    _kernel(call.format(op="add"), dtype="float32")  # accepted
    with pytest.raises(TileError, match="element type not reducible with this operation.*int64.*for .add"):
        _kernel(call.format(op="add"), dtype="int64", tile="(8, 16)", gshape="(8, 16)")
    with pytest.raises(TileError, match="element type not reducible with this operation.*found float32"):
        _kernel(call.format(op="inc"), dtype="float32")


#: PTX ISA 9.1, 9.7.9.27.1.3 (cp.reduce.async.bulk.tensor), the table of valid ``.redOp`` /
#: element type combinations, transcribed with the ISA's type names.
ISA_REDUCE_TYPES = {
    "add": (".u32", ".s32", ".u64", ".f32", ".f16", ".bf16"),
    "min": (".u32", ".s32", ".u64", ".s64", ".f16", ".bf16"),
    "max": (".u32", ".s32", ".u64", ".s64", ".f16", ".bf16"),
    "inc": (".u32",),
    "dec": (".u32",),
    "and": (".b32", ".b64"),
    "or": (".b32", ".b64"),
    "xor": (".b32", ".b64"),
}
#: ISA type -> the tensor element types it names (``.bN``: the N-bit integer map types).
ISA_TYPE_DTYPES = {
    ".u32": {"uint32"}, ".s32": {"int32"}, ".u64": {"uint64"}, ".s64": {"int64"},
    ".f32": {"float32"}, ".f16": {"float16"}, ".bf16": {"bfloat16"},
    ".b32": {"uint32", "int32"}, ".b64": {"uint64", "int64"},
}  # fmt: skip


def test_reduction_table_is_the_isa_table():
    from_isa = {op: set().union(*(ISA_TYPE_DTYPES[t] for t in types)) for op, types in ISA_REDUCE_TYPES.items()}
    assert {op: set(types) for op, types in REDUCE_DTYPES.items()} == from_isa


@pytest.mark.parametrize(
    "op,dtype,ok",
    [
        ("add", "uint64", True), ("add", "int64", False), ("add", "float64", False),
        ("min", "int64", True), ("max", "bfloat16", True), ("min", "float32", False), ("max", "float64", False),
        ("inc", "uint32", True), ("dec", "int32", False),
        ("and", "int64", True), ("xor", "uint32", True), ("or", "float32", False), ("xor", "uint16", False),
    ],
)  # fmt: skip
def test_reduction_type_rule_per_operation(op, dtype, ok):
    call = f'T.cuda.tile.apply(T.ptx["cp.reduce.async.bulk.tensor.2d.global.shared::cta.{op}.bulk_group"], A, s, coords=(0, 0))'
    if ok:
        _kernel(call, dtype=dtype)
        return
    with pytest.raises(TileError, match=f"element type not reducible with this operation.*for .{op}.*found {dtype}"):
        _kernel(call, dtype=dtype)


def test_swizzled_image_needs_its_repeat_alignment():
    layout = "swizzled_layout((8, 32), 'float32', 3)"
    k = _kernel(LOAD + ", swizzle=3)", talign=128, layout=layout)
    with pytest.raises(TileError, match="dst .*not provably aligned: expected 1024-byte alignment"):
        testing.lower(k)
    testing.lower(_kernel(LOAD + ", swizzle=3)", talign=1024, layout=layout))


def test_unswizzled_image_needs_128_bytes():
    with pytest.raises(TileError, match="dst .*not provably aligned: expected 128-byte alignment"):
        testing.lower(_kernel(LOAD + ")", talign=16))


def test_mbar_rules_are_the_memory_rules():
    with pytest.raises(TileError, match="parameter mbar: wrong state space"):
        _kernel(f'T.cuda.tile.apply(T.ptx["{LOAD2D}"], s, A, mbar=A.view("uint64").sub[0, 0:1], coords=(0, 0))')
    with pytest.raises(TileError, match="parameter mbar: wrong atom shape"):
        _kernel(f'T.cuda.tile.apply(T.ptx["{LOAD2D}"], s, A, mbar=bar.sub[0], coords=(0, 0))')


def test_a_box_over_the_edge_is_legal():
    # rows 4..11 of 10 and columns 16..47 of 40: the TMA zero-fills, no bounds rule
    testing.lower(_kernel(LOAD.replace("(0, 0)", "(4, 16)") + ")", gshape="(10, 40)"))
    testing.lower(_kernel(LOAD.replace("(0, 0)", "(-4, -8)") + ")"))


def test_the_global_operand_must_be_a_kernel_parameter():
    src = (
        'T.cuda.tile.apply(T.ptx["' + LOAD2D + '"], s, G, mbar=bar, coords=(0, 0))'
    )
    with pytest.raises(TileError, match="tensor map of a tensor that is not a kernel parameter"):
        k = _kernel('G = T.alloc_buffer((8, 32), "float32", scope="global", align=16)\n    ' + src)
        testing.lower(k)


# -- on the GPU ------------------------------------------------------------------------------------


def _run(torch, name, *tensors):
    kernel = tvm_tirx.compile(K.KERNELS[name], target="cuda")
    kernel(*tensors)
    torch.cuda.synchronize()


@pytest.mark.gpu
def test_tma_add_one_on_the_gpu(torch_cuda):
    torch = torch_cuda
    a = torch.randn(K.ROWS, K.COLS, device="cuda")
    b = torch.zeros_like(a)
    _run(torch, "tma_add_one", a, b)
    assert torch.equal(b, a + 1)


@pytest.mark.gpu
def test_coord_steps_3d_on_the_gpu(torch_cuda):
    torch = torch_cuda
    a = torch.randn(K.D0, K.D1, K.D2, device="cuda")
    b = torch.zeros_like(a)
    _run(torch, "coord_steps_3d", a, b)
    want = torch.zeros_like(a)
    want[:, :, 32:] = a[:, :, 32:]
    assert torch.equal(b, want)


@pytest.mark.gpu
def test_swizzle128_tile_read_by_ldmatrix_on_the_gpu(torch_cuda):
    torch = torch_cuda
    a = torch.randn(K.SW, K.SW, device="cuda").to(torch.bfloat16)
    words = torch.zeros(K.SW, K.SW // 2, dtype=torch.int32, device="cuda")
    _run(torch, "swizzle128_ldmatrix", a, words)
    assert torch.equal(words.view(torch.bfloat16), a)


@pytest.mark.gpu
def test_multicast_reaches_both_ctas_on_the_gpu(torch_cuda):
    torch = torch_cuda
    a = torch.randn(K.ROWS, K.COLS, device="cuda")
    b = torch.zeros(2, K.ROWS, K.COLS, device="cuda")
    _run(torch, "multicast_pair", a, b)
    assert torch.equal(b[0], a) and torch.equal(b[1], a)


@pytest.mark.gpu
def test_store_and_reduce_add_on_the_gpu(torch_cuda):
    torch = torch_cuda
    a = torch.randn(K.ROWS, K.COLS, device="cuda")
    b = torch.zeros_like(a)
    c = torch.randn(K.ROWS, K.COLS, device="cuda")
    want_c = c + a
    _run(torch, "store_and_reduce", a, b, c)
    assert torch.equal(b, a)
    torch.testing.assert_close(c, want_c)


@pytest.mark.gpu
def test_box_over_the_edge_on_the_gpu(torch_cuda):
    torch = torch_cuda
    a = torch.randn(K.ER, K.EC, device="cuda")
    b = torch.full((K.ROWS, K.COLS), 7.0, device="cuda")
    c = torch.zeros_like(a)
    _run(torch, "edge_box", a, b, c)
    r0, c0 = K.EDGE_AT
    want_b = torch.zeros(K.ROWS, K.COLS, device="cuda")
    want_b[: K.ER - r0, : K.EC - c0] = a[r0:, c0:]
    assert torch.equal(b, want_b)
    want_c = torch.zeros_like(a)
    want_c[r0:, c0:] = a[r0:, c0:]
    assert torch.equal(c, want_c)


def test_a_tensor_axis_over_2_32_elements_cannot_be_mapped():
    call = 'T.cuda.tile.apply(T.ptx["cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"], s, A, mbar=bar, coords=(0,))'
    with pytest.raises(TileError, match="global extent out of range"):
        _kernel(call, tile="(16,)", dtype="uint8", gshape=f"({2**32 + 16},)")


# -- run-time extents (issue 23 item 2) ---------------------------------------------------------


def test_tma_on_run_time_extents_encodes_the_map_from_the_call():
    # refused before at parse time: "symbolic shape: expected static extents, found [m, n]"
    lowered = testing.lower(K.tma_add_one_any_shape).script()
    assert lowered.count("T.tensormap_encode_tiled(") == 2  # one map per tensor
    assert 'T.Cast("int64", n)' in lowered and 'T.Cast("int64", m)' in lowered  # dims from the call's shapes
    # what the map needs of the run-time values, asserted on the host before each encoding
    assert "global stride not a multiple of 16 bytes: expected the byte stride n * 4 of A" in lowered
    assert "global extent out of range: expected extent m of axis 0 of B in 1..2**32" in lowered
    testing.assemble(tvm_tirx.compile(K.tma_add_one_any_shape, arch="sm_90a"))


@pytest.mark.gpu
def test_tma_on_run_time_extents_on_the_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(K.tma_add_one_any_shape, target="cuda")
    for m, n in [(1, 4), (32, 32), (33, 36), (100, 64), (1000, 260), (7, 1028)]:
        a = torch.randn(m, n, device="cuda")
        b = torch.full_like(a, float("nan"))
        kernel(a, b)
        torch.cuda.synchronize()
        assert torch.equal(b, a + 1), (m, n)
    with pytest.raises(ValueError, match="global stride not a multiple of 16 bytes"):
        kernel(torch.zeros(8, 6, device="cuda"), torch.zeros(8, 6, device="cuda"))
