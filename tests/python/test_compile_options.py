"""compile(..., options=): CUDA compiler and ptxas flags; programmatic dependent launch."""

import re

import pytest
import tvm_ffi

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.build.options import CompileOptions, cuda_compiler_flags, parse_options
from tvm_tirx.build.export import _Reader
from tvm_tirx.script import tirx as T

from kernels import read_next_row

ARCH = "sm_90a"
LINE_INFO = re.compile(rb"\.nv_debug_line_sass|\.debug_line")


# -- parsing -----------------------------------------------------------------------------------


def test_options_are_split_into_ours_and_the_pass_config():
    opts = parse_options({"flags": ["-lineinfo"], "ptxas": "-v --warn-on-spills", "tirx.disable_vectorize": True})
    assert opts.flags == ("-lineinfo",)
    assert opts.ptxas == ("-v", "--warn-on-spills")
    assert opts.pass_config == {"tirx.disable_vectorize": True}
    assert opts.compiler_args() == ["-lineinfo", "--ptxas-options=-v", "--ptxas-options=--warn-on-spills"]
    assert parse_options(None) == CompileOptions()


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"flag": ["-lineinfo"]}, ValueError, "unknown option 'flag'"),
        ({"flags": [1]}, TypeError, r"options\['flags'\] must be a list of str"),
        ({"ptxas": {"-v": 1}}, TypeError, r"options\['ptxas'\] must be a list of str"),
        (["-lineinfo"], TypeError, "options must be a dict"),
    ],
)
def test_bad_options(options, error, message):
    with pytest.raises(error, match=message):
        tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH, options=options)


def test_detect_hangs_zero_and_false_are_off():
    assert parse_options({"detect_hangs": 0}).detect_hangs == 0
    assert parse_options({"detect_hangs": False}).detect_hangs == 0
    assert parse_options({"detect_hangs": True}).detect_hangs == 2000
    assert parse_options({"detect_hangs": 300}).detect_hangs == 300


@pytest.mark.parametrize(
    "value, error, message",
    [
        (-5, ValueError, r"options\['detect_hangs'\] must be 0 \(off\) or a positive number of milliseconds, got -5"),
        (10**13, ValueError, r"options\['detect_hangs'\] must be at most 4611686018427 ms .*int64"),
        (1.5, TypeError, r"options\['detect_hangs'\] must be a bool or an int"),
        ("2s", TypeError, r"options\['detect_hangs'\] must be a bool or an int"),
    ],
)
def test_bad_detect_hangs(value, error, message):
    with pytest.raises(error, match=message):
        parse_options({"detect_hangs": value})


def test_largest_detect_hangs_is_accepted():
    from tvm_tirx.build.options import MAX_HANG_TIMEOUT_MS

    assert parse_options({"detect_hangs": MAX_HANG_TIMEOUT_MS}).detect_hangs == MAX_HANG_TIMEOUT_MS


# -- the flags reach nvcc (Kernel.ptx / cubin / export) ------------------------------------------


@testing.requires_nvcc
def test_compiler_flags_reach_nvcc():
    plain = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    lineinfo = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH, options={"flags": ["-lineinfo"]})
    assert lineinfo.options.flags == ("-lineinfo",)
    assert not LINE_INFO.search(plain.cubin())
    assert LINE_INFO.search(lineinfo.cubin())
    assert ".loc" in lineinfo.ptx and ".loc" not in plain.ptx


@testing.requires_nvcc
def test_ptxas_flags_reach_ptxas():
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH, options={"ptxas": ["--no-such-flag"]})
    with pytest.raises(RuntimeError, match="ptxas.*Unknown option '-no-such-flag'"):
        kernel.cubin()
    o0 = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH, options={"ptxas": ["-O0"]})
    assert o0.cubin() != tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH).cubin()


# -- the flags reach apache-tvm's build (tvm_callback_cuda_compile) --------------------------------


def test_build_callback_passes_the_flags(monkeypatch):
    from tvm.support import nvcc

    calls = []
    monkeypatch.setattr(nvcc, "compile_cuda", lambda code, **kw: calls.append(kw) or b"binary")
    monkeypatch.setenv("TVM_CUDA_COMPILE_MODE", "nvrtc")
    opts = parse_options({"flags": ["-lineinfo", "-maxrregcount=64"], "ptxas": ["-v"]})
    with cuda_compiler_flags(opts):
        assert tvm_ffi.get_global_func("tvm_callback_cuda_compile")("code") == b"binary"
    assert calls == [
        {
            "target_format": "cubin",
            "options": ["-lineinfo", "-maxrregcount=64", "--ptxas-options=-v"],
            "compiler": "nvrtc",
        }
    ]
    # afterwards apache-tvm's own callback is back: it passes no options
    tvm_ffi.get_global_func("tvm_callback_cuda_compile")("code")
    assert len(calls) == 2 and calls[1].get("options") is None


def test_build_callback_nvcc_mode_makes_a_fatbin(monkeypatch):
    from tvm.support import nvcc

    calls = []
    monkeypatch.setattr(nvcc, "compile_cuda", lambda code, **kw: calls.append(kw) or b"binary")
    monkeypatch.setenv("TVM_CUDA_COMPILE_MODE", "nvcc")
    with cuda_compiler_flags(parse_options({"flags": ["-lineinfo"]})):
        tvm_ffi.get_global_func("tvm_callback_cuda_compile")("code")
    assert calls == [{"target_format": "fatbin", "options": ["-lineinfo"], "compiler": "nvcc"}]


@testing.requires_nvcc
def test_build_callback_compiles_with_the_flags(monkeypatch):
    # the real thing, as the GPU machine's build calls it (nvcc mode: nvcc is on this machine)
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    monkeypatch.setenv("TVM_CUDA_COMPILE_MODE", "nvcc")
    with kernel.target, cuda_compiler_flags(parse_options({"flags": ["-lineinfo"]})):
        fatbin = bytes(tvm_ffi.get_global_func("tvm_callback_cuda_compile")(kernel.cuda_source))
    assert LINE_INFO.search(fatbin)


def test_no_flags_leave_apache_tvms_callback_alone(monkeypatch):
    def replace(*args, **kwargs):
        raise AssertionError("the build callback was replaced without flags")

    monkeypatch.setattr(tvm_ffi, "register_global_func", replace)
    with cuda_compiler_flags(parse_options({"tirx.disable_vectorize": True})):
        pass


# -- programmatic dependent launch ----------------------------------------------------------------


@T.function
def pdl_consumer(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64, programmatic_dependent_launch=True))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    T.ptx["griddepcontrol.wait"]()  # what the previous kernel wrote is visible after this
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)


@T.function
def pdl_producer(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[(tid + 1) % 64, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)
    T.ptx["griddepcontrol.launch_dependents"]()  # the dependent kernel may start now


def _launch_params(kernel) -> dict:
    """``{kernel function: launch parameter tags}`` of the built CUDA module (serialized form,
    laid out as tvm_tirx.build.export describes)."""
    blob = tvm_ffi.get_global_func("runtime.ModulePackImportsToTensor")(kernel.executable.mod).numpy().tobytes()
    reader = _Reader(blob)
    reader.u64()
    indptr = [reader.u64() for _ in range(reader.u64())]
    [reader.u64() for _ in range(reader.u64())]
    found = {}
    for _ in range(len(indptr) - 1):
        kind = reader.string()
        if kind == b"_lib":
            continue
        payload = reader.string()
        if kind != b"cuda":
            continue
        cuda = _Reader(payload)
        cuda.string()  # format
        for _ in range(cuda.u64()):
            cuda.string()  # key
            name = cuda.string().decode()
            cuda.raw(4 * cuda.u64())
            found[name] = [cuda.string().decode() for _ in range(cuda.u64())]
            cuda.raw(4 * cuda.u64())
    return found


def test_programmatic_dependent_launch_reaches_the_launcher():
    pdl = tvm_tirx.compile(pdl_consumer, target="cuda", arch=ARCH)
    plain = tvm_tirx.compile(pdl_producer, target="cuda", arch=ARCH)
    assert _launch_params(pdl) == {
        "pdl_consumer_kernel": ["blockIdx.x", "threadIdx.x", "tirx.use_programtic_dependent_launch"]
    }
    assert _launch_params(plain) == {"pdl_producer_kernel": ["blockIdx.x", "threadIdx.x"]}


@testing.requires_nvcc
def test_griddepcontrol_assembles_for_sm_90a():
    for func, opcode in ((pdl_consumer, "griddepcontrol.wait;"), (pdl_producer, "griddepcontrol.launch_dependents;")):
        kernel = tvm_tirx.compile(func, target="cuda", arch=ARCH)
        assert opcode in kernel.ptx
        assert testing.assemble(kernel)


def test_programmatic_dependent_launch_with_clusters_is_refused():
    with pytest.raises(ValueError, match="programmatic_dependent_launch with cluster"):
        T.cuda.LaunchConfig(grid=2, block=64, cluster=2, programmatic_dependent_launch=True)


def test_programmatic_dependent_launch_needs_device_entry_at_the_top_level():
    with pytest.raises(Exception, match="T.device_entry must be at the top level of the kernel"):

        @T.function
        def late_entry(A: T.Tensor((64, 4), "float32", align=16)):
            with T.attr(0, "pragma_note", 1):  # a frame opened before the device entry
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64, programmatic_dependent_launch=True))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])


@pytest.mark.gpu
def test_programmatic_dependent_launch_runs(torch_cuda):
    torch = torch_cuda
    producer = tvm_tirx.compile(pdl_producer, target="cuda")
    consumer = tvm_tirx.compile(pdl_consumer, target="cuda")
    for seed in range(20):
        a = torch.randn(64, 4, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
        mid = torch.zeros_like(a)
        out = torch.zeros_like(a)
        producer(a, mid)
        consumer(mid, out)  # may start early; griddepcontrol.wait orders its reads after producer
        torch.cuda.synchronize()
        assert torch.equal(out, torch.roll(a, -1, 0)), seed


@pytest.mark.gpu
def test_compile_options_build_and_run(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(
        read_next_row, target="cuda", options={"flags": ["-lineinfo", "-maxrregcount=32"], "ptxas": ["-v"]}
    )
    a = torch.randn(64, 4, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, torch.roll(a, -1, 0))
