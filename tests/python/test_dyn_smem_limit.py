"""Run-time dynamic shared memory above 48 KiB: ``Kernel`` raises the kernel's
``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` once per device
(:mod:`tvm_tirx.build.dynamic_smem_limit`), since apache-tvm 0.27's launcher sets it only
for the first launch's size."""

from types import SimpleNamespace

import pytest

import tvm_tirx
from tvm_tirx.build import dynamic_smem_limit
from tvm_tirx.script import tirx as T

ARCH = "sm_90a"
N = T.dynamic("N")
KIB = 1024
#: the carve-out of full_pool: 100 KiB, 6400 rows of 4 float32
ROWS = 100 * KIB // 16
THREADS = 256


@T.function
def full_pool(A: T.Tensor((N, 4), "float32", align=16), B: T.Tensor((N, 4), "float32", align=16), smem: T.int32):
    # every CTA stages 6400 rows (100 KiB) through dynamic shared memory of a run-time size,
    # then writes them back in reverse order: each byte of the pool is written and read
    T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(N, ROWS), block=THREADS, dynamic_smem_bytes=smem))
    tid = T.cuda.thread_idx("x")
    base = T.cuda.block_idx("x") * ROWS
    tile = T.alloc_shared((ROWS, 4), "float32", scope="shared.dyn", align=16)
    r = T.alloc_local((4,), "float32")
    for k in T.serial(ROWS // THREADS):
        row = k * THREADS + tid
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[base + row, :], pred=base + row < N)
        T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], tile.sub[row, :], r)
    T.cuda.cta_sync()
    for k in T.serial(ROWS // THREADS):
        row = k * THREADS + tid
        T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], r, tile.sub[ROWS - 1 - row, :])
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[base + row, :], r, pred=base + row < N)


@T.function
def small_pool(A: T.Tensor((N, 4), "float32", align=16), B: T.Tensor((N, 4), "float32", align=16), smem: T.int32):
    # a 1 KiB carve-out in a pool of any run-time size >= 1 KiB (each thread stores the
    # row another thread loaded: B == A)
    T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(N, 64), block=64, dynamic_smem_bytes=smem))
    tid = T.cuda.thread_idx("x")
    row = T.cuda.block_idx("x") * 64 + tid
    mirrored = T.cuda.block_idx("x") * 64 + 63 - tid
    tile = T.alloc_shared((64, 4), "float32", scope="shared.dyn", align=16)
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[row, :], pred=row < N)
    T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], tile.sub[tid, :], r)
    T.cuda.cta_sync()
    T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], r, tile.sub[63 - tid, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[mirrored, :], r, pred=mirrored < N)


def _cuda_like(*shape, index=0):
    """Stands in for a CUDA tensor on a machine without one."""
    return SimpleNamespace(shape=shape, dtype="float32", device=SimpleNamespace(type="cuda", index=index))


@pytest.fixture(scope="module")
def kernel():
    return tvm_tirx.compile(full_pool, target="cuda", arch=ARCH)


def _fake_launch(kernel, monkeypatch):
    """Record launches and raises instead of making them (no GPU here)."""
    calls = {"launch": [], "raise": []}
    monkeypatch.setitem(kernel.__dict__, "_function", lambda *args: calls["launch"].append(args))
    monkeypatch.setattr(kernel, "_dyn_limit", dynamic_smem_limit.DynamicSmemLimit(kernel.name))

    def fake_raise(launcher, *args):
        calls["raise"].append(dynamic_smem_limit.device_index(args))
        return 227 * KIB

    monkeypatch.setattr(dynamic_smem_limit, "raise_dynamic_smem_limit", fake_raise)
    return calls


def test_run_time_size_over_48_kib_reaches_the_launcher_after_one_raise_per_device(kernel, monkeypatch):
    # before: refused over 48 KiB ("apache-tvm 0.27's launcher does not raise ...")
    calls = _fake_launch(kernel, monkeypatch)
    a, b = _cuda_like(2 * ROWS, 4), _cuda_like(2 * ROWS, 4)
    for size in (100 * KIB, 100 * KIB, 200 * KIB, 227 * KIB):
        kernel(a, b, size)
    c, d = _cuda_like(ROWS, 4, index=1), _cuda_like(ROWS, 4, index=1)
    kernel(c, d, 100 * KIB)
    assert [args[2] for args in calls["launch"]] == [100 * KIB, 100 * KIB, 200 * KIB, 227 * KIB, 100 * KIB]
    assert calls["raise"] == [0, 1]  # once per device, before its first launch


def test_run_time_size_over_the_target_limit_is_refused_before_any_launch(kernel, monkeypatch):
    calls = _fake_launch(kernel, monkeypatch)
    with pytest.raises(ValueError, match=r"dynamic_smem_bytes = smem = 232449 with smem = 232449: over the 232448 bytes of shared memory a CTA may use on sm_90a"):
        kernel(_cuda_like(ROWS, 4), _cuda_like(ROWS, 4), 227 * KIB + 1)
    with pytest.raises(ValueError, match=r"the kernel's shared.dyn tensors use bytes \[0, 102400\)"):
        kernel(_cuda_like(ROWS, 4), _cuda_like(ROWS, 4), 100 * KIB - 1)
    assert calls == {"launch": [], "raise": []}


def test_a_failed_raise_still_launches_up_to_48_kib_and_names_the_reason(monkeypatch):
    limit = dynamic_smem_limit.DynamicSmemLimit("k")
    tries = []

    def failing(launcher, *args):
        tries.append(args)
        raise RuntimeError("tvm_tirx: cuStreamBeginCapture_v2 failed with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900)")

    monkeypatch.setattr(dynamic_smem_limit, "raise_dynamic_smem_limit", failing)
    args = (_cuda_like(1, 4),)
    limit.before(None, args, 48 * KIB)
    limit.before(None, args, 1 * KIB)
    assert len(tries) == 1
    with pytest.raises(RuntimeError, match=r"k: 65536 bytes of dynamic shared memory on cuda:0, over the 49152 bytes .*CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"):
        limit.before(None, args, 64 * KIB)
    assert len(tries) == 2  # tried again for the larger launch


def test_device_index_of_a_launch():
    assert dynamic_smem_limit.device_index((3, _cuda_like(1, index=2))) == 2
    assert dynamic_smem_limit.device_index((SimpleNamespace(device=SimpleNamespace(type="cuda")),)) == 0
    assert dynamic_smem_limit.device_index((1, 2.0)) == 0


# -- on the GPU -----------------------------------------------------------------------------


@pytest.mark.gpu
def test_100_kib_of_run_time_dynamic_shared_memory_runs(kernel, torch_cuda):
    torch = torch_cuda
    a = torch.arange(2 * ROWS * 4, dtype=torch.float32, device="cuda").reshape(2 * ROWS, 4)
    b = torch.full_like(a, float("nan"))
    kernel(a, b, 100 * KIB)
    torch.cuda.synchronize()
    expected = a.reshape(2, ROWS, 4).flip(1).reshape(2 * ROWS, 4)
    assert torch.equal(b, expected)


@pytest.mark.gpu
def test_run_time_sizes_grow_after_a_small_first_launch(torch_cuda):
    # apache-tvm's launcher alone: 1 KiB first, then 64 KiB -> CUDA_ERROR_INVALID_VALUE
    torch = torch_cuda
    kernel = tvm_tirx.compile(small_pool, target="cuda", arch=ARCH)
    a = torch.randn(1000, 4, device="cuda")
    for size in (1 * KIB, 64 * KIB, 200 * KIB, 48 * KIB, 227 * KIB, 100 * KIB):
        b = torch.full_like(a, float("nan"))
        kernel(a, b, size)
        torch.cuda.synchronize()
        assert torch.equal(a, b), size


@pytest.mark.gpu
def test_exported_library_raises_the_limit_with_the_helper(torch_cuda, tmp_path):
    # a program calling the library itself: a small launch first, then the helper (with
    # arguments of a size the kernel can already take), then 100 KiB
    import tvm

    torch = torch_cuda
    kernel = tvm_tirx.compile(small_pool, target="cuda", arch=ARCH)
    path = tmp_path / "small_pool.so"
    kernel.export(path)
    function = tvm.runtime.load_module(str(path))[kernel.name]
    a = torch.randn(1000, 4, device="cuda")
    for size, raise_first in ((1 * KIB, False), (1 * KIB, True), (100 * KIB, False), (227 * KIB, False)):
        if raise_first:
            limit = dynamic_smem_limit.raise_dynamic_smem_limit(function, a, torch.empty_like(a), size)
            assert limit == torch.cuda.get_device_properties(0).shared_memory_per_block_optin
        b = torch.full_like(a, float("nan"))
        function(a, b, size)
        torch.cuda.synchronize()
        assert torch.equal(a, b), size
