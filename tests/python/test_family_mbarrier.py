"""mbarrier family: lowering Before/Expected, every sm_90a form assembles, one test per
rule, the spin-wait helper, and (on the GPU) a 3-stage full/empty pipeline."""

import pytest
import tvm

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T

import bulk_forms


def _lower_error(func, match):
    with pytest.raises(TileError, match=match):
        testing.lower(func)


# -- Before / Expected ------------------------------------------------------------------


def test_init_sets_up_every_stage_in_one_call():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        bars = T.alloc_shared((3, 1), "uint64", align=8)
        if tid == 0:
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bars, count=T.uint32(1))

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        bars = T.alloc_shared((3, 1), "uint64", align=8)
        if tid == 0:
            for r0 in T.unroll(3):
                T.ptx["mbarrier.init.shared::cta.b64"](bars.ptr_to([r0, 0]), T.uint32(1))

    testing.assert_lowers_to(before, expected)


def test_count_selects_the_arrive_form_with_a_count():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        bar = T.alloc_shared((1,), "uint64", align=8)
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.release.cta.shared::cta.b64"], bar)
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.release.cta.shared::cta.b64"], bar, count=T.uint32(4))

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        bar = T.alloc_shared((1,), "uint64", align=8)
        T.ptx["mbarrier.arrive.release.cta.shared::cta.b64"](bar.ptr_to([0]))
        T.ptx["mbarrier.arrive.release.cta.shared::cta.b64"](bar.ptr_to([0]), T.uint32(4))

    testing.assert_lowers_to(before, expected)


def test_try_wait_writes_the_done_register_per_stage():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        bars = T.alloc_shared((2, 1), "uint64", align=8)
        done = T.alloc_local((2, 1), "uint32")
        T.cuda.tile.apply(T.ptx["mbarrier.try_wait.parity.shared::cta.b64"], done, bars, phase=T.uint32(1))

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        bars = T.alloc_shared((2, 1), "uint64", align=8)
        done = T.alloc_local((2, 1), "uint32")
        for r0 in T.unroll(2):
            T.ptx["mbarrier.try_wait.parity.shared::cta.b64"](done[r0, 0], bars.ptr_to([r0, 0]), T.uint32(1))

    testing.assert_lowers_to(before, expected)


def test_remote_arrive_maps_the_barrier_with_mapa():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32, cluster=2))
        bars = T.alloc_shared((2, 1), "uint64", align=8)
        T.cuda.tile.apply(
            T.ptx["mbarrier.arrive.release.cluster.shared::cluster.b64"], bars, remote_cta_id=T.uint32(1)
        )

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32, cluster=2))
        bars = T.alloc_shared((2, 1), "uint64", align=8)
        peer = T.decl_buffer((1,), "uint32", scope="local")
        for r0 in T.unroll(2):
            T.ptx["mapa.shared::cluster.u32"](
                peer[0],
                T.Cast("uint32", T.call_pure_extern("uint64", "__cvta_generic_to_shared", bars.ptr_to([r0, 0]))),
                T.uint32(1),
            )
            T.ptx["mbarrier.arrive.release.cluster.shared::cluster.b64"](peer[0])

    lowered = testing.lower(before)
    # the scratch register is an allocation (AllocBuffer), which the script of
    # ``expected`` spells as a declaration: compare the loop, then the allocation
    loop_of = lambda f: [s for s in f.body.body.seq if isinstance(s, tvm.tirx.For)][-1]  # noqa: E731
    tvm.ir.assert_structural_equal(loop_of(lowered), loop_of(expected), map_free_vars=True)
    allocs = [s for s in lowered.body.body.seq if isinstance(s, tvm.tirx.AllocBuffer)]
    assert [(a.buffer.dtype, [int(x) for x in a.buffer.shape], a.buffer.scope()) for a in allocs][-1] == (
        "uint32",
        [1],
        "local",
    )


# -- every form assembles ------------------------------------------------------------------


@testing.requires_nvcc
def test_every_sm90a_form_assembles(tmp_path):
    forms = bulk_forms.sm90a_forms("mbarrier")
    assert len(forms) > 100  # init, arrive(_drop), expect_tx, complete_tx, waits, inval
    built = testing.assemble_forms(bulk_forms.kernels(forms), tmp_path, arch="sm_90a", fmt="ptx")
    for each in built:
        assert testing.ptxas_errors(each.assembled, "sm_90a") == []
    ptx = "".join(each.assembled for each in built)
    for form in forms:
        assert form.opcode + " " in ptx, form.key
    assert "mapa.shared::cluster.u32" in ptx


# -- rules -----------------------------------------------------------------------------------


def test_barrier_must_be_uint64():
    with pytest.raises(TileError, match=r"bar \(operand 1\).*64-bit uint64"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            bar = T.alloc_shared((1,), "uint32", align=8)
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(1))


def test_barrier_must_be_in_shared_memory():
    with pytest.raises(TileError, match="wrong state space"):

        @T.function
        def k(B: T.Tensor((1,), "uint64", align=8)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], B, count=T.uint32(1))


def test_barrier_must_be_8_byte_aligned():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
        words = T.alloc_shared((4,), "uint32", align=4)
        T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], words.view("uint64").sub[0:1], count=T.uint32(1))

    _lower_error(k, r"not provably aligned.*8-byte alignment")


def test_init_needs_count():
    with pytest.raises(TileError, match="missing parameter 'count'"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            bar = T.alloc_shared((1,), "uint64", align=8)
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar)


def test_count_must_be_uint32():
    with pytest.raises(TileError, match="parameter count.*uint32"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            bar = T.alloc_shared((1,), "uint64", align=8)
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.int64(1))


def test_expect_tx_takes_tx_not_count():
    with pytest.raises(TileError, match="unknown parameter 'count'"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            bar = T.alloc_shared((1,), "uint64", align=8)
            T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar, count=T.uint32(64))


def test_done_and_barriers_share_the_repeat_shape():
    with pytest.raises(TileError, match="repeat shapes differ"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            bars = T.alloc_shared((3, 1), "uint64", align=8)
            done = T.alloc_local((2, 1), "uint32")
            T.cuda.tile.apply(T.ptx["mbarrier.test_wait.parity.shared::cta.b64"], done, bars, phase=T.uint32(0))


def test_barrier_view_inside_its_tensor():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=4))
        tid = T.cuda.thread_idx("x")
        bars = T.alloc_shared((3, 1), "uint64", align=8)
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], bars.sub[tid, :])

    _lower_error(k, "out of the tensor's bounds")


def test_remote_cta_id_needs_a_cluster_launch():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=1))
        bar = T.alloc_shared((1,), "uint64", align=8)
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cluster.b64"], bar, remote_cta_id=T.uint32(1))

    _lower_error(k, "remote_cta_id needs a cluster launch")


def test_remote_cta_id_inside_the_cluster():
    @T.function
    def k():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=1, cluster=2))
        bar = T.alloc_shared((1,), "uint64", align=8)
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cluster.b64"], bar, remote_cta_id=T.uint32(2))

    _lower_error(k, r"remote_cta_id outside the cluster.*\[0, 2\).*found 2")


def test_remote_cta_id_only_on_cluster_forms():
    with pytest.raises(TileError, match="unknown parameter 'remote_cta_id'"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=1, cluster=2))
            bar = T.alloc_shared((1,), "uint64", align=8)
            T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], bar, remote_cta_id=T.uint32(1))


@pytest.mark.parametrize(
    "opcode, reason",
    [
        ("mbarrier.init.b64", "generic addressing"),
        ("mbarrier.try_wait.parity.phase_type::primary.acquire.cta.shared::cta.b64", "phase_type::primary"),
        ("mbarrier.init.layout::v0.shared::cta.b64", "layout::v0"),
        ("mbarrier.arrive.noComplete.shared::cta.b64", "noComplete"),
        ("mbarrier.pending_count.b64", "report forms"),
    ],
)
def test_forms_that_are_not_tile_forms_say_why(opcode, reason):
    from tvm_tirx.tile.ir.registry import candidates

    with pytest.raises(TileError, match="unsupported form") as info:
        candidates(opcode)
    assert reason in str(info.value)


# -- the spin-wait helper -----------------------------------------------------------------------


def test_wait_phase_is_apache_tvms_wait_loop():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        bars = T.alloc_shared((2, 1), "uint64", align=8)
        T.cuda.mbarrier_wait_phase(bars.sub[1, :], 1)
        T.cuda.mbarrier_wait_phase(bars.sub[0, :], 0, scope="cluster")

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        bars = T.alloc_shared((2, 1), "uint64", align=8)
        b1 = bars.sub[1, :]
        T.cuda.mbarrier_wait(b1.ptr_to([0]), 1)
        b0 = bars.sub[0, :]
        T.cuda.mbarrier_wait_acquire_cluster(b0.ptr_to([0]), 0)

    testing.assert_lowers_to(before, expected)


@pytest.mark.parametrize(
    "make, found",
    [
        ('T.alloc_shared((2, 1), "uint64", align=8)', r"shape \(2, 1\)"),
        ('T.alloc_shared((1,), "float64", align=8)', "float64 view"),
        ('T.alloc_local((1,), "uint64")', "'local' memory"),
    ],
)
def test_wait_phase_rejects_what_is_not_one_barrier(tmp_path, make, found):
    source = (
        "from tvm_tirx.script import tirx as T\n\n@T.function\ndef k():\n"
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))\n"
        f"    bar = {make}\n    T.cuda.mbarrier_wait_phase(bar, 0)\n"
    )
    from tvm_tirx.build.stages import KernelFileError

    # the kernel file's loader reports the TileError with its file:line
    with pytest.raises(KernelFileError, match=f"TileError: .*k.py:7: .*not one mbarrier.*{found}"):
        testing.load_kernel(source, tmp_path, "k")


def test_wait_phase_scope_is_cta_or_cluster():
    with pytest.raises(TileError, match="unknown wait scope"):

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            bar = T.alloc_shared((1,), "uint64", align=8)
            T.cuda.mbarrier_wait_phase(bar, 0, scope="gpu")


# -- a 3-stage pipeline with full and empty barriers ---------------------------------------------

TILES, STAGES, ROW = 16, 3, 256  # 16 tiles of 256 float32 (1 KiB), 3 stages
THREADS = 128


@T.function
def pipeline(A: T.Tensor((TILES, ROW), "float32", align=16), B: T.Tensor((TILES, ROW), "float32", align=16)):
    # One thread (tid 0) produces: bulk copies of tile t into stage t % STAGES,
    # completing on full[s]; all 128 threads consume (B = 2 * A) and arrive on
    # empty[s]; the producer refills a stage once its empty barrier completed.
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=THREADS, dynamic_smem_bytes=STAGES * ROW * 4 + 64))
    bufs = T.alloc_shared((STAGES, ROW), "float32", scope="shared.dyn", align=128)
    full = T.alloc_shared((STAGES, 1), "uint64", scope="shared.dyn", align=8)
    empty = T.alloc_shared((STAGES, 1), "uint64", scope="shared.dyn", align=8)
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], full, count=T.uint32(1))
        T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], empty, count=T.uint32(THREADS))
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cta_sync()
    if tid == 0:
        for p in T.unroll(STAGES):
            T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], full.sub[p, :], tx=T.uint32(ROW * 4))
            T.cuda.tile.apply(
                T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"],
                bufs.sub[p, :],
                A.sub[p, :],
                mbar=full.sub[p, :],
            )
    for t in T.serial(TILES):
        T.cuda.mbarrier_wait_phase(full.sub[t % STAGES, :], (t // STAGES) % 2)
        for j in T.unroll(ROW // THREADS):
            B[t, j * THREADS + tid] = bufs[t % STAGES, j * THREADS + tid] * T.float32(2)
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], empty.sub[t % STAGES, :])
        if tid == 0:
            if t + STAGES < TILES:
                T.cuda.mbarrier_wait_phase(empty.sub[t % STAGES, :], (t // STAGES) % 2)
                T.cuda.tile.apply(
                    T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], full.sub[t % STAGES, :], tx=T.uint32(ROW * 4)
                )
                T.cuda.tile.apply(
                    T.ptx["cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"],
                    bufs.sub[t % STAGES, :],
                    A.sub[t + STAGES, :],
                    mbar=full.sub[t % STAGES, :],
                )


@testing.requires_nvcc
def test_pipeline_assembles_for_sm90a():
    kernel = tvm_tirx.compile(pipeline, target="cuda", arch="sm_90a")
    ptx = testing.assemble(kernel, fmt="ptx").decode()
    assert "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64" in ptx
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx


@pytest.mark.gpu
def test_pipeline_on_the_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(pipeline, target="cuda")
    a = torch.randn(TILES, ROW, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a * 2)
