"""Debug builds reach every entry point (issue 44 item 6): detect_hangs and check_assumptions
through tvm.compile, the Relax offload, the torch operators' kernels, and a clear refusal for
kernels that sch.tensorize gave tile calls."""

import pytest
import tvm
from tvm import relax
from tvm.script import relax as R

import tvm_tirx
from tvm_tirx.build import debug
from tvm_tirx.build.pipeline import register_pipeline
from tvm_tirx.script import tirx as T

TARGET = {"kind": "cuda", "arch": "sm_90a"}
LOAD2D = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
HANG = "mbarrier wait timed out after"
ASSUME = "does not hold"


@T.function
def waits_and_assumes(A: T.Tensor((64, 64), "float32", align=16), B: T.Tensor((64, 64), "float32", align=16)):
    # one mbarrier wait (detect_hangs) and one assumption (check_assumptions)
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tile = T.alloc_shared((64, 64), "float32", align=128)
    bar = T.alloc_shared((1,), "uint64", align=8)
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(1))
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar, tx=T.uint32(16384))
        T.cuda.tile.apply(T.ptx[LOAD2D], tile, A, mbar=bar, coords=(0, 0))
    T.cuda.mbarrier_wait_phase(bar, 0)
    T.assume(A[0, 0] >= T.float32(0))
    for q in T.unroll(32):
        B[q * 2 + tid // 64, tid % 64] = tile[q * 2 + tid // 64, tid % 64]


def _cuda_source(executable) -> str:
    def walk(mod):
        yield mod
        for sub in mod.imports:
            yield from walk(sub)

    sources = [m.inspect_source() for m in walk(executable.mod) if m.kind == "cuda"]
    assert len(sources) == 1
    return sources[0]


def _tvm_compile(mod) -> str:
    return _cuda_source(tvm.compile(mod, target=tvm.target.Target(TARGET), tir_pipeline=register_pipeline()))


def _counts(source):
    return source.count(HANG), source.count(ASSUME)


# -- tvm.compile(..., tir_pipeline="tvm_tirx") --------------------------------------


def test_tvm_compile_builds_the_checks_inside_debug_build():
    mod = tvm.IRModule({"waits_and_assumes": waits_and_assumes})
    assert _counts(_tvm_compile(mod)) == (0, 0)
    with tvm_tirx.debug_build(detect_hangs=True):
        assert _counts(_tvm_compile(mod)) == (1, 0)
    with tvm_tirx.debug_build(check_assumptions=True):
        assert _counts(_tvm_compile(mod)) == (0, 1)
    with tvm_tirx.debug_build(detect_hangs=25, check_assumptions=True):
        source = _tvm_compile(mod)
    assert _counts(source) == (1, 1) and "timed out after 25 ms on mbarrier bar (init count 1" in source
    assert _counts(_tvm_compile(mod)) == (0, 0)  # the block is left: off again


def test_tvm_compile_builds_the_checks_from_the_environment(monkeypatch):
    mod = tvm.IRModule({"waits_and_assumes": waits_and_assumes})
    monkeypatch.setenv(debug.ENV_DETECT_HANGS, "1")
    monkeypatch.setenv(debug.ENV_CHECK_ASSUMPTIONS, "1")
    assert _counts(_tvm_compile(mod)) == (1, 1)
    with tvm_tirx.debug_build():  # a block says off, whatever the environment says
        assert _counts(_tvm_compile(mod)) == (0, 0)
    monkeypatch.setenv(debug.ENV_DETECT_HANGS, "0")
    monkeypatch.setenv(debug.ENV_CHECK_ASSUMPTIONS, "off")
    assert _counts(_tvm_compile(mod)) == (0, 0)


def test_pipeline_factory_takes_the_options_as_arguments():
    mod = tvm.IRModule({"waits_and_assumes": waits_and_assumes.with_attr("target", tvm.target.Target(TARGET))})
    register_pipeline()
    on, _, _ = tvm.tirx.get_tir_pipeline("tvm_tirx", detect_hangs=40, check_assumptions=True)
    off, _, _ = tvm.tirx.get_tir_pipeline("tvm_tirx")
    assert _counts(on(mod)["waits_and_assumes"].script()) == (1, 1)
    assert _counts(off(mod)["waits_and_assumes"].script()) == (0, 0)


def test_bad_environment_values_are_refused(monkeypatch):
    monkeypatch.setenv(debug.ENV_DETECT_HANGS, "soon")
    with pytest.raises(ValueError, match="TVM_TIRX_DETECT_HANGS='soon'"):
        debug.current_debug()
    monkeypatch.setenv(debug.ENV_DETECT_HANGS, "300")
    monkeypatch.setenv(debug.ENV_CHECK_ASSUMPTIONS, "2")
    with pytest.raises(ValueError, match="TVM_TIRX_CHECK_ASSUMPTIONS='2'"):
        debug.current_debug()
    monkeypatch.setenv(debug.ENV_CHECK_ASSUMPTIONS, "yes")
    assert debug.current_debug() == debug.DebugOptions(300, True)
    with pytest.raises(ValueError, match="detect_hangs must be 0"):
        with tvm_tirx.debug_build(detect_hangs=-1):
            pass


# -- tvm_tirx.compile ----------------------------------------------------------------


def test_tvm_tirx_compile_takes_the_block_and_its_options_win():
    with tvm_tirx.debug_build(detect_hangs=True, check_assumptions=True):
        # built once: the pipeline that tvm_tirx.compile runs adds no second copy
        assert _counts(tvm_tirx.compile(waits_and_assumes, arch="sm_90a").cuda_source) == (1, 1)
        plain = tvm_tirx.compile(waits_and_assumes, arch="sm_90a", options={"detect_hangs": False,
                                                                             "check_assumptions": False})
        assert _counts(plain.cuda_source) == (0, 0)
    assert _counts(tvm_tirx.compile(waits_and_assumes, arch="sm_90a").cuda_source) == (0, 0)


# -- the Relax offload -----------------------------------------------------------------


def _relax_module():
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((64, 64), "float32"))
    with bb.function("main", [x]):
        kernel = bb.add_func(waits_and_assumes, "waits_and_assumes")
        with bb.dataflow():
            y = bb.emit(relax.call_tir(kernel, (x,), R.Tensor((64, 64), "float32")))
            z = bb.emit_output(relax.op.add(y, x))
        bb.emit_func_output(z)
    return bb.get()


def _relax_source():
    exe = tvm.compile(_relax_module(), target=tvm.target.Target(TARGET), relax_pipeline="tvm_tirx",
                      tir_pipeline="tvm_tirx")
    return _cuda_source(exe)


def test_relax_build_takes_the_debug_options():
    import tvm_tirx.ops.relax  # noqa: F401  (registers the "tvm_tirx" Relax pipeline)

    assert _counts(_relax_source()) == (0, 0)
    with tvm_tirx.debug_build(detect_hangs=True, check_assumptions=True):
        assert _counts(_relax_source()) == (1, 1)


# -- the torch operators' kernels -------------------------------------------------------


def test_torch_op_kernels_are_built_with_the_environment_setting(monkeypatch):
    from tvm_tirx.ops import gemm_kernels

    key = gemm_kernels.GemmKey(n=256, k=128, in_dtype="bfloat16", out_dtype="bfloat16", arch="sm_90a")
    assert HANG not in gemm_kernels._compile(key).cuda_source
    monkeypatch.setenv(debug.ENV_DETECT_HANGS, "1")
    assert gemm_kernels._compile(key).cuda_source.count(HANG) == 2  # the producer's and the consumer's waits


def test_kernel_table_keeps_a_debug_build_apart(monkeypatch):
    from tvm_tirx.ops.kernel_table import KernelTable

    table = KernelTable(lambda key: (key, debug.current_debug()))
    plain = table.get("k")
    assert plain == ("k", debug.DebugOptions()) and table.get("k") is plain
    monkeypatch.setenv(debug.ENV_CHECK_ASSUMPTIONS, "1")
    checked = table.get("k")
    assert checked == ("k", debug.DebugOptions(0, True)) and table.get("k") is checked
    monkeypatch.delenv(debug.ENV_CHECK_ASSUMPTIONS)
    assert table.get("k") is plain


# -- scheduled kernels (sch.tensorize) --------------------------------------------------


def test_scheduled_kernels_refuse_a_debug_build():
    from tvm_tirx.schedule import tensor_intrin

    if not tensor_intrin.tensorize_supported():
        pytest.skip("Schedule.tensorize is not usable with this apache-tvm-ffi")
    from test_tensor_intrin import _vector_schedule

    mod = _vector_schedule("f32", 4).mod
    assert "ld.global.v4.b32" in _tvm_compile(mod)  # off: built as before
    with tvm_tirx.debug_build(detect_hangs=True):
        with pytest.raises(Exception, match="detect_hangs cannot be built into the scheduled kernel"):
            _tvm_compile(mod)
        with pytest.raises(ValueError, match="detect_hangs cannot be built into the scheduled kernel"):
            tvm_tirx.compile(mod, arch="sm_90a")
    with pytest.raises(ValueError, match="check_assumptions cannot be built into the scheduled kernel"):
        tvm_tirx.compile(mod, arch="sm_90a", options={"check_assumptions": True})
