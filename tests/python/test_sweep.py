"""tvm_tirx.testing.sweep and do_bench: failures are reported, not raised; the fastest wins.

Timing needs a GPU; here a stand-in timer returns fixed times, so what is
tested is the sweep's bookkeeping: which configurations compile, which are
dropped and why, which one is the best.
"""

import pytest

from tvm_tirx import testing
from tvm_tirx.script import tirx as T


def make_copy(offset: int, block: int = 64):
    """A row copy; ``offset`` > 0 reads past the end (a contract error found when compiling)."""
    if block > 1024:
        raise ValueError(f"block {block} is too large")

    @T.function
    def copy(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=block))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid + offset, :])
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)

    return copy


CONFIGS = [
    {"offset": 0},
    {"offset": 1},  # out of bounds: TileError
    {"offset": 0, "block": 32},
    {"offset": 0, "block": 2048},  # make_kernel itself raises
]


class FakeTimer:
    """Returns the given medians in turn (ms), recording how often it was asked."""

    def __init__(self, medians):
        self.medians = list(medians)
        self.calls = 0

    def __call__(self, fn):
        self.calls += 1
        return testing.Timing(median=self.medians.pop(0), spread=0.0)


def _check(result, timer):
    rows = result.rows
    assert [r.config for r in rows] == CONFIGS
    assert rows[0].error is None and rows[2].error is None
    assert rows[1].error.startswith("TileError:") and "ld.global.v4.b32" in rows[1].error
    assert rows[3].error == "ValueError: block 2048 is too large"
    assert rows[1].kernel is None and rows[3].kernel is None and rows[1].timing is None
    assert timer.calls == 2  # only what compiled was timed
    assert result.best is rows[2] and result.best.timing.median == 1.0
    text = result.table()
    assert "dropped: TileError" in text and "<- best" in text and "block=2048: dropped: ValueError" in text


def test_sweep_reports_failing_configurations_in_process():
    timer = FakeTimer([2.0, 1.0])
    result = testing.sweep(make_copy, CONFIGS, (), arch="sm_90a", workers=0, progress=False, timer=timer)
    _check(result, timer)


@pytest.mark.slow
def test_sweep_compiles_in_worker_processes():
    timer = FakeTimer([2.0, 1.0])
    result = testing.sweep(make_copy, CONFIGS, (), arch="sm_90a", workers=2, progress=True, timer=timer)
    _check(result, timer)
    assert "__global__" in result.rows[0].kernel.cuda_source  # loaded here (from the cache the workers filled)


_UNGUARDED_SCRIPT = """
from tvm_tirx import testing
from test_sweep import make_copy

# no if __name__ == "__main__": guard -- each spawned worker re-runs this line and fails
result = testing.sweep(make_copy, [{"offset": 0}], (), arch="sm_90a", workers=1, progress=False, measure=False)
print(result.table())
"""


@pytest.mark.slow
def test_sweep_names_the_main_guard_when_its_workers_break(tmp_path):
    import os
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(_UNGUARDED_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    table = out.stdout
    assert "dropped: worker process failed (BrokenProcessPool" in table, out.stdout + out.stderr
    assert "if __name__ == '__main__'" in table and "workers=0" in table, table


def test_sweep_without_timing():
    result = testing.sweep(make_copy, CONFIGS[:2], (), arch="sm_90a", workers=0, progress=False, measure=False)
    assert result.best is None and result.rows[0].timing is None and result.rows[0].kernel is not None
    assert result.rows[1].error.startswith("TileError:")
    assert "offset=0: compiled" in result.table()


def test_sweep_args_may_depend_on_the_configuration():
    seen = []

    def timer(fn):
        return testing.Timing(median=1.0, spread=0.0)

    def args(config):
        seen.append(config["offset"])
        return ()

    testing.sweep(make_copy, CONFIGS[:2], args, arch="sm_90a", workers=0, progress=False, timer=timer)
    assert seen == [0]  # asked for the configuration that compiled


def test_do_bench_needs_a_gpu():
    if testing.has_cuda():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match="do_bench needs"):
        testing.do_bench(lambda: None)


def test_do_bench_rejects_no_runs():
    with pytest.raises(ValueError, match="runs must be at least 1"):
        testing.do_bench(lambda: None, runs=0)


@pytest.mark.gpu
def test_do_bench_times_gpu_work(torch_cuda):
    torch = torch_cuda
    x = torch.randn(1 << 24, device="cuda")
    small = testing.do_bench(lambda: x[: 1 << 10].mul_(1.0), runs=20)
    large = testing.do_bench(lambda: x.mul_(1.0), runs=20)
    assert len(small.samples) == 20 and small.spread >= 0
    assert large.median > small.median  # 16 Mi elements take longer than 1 Ki


@pytest.mark.gpu
def test_sweep_on_the_gpu(torch_cuda):
    torch = torch_cuda
    a = torch.randn(64, 4, device="cuda")
    b = torch.zeros_like(a)
    result = testing.sweep(make_copy, CONFIGS, (a, b), workers=0, progress=False)
    assert result.best is not None and result.best.config in (CONFIGS[0], CONFIGS[2])
    assert result.rows[1].error.startswith("TileError:")
    result.rows[0].kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)
