"""Run-time launch sizes: ``LaunchConfig(grid=T.ceildiv(N, 64), dynamic_smem_bytes=...)``
with expressions of the kernel's parameters -- compile, assemble, the host's launch
arguments, the tail rule, and the checks ``Kernel.__call__`` makes before a launch."""

import math
from types import SimpleNamespace

import pytest
import tvm
import tvm_ffi

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T

ARCH = "sm_90a"
N = T.dynamic("N")


@T.function
def copy_rows(A: T.Tensor((N, 4), "float32", align=16), B: T.Tensor((N, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(N, 64), block=64))
    row = T.cuda.block_idx("x") * 64 + T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    if row < N:
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[row, :])
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[row, :], r)


@T.function
def scale_first_n(A: T.Tensor((65536,), "float32", align=16), n: T.int32, s: T.float32):
    # a grid from a scalar parameter; the tail guarded by pred=, and the author's
    # promise that n is within A (the bounds proof needs it: nothing else bounds n)
    T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(n, 256), block=256))
    i = T.cuda.block_idx("x") * 256 + T.cuda.thread_idx("x")
    T.assume(n <= 65536)
    r = T.alloc_local((1,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[i : i + 1], pred=i < n)
    T.cuda.tile.apply(T.ptx["mul.rn.f32"], r, r, s)
    T.cuda.tile.apply(T.ptx["st.global.f32"], A.sub[i : i + 1], r, pred=i < n)


@T.function
def staged_rows(A: T.Tensor((N, 4), "float32", align=16), B: T.Tensor((N, 4), "float32", align=16), smem: T.int32):
    # dynamic shared memory of a run-time size: the carve-out uses its first 1024 bytes
    T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(N, 64), block=64, dynamic_smem_bytes=smem))
    # (each thread stores the row another thread loaded)
    tid = T.cuda.thread_idx("x")
    row = T.cuda.block_idx("x") * 64 + tid
    mirrored = T.cuda.block_idx("x") * 64 + 63 - tid
    tile = T.alloc_shared((64, 4), "float32", scope="shared.dyn", align=16)
    r = T.alloc_local((4,), "float32")
    if row < N:
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[row, :])
        T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], tile.sub[tid, :], r)
    T.cuda.cta_sync()
    if mirrored < N:
        T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], r, tile.sub[63 - tid, :])
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[mirrored, :], r)


@pytest.fixture(scope="module")
def kernels():
    return {f.attrs["global_symbol"]: tvm_tirx.compile(f, target="cuda", arch=ARCH) for f in (copy_rows, scale_first_n, staged_rows)}


def _cuda_like(*shape, dtype="float32"):
    """Stands in for a CUDA tensor on a machine without one (shape, dtype, device only)."""
    return SimpleNamespace(shape=shape, dtype=dtype, device=SimpleNamespace(type="cuda"))


# -- compile, assemble, and the host computes the launch -----------------------------------


@pytest.mark.parametrize("name", ["copy_rows", "scale_first_n", "staged_rows"])
def test_run_time_launch_compiles_and_assembles(kernels, name):
    kernel = kernels[name]
    assert "__global__" in kernel.cuda_source
    if testing.has_nvcc():
        assert testing.assemble(kernel)


def _launch_args(func, name):
    """The launch arguments of the host's call of the device kernel (apache-tvm's pipeline)."""
    from tvm.tirx import compilation_pipeline as cp

    target = tvm.target.Target({"kind": "cuda", "arch": ARCH}, host="llvm")
    with target:
        mod = tvm.IRModule({name: testing.lower(func)})
    host = cp.tirx_pipeline()[0](tvm.tirx.transform.BindTarget(target)(mod))[name]
    calls = []
    tvm_ffi.structural_walk(host.body, (tvm.ir.Call, calls.append))
    (launch,) = [c for c in calls if c.op.name == "tirx.call_ffi_kernel"]
    return launch


def test_host_code_computes_the_grid_from_the_arguments():
    launch = _launch_args(copy_rows, "copy_rows")
    assert list(launch.attrs.launch_params) == ["blockIdx.x", "threadIdx.x"]
    grid, block = launch.args[-2:]
    assert str(grid) == "(N + 63) // 64" and int(block) == 64


def test_host_code_computes_the_dynamic_shared_memory_size_from_the_arguments():
    launch = _launch_args(staged_rows, "staged_rows")
    assert list(launch.attrs.launch_params) == ["blockIdx.x", "threadIdx.x", "tirx.use_dyn_shared_memory"]
    grid, _, size = launch.args[-3:]
    assert str(grid) == "(N + 63) // 64" and "smem" in str(size)


def test_grid_dim_is_the_run_time_extent():
    @T.function
    def k(A: T.Tensor((N,), "int32", align=4)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(N, 32), block=32))
        T.evaluate(T.cuda.grid_dim("x") + T.cuda.grid_dim("y"))

    assert "T.evaluate((N + 32 - 1) // 32 + 1)" in k.script()


# -- the tail rule ---------------------------------------------------------------------------


def test_unguarded_tail_is_rejected_naming_the_bound():
    @T.function
    def unguarded(A: T.Tensor((N, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(N, 64), block=64))
        row = T.cuda.block_idx("x") * 64 + T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[row, :])  # UNGUARDED

    with pytest.raises(TileError) as info:
        tvm_tirx.compile(unguarded, target="cuda", arch=ARCH)
    err = info.value
    assert err.rule == "view not provably within the tensor's bounds"
    assert "bytes within [0, N * 16) of A (N * 4 x float32)" in err.expected
    assert err.found.endswith("threadIdx.x * 16 + 16 <= N * 16 does not follow (guard the access with if or pred=, "
                              "or state what the prover cannot derive with T.assume(cond))"), err.found
    assert err.operand == "src (operand 2)"


def test_unguarded_tail_of_a_static_tensor_is_rejected():
    # the grid follows n; nothing says n <= 65536 / 256 CTAs' worth of A
    @T.function
    def unguarded(A: T.Tensor((65536,), "float32", align=16), n: T.int32):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(n, 256), block=256))
        i = T.cuda.block_idx("x") * 256 + T.cuda.thread_idx("x")
        r = T.alloc_local((1,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[i : i + 1])

    with pytest.raises(TileError, match=r"not provably within the tensor's bounds: expected bytes within \[0, 262144\) of A \(65536 x float32\)"):
        testing.lower(unguarded)


def test_guarded_tail_is_accepted(kernels):
    # `if row < N` (copy_rows) and pred=i < n (scale_first_n) both lower
    assert testing.count_ptx(testing.lower(copy_rows)) == 2
    assert testing.count_ptx(testing.lower(scale_first_n)) == 3


def test_a_guard_does_not_hide_a_provable_overrun():
    # in a run-time grid, an access provably past the tensor at some point is still rejected
    @T.function
    def past(A: T.Tensor((64, 4), "float32", align=16), n: T.int32):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(n, 64), block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        if tid < 64:
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid + 1, :])

    with pytest.raises(TileError, match="provably out of the tensor's bounds.*tid=63|provably out of the tensor's bounds.*v_1=63"):
        testing.lower(past)


# -- Kernel.__call__ checks the launch sizes its arguments give ------------------------------


def test_grid_of_zero_ctas_is_refused_before_launch(kernels):
    with pytest.raises(ValueError, match=r"copy_rows: grid.x = \(N \+ 64 - 1\) // 64 = 0 with N = 0: a CUDA grid has 1 to"):
        kernels["copy_rows"](_cuda_like(0, 4), _cuda_like(0, 4))
    with pytest.raises(ValueError, match=r"scale_first_n: grid.x = .* = 0 with n = -5"):
        kernels["scale_first_n"](_cuda_like(65536), -5, 2.0)


def test_argument_checks_come_first(kernels):
    # symbolic sizes that disagree are reported as such, not as a launch size
    with pytest.raises(ValueError, match=r"argument 'B': expected shape \(N, 4\) with N = 10"):
        kernels["copy_rows"](_cuda_like(10, 4), _cuda_like(12, 4))
    with pytest.raises(TypeError, match="argument 'n'"):
        kernels["scale_first_n"](_cuda_like(65536), 1.5, 2.0)


def _recording(kernel, monkeypatch):
    calls = []
    monkeypatch.setitem(kernel.__dict__, "_function", lambda *args: calls.append(args))
    # no raise of the dynamic shared memory limit (it would capture a launch of the fake)
    monkeypatch.setattr(kernel, "_dyn_limit", SimpleNamespace(before=lambda *args: None))
    return calls


def test_good_run_time_sizes_reach_the_launcher(kernels, monkeypatch):
    kernel = kernels["staged_rows"]
    calls = _recording(kernel, monkeypatch)
    a, b = _cuda_like(1000, 4), _cuda_like(1000, 4)
    kernel(a, b, 1024)
    assert calls == [(a, b, 1024)]


def test_dynamic_shared_memory_below_the_carve_outs_is_refused(kernels, monkeypatch):
    kernel = kernels["staged_rows"]
    calls = _recording(kernel, monkeypatch)
    with pytest.raises(ValueError, match=r"dynamic_smem_bytes = smem = 1000 with smem = 1000: the kernel's shared.dyn tensors use bytes \[0, 1024\)"):
        kernel(_cuda_like(10, 4), _cuda_like(10, 4), 1000)
    assert not calls


def test_dynamic_shared_memory_over_the_limit_is_refused(kernels, monkeypatch):
    kernel = kernels["staged_rows"]
    calls = _recording(kernel, monkeypatch)
    with pytest.raises(ValueError, match=r"= 300000 with smem = 300000: over the 232448 bytes of shared memory a CTA may use on sm_90a"):
        kernel(_cuda_like(10, 4), _cuda_like(10, 4), 300000)
    assert not calls


def test_grid_y_over_cuda_limit_is_refused(monkeypatch):
    @T.function
    def tall(A: T.Tensor((N,), "float32", align=4)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(1, N), block=32))
        T.evaluate(0)

    kernel = tvm_tirx.compile(tall, target="cuda", arch=ARCH)
    calls = _recording(kernel, monkeypatch)
    kernel(_cuda_like(65535), )
    with pytest.raises(ValueError, match=r"grid.y = N = 65536 with N = 65536: a CUDA grid has 1 to 65535 CTAs along y"):
        kernel(_cuda_like(65536))
    assert len(calls) == 1


def test_static_launch_has_no_launch_size_check():
    from tvm_tirx.build.launch_sizes import LaunchSizes

    @T.function
    def fixed(A: T.Tensor((N, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=64, dynamic_smem_bytes=1024))
        T.evaluate(0)

    assert LaunchSizes.of(fixed, "fixed", ARCH) is None


# -- what stays compile-time -----------------------------------------------------------------


def test_run_time_block_is_rejected():
    with pytest.raises(ValueError, match=r"block extent .* is a run-time value; block extents are ints"):
        T.cuda.LaunchConfig(grid=1, block=N)


def test_run_time_grid_with_cluster_is_rejected():
    with pytest.raises(ValueError, match="run-time grid .* with cluster"):
        T.cuda.LaunchConfig(grid=T.ceildiv(N, 2) * 2, block=32, cluster=2)


def test_dynamic_smem_bytes_must_be_an_integer():
    with pytest.raises(ValueError, match="dynamic_smem_bytes must be an int >= 0 or an integer expression"):
        T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=T.float32(4))
    assert T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=T.int32(4)).dynamic_smem_bytes == 4


def test_carve_out_provably_past_a_run_time_size_is_rejected():
    with pytest.raises(TileError, match="carve-out past the declared dynamic shared memory"):

        @T.function
        def k(A: T.Tensor((N,), "float32", align=4)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=T.min(N, 512)))
            T.alloc_shared((256,), "float32", scope="shared.dyn")


def test_size_reading_an_unknown_variable_is_refused():
    from tvm_tirx.build.launch_sizes import LaunchSizes

    m = T.dynamic("M")

    # the parser's well-formedness check refuses this kernel first; LaunchSizes does too
    @T.function(check_well_formed=False)
    def k(A: T.Tensor((N,), "float32", align=4)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=m, block=32))
        T.evaluate(0)

    with pytest.raises(ValueError, match="grid.x = M reads M, which is neither a scalar parameter"):
        LaunchSizes.of(k, "k", ARCH)


# -- T.dynamic -------------------------------------------------------------------------------


def test_dynamic_names_the_extent():
    n = T.dynamic("rows")
    assert isinstance(n, tvm.ir.Var) and n.name == "rows" and str(n.ty.dtype) == "int32"
    assert str(T.dynamic("big", "int64").ty.dtype) == "int64"
    with pytest.raises(ValueError, match="identifier"):
        T.dynamic("2n")
    with pytest.raises(ValueError, match="int32"):
        T.dynamic("n", "float32")


# -- on the GPU ------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1000, 70001])
def test_run_time_grid_runs(kernels, torch_cuda, rows):
    torch = torch_cuda
    a = torch.randn(rows, 4, device="cuda")
    b = torch.full((rows, 4), float("nan"), device="cuda")
    kernels["copy_rows"](a, b)
    x = torch.randn(65536, device="cuda")
    expected = x.clone()
    expected[:rows] *= 3.0
    kernels["scale_first_n"](x, min(rows, 65536), 3.0)
    torch.cuda.synchronize()
    assert torch.equal(a, b)
    assert torch.equal(x, expected)


@pytest.mark.gpu
@pytest.mark.parametrize("rows, smem", [(100, 1024), (5000, 48 * 1024)])
def test_run_time_dynamic_shared_memory_runs(kernels, torch_cuda, rows, smem):
    torch = torch_cuda
    a = torch.randn(rows, 4, device="cuda")
    b = torch.full((rows, 4), float("nan"), device="cuda")
    kernels["staged_rows"](a, b, smem)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


def test_sizes_are_computed_like_the_host_computes_them():
    # the translated arithmetic (C division for truncdiv/truncmod) and the fallback through
    # apache-tvm's arithmetic (a shift) give the values the expressions have
    from tvm_tirx.build.launch_sizes import LaunchSizes

    @T.function
    def k(A: T.Tensor((N,), "float32", align=4), n: T.int32):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(T.truncdiv(n, 4) + T.truncmod(n, 3), (n >> 6) + 1), block=32))
        T.evaluate(0)

    sizes = LaunchSizes.of(k, "k", ARCH)
    (_, x), (_, y) = sizes.grid
    for n in (640, 7, -7, -640):
        assert x.compute((None, n)) == int(n / 4) + int(math.fmod(n, 3))
        assert y.compute((None, n)) == (n >> 6) + 1
    with pytest.raises(ValueError, match=r"k: grid.x = .* = -161 with n = -640: a CUDA grid has 1 to"):
        sizes((_cuda_like(4), -640))


def test_a_select_grid_is_translated_to_python_not_folded_per_call(monkeypatch):
    # the persistent attention grid is T.Select(L <= bound, T.min(sms, tiles), tiles): it is
    # computed by translated Python, without apache-tvm's arithmetic on every launch
    from tvm_tirx.build import launch_sizes

    @T.function
    def k(A: T.Tensor((N,), "float32", align=4), n: T.int32):
        T.device_entry(launch=T.cuda.LaunchConfig(
            grid=T.Select(tvm.tirx.And(n <= 4096, tvm.tirx.Not(n == 7)), T.min(132, n), n + 1), block=32))
        T.evaluate(0)

    sizes = launch_sizes.LaunchSizes.of(k, "k", ARCH)
    monkeypatch.setattr(launch_sizes, "fold", lambda *a: pytest.fail("the grid was folded by apache-tvm"))
    ((_, x),) = sizes.grid
    for n, want in ((1, 1), (7, 8), (200, 132), (4096, 132), (4097, 4098)):
        assert x.compute((None, n)) == want
