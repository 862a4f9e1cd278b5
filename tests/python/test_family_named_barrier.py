"""named_barrier family: Before/Expected of bar.sync / bar.arrive / barrier.cluster, the
patterns real kernels use (per-warpgroup epilogue barriers, FlashAttention-3's ping-pong,
bar.sync 0), one refused kernel per rule next to its accepted twin, every form assembled,
and (GPU) a two-warpgroup ping-pong and per-warpgroup barriers against torch."""

import pytest

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.ir.forms import forms_of

SYNC, ARRIVE = "bar.sync", "bar.arrive"
ROUNDS = 6


def _rejected(func, match):
    """``func`` lowers with a TileError whose message matches ``match``; returns the message."""
    with pytest.raises(TileError, match=match) as info:
        testing.lower(func)
    return str(info.value)


# -- Before / Expected -----------------------------------------------------------------------


def test_one_instruction_per_thread_with_id_and_count_as_written():
    @T.function
    def before():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384))
        wg = T.cuda.warp_id() // 4
        if wg > 0:  # the producer warpgroup 0 takes no part
            c = wg - 1
            T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(1 + c), count=T.uint32(128))
        T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(0))

    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384))
        wg = T.cuda.warp_id() // 4
        if wg > 0:
            c = wg - 1
            T.ptx[SYNC](T.uint32(1 + c), T.uint32(128))
        T.ptx[SYNC](T.uint32(0))

    testing.assert_lowers_to(before, expected)


def _ping_pong(producer: bool = True, count2: int = 256):
    """FlashAttention-3's ping-pong: consumer warpgroup 1 syncs on barrier 2 where
    warpgroup 2 arrives on it, and the other way round on barrier 3."""
    block = 384 if producer else 256
    first = 1 if producer else 0

    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=block))
        wg = T.cuda.warp_id() // 4
        if wg == first:
            T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(2), count=T.uint32(count2))
            T.cuda.tile.apply(T.ptx[ARRIVE], id=T.uint32(3), count=T.uint32(256))
        elif wg == first + 1:
            T.cuda.tile.apply(T.ptx[ARRIVE], id=T.uint32(2), count=T.uint32(256))
            T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(3), count=T.uint32(256))

    return kernel


def test_ping_pong_lowers_to_sync_and_arrive():
    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384))
        wg = T.cuda.warp_id() // 4
        if wg == 1:
            T.ptx[SYNC](T.uint32(2), T.uint32(256))
            T.ptx[ARRIVE](T.uint32(3), T.uint32(256))
        elif wg == 2:
            T.ptx[ARRIVE](T.uint32(2), T.uint32(256))
            T.ptx[SYNC](T.uint32(3), T.uint32(256))

    testing.assert_lowers_to(_ping_pong(), expected)


def _cluster_barrier(cluster=2, limit=128):
    """Arrive under ``if tid < limit`` (every thread at 128), then wait."""

    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=128, cluster=cluster))
        if T.cuda.thread_idx("x") < limit:
            T.cuda.tile.apply(T.ptx["barrier.cluster.arrive.release.aligned"])
        T.cuda.tile.apply(T.ptx["barrier.cluster.wait.acquire.aligned"])

    return kernel


def test_cluster_barrier_lowers_to_arrive_and_wait():
    @T.function
    def expected():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=128, cluster=2))
        if T.cuda.thread_idx("x") < 128:
            T.ptx["barrier.cluster.arrive.release.aligned"]()
        T.ptx["barrier.cluster.wait.acquire.aligned"]()

    testing.assert_lowers_to(_cluster_barrier(), expected)


# -- patterns that must be accepted ----------------------------------------------------------


def test_count_less_sync_counts_the_whole_cta():
    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(0))
        T.cuda.cta_sync()
        T.cuda.tile.apply(T.ptx["barrier.sync"], id=T.uint32(5))

    assert testing.count_ptx(testing.lower(kernel), SYNC) == 1


def test_an_id_may_change_with_a_loop_counter():
    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        for k in T.serial(4):
            T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(1 + k % 2), count=T.uint32(256))

    assert testing.count_ptx(testing.lower(kernel), SYNC) == 4


def test_a_non_aligned_barrier_may_split_a_warp_between_call_sites():
    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        if T.cuda.thread_idx("x") < 48:
            T.cuda.tile.apply(T.ptx["barrier.sync"], id=T.uint32(1), count=T.uint32(64))
        else:
            T.cuda.tile.apply(T.ptx["barrier.sync"], id=T.uint32(1), count=T.uint32(64))

    testing.lower(kernel)


def test_the_gemm_epilogue_barrier_is_per_consumer_warpgroup():
    """``tvm_tirx.kernels.gemm``'s epilogue barrier ``1 + c`` inside its rounds loop."""

    @T.function
    def kernel(n_tiles: T.int32):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=132, block=384))
        wg = T.cuda.warp_id() // 4
        bx = T.cuda.block_idx("x")
        if wg > 0:
            c = wg - 1
            for i in T.serial(2):
                if bx + i * 132 < n_tiles:
                    T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.uint32(1 + c), count=T.uint32(128))
                    T.cuda.tile.apply(T.ptx["barrier.sync.aligned"], id=T.uint32(1 + c), count=T.uint32(128))

    assert testing.count_ptx(testing.lower(kernel), "barrier.sync.aligned") == 4


# -- one refused kernel per rule, next to its accepted twin ----------------------------------


def _sync(block, id_, count, guard_warps=None):
    """``bar.sync id, count`` in a CTA of ``block`` threads, under ``warp_id() < guard_warps``
    (default: every warp)."""
    warps = block // 32 if guard_warps is None else guard_warps

    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=block))
        if T.cuda.warp_id() < warps:
            T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(id_), count=T.uint32(count))

    return kernel


@pytest.mark.parametrize("id_", [16, 31])
def test_id_outside_0_to_15_is_refused(id_):
    with pytest.raises(TileError, match=f"parameter id: barrier id outside 0..15.*found {id_}"):
        _sync(256, id_, 256)
    testing.lower(_sync(256, 15, 256))


@pytest.mark.parametrize("count", [0, 100, 48])
def test_count_not_a_positive_multiple_of_32_is_refused(count):
    with pytest.raises(TileError, match=f"thread count not a positive multiple of 32.*found {count}"):
        _sync(256, 1, count)
    testing.lower(_sync(256, 1, 96, guard_warps=3))


def test_count_above_the_cta_is_refused():
    _rejected(_sync(256, 1, 512), r"thread count above the CTA's threads: expected at most 256.*found 512")
    testing.lower(_sync(256, 1, 256))


def test_count_larger_than_the_threads_that_reach_it_is_refused():
    msg = _rejected(_sync(256, 1, 256, guard_warps=4), r"barrier 1: count 256 but 128 threads use it")
    assert "sync at " in msg and "test_family_named_barrier.py" in msg and "by warpgroup 0" in msg
    testing.lower(_sync(256, 1, 128, guard_warps=4))


def test_barrier_0_counts_the_whole_cta():
    _rejected(_sync(256, 0, 128, guard_warps=4), r"barrier 0 with a count other than the CTA's threads.*count=256")
    testing.lower(_sync(256, 0, 256))


def test_threads_of_one_barrier_must_sum_to_the_count_across_call_sites():
    testing.lower(_ping_pong())
    _rejected(_ping_pong(count2=384), r"barrier 2: calls state different counts.*count 256 \(arrive at .*count 384 "
              r"\(sync at ")  # fmt: skip


def test_ping_pong_without_a_partner_is_refused():
    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384))
        wg = T.cuda.warp_id() // 4
        if wg == 1:
            T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(2), count=T.uint32(256))

    _rejected(kernel, r"barrier 2: count 256 but 128 threads use it.*sync at .* by warpgroup 1")


def _tid_guard(limit, opcode=SYNC, count=64, else_too=False):
    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        if tid < limit:
            T.cuda.tile.apply(T.ptx[opcode], id=T.uint32(1), count=T.uint32(count))
        elif else_too:
            T.cuda.tile.apply(T.ptx[opcode], id=T.uint32(1), count=T.uint32(count))

    return kernel


def test_an_aligned_barrier_reached_by_part_of_a_warp_is_refused():
    _rejected(_tid_guard(48), r"bar.sync: barrier reached by part of a warp.*found 16 of the 32 threads of warp 1")
    testing.lower(_tid_guard(64))


def test_a_non_aligned_barrier_used_by_part_of_a_warp_is_refused():
    _rejected(_tid_guard(48, "barrier.sync", count=32), r"barrier reached by part of a warp.*warp 1 use barrier 1")
    testing.lower(_tid_guard(48, "barrier.sync", else_too=True))


def test_an_id_that_differs_within_a_warp_is_refused():
    def kernel_with(per_warp):
        @T.function
        def kernel():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
            tid = T.cuda.thread_idx("x")
            if per_warp:
                T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(1 + tid // 32 % 2), count=T.uint32(128))
            else:
                T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(1 + tid % 2), count=T.uint32(128))

        return kernel

    _rejected(kernel_with(False), r"parameter id: barrier id not uniform over the warp.*differs between the lanes")
    testing.lower(kernel_with(True))


def test_an_id_not_known_when_compiling_is_refused():
    @T.function
    def runtime_id(n: T.int32):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(n), count=T.uint32(128))

    _rejected(runtime_id, r"parameter id: barrier id not known when compiling.*found id=")


def test_pred_is_refused():
    with pytest.raises(TileError, match=r"pred: pred on a barrier: expected a guard"):

        @T.function
        def kernel():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
            T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(1), count=T.uint32(128), pred=T.cuda.warp_id() < 4)


def test_a_guard_not_uniform_over_the_warp_is_refused():
    @T.function
    def kernel(A: T.Tensor((128,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        if A[T.cuda.thread_idx("x")] > 0:
            T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(1), count=T.uint32(128))

    _rejected(kernel, r"guard not uniform over the warp")


def test_the_cluster_barrier_needs_a_cluster_launch():
    _rejected(_cluster_barrier(cluster=None), r"barrier.cluster needs a cluster launch")
    testing.lower(_cluster_barrier(cluster=2))


def test_the_cluster_barrier_is_reached_by_the_whole_cluster():
    _rejected(_cluster_barrier(limit=64), r"barrier.cluster reached by part of the cluster.*all 256 threads.*found 128")


def test_errors_point_at_the_call():
    msg = _rejected(_tid_guard(48), "part of a warp")
    assert msg.startswith(f"{__file__}:")
    msg = _rejected(_ping_pong(count2=384), "different counts")  # a kernel rule: at the first site, naming both
    assert msg.startswith(f"{__file__}:") and msg.count(f"{__file__}:") == 3


def test_bar_warp_sync_and_reductions_are_not_claimed():
    for opcode in ("bar.warp.sync", "bar.red.popc.u32"):
        with pytest.raises(TileError, match="no tile family for this instruction"):

            @T.function
            def kernel():
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                T.cuda.tile.apply(T.ptx[opcode], id=T.uint32(0))


# -- raw T.ptx calls: checked as the tile form, left as written ------------------------------


def _raw(block, warps, count, opcode=SYNC):
    """A raw ``T.ptx[opcode](1, count)`` (``(1)`` when ``count`` is None) under ``warp_id() < warps``."""

    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=block))
        if T.cuda.warp_id() < warps:
            if count is None:
                T.ptx[opcode](T.uint32(1))
            else:
                T.ptx[opcode](T.uint32(1), T.uint32(count))

    return kernel


def test_a_raw_bar_sync_reached_by_fewer_threads_than_its_count_is_refused():
    msg = _rejected(_raw(256, 4, 256), r"bar.sync: parameter count: barrier 1: count 256 but 128 threads use it")
    assert msg.startswith(f"{__file__}:") and "sync at " in msg and "by warpgroup 0" in msg


def test_a_raw_bar_sync_counting_the_threads_that_reach_it_is_accepted_as_written():
    kernel = _raw(256, 4, 128)
    testing.assert_lowers_to(kernel, kernel)  # checked, not rewritten


def test_a_raw_count_less_barrier_sync_counts_the_whole_cta():
    _rejected(_raw(256, 4, None, "barrier.sync"), r"barrier.sync: parameter count: barrier 1: count 256 but 128 threads")
    testing.lower(_raw(256, 8, None, "barrier.sync"))


def test_a_raw_count_not_a_multiple_of_32_is_refused():
    _rejected(_raw(256, 4, 100), r"parameter count: thread count not a positive multiple of 32.*found 100")
    testing.lower(_raw(256, 3, 96))


def test_a_raw_bar_arrive_counts_with_the_tile_sync_it_pairs_with():
    def ping_pong(arrive_count):
        @T.function
        def kernel():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
            if T.cuda.warp_id() < 4:
                T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(2), count=T.uint32(256))
            else:
                T.ptx[ARRIVE](T.uint32(2), T.uint32(arrive_count))

        return kernel

    _rejected(ping_pong(128), r"barrier 2: calls state different counts.*count 128 \(arrive at .*count 256 \(sync at ")
    testing.lower(ping_pong(256))


def test_a_raw_aligned_barrier_reached_by_part_of_a_warp_is_refused():
    def kernel_with(limit):
        @T.function
        def kernel():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            if T.cuda.thread_idx("x") < limit:
                T.ptx["barrier.sync.aligned"](T.uint32(1), T.uint32(64))

        return kernel

    _rejected(kernel_with(48), r"barrier.sync.aligned: barrier reached by part of a warp.*16 of the 32 threads of warp 1")
    testing.lower(kernel_with(64))


def test_a_raw_barrier_with_pred_is_refused():
    @T.function
    def kernel():
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        T.ptx[SYNC](T.uint32(1), T.uint32(128), pred=T.cuda.warp_id() < 4)

    _rejected(kernel, r"bar.sync: pred: pred on a barrier: expected a guard")


def test_a_raw_cluster_barrier_is_reached_by_the_whole_cluster():
    def kernel_with(limit):
        @T.function
        def kernel():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=128, cluster=2))
            if T.cuda.thread_idx("x") < limit:
                T.ptx["barrier.cluster.arrive.release.aligned"]()
            T.ptx["barrier.cluster.wait.acquire.aligned"]()

        return kernel

    _rejected(kernel_with(64), r"barrier.cluster reached by part of the cluster.*found 128")
    testing.lower(kernel_with(128))


# -- every form assembles --------------------------------------------------------------------

#: One CTA pair of a 2-CTA cluster: every call uses barrier 1 with the CTA's 128 threads.
HEAD = testing.KernelHead(launch="T.cuda.LaunchConfig(grid=2, block=128, cluster=2)")
VALUES = {"id": 1, "count": 128}


def _call(form, i):  # pylint: disable=unused-argument
    params = "".join(f", {name}=T.uint32({VALUES[name]})" for name in form.contract.params)
    return [f'T.cuda.tile.apply(T.ptx["{form.opcode}"]{params})']


@testing.requires_nvcc
def test_every_form_assembles_for_sm90a(tmp_path):
    forms = forms_of("named_barrier")
    assert len(forms) == 28  # sync 12 (with and without count), arrive 6, cluster arrive 6, wait 4
    built = testing.assemble_forms(testing.form_kernels(forms, _call, HEAD), tmp_path, fmt="ptx")
    ptx = "".join(each.assembled for each in built)
    for each in built:
        assert testing.ptxas_errors(each.assembled, "sm_90a") == []
    for form in forms:
        assert form.opcode + (" " if form.contract.params else ";") in ptx, form.key


# -- GPU --------------------------------------------------------------------------------------


@T.function
def ping_pong(A: T.Tensor((128,), "int32"), X: T.Tensor((ROUNDS, 128), "int32"),
              Y: T.Tensor((ROUNDS, 128), "int32"), Out: T.Tensor((128,), "int32")):  # fmt: skip
    """Warpgroups 0 and 1 take turns updating a shared array: barrier 1 hands the turn
    to warpgroup 1 (0 arrives, 1 syncs), barrier 2 hands it back."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
    tid = T.cuda.thread_idx("x")
    S = T.alloc_shared((128,), "int32")
    if tid < 128:
        S[tid] = A[tid]
        for r in T.serial(ROUNDS):
            S[tid] = S[tid] * 2 + X[r, tid]
            T.cuda.tile.apply(T.ptx[ARRIVE], id=T.uint32(1), count=T.uint32(256))
            T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(2), count=T.uint32(256))
        Out[tid] = S[tid]
    else:
        for r in T.serial(ROUNDS):
            T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(1), count=T.uint32(256))
            S[tid - 128] = S[tid - 128] * 3 + Y[r, tid - 128]
            T.cuda.tile.apply(T.ptx[ARRIVE], id=T.uint32(2), count=T.uint32(256))


@T.function
def per_warpgroup(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
    """Consumer warpgroups 1 and 2 of 384 threads each stage 128 values in shared
    memory, sync on their own barrier ``1 + c`` and read their neighbour's value."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384))
    tid = T.cuda.thread_idx("x")
    wg = T.cuda.warp_id() // 4
    S = T.alloc_shared((2, 128), "float32")
    if wg > 0:
        c = wg - 1
        S[c, tid % 128] = A[c * 128 + tid % 128]
        T.cuda.tile.apply(T.ptx[SYNC], id=T.uint32(1 + c), count=T.uint32(128))
        B[c * 128 + tid % 128] = S[c, (tid + 1) % 128]


def test_gpu_kernels_lower_on_the_cpu():
    assert testing.count_ptx(testing.lower(ping_pong), SYNC) == ROUNDS * 2
    assert testing.count_ptx(testing.lower(per_warpgroup), SYNC) == 1


@testing.requires_nvcc
@pytest.mark.parametrize("kernel", [ping_pong, per_warpgroup], ids=["ping_pong", "per_warpgroup"])
def test_gpu_kernels_assemble_for_sm90a(kernel):
    ptx = testing.assemble(tvm_tirx.compile(kernel, target="cuda", arch="sm_90a"), fmt="ptx").decode()
    assert testing.ptxas_errors(ptx, "sm_90a") == []
    assert "bar.sync" in ptx


@pytest.mark.gpu
def test_ping_pong_on_the_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(ping_pong, target="cuda")
    a = torch.randint(0, 8, (128,), dtype=torch.int32, device="cuda")
    x = torch.randint(0, 8, (ROUNDS, 128), dtype=torch.int32, device="cuda")
    y = torch.randint(0, 8, (ROUNDS, 128), dtype=torch.int32, device="cuda")
    out = torch.empty_like(a)
    kernel(a, x, y, out)
    torch.cuda.synchronize()
    want = a.clone()
    for r in range(ROUNDS):
        want = (want * 2 + x[r]) * 3 + y[r]
    assert torch.equal(out, want)


@pytest.mark.gpu
def test_per_warpgroup_barriers_on_the_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(per_warpgroup, target="cuda")
    a = torch.randn(256, device="cuda")
    b = torch.empty_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, torch.roll(a.view(2, 128), -1, dims=1).reshape(256))
