"""atom / red family: lowering Before/Expected, one test per rule, every form assembles, and
(on the GPU) a two-level histogram and a work counter against torch."""

import inspect

import pytest
import tvm
from tvm.tirx.layout import Axis, S, TileLayout

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.build.stages import KernelFileError
from tvm_tirx.script import tirx as T

import atomic_forms


def _line_of(marker):
    """Line number (in this file) of the first line containing ``marker``."""
    for i, line in enumerate(inspect.getsource(inspect.getmodule(_line_of)).splitlines(), 1):
        if marker in line:
            return i
    raise AssertionError(marker)


def _lower_error(func, match):
    with pytest.raises(TileError, match=match) as info:
        testing.lower(func)
    return info.value


# -- Before / Expected ------------------------------------------------------------------


def test_one_thread_takes_a_ticket_from_a_global_counter():
    @T.function
    def before(Counter: T.Tensor((1,), "uint32", align=4)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=32))
        tid = T.cuda.thread_idx("x")
        old = T.alloc_local((1,), "uint32")
        if tid == 0:
            T.cuda.tile.apply(T.ptx["atom.global.add.u32"], old, Counter.sub[0:1], T.uint32(1))

    @T.function
    def expected(Counter: T.Tensor((1,), "uint32", align=4)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=32))
        tid = T.cuda.thread_idx("x")
        old = T.alloc_local((1,), "uint32")
        if tid == 0:
            c = Counter.sub[0:1]
            T.ptx["atom.global.add.u32"](old[0], c.ptr_to([0]), T.uint32(1))

    testing.assert_lowers_to(before, expected)


def test_shared_red_repeats_one_atomic_per_coordinate_with_a_broadcast_scalar():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        hist = T.alloc_shared((32, 4), "uint32", align=16)
        T.cuda.tile.apply(T.ptx["red.shared::cta.add.u32"], hist.sub[tid, :].view(4, 1), T.uint32(1))

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        hist = T.alloc_shared((32, 4), "uint32", align=16)
        h = hist.sub[tid, :].view(4, 1)
        for r0 in T.unroll(4):
            T.ptx["red.shared::cta.add.u32"](h.ptr_to([r0, 0]), T.uint32(1))

    testing.assert_lowers_to(before, expected)


def test_vector_atom_returns_the_old_values_per_repeat():
    @T.function
    def before(A: T.Tensor((32, 8), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        old = T.alloc_local((2, 4), "float32")
        b = T.alloc_local((2, 4), "float32")
        T.cuda.tile.apply(T.ptx["atom.global.add.v4.f32"], old, A.sub[tid, :].view(2, 4), b)

    @T.function
    def expected(A: T.Tensor((32, 8), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        old = T.alloc_local((2, 4), "float32")
        b = T.alloc_local((2, 4), "float32")
        a = A.sub[tid, :].view(2, 4)
        for r0 in T.unroll(2):
            T.ptx["atom.global.add.v4.f32"](
                old[r0, 0], old[r0, 1], old[r0, 2], old[r0, 3], a.ptr_to([r0, 0]),
                b[r0, 0], b[r0, 1], b[r0, 2], b[r0, 3],
            )  # fmt: skip

    testing.assert_lowers_to(before, expected)


def test_cas_takes_the_compared_then_the_new_value():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        locks = T.alloc_shared((32,), "uint32", align=4)
        old = T.alloc_local((1,), "uint32")
        T.cuda.tile.apply(
            T.ptx["atom.acquire.cta.shared::cta.cas.b32"], old, locks.sub[tid : tid + 1], T.uint32(0), T.uint32(1)
        )

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        locks = T.alloc_shared((32,), "uint32", align=4)
        old = T.alloc_local((1,), "uint32")
        lock = locks.sub[tid : tid + 1]
        T.ptx["atom.acquire.cta.shared::cta.cas.b32"](old[0], lock.ptr_to([0]), T.uint32(0), T.uint32(1))

    testing.assert_lowers_to(before, expected)


def test_atom_without_a_destination_is_the_bit_bucket_form():
    @T.function
    def before(H: T.Tensor((32,), "uint64", align=8)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        T.cuda.tile.apply(T.ptx["atom.global.max.u64"], H.sub[tid : tid + 1], T.uint64(7))

    @T.function
    def expected(H: T.Tensor((32,), "uint64", align=8)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        h = H.sub[tid : tid + 1]
        T.ptx["atom.global.max.u64"](h.ptr_to([0]), T.uint64(7))

    testing.assert_lowers_to(before, expected)
    kernel = tvm_tirx.compile(before, target="cuda", arch="sm_90a")
    assert "atom.global.max.u64 _, [%0], %1;" in kernel.cuda_source


def test_pred_guards_each_atomic_and_preserve_dst_keeps_the_old_register():
    @T.function
    def before(A: T.Tensor((32, 2), "uint32", align=4)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        old = T.alloc_local((2, 1), "uint32")
        T.cuda.tile.apply(
            T.ptx["atom.global.exch.b32"], old, A.sub[tid, :].view(2, 1), T.uint32(5), pred=tid < 16, preserve_dst=True
        )

    @T.function
    def expected(A: T.Tensor((32, 2), "uint32", align=4)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        old = T.alloc_local((2, 1), "uint32")
        a = A.sub[tid, :].view(2, 1)
        for r0 in T.unroll(2):
            T.ptx["atom.global.exch.b32"](old[r0, 0], a.ptr_to([r0, 0]), T.uint32(5), pred=tid < 16, preserve_dst=True)

    testing.assert_lowers_to(before, expected)


def test_warp_scope_atom_binds_each_lane_to_its_row():
    lanes = TileLayout(S[(32, 1) : (1 @ Axis.laneid, 1)])

    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        counts = T.alloc_shared((2, 32, 1), "uint32", align=4)
        old = T.alloc_local((32, 1), "uint32", layout=lanes)
        T.cuda.tile.apply(T.ptx["atom.shared.inc.u32"], old, counts.sub[tid // 32, :, :], T.uint32(9), scope="warp")

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        counts = T.alloc_shared((2, 32, 1), "uint32", align=4)
        old = T.alloc_local((32, 1), "uint32", layout=lanes)
        c = counts.sub[tid // 32, :, :]
        ol = old.local()
        T.ptx["atom.shared.inc.u32"](ol[0], c.ptr_to([tid % 32, 0]), T.uint32(9))

    testing.assert_lowers_to(before, expected)


def test_cache_hint_passes_the_policy():
    @T.function
    def before(A: T.Tensor((32,), "float32", align=4)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        T.cuda.tile.apply(
            T.ptx["red.release.gpu.global.add.L2::cache_hint.f32"],
            A.sub[tid : tid + 1],
            T.float32(1),
            cache_policy=T.uint64(0),
        )

    @T.function
    def expected(A: T.Tensor((32,), "float32", align=4)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        a = A.sub[tid : tid + 1]
        T.ptx["red.release.gpu.global.add.L2::cache_hint.f32"](a.ptr_to([0]), T.float32(1), T.uint64(0))

    testing.assert_lowers_to(before, expected)


def test_half_atom_takes_float16_memory_and_registers():
    @T.function
    def before(A: T.Tensor((32, 8), "float16", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        v = T.alloc_local((8,), "float16")
        T.cuda.tile.apply(T.ptx["red.global.max.noftz.v8.f16"], A.sub[tid, :], v)

    kernel = tvm_tirx.compile(before, target="cuda", arch="sm_90a")
    assert "red.global.max.noftz.v8.f16 [%0], {%1, %2, %3, %4, %5, %6, %7, %8};" in kernel.cuda_source
    assert testing.count_ptx(testing.lower(before), "red.global.max.noftz.v8.f16") == 1


def test_peer_cta_atomic_maps_the_address_with_mapa():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32, cluster=2))
        tid = T.cuda.thread_idx("x")
        counts = T.alloc_shared((32, 2), "uint32", align=4)
        T.cuda.tile.apply(
            T.ptx["red.relaxed.cluster.shared::cluster.add.u32"],
            counts.sub[tid, :].view(2, 1),
            T.uint32(1),
            remote_cta_id=T.uint32(1),
        )

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32, cluster=2))
        tid = T.cuda.thread_idx("x")
        counts = T.alloc_shared((32, 2), "uint32", align=4)
        c = counts.sub[tid, :].view(2, 1)
        peer = T.decl_buffer((1,), "uint32", scope="local")
        for r0 in T.unroll(2):
            T.ptx["mapa.shared::cluster.u32"](
                peer[0],
                T.Cast("uint32", T.call_pure_extern("uint64", "__cvta_generic_to_shared", c.ptr_to([r0, 0]))),
                T.uint32(1),
            )
            T.ptx["red.relaxed.cluster.shared::cluster.add.u32"](peer[0], T.uint32(1))

    lowered = testing.lower(before)
    # the scratch register is an allocation, which ``expected`` spells as a declaration: compare the loops
    loop_of = lambda f: [s for s in f.body.body.seq if isinstance(s, tvm.tirx.For)][-1]  # noqa: E731
    tvm.ir.assert_structural_equal(loop_of(lowered), loop_of(expected), map_free_vars=True)


def test_cluster_form_without_a_rank_updates_this_ctas_copy():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32, cluster=2))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((32,), "uint32", align=4)
        old = T.alloc_local((1,), "uint32")
        T.cuda.tile.apply(T.ptx["atom.shared::cluster.add.u32"], old, s.sub[tid : tid + 1], T.uint32(1))

    source = tvm_tirx.compile(k, target="cuda", arch="sm_90a").cuda_source
    assert "mapa" not in source and "atom.shared::cluster.add.u32 %0, [%1], %2;" in source
    assert "cvta_generic_to_shared((&(s_ptr[((int)threadIdx.x)])))" in source


# -- rules -----------------------------------------------------------------------------------


def test_misaligned_vector_atom_is_rejected_when_lowered():
    @T.function
    def k(A: T.Tensor((32, 8), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        b = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["red.global.add.v4.f32"], A.sub[tid, 2:6], b)  # ALIGN-LINE

    err = _lower_error(k, r"mem \(operand 1\): vector atom not provably aligned: expected byte offset a multiple of 16")
    assert err.location.endswith(f"test_family_atomics.py:{_line_of('# ALIGN-LINE')}")


def test_vector_atom_needs_a_tensor_declared_aligned_to_the_vector():
    @T.function
    def k(A: T.Tensor((32, 8), "float16", align=8)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        b = T.alloc_local((8,), "float16")
        T.cuda.tile.apply(T.ptx["red.global.add.noftz.v8.f16"], A.sub[tid, :], b)

    _lower_error(k, r"vector atom not provably aligned: expected 16-byte alignment.*found A declared align=8")


def test_vector_atom_is_contiguous():
    with pytest.raises(TileError, match=r"mem \(operand 2\): vector atom not contiguous"):

        @T.function
        def k(A: T.Tensor((4, 32), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((2,), "float32")
            T.cuda.tile.apply(T.ptx["atom.global.add.v2.f32"], r, A.sub[0:2, tid], r)


def test_atomic_outside_its_tensor_is_rejected():
    @T.function
    def k(H: T.Tensor((16,), "uint32", align=4)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        T.cuda.tile.apply(T.ptx["red.global.add.u32"], H.sub[tid : tid + 1], T.uint32(1))

    _lower_error(k, r"mem \(operand 1\): view provably out of the tensor's bounds")


def test_atomic_at_an_index_read_from_memory_needs_a_bound():
    @T.function
    def k(A: T.Tensor((32,), "int32", align=4), H: T.Tensor((16,), "uint32", align=4)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        T.cuda.tile.apply(T.ptx["red.global.add.u32"], H.sub[A[tid] : A[tid] + 1], T.uint32(1))

    _lower_error(k, r"view not provably within the tensor's bounds")


def test_a_bin_index_modulo_the_bins_is_within_bounds():
    @T.function
    def k(A: T.Tensor((32,), "int32", align=4), H: T.Tensor((16,), "uint32", align=4)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        T.cuda.tile.apply(T.ptx["red.global.add.u32"], H.sub[A[tid] % 16 : A[tid] % 16 + 1], T.uint32(1))

    assert testing.count_ptx(testing.lower(k), "red.global.add.u32") == 1


@pytest.mark.parametrize(
    "mem_dtype, value, match",
    [
        ("int32", "T.uint32(1)", r"mem \(operand 2\): dtype not accepted by the PTX type: expected 32-bit uint32"),
        ("uint32", "T.int32(1)", r"b \(operand 3\): dtype not accepted by the PTX type: expected 32-bit uint32"),
        ("uint64", "T.uint32(1)", r"mem \(operand 2\): element bit width differs from the PTX type's"),
    ],
)
def test_memory_and_values_have_the_ptx_type(mem_dtype, value, match, tmp_path):
    source = f"""
from tvm_tirx.script import tirx as T

@T.function
def k(H: T.Tensor((32,), "{mem_dtype}", align=8)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    old = T.alloc_local((1,), "uint32")
    T.cuda.tile.apply(T.ptx["atom.global.add.u32"], old, H.sub[tid : tid + 1], {value})
"""
    with pytest.raises(KernelFileError, match=match):
        testing.load_kernel(source, tmp_path, "k")


def test_half_add_takes_half_memory_not_float():
    with pytest.raises(TileError, match=r"mem \(operand 1\): element bit width differs.*16-bit uint16 / float16"):

        @T.function
        def k(A: T.Tensor((32,), "float32", align=4)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            T.cuda.tile.apply(T.ptx["red.global.add.noftz.f16"], A.sub[tid : tid + 1], T.float16(1))


def test_cas_needs_the_compared_and_the_new_value():
    with pytest.raises(TileError, match=r"operand count: expected 4 operand\(s\) \(dst, mem, b, c\), found 2"):

        @T.function
        def k(L: T.Tensor((32,), "uint32", align=4)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            T.cuda.tile.apply(T.ptx["atom.global.cas.b32"], L.sub[tid : tid + 1], T.uint32(0))


def test_three_cas_operands_are_the_form_without_destination():
    # atom.cas d, [a], b, c and atom.cas _, [a], b, c: three operands are (mem, b, c)
    with pytest.raises(TileError, match=r"mem \(operand 1\): wrong state space.*found storage scope 'local'"):

        @T.function
        def k(L: T.Tensor((32,), "uint32", align=4)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            old = T.alloc_local((1,), "uint32")
            T.cuda.tile.apply(T.ptx["atom.global.cas.b32"], old, L.sub[tid : tid + 1], T.uint32(0))


def test_red_has_no_result_register():
    with pytest.raises(TileError, match=r"red.global.add.u32: operand count: expected 2 operand\(s\) \(mem, b\), found 3"):

        @T.function
        def k(H: T.Tensor((32,), "uint32", align=4)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            old = T.alloc_local((1,), "uint32")
            T.cuda.tile.apply(T.ptx["red.global.add.u32"], old, H.sub[tid : tid + 1], T.uint32(1))


def test_bit_bucket_call_reports_its_own_error_not_the_operand_count():
    # two operands name atom's form without a destination: its error is the one shown
    with pytest.raises(TileError, match=r"b \(operand 2\): dtype not accepted by the PTX type") as info:

        @T.function
        def k(H: T.Tensor((32,), "uint32", align=4)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            T.cuda.tile.apply(T.ptx["atom.global.add.u32"], H.sub[tid : tid + 1], T.int32(1))  # BUCKET-LINE

    assert info.value.location.endswith(f"test_family_atomics.py:{_line_of('# BUCKET-LINE')}")


def test_preserve_dst_needs_a_destination():
    with pytest.raises(TileError, match="preserve_dst on an instruction without a register destination"):

        @T.function
        def k(H: T.Tensor((32,), "uint32", align=4)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            T.cuda.tile.apply(
                T.ptx["atom.global.add.u32"], H.sub[tid : tid + 1], T.uint32(1), pred=tid < 8, preserve_dst=True
            )


def test_destination_is_a_register_tensor():
    with pytest.raises(TileError, match=r"dst \(operand 1\): scalar in a destination slot"):

        @T.function
        def k(H: T.Tensor((32,), "uint32", align=4)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            T.cuda.tile.apply(T.ptx["atom.global.add.u32"], T.uint32(0), H.sub[tid : tid + 1], T.uint32(1))


def test_a_scalar_covers_one_register_not_a_vector():
    with pytest.raises(TileError, match=r"b \(operand 2\): scalar for a register group"):

        @T.function
        def k(A: T.Tensor((32, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            T.cuda.tile.apply(T.ptx["red.global.add.v4.f32"], A.sub[tid, :], T.float32(1))


def test_memory_is_in_the_opcode_state_space():
    with pytest.raises(TileError, match=r"mem \(operand 1\): wrong state space for the opcode.*storage scope global"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            s = T.alloc_shared((32,), "uint32", align=4)
            T.cuda.tile.apply(T.ptx["red.global.add.u32"], s.sub[tid : tid + 1], T.uint32(1))


def test_destination_and_memory_share_the_repeat_shape():
    with pytest.raises(TileError, match="repeat shapes differ"):

        @T.function
        def k(H: T.Tensor((32, 4), "uint32", align=4)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            old = T.alloc_local((2, 1), "uint32")
            T.cuda.tile.apply(T.ptx["atom.global.inc.u32"], old, H.sub[tid, :].view(4, 1), T.uint32(9))


def test_cluster_space_needs_a_cluster_launch():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((32,), "uint32", align=4)
        T.cuda.tile.apply(T.ptx["red.shared::cluster.add.u32"], s.sub[tid : tid + 1], T.uint32(1))

    _lower_error(k, r"\.shared::cluster needs a cluster launch: expected .*cluster=N\)\) with N > 1")


def test_remote_cta_id_inside_the_cluster():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=32, cluster=2))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((32,), "uint32", align=4)
        T.cuda.tile.apply(
            T.ptx["red.shared::cluster.add.u32"], s.sub[tid : tid + 1], T.uint32(1), remote_cta_id=T.uint32(2)
        )

    _lower_error(k, r"remote_cta_id outside the cluster.*\[0, 2\).*found 2")


def test_remote_cta_id_only_on_cluster_forms():
    with pytest.raises(TileError, match="unknown parameter 'remote_cta_id'"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32, cluster=2))
            tid = T.cuda.thread_idx("x")
            s = T.alloc_shared((32,), "uint32", align=4)
            T.cuda.tile.apply(
                T.ptx["red.shared::cta.add.u32"], s.sub[tid : tid + 1], T.uint32(1), remote_cta_id=T.uint32(1)
            )


def test_cache_hint_needs_a_uint64_policy():
    with pytest.raises(TileError, match=r"missing parameter 'cache_policy'"):

        @T.function
        def k(H: T.Tensor((32,), "uint32", align=4)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            T.cuda.tile.apply(T.ptx["red.global.add.L2::cache_hint.u32"], H.sub[tid : tid + 1], T.uint32(1))

    with pytest.raises(TileError, match=r"parameter cache_policy: parameter of the wrong type.*uint64"):

        @T.function
        def k2(H: T.Tensor((32,), "uint32", align=4)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            T.cuda.tile.apply(
                T.ptx["red.global.add.L2::cache_hint.u32"], H.sub[tid : tid + 1], T.uint32(1), cache_policy=T.uint32(0)
            )


@pytest.mark.parametrize(
    "opcode, reason",
    [
        ("atom.add.u32", "generic addressing is not a tile form"),
        ("red.global.add.noftz.f32", r"\.add\.noftz\.f32 \(PTX ISA 9\.4\) is not a tile form"),
        ("atom.global.add.noftz.v4.f32", "the ptxas of CUDA 13.0 assembles it for no target"),
    ],
)
def test_forms_that_are_not_tile_forms_say_why(opcode, reason):
    from tvm_tirx.tile.ir.registry import candidates

    with pytest.raises(TileError, match=f"unsupported form.*{reason}"):
        candidates(opcode)


def test_illegal_op_type_pairs_are_the_tables():
    from tvm_tirx.tile.ir.registry import candidates

    with pytest.raises(TileError, match=r"illegal opcode.*\.inc requires \.u32"):
        candidates("atom.global.inc.s32")
    with pytest.raises(TileError, match="illegal opcode"):
        candidates("red.shared.add.noftz.v2.f16")  # vector forms are .global only


# -- every form assembles ------------------------------------------------------------------


def test_the_forms_cover_every_entry_space_and_order():
    from tvm_tirx.tile.ir.forms import forms_of

    every = forms_of("atomics")
    picked = atomic_forms.covering(every)
    assert len(every) > 12000 and len(picked) < len(every) // 5
    entries = {f.key.split(":", 1)[0] for f in every}
    assert entries == {f.key.split(":", 1)[0] for f in picked} and len(entries) == 16
    for mnemonic, sems in (("atom", 5), ("red", 3)):
        orders = {(f.contract.instruction.modifiers["sem"], f.contract.instruction.modifiers["scope"])
                  for f in picked if f.contract.instruction.mnemonic == mnemonic}  # fmt: skip
        assert len(orders) == sems * 5
    spaces = {f.contract.instruction.modifiers["space"] for f in picked}
    assert spaces == {"global", "shared", "shared::cta", "shared::cluster"}


@pytest.mark.slow
@testing.requires_nvcc
def test_every_form_assembles_for_sm90a(tmp_path):
    selected = atomic_forms.forms()
    built = testing.assemble_forms(atomic_forms.kernels(selected), tmp_path, arch="sm_90a", fmt="ptx")
    for each in built:
        assert testing.ptxas_errors(each.assembled, "sm_90a") == []
        assert sum(n for op, n in each.issued.items() if not op.startswith("mapa")) == len(each.kernel.forms)
    ptx = "".join(each.assembled for each in built)
    for form in selected:
        assert form.opcode + " " in ptx, form.key
    assert "atom.global.add.u32 _," in ptx and "mapa.shared::cluster.u32" in ptx


# -- on the GPU: a two-level histogram and a work counter ----------------------------------------

BINS, THREADS, BLOCKS, PER_THREAD = 64, 128, 8, 16
N = BLOCKS * THREADS * PER_THREAD


@T.function
def histogram(A: T.Tensor((N,), "int32", align=4), H: T.Tensor((BINS,), "uint32", align=4)):
    """Each CTA counts its values in shared memory, then adds its counts to the global bins."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=BLOCKS, block=THREADS))
    tid = T.cuda.thread_idx("x")
    bid = T.cuda.block_idx("x")
    counts = T.alloc_shared((BINS,), "uint32", align=4)
    if tid < BINS:
        counts[tid] = T.uint32(0)
    T.cuda.cta_sync()
    for i in T.serial(PER_THREAD):
        v = A[(bid * THREADS + tid) * PER_THREAD + i] % BINS
        T.cuda.tile.apply(T.ptx["red.shared.add.u32"], counts.sub[v : v + 1], T.uint32(1))
    T.cuda.cta_sync()
    if tid < BINS:
        T.cuda.tile.apply(T.ptx["red.global.add.u32"], H.sub[tid : tid + 1], counts[tid])


TILES, WORKERS = 96, 8


@T.function
def tickets(
    Counter: T.Tensor((2,), "uint32", align=4),
    Ticket: T.Tensor((WORKERS * THREADS,), "uint32", align=4),
    Owner: T.Tensor((TILES, THREADS), "uint32", align=4),
    Visits: T.Tensor((TILES,), "uint32", align=4),
):
    """Every thread takes a ticket (``Counter[0]``); then, as a dynamic tile scheduler, thread 0
    of each CTA takes tile numbers (``Counter[1]``) and hands them to its CTA through shared
    memory until the tiles run out: each tile is processed by exactly one CTA."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=WORKERS, block=THREADS))
    tid = T.cuda.thread_idx("x")
    bid = T.cuda.block_idx("x")
    old = T.alloc_local((1,), "uint32")
    T.cuda.tile.apply(T.ptx["atom.global.add.u32"], old, Counter.sub[0:1], T.uint32(1))
    Ticket[bid * THREADS + tid] = old[0]
    tile = T.alloc_shared((1,), "uint32", align=4)
    for _ in T.serial(TILES):
        if tid == 0:
            T.cuda.tile.apply(T.ptx["atom.relaxed.gpu.global.add.u32"], old, Counter.sub[1:2], T.uint32(1))
            tile[0] = old[0]
        T.cuda.cta_sync()
        t = tile[0]
        if t < TILES:
            Owner[t, tid] = T.Cast("uint32", bid)
            if tid == 0:
                T.cuda.tile.apply(T.ptx["red.global.add.u32"], Visits.sub[t : t + 1], T.uint32(1))
        T.cuda.cta_sync()


@testing.requires_nvcc
@pytest.mark.parametrize("kernel", [histogram, tickets], ids=["histogram", "tickets"])
def test_gpu_kernels_assemble_for_sm90a(kernel):
    built = tvm_tirx.compile(kernel, target="cuda", arch="sm_90a")
    assert testing.assemble(built, fmt="cubin")


@pytest.mark.gpu
def test_histogram_on_the_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(histogram, target="cuda")
    a = torch.randint(0, 1 << 20, (N,), device="cuda", dtype=torch.int32)
    h = torch.zeros(BINS, device="cuda", dtype=torch.uint32)
    kernel(a, h)
    torch.cuda.synchronize()
    expected = torch.bincount((a % BINS).long(), minlength=BINS)
    assert torch.equal(h.long(), expected)


@pytest.mark.gpu
def test_work_counter_hands_out_distinct_tickets_on_the_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(tickets, target="cuda")
    counter = torch.zeros(2, device="cuda", dtype=torch.uint32)
    ticket = torch.zeros(WORKERS * THREADS, device="cuda", dtype=torch.uint32)
    owner = torch.zeros(TILES, THREADS, device="cuda", dtype=torch.uint32)
    visits = torch.zeros(TILES, device="cuda", dtype=torch.uint32)
    kernel(counter, ticket, owner, visits)
    torch.cuda.synchronize()
    assert torch.equal(ticket.long().sort().values, torch.arange(WORKERS * THREADS, device="cuda"))
    assert counter.long().tolist() == [WORKERS * THREADS, WORKERS * TILES]
    assert torch.equal(visits.long(), torch.ones(TILES, dtype=torch.long, device="cuda"))
    # each tile's row was written by one CTA, the one that took its number
    assert bool((owner == owner[:, :1]).all()) and int(owner.long().max()) < WORKERS  # (no uint32 max in torch)
