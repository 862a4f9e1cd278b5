"""Timing :func:`~tvm_tirx.testing.sweep`'s kernels on other machines, through apache-tvm's RPC.

:class:`RPCRunner` hands each compiled configuration to a server that an
apache-tvm RPC tracker (``python -m tvm.exec.rpc_tracker``) schedules: the
library (written here by :meth:`tvm_tirx.Kernel.export`) is uploaded to the
server with ``RPCSession.upload``, loaded there with ``RPCSession.load_module``,
its arguments are copied to the server's device and it is timed there, on the
server's clock (``Module.time_evaluator``).  Which server runs which
configuration is the tracker's decision; this module keeps up to one session
per server open at once and records, per configuration, the server that ran it.

Servers register with ``python -m tvm.exec.rpc_server --tracker=HOST:PORT --key=KEY``
(or ``tvm.rpc.Server(tracker_addr=..., key=...)``); they need apache-tvm's runtime
(``apache-tvm``) and, for CUDA kernels, a GPU with its driver -- not tvm_tirx,
nvcc or torch.  The tracker needs ``tornado`` and ``cloudpickle``
(``pip install "tvm_tirx[rpc]"``).
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import os
import socket
import statistics
import struct
from dataclasses import dataclass

import numpy as np
import tvm
from tvm import rpc
from tvm.rpc import base as rpc_base

from .benchmark import Timing, _iqr, _Progress

__all__ = ["RPCRunner", "RemoteRun", "export_cubin", "remote_time_evaluator"]


def export_cubin(kernel, config, path) -> None:
    """The default ``export`` of :class:`RPCRunner`: ``kernel.export(path)`` (the kernel's
    host launcher and its cubin, assembled here by ``nvcc`` for the kernel's arch).

    Parameters
    ----------
    kernel : tvm_tirx.Kernel
        The compiled configuration.
    config : dict
        Its configuration (unused here; a custom ``export`` may use it).
    path : str
        The ``.so`` file to write.

    Raises
    ------
    RuntimeError
        ``nvcc`` is missing or rejects the kernel (see :meth:`tvm_tirx.Kernel.export`).
    """
    del config
    kernel.export(path)


def remote_time_evaluator(module, name, device, args, *, number=10, repeat=20, min_repeat_ms=0, cache_flush_bytes=0):
    """Time ``module[name](*args)`` where ``module`` lives, with apache-tvm's ``time_evaluator``.

    One call runs first and is discarded; then ``repeat`` times: the device is
    synchronized, its timer started (CUDA events on the device's stream, on a
    GPU), ``number`` calls are launched back to back, the timer stopped.  Each
    sample is that time divided by ``number``: for a kernel shorter than a launch
    (a few microseconds) it includes the gaps between launches, and calls after
    the first of a repeat find the inputs in the L2 cache (``cache_flush_bytes``
    overwrites that many bytes on the device before each repeat only).

    Parameters
    ----------
    module : tvm.runtime.Module
        The loaded library (a remote module, from ``RPCSession.load_module``).
    name : str
        The function to time.
    device : tvm.runtime.Device
        The device whose timer is used (a remote device, e.g. ``session.cuda(0)``).
    args : list
        The arguments, already on ``device`` (tensors) or Python scalars.
    number, repeat : int
        Calls per sample, and samples.
    min_repeat_ms : int
        A sample shorter than this (whole milliseconds) is taken again with
        more calls (0: never).
    cache_flush_bytes : int
        Bytes written on the device before each sample (0: none).

    Returns
    -------
    Timing
        Median and interquartile range of the samples, and the samples, in
        milliseconds per call.

    Raises
    ------
    tvm.error.RPCError
        The call failed on the server (the error is apache-tvm's, raised there).
    """
    evaluator = module.time_evaluator(
        name, device, number=number, repeat=repeat, min_repeat_ms=int(min_repeat_ms), cache_flush_bytes=cache_flush_bytes
    )
    samples = [seconds * 1e3 for seconds in evaluator(*args).results]
    return Timing(statistics.median(samples), _iqr(samples), tuple(samples))


@dataclass(frozen=True)
class RemoteRun:
    """What one configuration's run on a server gave.

    Attributes
    ----------
    timing : Timing | None
        Its time (None when it failed).
    error : str | None
        Why it failed (``"RPCError: ..."``), or None.
    server : str | None
        ``"host:port"`` of the server the tracker handed out (None when none was obtained).
    """

    timing: Timing | None
    error: str | None
    server: str | None


def _parse_tracker(tracker) -> tuple:
    """``(host, port)`` from ``"host:port"`` or a ``(host, port)`` pair."""
    if isinstance(tracker, str):
        host, sep, port = tracker.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"RPCRunner: tracker must be 'host:port', got {tracker!r}")
        return host, int(port)
    if isinstance(tracker, tuple | list) and len(tracker) == 2 and isinstance(tracker[1], int):
        return str(tracker[0]), tracker[1]
    raise ValueError(f"RPCRunner: tracker must be 'host:port' or (host, port), got {tracker!r}")


#: Seconds to retry a refused connection to the tracker.
_CONNECT_TIMEOUT = 10


def _tracker_call(addr, message, timeout):
    """Send one message to the tracker at ``addr`` and return its answer (tvm.rpc's protocol)."""
    try:
        sock = rpc_base.connect_with_retry(addr, timeout=_CONNECT_TIMEOUT, retry_period=1)
    except RuntimeError as err:  # apache-tvm's "Failed to connect to server", after its retries
        raise ConnectionRefusedError(
            f"connection refused for {_CONNECT_TIMEOUT} s: no RPC tracker listens there "
            f"(start one with python -m tvm.exec.rpc_tracker --host={addr[0]} --port={addr[1]})"
        ) from err
    try:
        sock.settimeout(timeout)
        sock.sendall(struct.pack("<i", rpc_base.RPC_TRACKER_MAGIC))
        magic = struct.unpack("<i", rpc_base.recvall(sock, 4))[0]
        if magic != rpc_base.RPC_TRACKER_MAGIC:
            raise RuntimeError(f"{addr[0]}:{addr[1]} is not an RPC tracker")
        rpc_base.sendjson(sock, message)
        return rpc_base.recvjson(sock)
    finally:
        sock.close()


def _remote_value(value, device):
    """``value`` on ``device``: arrays (numpy, torch, tvm) are copied there; scalars stay."""
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "detach"):  # a torch tensor, on any device; through DLPack: bfloat16 too
        value = tvm.runtime.from_dlpack(value.detach().cpu().contiguous())
    if isinstance(value, tvm.runtime.Tensor):
        value = value.numpy()  # bfloat16 and float8 as ml_dtypes' numpy types
    return tvm.runtime.tensor(np.ascontiguousarray(value), device=device)


class RPCRunner:
    """Where :func:`~tvm_tirx.testing.sweep` sends its kernels to be timed: the servers an
    apache-tvm RPC tracker holds under one key.

    ``sweep(..., runner=RPCRunner("tracker-host:9190", "h200"))`` compiles and
    exports every configuration here (in its worker processes), then for each
    one asks the tracker for a free server, uploads the library, loads it there,
    copies the arguments to the server's device and times the kernel with
    ``measure``.  Up to ``parallel`` configurations run at once, each in its own
    session (the server serves it in a fresh process, in a fresh directory).

    Parameters
    ----------
    tracker : str | tuple[str, int]
        The tracker's address, ``"host:port"`` or ``(host, port)``.
    key : str
        The key the servers registered with (``--key`` of ``tvm.exec.rpc_server``).
    device : str
        The servers' device the kernels run on: ``"cuda"`` (default) or
        another apache-tvm device name (``"cpu"``), device 0.
    measure : Callable[[Module, str, Device, list], Timing] | None
        ``measure(module, name, device, args)`` times ``module[name]`` on the
        server's ``device`` with ``args`` already there; default
        :func:`remote_time_evaluator` with ``number``, ``repeat``,
        ``min_repeat_ms`` and ``cache_flush_bytes``.
    export : Callable[[Kernel, dict, str], None] | None
        ``export(kernel, config, path)`` writes the library a server loads,
        holding a function named ``kernel.name``; default :func:`export_cubin`.
        It runs in the sweep's worker processes: with ``workers > 0`` it must
        be picklable (a module-level function).
    number, repeat, min_repeat_ms, cache_flush_bytes :
        The default ``measure``'s settings (see :func:`remote_time_evaluator`;
        ``min_repeat_ms`` in milliseconds, ``cache_flush_bytes`` in bytes).
    parallel : int | None
        Configurations in flight at once; default: the number of servers the
        tracker holds under ``key`` when the sweep starts.
    priority : int
        The tracker's priority of these requests (higher first).
    session_timeout : float
        Seconds a server gives one configuration's session before it ends it
        (upload, load and timing; 0: no limit).  A configuration that runs over
        is reported as failed.
    request_timeout : float | None
        Seconds to wait for the tracker to hand out a free server (None: as long
        as it takes).

    Raises
    ------
    ValueError
        ``tracker`` is not ``"host:port"`` or ``(host, port)``; ``parallel``,
        ``number`` or ``repeat`` is below 1.
    """

    def __init__(
        self,
        tracker,
        key: str,
        *,
        device: str = "cuda",
        measure=None,
        export=None,
        number: int = 10,
        repeat: int = 20,
        min_repeat_ms: int = 0,
        cache_flush_bytes: int = 0,
        parallel: int | None = None,
        priority: int = 1,
        session_timeout: float = 600.0,
        request_timeout: float | None = None,
    ):
        self.tracker = _parse_tracker(tracker)
        if parallel is not None and parallel < 1 or number < 1 or repeat < 1:
            raise ValueError(f"RPCRunner: parallel, number and repeat must be at least 1, got {parallel}, {number}, {repeat}")
        self.key, self.device, self.parallel, self.priority = key, device, parallel, priority
        self.session_timeout, self.request_timeout = session_timeout, request_timeout
        self.export = export if export is not None else export_cubin
        self.measure = measure or functools.partial(
            remote_time_evaluator,
            number=number,
            repeat=repeat,
            min_repeat_ms=min_repeat_ms,
            cache_flush_bytes=cache_flush_bytes,
        )

    def __repr__(self):
        return f"RPCRunner(tracker='{self.tracker[0]}:{self.tracker[1]}', key={self.key!r}, device={self.device!r})"

    def servers(self) -> list:
        """The servers the tracker holds under :attr:`key` now, busy or free.

        Returns
        -------
        list[str]
            ``"host:port"`` of each.

        Raises
        ------
        RuntimeError
            The tracker cannot be reached, or is not an RPC tracker.
        """
        try:
            answer = _tracker_call(self.tracker, [rpc_base.TrackerCode.SUMMARY], timeout=30)
        except OSError as err:
            raise RuntimeError(f"RPCRunner: cannot reach the tracker at {self.tracker[0]}:{self.tracker[1]}: {err}") from err
        if answer[0] != rpc_base.TrackerCode.SUCCESS:
            raise RuntimeError(f"RPCRunner: unexpected answer from the tracker: {answer!r}")
        return [f"{i['addr'][0]}:{i['addr'][1]}" for i in answer[1]["server_info"] if i["key"] == "server:" + self.key]

    def run(self, jobs, progress: bool = False) -> list:
        """Run ``jobs`` on the tracker's servers, up to :attr:`parallel` at once.

        Parameters
        ----------
        jobs : Sequence[tuple[str, str, Sequence]]
            ``(library path, function name, arguments)`` per configuration;
            arguments are arrays (numpy -- ``ml_dtypes.bfloat16`` too --, torch
            or tvm tensors, copied to the server's device through host memory)
            and Python scalars.
        progress : bool
            Show a progress bar.

        Returns
        -------
        list[RemoteRun]
            One per job, in order; a job that failed anywhere (no server, upload,
            load, argument copy, timing, session timeout) has its ``error``.

        Raises
        ------
        RuntimeError
            The tracker cannot be reached, or holds no server under :attr:`key`.
        """
        if not jobs:
            return []
        servers = self.servers()
        if not servers:
            host, port = self.tracker
            raise RuntimeError(f"RPCRunner: the tracker at {host}:{port} holds no server under key {self.key!r}")
        bar = _Progress(len(jobs), progress, f"timing on RPC servers ({len(servers)} under {self.key!r})")
        try:
            with cf.ThreadPoolExecutor(self.parallel or len(servers)) as pool:
                futures = [pool.submit(self.run_one, *job) for job in jobs]
                for _ in cf.as_completed(futures):
                    bar.step()
                return [f.result() for f in futures]
        finally:
            bar.close()

    def run_one(self, path, name, args) -> RemoteRun:
        """Time one library on a server the tracker hands out; failures are returned, not raised.

        Parameters
        ----------
        path : str
            The library to upload (its file name is kept on the server).
        name : str
            The function in it to time.
        args : Sequence
            Its arguments (see :meth:`run`).

        Returns
        -------
        RemoteRun
            The timing, or the error; and the server.
        """
        server = None
        try:
            session, server = self._session()
            session.upload(path)
            module = session.load_module(os.path.basename(path))
            device = session.device(self.device, 0)
            remote_args = [_remote_value(a, device) for a in args]
            return RemoteRun(self.measure(module, name, device, remote_args), None, server)
        except Exception as err:  # pylint: disable=broad-except
            text = str(err)  # apache-tvm's RPC errors start with their type's name already
            return RemoteRun(None, text if text.startswith(type(err).__name__) else f"{type(err).__name__}: {text}", server)

    def _session(self):
        """``(RPCSession, "host:port")``: a session with a free server, as
        ``tvm.rpc.TrackerSession.request`` opens it, keeping the server's address."""
        try:
            answer = _tracker_call(self.tracker, [rpc_base.TrackerCode.REQUEST, self.key, "", self.priority], self.request_timeout)
        except socket.timeout as err:
            raise TimeoutError(f"no server under key {self.key!r} was free within {self.request_timeout} s") from err
        if answer[0] != rpc_base.TrackerCode.SUCCESS:
            raise RuntimeError(f"unexpected answer from the tracker: {answer!r}")
        host, port, matchkey = answer[1]
        session = rpc.connect(host, port, matchkey, session_timeout=self.session_timeout)
        return session, f"{host}:{port}"
