"""Dynamic shared memory: ``LaunchConfig(dynamic_smem_bytes=N)``, the pool and its
carve-outs (``T.alloc_shared(..., scope="shared.dyn")``), the target's limit, and
alignment / bounds proofs against each carve-out (docs/guides/memory.rst)."""

import pytest

import tvm
import tvm_ffi
import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.build.smem_limits import smem_limit

SM90_LIMIT = 232448  # 227 KB (CUDA C++ Programming Guide, compute capability 9.0)
BIG = 200 * 1024


def _nodes(func, cls):
    found = []
    tvm_ffi.structural_walk(func.body, (cls, found.append))
    return found


def _decls(func):
    return {n.buffer.name: n.buffer for n in _nodes(func, tvm.tirx.DeclBuffer)}


def _launch(dyn, block=64):
    return T.cuda.LaunchConfig(grid=1, block=block, dynamic_smem_bytes=dyn)


def _reverse_through(dyn, offset):
    """A (64, 4) float32 tile through a carve-out at byte ``offset`` of ``dyn`` bytes."""

    @T.function
    def k(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=_launch(dyn))
        s = T.alloc_shared((64, 4), "float32", scope="shared.dyn", align=16, offset=offset)
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])
        T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], s.sub[tid, :], r)
        T.cuda.cta_sync()
        T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], r, s.sub[63 - tid, :])
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)

    return k


@T.function
def far_end_200k(A: T.Tensor((128, 4), "float32", align=16), B: T.Tensor((128, 4), "float32", align=16)):
    # 200 KB of dynamic shared memory: a filler, then a (128, 4) tile in the last 2 KB.
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, dynamic_smem_bytes=BIG))
    filler = T.alloc_shared((BIG // 4 - 512,), "float32", scope="shared.dyn")  # noqa: F841
    tail = T.alloc_shared((128, 4), "float32", scope="shared.dyn", align=16)
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])
    T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], tail.sub[127 - tid, :], r)
    T.cuda.cta_sync()
    T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], r, tail.sub[tid, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)


# -- the pool and the attribute ---------------------------------------------------------


def test_carve_outs_are_apache_tvm_pool_declarations():
    @T.function
    def ours():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=4096))
        a = T.alloc_shared((64,), "float32", scope="shared.dyn")  # noqa: F841
        b = T.alloc_shared((8, 8), "float16", scope="shared.dyn", align=1024)  # noqa: F841
        c = T.alloc_shared((4,), "uint64", scope="shared.dyn")  # noqa: F841

    @T.prim_func
    def expected():
        T.attr({"tirx.device_entry": T.bool(True), "tirx.dyn_smem_bytes": 4096})
        v = T.cta_id([1])  # noqa: F841
        t = T.thread_id([32])  # noqa: F841
        dyn_smem = T.alloc_buffer((0,), "uint8", scope="shared.dyn", align=1024)
        a = T.decl_buffer((64,), "float32", data=dyn_smem.data, byte_offset=0, scope="shared.dyn", align=4)  # noqa: F841
        b = T.decl_buffer((8, 8), "float16", data=dyn_smem.data, byte_offset=1024, scope="shared.dyn", align=1024)  # noqa: F841
        c = T.decl_buffer((4,), "uint64", data=dyn_smem.data, byte_offset=1152, scope="shared.dyn", align=8)  # noqa: F841

    tvm.ir.assert_structural_equal(ours.with_attr("global_symbol", "expected"), expected)


def test_dynamic_smem_bytes_reaches_the_launch_attribute():
    attrs = _nodes(_reverse_through(4096, None), tvm.tirx.AttrStmt)
    assert [int(a.value) for a in attrs if a.attr_key == "tirx.dyn_smem_bytes"] == [4096]


@pytest.mark.parametrize("size", [-1, 1.5, True])
def test_launch_config_rejects_a_size_that_is_not_a_byte_count(size):
    with pytest.raises(ValueError, match="dynamic_smem_bytes must be an int >= 0"):
        T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=size)


def test_shared_dyn_without_dynamic_smem_bytes_is_rejected():
    with pytest.raises(TileError, match=r"shared.dyn allocation without dynamic shared memory.*dynamic_smem_bytes=0"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            s = T.alloc_shared((64,), "float32", scope="shared.dyn")  # noqa: F841


# -- the target's limit -------------------------------------------------------------------


def test_limit_table_sm90_is_227_kb():
    assert smem_limit("sm_90a") == smem_limit("sm_90") == SM90_LIMIT
    assert smem_limit("sm_80") == 163 * 1024
    assert smem_limit("sm_42") is None


def test_over_the_sm90_limit_is_a_compile_time_error_naming_size_and_limit():
    with pytest.raises(TileError, match=r"over the target's limit.*at most 232448 bytes.*sm_90a.*232449"):
        tvm_tirx.compile(_reverse_through(SM90_LIMIT + 1, 0), target="cuda", arch="sm_90a")


def test_exactly_the_sm90_limit_compiles():
    assert "dyn_smem" in tvm_tirx.compile(_reverse_through(SM90_LIMIT, 0), target="cuda", arch="sm_90a").cuda_source


def test_static_shared_memory_counts_against_the_limit():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=SM90_LIMIT - 1024))
        s = T.alloc_shared((257,), "float32")
        s[0] = T.float32(0)

    with pytest.raises(TileError, match=r"232452 bytes.*dynamic_smem_bytes=231424 \+ 1028 bytes of static"):
        tvm_tirx.compile(k, target="cuda", arch="sm_90a")


def test_200k_fits_sm90_but_not_sm80():
    tvm_tirx.compile(_reverse_through(BIG, 0), target="cuda", arch="sm_90a")
    with pytest.raises(TileError, match=r"at most 166912 bytes.*sm_80.*204800"):
        tvm_tirx.compile(_reverse_through(BIG, 0), target="cuda", arch="sm_80")


# -- carve-out rules (parse time) -----------------------------------------------------------


def test_carve_out_past_the_declared_size_names_size_and_limit():
    with pytest.raises(TileError, match=r"test_dyn_smem.py:\d+: carve-out past the declared dynamic shared memory: "
                       r"expected bytes within \[0, 4096\).*found \(64, 4\) float32 of 1024 bytes at bytes \[3584, 4608\)"):
        _reverse_through(4096, 3584)


def test_carve_outs_after_the_first_are_placed_past_it_and_checked_too():
    with pytest.raises(TileError, match=r"carve-out past.*\[0, 1024\).*\(2,\) float32 of 8 bytes at bytes \[1024, 1032\)"):

        @T.function
        def k():
            T.device_entry(launch=_launch(1024))
            a = T.alloc_shared((256,), "float32", scope="shared.dyn")  # noqa: F841
            b = T.alloc_shared((2,), "float32", scope="shared.dyn")  # noqa: F841


def test_overlapping_carve_outs_are_rejected_naming_both():
    with pytest.raises(TileError, match=r"overlapping dynamic shared memory carve-outs.*alias=True.*"
                       r"\(16,\) float32 at bytes \[512, 576\) overlaps first \(\(256,\) float32\) at bytes \[0, 1024\)"):

        @T.function
        def k():
            T.device_entry(launch=_launch(4096))
            first = T.alloc_shared((256,), "float32", scope="shared.dyn")  # noqa: F841
            second = T.alloc_shared((16,), "float32", scope="shared.dyn", offset=512)  # noqa: F841


def test_explicit_alias_is_accepted_at_the_same_bytes():
    @T.function
    def k():
        T.device_entry(launch=_launch(4096))
        first = T.alloc_shared((256,), "float32", scope="shared.dyn")  # noqa: F841
        again = T.alloc_shared((512,), "float16", scope="shared.dyn", offset=0, alias=True)  # noqa: F841
        after = T.alloc_shared((4,), "float32", scope="shared.dyn")  # noqa: F841

    decls = _decls(k)
    assert int(decls["first"].elem_offset) == 0 and int(decls["again"].elem_offset) == 0
    # the next default placement starts after every carve-out (1024 bytes)
    assert int(decls["after"].elem_offset) * 4 == 1024


@pytest.mark.parametrize(
    "kwargs,found",
    [
        ({"align": 24}, "align=24"),
        ({"align": 2}, "align=2"),  # below the element size
        ({"align": 2048}, "align=2048"),  # above the pool's 1024
    ],
)
def test_carve_out_alignment_must_be_a_power_of_two_within_element_and_pool(kwargs, found):
    with pytest.raises(TileError, match=rf"carve-out alignment.*within \[4, 1024\].*found {found}"):

        @T.function
        def k():
            T.device_entry(launch=_launch(4096))
            s = T.alloc_shared((16,), "float32", scope="shared.dyn", **kwargs)  # noqa: F841


def test_explicit_offset_must_be_a_multiple_of_the_alignment():
    with pytest.raises(TileError, match=r"carve-out offset: expected a byte offset >= 0 and a multiple of align=16.*offset=8"):

        @T.function
        def k():
            T.device_entry(launch=_launch(4096))
            s = T.alloc_shared((16,), "float32", scope="shared.dyn", align=16, offset=8)  # noqa: F841


def test_default_placement_rounds_up_to_the_alignment():
    @T.function
    def k():
        T.device_entry(launch=_launch(4096))
        a = T.alloc_shared((3,), "float32", scope="shared.dyn")  # noqa: F841
        b = T.alloc_shared((16,), "bfloat16", scope="shared.dyn", align=1024)  # noqa: F841

    decls = _decls(k)
    assert int(decls["b"].elem_offset) * 2 == 1024 and int(decls["b"].data_alignment) == 1024


# -- proofs against each carve-out (LowerTileApply) -------------------------------------------


def test_vector_access_in_a_16_byte_aligned_carve_out_is_proven():
    lowered = testing.lower(_reverse_through(4096, 2048))
    assert testing.count_ptx(lowered, "st.shared.v4.b32") == 1


def test_alignment_comes_from_the_carve_out_not_the_pool():
    @T.function
    def k():
        T.device_entry(launch=_launch(4096))
        pad = T.alloc_shared((1,), "float32", scope="shared.dyn")  # noqa: F841
        s = T.alloc_shared((64, 4), "float32", scope="shared.dyn", align=4)  # placed at byte 4
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], s.sub[tid, :], r)

    with pytest.raises(TileError, match=r"st.shared.v4.b32: dst \(operand 1\): vector atom not provably aligned: "
                       r"expected 16-byte alignment \(tensor s declared with align>=16\), found s declared align=4"):
        testing.lower(k)


def test_misaligned_view_inside_an_aligned_carve_out_is_rejected():
    @T.function
    def k():
        T.device_entry(launch=_launch(4096))
        s = T.alloc_shared((260,), "float32", scope="shared.dyn", align=16, offset=1024)
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], s.sub[tid * 4 + 1 : tid * 4 + 5], r)

    with pytest.raises(TileError, match=r"vector atom not provably aligned: expected byte offset a multiple of 16"):
        testing.lower(k)


def _row_past(carve_rows, row):
    @T.function
    def k():
        T.device_entry(launch=_launch(4096))
        a = T.alloc_shared((carve_rows * 4,), "float32", scope="shared.dyn", align=16)
        b = T.alloc_shared((64, 4), "float32", scope="shared.dyn", align=16)  # noqa: F841  (right after a)
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], a.sub[(tid + row) * 4 : (tid + row) * 4 + 4], r)

    return k


def test_bounds_are_the_carve_out_s_own_not_the_pool_s():
    # a.sub[tid + 1] at tid = 63 is row 64 of a 64-row carve-out: inside the pool
    # (it is b's first row) but outside a.
    with pytest.raises(TileError, match=r"view provably out of the tensor's bounds: "
                       r"expected bytes within \[0, 1024\) of a \(256 x float32\), found bytes \[1024, 1040\) at tid=63"):
        testing.lower(_row_past(64, 1))
    assert testing.count_ptx(testing.lower(_row_past(65, 1)), "st.shared.v4.b32") == 1


def test_bounds_of_a_later_carve_out_count_from_its_own_start():
    # b starts 1024 bytes into the pool: its row tid is element 4 * tid of b, in bounds.
    @T.function
    def k():
        T.device_entry(launch=_launch(4096))
        a = T.alloc_shared((64, 4), "float32", scope="shared.dyn", align=16)  # noqa: F841
        b = T.alloc_shared((64, 4), "float32", scope="shared.dyn", align=16)
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], b.sub[tid, :], r)
        T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], r, b.sub[63 - tid, :])

    assert testing.count_ptx(testing.lower(k), "st.shared.v4.b32") == 1


def test_a_view_larger_than_its_carve_out_is_bounded_by_the_carve_out():
    @T.function
    def k():
        T.device_entry(launch=_launch(4096))
        s = T.alloc_shared((64, 4), "float32", scope="shared.dyn", align=16)  # noqa: F841
        too_big = T.decl_buffer((1024,), "float32", data=s.data, scope="shared.dyn", align=16)
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], too_big.sub[1020:1024], r)

    # a view of s bigger than s: bounds are s's 256 elements (1024 bytes)
    with pytest.raises(TileError, match=r"bytes within \[0, 1024\) of s \(256 x float32\), found bytes \[4080, 4096\)"):
        testing.lower(k)


# -- the 200 KB kernel --------------------------------------------------------------------------


@testing.requires_nvcc
def test_200k_kernel_assembles_for_sm90a():
    kernel = tvm_tirx.compile(far_end_200k, target="cuda", arch="sm_90a")
    assert "extern __shared__ __align__(1024) uchar dyn_smem_ptr[];" in kernel.cuda_source
    assert len(testing.assemble(kernel)) > 0


@pytest.mark.gpu
def test_200k_kernel_on_the_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(far_end_200k, target="cuda")
    a = torch.randn(128, 4, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, torch.flip(a, dims=[0]))
