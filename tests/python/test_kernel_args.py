"""Kernel arguments are checked before launch, with errors naming the parameter."""

from types import SimpleNamespace

import pytest
import tvm

import tvm_tirx

from kernels import read_next_row
from tvm_tirx.script import tirx as T


@pytest.fixture(scope="module")
def kernel():
    return tvm_tirx.compile(read_next_row, target="cuda", arch="sm_90a")


def test_argument_count(kernel):
    with pytest.raises(TypeError, match=r"expected 2 argument\(s\) \(A, B\), got 1"):
        kernel(object())


def test_not_a_tensor(kernel, torch_cpu):
    b = torch_cpu.zeros(64, 4)
    with pytest.raises(TypeError, match="argument 'A': expected a CUDA tensor"):
        kernel([1, 2, 3], b)


def test_wrong_dtype(kernel, torch_cpu):
    torch = torch_cpu
    with pytest.raises(ValueError, match="argument 'A': expected dtype float32, got float16"):
        kernel(torch.zeros(64, 4, dtype=torch.float16), torch.zeros(64, 4))


def test_wrong_shape(kernel, torch_cpu):
    torch = torch_cpu
    with pytest.raises(ValueError, match=r"argument 'A': expected shape \(64, 4\), got \(4, 64\)"):
        kernel(torch.zeros(4, 64), torch.zeros(64, 4))


def test_non_contiguous(kernel, torch_cpu):
    torch = torch_cpu
    with pytest.raises(ValueError, match=r"argument 'A': expected a contiguous row-major tensor"):
        kernel(torch.zeros(4, 64).t(), torch.zeros(64, 4))


def test_misaligned_pointer(kernel, torch_cpu):
    torch = torch_cpu
    base = torch.zeros(64 * 4 + 1)
    a = base[1:].view(64, 4)  # 4 bytes past a 16-byte boundary
    with pytest.raises(ValueError, match=r"argument 'A': .*align=16 bytes.*4 bytes past"):
        kernel(a, torch.zeros(64, 4))


def test_cpu_tensor(kernel, torch_cpu):
    torch = torch_cpu
    with pytest.raises(ValueError, match="argument 'A': expected a CUDA tensor, got one on cpu"):
        kernel(torch.zeros(64, 4), torch.zeros(64, 4))


def test_sources_and_script(kernel):
    assert "read_next_row_kernel" in kernel.cuda_source
    assert "T.cuda.tile.apply" in kernel.script()
    assert "read_next_row" in repr(kernel)


@T.function
def first_rows(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16), n: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :], pred=tid < n)
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r, pred=tid < n)


@pytest.fixture(scope="module")
def scalar_kernel():
    return tvm_tirx.compile(first_rows, target="cuda", arch="sm_90a")


@pytest.mark.parametrize(
    "value, error, message",
    [
        (2.5, TypeError, r"argument 'n': expected a Python int for a int32 scalar, got float"),
        (True, TypeError, r"argument 'n': expected a Python int for a int32 scalar, got bool"),
        ("3", TypeError, r"argument 'n': expected a Python int for a int32 scalar, got str"),
        (2**31, ValueError, r"argument 'n': 2147483648 does not fit int32 \(\[-2147483648, 2147483647\]\)"),
    ],
)
@pytest.mark.gpu
def test_scalar_argument(scalar_kernel, torch_cuda, value, error, message):
    a = torch_cuda.randn(64, 4, device="cuda")
    b = torch_cuda.full((64, 4), 7.0, device="cuda")
    with pytest.raises(error, match=message):
        scalar_kernel(a, b, value)
    scalar_kernel(a, b, 3)  # a good call still runs: rows 0..2 copied, the rest untouched
    torch_cuda.cuda.synchronize()
    assert torch_cuda.equal(b[:3], a[:3]) and bool((b[3:] == 7.0).all())


def _misaligned(torch, like):
    base = torch.full((like.numel() + 1,), 7.0, device=like.device)
    return base[1:].view(like.shape)


BAD = {
    "not a tensor": (TypeError, lambda torch, t: t.tolist()),
    "wrong dtype": (ValueError, lambda torch, t: t.to(torch.float16)),
    "wrong shape": (ValueError, lambda torch, t: t.reshape(4, 64)),
    "non-contiguous": (ValueError, lambda torch, t: t.t().contiguous().t()),
    "misaligned": (ValueError, _misaligned),
    "cpu tensor": (ValueError, lambda torch, t: t.cpu()),
}


@pytest.mark.gpu
@pytest.mark.parametrize("position", [0, 1], ids=["input A", "output B"])
@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_argument_launches_nothing(kernel, torch_cuda, case, position):
    torch = torch_cuda
    a = torch.randn(64, 4, device="cuda")
    b = torch.full((64, 4), 7.0, device="cuda")
    args = [a, b]
    error, make_bad = BAD[case]
    bad = make_bad(torch, args[position])
    args[position] = bad
    before = [x.clone() if hasattr(x, "clone") else None for x in args]
    with pytest.raises(error, match=f"argument '{'AB'[position]}'"):
        kernel(*args)
    torch.cuda.synchronize()
    # the kernel did not run: B still holds its sentinel, no argument changed
    assert torch.equal(b, torch.full((64, 4), 7.0, device="cuda"))
    for x, old in zip(args, before):
        if old is not None:
            assert torch.equal(x, old)
    if case == "misaligned":
        assert torch.equal(bad._base if bad._base is not None else bad, torch.full_like(bad._base, 7.0))


@pytest.mark.gpu
def test_too_few_arguments_launch_nothing(kernel, torch_cuda):
    torch = torch_cuda
    b = torch.full((64, 4), 7.0, device="cuda")
    with pytest.raises(TypeError, match="expected 2 argument"):
        kernel(b)
    torch.cuda.synchronize()
    assert torch.equal(b, torch.full((64, 4), 7.0, device="cuda"))


@pytest.mark.gpu
def test_good_arguments_after_bad_ones_run(kernel, torch_cuda):
    # the checks leave no state behind: a correct call after rejected ones works
    torch = torch_cuda
    a = torch.randn(64, 4, device="cuda")
    b = torch.zeros(64, 4, device="cuda")
    with pytest.raises(ValueError):
        kernel(a.cpu(), b)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, torch.roll(a, -1, 0))


N = tvm.tirx.Var("N", "int32")  # a symbolic extent with a name (T.int32() would print as "v")


@T.function
def first_n_rows(A: T.Tensor((N, 4), "float32", align=16), B: T.Tensor((N, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    if tid < N:
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)


@pytest.fixture(scope="module")
def symbolic_kernel():
    return tvm_tirx.compile(first_n_rows, target="cuda", arch="sm_90a")


def _cuda_like(*shape):
    """Stands in for a CUDA tensor on a machine without one (shape, dtype, device only)."""
    return SimpleNamespace(shape=shape, dtype="float32", device=SimpleNamespace(type="cuda"))


def test_symbolic_shape_binds_one_size_for_every_argument(symbolic_kernel):
    with pytest.raises(ValueError, match=r"argument 'B': expected shape \(N, 4\) with N = 10 .*got \(12, 4\)"):
        symbolic_kernel(_cuda_like(10, 4), _cuda_like(12, 4))
    with pytest.raises(ValueError, match=r"argument 'A': expected shape \(N, 4\), got \(10, 5\)"):
        symbolic_kernel(_cuda_like(10, 5), _cuda_like(10, 5))


@pytest.mark.gpu
def test_symbolic_shape_runs(symbolic_kernel, torch_cuda):
    torch = torch_cuda
    a = torch.randn(40, 4, device="cuda")
    b = torch.zeros(40, 4, device="cuda")
    symbolic_kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


# -- the compiled fast path (tvm_tirx.build.arguments.build_checker) ---------------------------------
# Built with cuda=False it takes CPU tensors, so every branch of the generated
# checks runs here: what the fast path accepts, and that everything else falls
# through to the complete check and raises its message.


def _cpu_checker(kernel):
    from tvm_tirx.build.arguments import build_checker

    return build_checker(kernel._params, kernel.name, cuda=False)


def test_fast_path_accepts_good_tensors_without_the_complete_check(kernel, torch_cpu, monkeypatch):
    from tvm_tirx.build.arguments import ParamSpec

    check = _cpu_checker(kernel)

    def complete_check(*args):
        raise AssertionError("the complete check ran for a good argument")

    monkeypatch.setattr(ParamSpec, "require", complete_check)
    check((torch_cpu.zeros(64, 4), torch_cpu.zeros(64, 4)))


@pytest.mark.parametrize("case", sorted(set(BAD) - {"cpu tensor"}))
@pytest.mark.parametrize("position", [0, 1], ids=["A", "B"])
def test_fast_path_rejects_what_the_complete_check_rejects(kernel, torch_cpu, case, position):
    check = _cpu_checker(kernel)
    args = [torch_cpu.randn(64, 4), torch_cpu.randn(64, 4)]
    error, make_bad = BAD[case]
    args[position] = make_bad(torch_cpu, args[position])
    with pytest.raises(error, match=f"argument '{'AB'[position]}'"):
        check(tuple(args))


def test_fast_path_checks_the_device(kernel, torch_cpu):
    # the kernel's own checker wants CUDA: a CPU tensor of the right kind is refused
    with pytest.raises(ValueError, match="argument 'A': expected a CUDA tensor, got one on cpu"):
        kernel._check((torch_cpu.zeros(64, 4), torch_cpu.zeros(64, 4)))


def test_fast_path_argument_count(kernel, torch_cpu):
    check = _cpu_checker(kernel)
    with pytest.raises(TypeError, match=r"expected 2 argument\(s\) \(A, B\), got 3"):
        check((torch_cpu.zeros(64, 4),) * 3)


def test_fast_path_symbolic_sizes_agree_across_arguments(symbolic_kernel, torch_cpu):
    check = _cpu_checker(symbolic_kernel)
    check((torch_cpu.zeros(10, 4), torch_cpu.zeros(10, 4)))
    check((torch_cpu.zeros(12, 4), torch_cpu.zeros(12, 4)))  # no size remembered between calls
    with pytest.raises(ValueError, match=r"argument 'B': expected shape \(N, 4\) with N = 10 .*got \(12, 4\)"):
        check((torch_cpu.zeros(10, 4), torch_cpu.zeros(12, 4)))
    with pytest.raises(ValueError, match=r"argument 'A': expected shape \(N, 4\), got \(10, 5\)"):
        check((torch_cpu.zeros(10, 5), torch_cpu.zeros(10, 5)))


@pytest.mark.parametrize(
    "value, error",
    [(3, None), (-(2**31), None), (2**31 - 1, None), (2**31, ValueError), (2.5, TypeError), (True, TypeError)],
)
def test_fast_path_scalars(scalar_kernel, torch_cpu, value, error):
    check = _cpu_checker(scalar_kernel)
    args = (torch_cpu.zeros(64, 4), torch_cpu.zeros(64, 4), value)
    if error is None:
        check(args)
    else:
        with pytest.raises(error, match="argument 'n'"):
            check(args)


def test_launcher_is_looked_up_once(kernel, monkeypatch):
    # Kernel.__call__ uses the function fetched on the first call, not executable[name] each time
    calls = []

    class CountingExecutable:
        def __getitem__(self, name):
            calls.append(name)
            return lambda *args: None

    monkeypatch.setattr(kernel, "_executable", CountingExecutable())
    kernel.__dict__.pop("_function", None)
    monkeypatch.setattr(kernel, "_check", lambda args: None)
    for _ in range(3):
        kernel(object(), object())
    assert calls == [kernel.name]
    kernel.__dict__.pop("_function", None)


# -- streams and CUDA graphs ------------------------------------------------------------------


@pytest.mark.gpu
def test_launches_on_torchs_current_stream(kernel, torch_cuda):
    torch = torch_cuda
    a = torch.randn(64, 4, device="cuda")
    c = torch.zeros(64, 4, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # ~30 ms of spinning ahead of the kernel on the side stream
        kernel(a, c)
    # back on the default stream, which does not wait for the side one: had the
    # kernel gone to the default stream, it would have run before this copy
    snapshot = c.clone()
    torch.cuda.synchronize()
    assert torch.equal(snapshot, torch.zeros(64, 4, device="cuda"))
    assert torch.equal(c, torch.roll(a, -1, 0))


@pytest.mark.gpu
def test_cuda_graph_capture_and_replay(kernel, torch_cuda):
    torch = torch_cuda
    a = torch.randn(64, 4, device="cuda")
    b = torch.zeros(64, 4, device="cuda")
    kernel(a, b)  # warm-up outside the capture (first call resolves the function)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    b.zero_()
    with torch.cuda.graph(graph):
        kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, torch.zeros(64, 4, device="cuda"))  # captured, not run
    for seed in range(3):
        a.copy_(torch.randn(64, 4, device="cuda", generator=torch.Generator("cuda").manual_seed(seed)))
        b.zero_()
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(b, torch.roll(a, -1, 0)), seed
