"""cp.async.bulk family (non-tensor): lowering Before/Expected, every sm_90a form
assembles, one test per rule, arch floors, and (on the GPU) a 4 KiB copy through shared
memory and CTA 0 sending 256 bytes to CTA 1 of a cluster."""

import pytest
import tvm

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T

import bulk_forms

G2S = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
G2S_CTA = "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes"
MULTICAST = G2S + ".multicast::cluster"
S2C = "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes"
S2G = "cp.async.bulk.global.shared::cta.bulk_group"


def _lower_error(func, match):
    with pytest.raises(TileError, match=match):
        testing.lower(func)


# -- Before / Expected ------------------------------------------------------------------


def test_global_to_shared_one_copy_per_row_one_barrier():
    @T.function
    def before(A: T.Tensor((4, 64), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((4, 64), "float32", align=16)
        bar = T.alloc_shared((1,), "uint64", align=8)
        if tid == 0:
            T.cuda.tile.apply(T.ptx[G2S], s, A, mbar=bar)

    @T.function
    def expected(A: T.Tensor((4, 64), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((4, 64), "float32", align=16)
        bar = T.alloc_shared((1,), "uint64", align=8)
        if tid == 0:
            for r0 in T.unroll(4):
                T.ptx[G2S](s.ptr_to([r0, 0]), A.ptr_to([r0, 0]), T.uint32(256), bar.ptr_to([0]))

    testing.assert_lowers_to(before, expected)


def test_shared_to_global_bulk_group_with_cache_hint():
    @T.function
    def before(B: T.Tensor((2, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
        s = T.alloc_shared((2, 32), "float32", align=16)
        T.cuda.tile.apply(T.ptx[S2G + ".L2::cache_hint"], B, s, cache_policy=T.uint64(7))

    @T.function
    def expected(B: T.Tensor((2, 32), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
        s = T.alloc_shared((2, 32), "float32", align=16)
        for r0 in T.unroll(2):
            T.ptx[S2G + ".L2::cache_hint"](B.ptr_to([r0, 0]), s.ptr_to([r0, 0]), T.uint32(128), T.uint64(7))

    testing.assert_lowers_to(before, expected)


def test_shared_to_peer_maps_destination_per_row_and_barrier_once():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=1, cluster=2))
        src = T.alloc_shared((2, 16), "float32", align=16)
        dst = T.alloc_shared((2, 16), "float32", align=16)
        bar = T.alloc_shared((1,), "uint64", align=8)
        T.cuda.tile.apply(T.ptx[S2C], dst, src, mbar=bar, remote_cta_id=T.uint32(1))

    lowered = testing.lower(before)
    seq = list(lowered.body.body.seq)
    allocs = [s for s in seq if isinstance(s, tvm.tirx.AllocBuffer) and s.buffer.scope() == "local"]
    assert len(allocs) == 2  # one scratch register per mapped operand
    mapa_once, loop = seq[-2], seq[-1]
    assert isinstance(loop, tvm.tirx.For) and int(loop.extent) == 2
    # before the loop: mapa of the barrier; in it: mapa of the row, then the copy
    assert testing.ptx_opcode_of(mapa_once.value) == "mapa.shared::cluster.u32"
    body = list(loop.body.seq)
    assert [testing.ptx_opcode_of(s.value) for s in body] == ["mapa.shared::cluster.u32", S2C]
    bar_addr, dst_addr = mapa_once.value.args[0], body[0].value.args[0]
    copy = body[1].value
    # the copy writes to the mapped row, reads the local row, takes the mapped barrier
    tvm.ir.assert_structural_equal(copy.args[0], dst_addr)
    tvm.ir.assert_structural_equal(copy.args[3], bar_addr)
    assert int(copy.args[2]) == 64


# -- every form assembles; floors -------------------------------------------------------------


@testing.requires_nvcc
def test_every_sm90a_form_assembles(tmp_path):
    forms = bulk_forms.sm90a_forms("cp_async_bulk")
    opcodes = {f.opcode for f in forms}
    assert {G2S, G2S_CTA, MULTICAST, S2C, S2G, "cp.async.bulk.prefetch.L2.global"} <= opcodes
    built = testing.assemble_forms(bulk_forms.kernels(forms), tmp_path, arch="sm_90a", fmt="ptx")
    for each in built:
        assert testing.ptxas_errors(each.assembled, "sm_90a") == []
    ptx = "".join(each.assembled for each in built)
    for opcode in opcodes:
        assert opcode + " " in ptx, opcode


@pytest.mark.parametrize(
    "opcode, floor",
    [
        (S2G + ".cp_mask", "sm_100"),  # measured: ptxas takes .cp_mask from plain sm_100
        ("cp.async.bulk.weak.shared::cta.global.mbarrier::complete_tx::bytes", "sm_103a"),
        ("cp.async.bulk.relaxed.cta.global.shared::cta.bulk_group.b128", "sm_103a"),
    ],
)
def test_forms_above_sm90a_are_refused_with_their_arch(opcode, floor):
    from tvm_tirx.tile.ir.registry import candidates
    from tvm_tirx.tile.rules.static_rules import rule_arch

    (contract,) = candidates(opcode)
    assert contract.min_arch == floor
    err = rule_arch(contract, "sm_90a")
    assert err is not None and f"{floor} or newer" in str(err) and "sm_90a" in str(err)
    assert rule_arch(contract, floor) is None


def test_cp_mask_is_refused_when_compiled_for_sm90a():
    @T.function
    def k(B: T.Tensor((64,), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
        s = T.alloc_shared((64,), "float32", align=16)
        T.cuda.tile.apply(T.ptx[S2G + ".cp_mask"], B, s, byte_mask=T.uint16(0xFFFF))

    with pytest.raises(TileError, match="needs sm_100 or newer.*found sm_90a"):
        tvm_tirx.compile(k, target="cuda", arch="sm_90a")


@pytest.mark.parametrize(
    "opcode, reason",
    [
        (G2S_CTA + ".ignore_oob", "ignore_oob"),
        (G2S + ".multicast::cluster::16b", "multicast::cluster::16b"),
        ("cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes.mbarrier::report::disabled", "report"),
    ],
)
def test_forms_that_are_not_tile_forms_say_why(opcode, reason):
    from tvm_tirx.tile.ir.registry import candidates

    with pytest.raises(TileError, match="unsupported form") as info:
        candidates(opcode)
    assert reason in str(info.value)


# -- rules -------------------------------------------------------------------------------------


def test_run_must_be_a_multiple_of_16_bytes():
    with pytest.raises(TileError, match=r"dst \(operand 1\).*positive multiple of 16 bytes.*12 bytes"):

        @T.function
        def k(A: T.Tensor((3,), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            s = T.alloc_shared((3,), "float32", align=16)
            bar = T.alloc_shared((1,), "uint64", align=8)
            T.cuda.tile.apply(T.ptx[G2S], s, A, mbar=bar)


def test_runs_must_have_the_same_size():
    with pytest.raises(TileError, match=r"src \(operand 2\).*runs differ.*64 bytes like dst.*32 bytes"):

        @T.function
        def k(A: T.Tensor((16,), "float16", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            s = T.alloc_shared((16,), "float32", align=16)
            bar = T.alloc_shared((1,), "uint64", align=8)
            T.cuda.tile.apply(T.ptx[G2S], s, A, mbar=bar)


def test_runs_must_be_16_byte_aligned_not_size_aligned():
    @T.function
    def ok(A: T.Tensor((2, 12), "float32", align=16)):
        # 48-byte rows: each row starts 16-byte aligned, none 48-byte aligned
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
        s = T.alloc_shared((2, 12), "float32", align=16)
        bar = T.alloc_shared((1,), "uint64", align=8)
        T.cuda.tile.apply(T.ptx[G2S], s, A, mbar=bar)

    testing.lower(ok)

    @T.function
    def bad(A: T.Tensor((20,), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
        s = T.alloc_shared((16,), "float32", align=16)
        bar = T.alloc_shared((1,), "uint64", align=8)
        T.cuda.tile.apply(T.ptx[G2S], s, A.sub[1:17], mbar=bar)

    _lower_error(bad, r"src \(operand 2\).*not provably aligned.*multiple of 16")


def test_copy_must_stay_inside_the_tensor():
    @T.function
    def k(A: T.Tensor((4, 16), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
        tid = T.cuda.thread_idx("x")
        s = T.alloc_shared((8, 16), "float32", align=16)
        bar = T.alloc_shared((1,), "uint64", align=8)
        T.cuda.tile.apply(T.ptx[G2S], s.sub[tid, :], A.sub[tid, :], mbar=bar)

    _lower_error(k, r"src \(operand 2\).*out of the tensor's bounds")


def test_mbar_is_required():
    with pytest.raises(TileError, match="missing parameter 'mbar'"):

        @T.function
        def k(A: T.Tensor((16,), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            s = T.alloc_shared((16,), "float32", align=16)
            T.cuda.tile.apply(T.ptx[G2S], s, A)


def test_mbar_is_one_uint64_barrier():
    with pytest.raises(TileError, match=r"parameter mbar: repeat shapes differ: expected repeat \(\)"):

        @T.function
        def k(A: T.Tensor((16,), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            s = T.alloc_shared((16,), "float32", align=16)
            bars = T.alloc_shared((2, 1), "uint64", align=8)
            T.cuda.tile.apply(T.ptx[G2S], s, A, mbar=bars)


def test_bulk_group_store_takes_no_mbar():
    with pytest.raises(TileError, match="unknown parameter 'mbar'"):

        @T.function
        def k(B: T.Tensor((16,), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            s = T.alloc_shared((16,), "float32", align=16)
            bar = T.alloc_shared((1,), "uint64", align=8)
            T.cuda.tile.apply(T.ptx[S2G], B, s, mbar=bar)


def test_multicast_needs_a_cluster_launch():
    @T.function
    def k(A: T.Tensor((16,), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=1))
        s = T.alloc_shared((16,), "float32", align=16)
        bar = T.alloc_shared((1,), "uint64", align=8)
        T.cuda.tile.apply(T.ptx[MULTICAST], s, A, mbar=bar, cta_mask=T.uint16(3))

    _lower_error(k, r"\.multicast::cluster needs a cluster launch")


def test_multicast_mask_names_ctas_of_the_cluster():
    @T.function
    def k(A: T.Tensor((16,), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=1, cluster=2))
        s = T.alloc_shared((16,), "float32", align=16)
        bar = T.alloc_shared((1,), "uint64", align=8)
        T.cuda.tile.apply(T.ptx[MULTICAST], s, A, mbar=bar, cta_mask=T.uint16(4))

    _lower_error(k, r"cta_mask names CTAs outside the cluster.*below 4.*0x4")


def test_shared_to_peer_needs_remote_cta_id():
    with pytest.raises(TileError, match="missing parameter 'remote_cta_id'"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=1, cluster=2))
            s = T.alloc_shared((16,), "float32", align=16)
            bar = T.alloc_shared((1,), "uint64", align=8)
            T.cuda.tile.apply(T.ptx[S2C], s, s, mbar=bar)


def test_shared_to_peer_needs_a_cluster_launch():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=1))
        s = T.alloc_shared((16,), "float32", align=16)
        bar = T.alloc_shared((1,), "uint64", align=8)
        T.cuda.tile.apply(T.ptx[S2C], s, s, mbar=bar, remote_cta_id=T.uint32(1))

    _lower_error(k, "remote_cta_id needs a cluster launch")


def test_wrong_state_space_for_the_direction():
    with pytest.raises(TileError, match=r"src \(operand 2\).*wrong state space"):

        @T.function
        def k(B: T.Tensor((16,), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            T.cuda.tile.apply(T.ptx[S2G], B, B)


# -- run-time extents (issue 23 item 2: bulk copies) -----------------------------------------

M_RT, N_RT = T.dynamic("m"), T.dynamic("n")


def _row_store(assume: bool):
    """One CTA per row of a run-time (m, n) tensor: a 256-byte bulk store of 64 floats."""

    @T.function
    def k(B: T.Tensor((M_RT, N_RT), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=M_RT, block=32))
        buf = T.alloc_shared((64,), "float32", align=128)
        tid = T.cuda.thread_idx("x")
        r = T.cuda.block_idx("x")
        if assume:
            T.assume(N_RT % 4 == 0)
        buf[tid] = T.float32(1)
        buf[tid + 32] = T.float32(1)
        T.ptx["fence.proxy.async.shared::cta"]()
        T.cuda.cta_sync()
        if tid == 0 and N_RT >= 64:
            T.cuda.tile.apply(T.ptx[S2G], B.sub[r, 0:64], buf)
            T.ptx["cp.async.bulk.commit_group"]()
            T.ptx["cp.async.bulk.wait_group"](0)

    return k


def test_bulk_copy_from_a_run_time_row_stride_needs_its_alignment_proved():
    # row r starts at byte r * n * 4: a multiple of 16 only when n is a multiple of 4
    _lower_error(_row_store(False), r"dst \(operand 1\): vector atom not provably aligned: .*found byte offset r \* n \* 4")
    lowered = testing.lower(_row_store(True)).script()
    assert "T.uint32(256)" in lowered and "elem_offset=r * n" in lowered


# -- kernels for the GPU ------------------------------------------------------------------------

ELEMS = 1024  # 4 KiB of float32


@T.function
def bulk_copy_4k(A: T.Tensor((ELEMS,), "float32", align=16), B: T.Tensor((ELEMS,), "float32", align=16)):
    # global -> shared (4 copies of 1 KiB, one barrier expecting all 4096 bytes),
    # B = 2 * A in shared memory, shared -> global (.bulk_group)
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256, dynamic_smem_bytes=ELEMS * 4 + 64))
    buf = T.alloc_shared((ELEMS,), "float32", scope="shared.dyn", align=128)
    bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(1))
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar, tx=T.uint32(ELEMS * 4))
        T.cuda.tile.apply(T.ptx[G2S], buf.view(4, ELEMS // 4), A.view(4, ELEMS // 4), mbar=bar)
    T.cuda.mbarrier_wait_phase(bar, 0)
    for i in T.unroll(ELEMS // 256):
        buf[i * 256 + tid] = buf[i * 256 + tid] * T.float32(2)
    T.ptx["fence.proxy.async.shared::cta"]()
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.tile.apply(T.ptx[S2G], B, buf)
        T.ptx["cp.async.bulk.commit_group"]()
        T.ptx["cp.async.bulk.wait_group"](0)


SEND = 64  # 256 bytes of float32


@T.function
def send_to_peer(A: T.Tensor((SEND,), "float32", align=16), B: T.Tensor((SEND,), "float32", align=16)):
    # CTA 0 fills its src from A and copies it into CTA 1's dst (completing on CTA
    # 1's barrier); CTA 1 writes dst to B.  The last cluster barrier keeps CTA 0's
    # shared memory alive until CTA 1 has received the bytes.
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32, cluster=2))
    tid = T.cuda.thread_idx("x")
    rank = T.cuda.cluster_ctaid("x")
    src = T.alloc_shared((SEND,), "float32", align=16)
    dst = T.alloc_shared((SEND,), "float32", align=16)
    bar = T.alloc_shared((1,), "uint64", align=8)
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(1))
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cluster_sync()
    if rank == 0:
        for j in T.unroll(SEND // 32):
            src[j * 32 + tid] = A[j * 32 + tid]
        T.ptx["fence.proxy.async.shared::cta"]()
        T.cuda.cta_sync()
        if tid == 0:
            T.cuda.tile.apply(T.ptx[S2C], dst, src, mbar=bar, remote_cta_id=T.uint32(1))
    if rank == 1:
        if tid == 0:
            T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar, tx=T.uint32(SEND * 4))
        T.cuda.mbarrier_wait_phase(bar, 0)
        for j in T.unroll(SEND // 32):
            B[j * 32 + tid] = dst[j * 32 + tid]
    T.cuda.cluster_sync()


@testing.requires_nvcc
@pytest.mark.parametrize("func", [bulk_copy_4k, send_to_peer], ids=["bulk_copy_4k", "send_to_peer"])
def test_gpu_kernels_assemble_for_sm90a(func):
    kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
    ptx = testing.assemble(kernel, fmt="ptx").decode()
    assert testing.ptxas_errors(ptx, "sm_90a") == []


@pytest.mark.gpu
def test_bulk_copy_4k_on_the_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(bulk_copy_4k, target="cuda")
    a = torch.randn(ELEMS, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a * 2)


@pytest.mark.gpu
def test_cta0_sends_256_bytes_to_cta1_on_the_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(send_to_peer, target="cuda")
    a = torch.randn(SEND, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a)
