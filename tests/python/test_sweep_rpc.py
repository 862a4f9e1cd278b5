"""tvm_tirx.testing.sweep through apache-tvm's RPC: a tracker and servers on this machine.

The CPU tests start a ``tvm.rpc.tracker.Tracker`` and two ``tvm.rpc.Server``
processes registered with it under one key, and sweep a tile kernel's
configurations through :class:`~tvm_tirx.testing.RPCRunner`.  Without a GPU
the kernels cannot run on the servers, so these tests plug in an ``export``
that writes a CPU function (under the kernel's name, its work scaled by the
configuration) and time it on the servers' CPU with apache-tvm's
``time_evaluator``: what is tested is the path -- compile and export here,
the tracker handing out both servers, upload, remote load, arguments copied to
the server, timing there, one row per configuration with its server -- and that
failures (a contract error here, a library a server cannot load) land in their
rows.  The ``gpu`` test sweeps the CUDA kernel itself on a server on this
machine's GPU.
"""

import contextlib
import dataclasses
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tvm
from tvm import rpc
from tvm.script import tirx as S

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.build.cache import has_cuda_loader
from tvm_tirx.script import tirx as T

pytest.importorskip("tornado", reason="tvm.rpc's tracker needs tornado")
pytest.importorskip("cloudpickle", reason="tvm.rpc's server and tracker processes need cloudpickle")

ELEMENTS = 1 << 14


def make_copy(block: int = 64, offset: int = 0, scale: int = 1, broken: bool = False):
    """A row copy; ``offset`` > 0 reads past the end (a TileError).  ``scale`` and
    ``broken`` are read by :func:`cpu_export` only."""
    del scale, broken

    @T.function
    def copy(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=block))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid + offset, :])
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)

    return copy


def cpu_export(kernel, config, path):
    """Stand-in for Kernel.export on CPU servers: ``B = A + 1`` over ``scale`` x ELEMENTS
    floats, named like the kernel; ``broken=True`` writes a file no server can load."""
    if config.get("broken"):
        with open(path, "wb") as f:
            f.write(b"not a shared library")
        return
    n = ELEMENTS * config.get("scale", 1)

    @S.prim_func
    def add_one(A: S.Buffer((n,), "float32"), B: S.Buffer((n,), "float32")):
        for i in range(n):
            B[i] = A[i] + S.float32(1)

    tvm.compile(tvm.IRModule({kernel.name: add_one.with_attr("global_symbol", kernel.name)}), target="llvm").export_library(path)


def cpu_args(config):
    n = ELEMENTS * config.get("scale", 1)
    return (np.arange(n, dtype="float32"), np.zeros(n, dtype="float32"))


@contextlib.contextmanager
def local_cluster(servers: int, timeout: float = 90.0):
    """A tracker and ``servers`` RPC servers on 127.0.0.1 under a key of their own:
    ``(tracker "host:port", key, ["host:port" of each server])``; all stopped on exit."""
    from tvm.rpc.tracker import Tracker  # pylint: disable=import-outside-toplevel  # needs tornado

    base = random.randint(20000, 50000)  # each process its own ports: ranges are scanned from here
    tracker = Tracker(host="127.0.0.1", port=base, port_end=base + 200, silent=True)
    key = f"tvm-tirx-test-{os.getpid()}-{base}"
    started = []

    def start(i):
        # a port range per server: two servers binding one port at once could both succeed
        lo = tracker.port + 200 + 100 * i
        server = rpc.Server(host="127.0.0.1", port=lo, port_end=lo + 100, tracker_addr=("127.0.0.1", tracker.port), key=key, silent=True)
        started.append(server)
        return server

    try:
        with ThreadPoolExecutor(servers) as pool:  # each server starts a Python process: start them together
            ports = [s.port for s in pool.map(start, range(servers))]
        runner = testing.RPCRunner(("127.0.0.1", tracker.port), key)
        deadline = time.monotonic() + timeout
        while len(runner.servers()) < servers:
            assert time.monotonic() < deadline, f"the servers did not register: {runner.servers()}"
            time.sleep(0.2)
        yield f"127.0.0.1:{tracker.port}", key, [f"127.0.0.1:{p}" for p in ports]
    finally:
        for server in started:
            server.terminate()
        tracker.terminate()


@pytest.fixture(scope="module")
def cluster():
    with local_cluster(2) as found:
        yield found


CONFIGS = [
    {"block": 64, "scale": 1},
    {"block": 32, "scale": 4},
    {"offset": 1},  # out of bounds: a TileError here, never sent
    {"block": 64, "scale": 2},
    {"block": 32, "scale": 1, "broken": True},  # the server cannot load it
    {"block": 32, "scale": 2},
]


class CountingMeasure:
    """The default measurement, counted: a plugged-in ``measure``."""

    def __init__(self):
        self.calls = 0

    def __call__(self, module, name, device, args):
        self.calls += 1
        # >= 5 x 20 ms per configuration: both requests are in flight together
        return testing.remote_time_evaluator(module, name, device, args, number=2, repeat=5, min_repeat_ms=20)


def test_sweep_through_a_tracker_uses_both_servers_and_reports_failures(cluster):
    tracker, key, servers = cluster
    measure = CountingMeasure()
    runner = testing.RPCRunner(tracker, key, device="cpu", export=cpu_export, measure=measure, session_timeout=60)
    result = testing.sweep(make_copy, CONFIGS, cpu_args, arch="sm_90a", workers=0, progress=False, runner=runner)
    rows = result.rows
    assert [r.config for r in rows] == CONFIGS
    good = [rows[i] for i in (0, 1, 3, 5)]
    for row in good:
        assert row.error is None and row.server in servers, (row.error, row.server)
        assert len(row.timing.samples) == 5 and row.timing.median > 0 and row.timing.spread >= 0
        assert isinstance(row.kernel, tvm_tirx.Kernel)  # compiled here, as in a local sweep
    assert {row.server for row in good} == set(servers)  # the tracker handed out both
    assert measure.calls == 4
    tile_error, broken = rows[2], rows[4]
    assert tile_error.error.startswith("TileError:") and tile_error.server is None and tile_error.kernel is None
    assert broken.timing is None and broken.server in servers and "load" in broken.error, broken.error
    assert result.best in good and result.best.timing.median == min(r.timing.median for r in good)
    text = result.table()
    assert "dropped: TileError" in text and "<- best" in text and f"[on {broken.server}]" in text


@pytest.mark.slow
def test_sweep_through_a_tracker_exports_in_worker_processes(cluster):
    tracker, key, servers = cluster
    runner = testing.RPCRunner(tracker, key, device="cpu", export=cpu_export, number=1, repeat=3)
    configs = [CONFIGS[0], CONFIGS[2], CONFIGS[4]]  # fine, TileError, a library the server cannot load
    result = testing.sweep(make_copy, configs, cpu_args, arch="sm_90a", workers=2, progress=True, runner=runner)
    fine, tile_error, broken = result.rows
    assert fine.error is None and fine.server in servers and len(fine.timing.samples) == 3
    assert tile_error.error.startswith("TileError:") and tile_error.server is None
    assert broken.server in servers and "load" in broken.error and broken.kernel is not None
    assert result.best is fine


def test_rpc_rows_have_the_fields_of_a_local_sweep(cluster):
    tracker, key, _ = cluster
    runner = testing.RPCRunner(tracker, key, device="cpu", export=cpu_export, number=1, repeat=3)
    remote = testing.sweep(make_copy, CONFIGS[:1], cpu_args, arch="sm_90a", workers=0, progress=False, runner=runner)
    local = testing.sweep(make_copy, CONFIGS[:1], (), arch="sm_90a", workers=0, progress=False, timer=lambda fn: testing.Timing(1.0, 0.0))
    assert type(remote) is type(local) and type(remote.rows[0]) is type(local.rows[0])
    assert [f.name for f in dataclasses.fields(remote.rows[0])] == [f.name for f in dataclasses.fields(local.rows[0])]
    assert remote.best is remote.rows[0] and len(remote.best.timing.samples) == 3
    assert local.rows[0].server is None and remote.rows[0].server is not None


def test_our_exported_kernel_is_uploaded_and_loaded_on_a_server(cluster):
    if not testing.has_nvcc():
        pytest.skip("Kernel.export needs nvcc")
    tracker, key, servers = cluster
    seen = []

    def measure(module, name, device, args):
        seen.append(module.implements_function(name))
        return testing.Timing(1.0, 0.0)

    runner = testing.RPCRunner(tracker, key, device="cpu", measure=measure)  # the default export: the cubin
    result = testing.sweep(make_copy, CONFIGS[:1], (), arch="sm_90a", workers=0, progress=False, runner=runner)
    row = result.rows[0]
    assert row.server in servers
    if has_cuda_loader():  # the servers (this machine's apache-tvm) load CUDA modules
        assert row.error is None and seen == [True]
    else:  # a server without apache-tvm's CUDA runtime refuses the library, in the row
        assert "ffi.Module.load_from_bytes.cuda" in row.error and seen == []


def test_a_session_that_outlasts_its_timeout_fails_its_configuration_only(cluster):
    tracker, key, servers = cluster

    calls = []

    def slow_measure(module, name, device, args):
        calls.append(name)
        if len(calls) == 1:
            time.sleep(3.0)  # the server ends the session after 1 s
        return testing.remote_time_evaluator(module, name, device, args, number=1, repeat=3)

    runner = testing.RPCRunner(tracker, key, device="cpu", export=cpu_export, measure=slow_measure, session_timeout=1, parallel=1)
    result = testing.sweep(make_copy, CONFIGS[:2], cpu_args, arch="sm_90a", workers=0, progress=False, runner=runner)
    first, second = result.rows
    assert first.timing is None and first.server in servers and "timeout" in first.error.lower(), first.error
    assert second.error is None and second.timing is not None and result.best is second


def test_a_tracker_without_servers_under_the_key_is_an_error(cluster):
    tracker, _, _ = cluster
    runner = testing.RPCRunner(tracker, "no-such-key", device="cpu", export=cpu_export)
    assert runner.servers() == []
    with pytest.raises(RuntimeError, match="holds no server under key 'no-such-key'"):
        testing.sweep(make_copy, CONFIGS[:1], cpu_args, arch="sm_90a", workers=0, progress=False, runner=runner)


def test_an_unreachable_tracker_is_named(monkeypatch):
    import socket

    from tvm_tirx.testing import rpc as rpc_module  # pylint: disable=import-outside-toplevel

    monkeypatch.setattr(rpc_module, "_CONNECT_TIMEOUT", 0)  # apache-tvm retries a refused connection for as long
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    runner = testing.RPCRunner(("127.0.0.1", port), "k", device="cpu", export=cpu_export)
    message = rf"cannot reach the tracker at 127.0.0.1:{port}: connection refused .* no RPC tracker listens there"
    with pytest.raises(RuntimeError, match=message):
        runner.servers()
    with pytest.raises(RuntimeError, match=message):
        testing.sweep(make_copy, CONFIGS[:1], cpu_args, arch="sm_90a", workers=0, progress=False, runner=runner)


def test_arguments_reach_the_server_as_tvm_tensors_bfloat16_too(torch_cpu):
    from tvm_tirx.testing.rpc import _remote_value  # pylint: disable=import-outside-toplevel

    device = rpc.LocalSession().cpu(0)  # the RPC session API, in this process
    x = torch_cpu.arange(6, dtype=torch_cpu.bfloat16).reshape(2, 3).t()  # not contiguous
    on_device = _remote_value(x, device)
    assert on_device.dtype == "bfloat16" and on_device.shape == (3, 2)
    np.testing.assert_array_equal(on_device.numpy().astype("float32"), x.float().numpy())
    assert _remote_value(np.float32(2.5), device) == 2.5 and _remote_value(7, device) == 7
    assert _remote_value(np.ones(3, "int8"), device).dtype == "int8"


def test_rpc_runner_arguments():
    with pytest.raises(ValueError, match="host:port"):
        testing.RPCRunner("localhost", "k")
    with pytest.raises(ValueError, match="at least 1"):
        testing.RPCRunner("localhost:9190", "k", repeat=0)
    assert repr(testing.RPCRunner(("localhost", 9190), "h200")) == "RPCRunner(tracker='localhost:9190', key='h200', device='cuda')"
    with pytest.raises(ValueError, match="not both"):
        testing.sweep(make_copy, [], (), arch="sm_90a", timer=lambda fn: None, runner=testing.RPCRunner("h:1", "k"))


@testing.requires_cuda
def test_sweep_through_a_tracker_on_the_gpu():
    a = np.random.default_rng(0).standard_normal((64, 4), dtype="float32")
    checked = []

    def measure(module, name, device, args):
        timing = testing.remote_time_evaluator(module, name, device, args, number=20, repeat=10)
        np.testing.assert_array_equal(args[1].numpy()[:32], a[:32])  # the copy ran on the server's GPU
        checked.append(name)
        return timing

    with local_cluster(1) as (tracker, key, servers):
        runner = testing.RPCRunner(tracker, key, measure=measure)  # device "cuda", the cubin export
        configs = [{"block": 64}, {"block": 64, "offset": 1}, {"block": 32}]
        result = testing.sweep(make_copy, configs, (a, np.zeros_like(a)), workers=0, progress=False, runner=runner)
    rows = result.rows
    assert rows[1].error.startswith("TileError:")
    for row in (rows[0], rows[2]):
        assert row.error is None and row.server == servers[0] and 0 < row.timing.median < 1.0, row
    assert len(checked) == 2 and result.best in (rows[0], rows[2])
