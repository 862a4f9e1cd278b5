"""Timing and tuning: :func:`do_bench` and :func:`sweep` (re-exported by :mod:`tvm_tirx.testing`).

``do_bench`` times GPU work with CUDA events; ``sweep`` compiles a list of
configurations of one kernel in parallel worker processes, reports those
that fail (a contract error, say) instead of raising, times the others --
here, or on the servers of an apache-tvm RPC tracker
(:class:`~tvm_tirx.testing.RPCRunner`) -- and returns the fastest with the
whole table.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import statistics
import sys
import tempfile
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

from ..build.kernel import Kernel
from ..build.kernel import compile as compile_kernel

__all__ = ["Timing", "do_bench", "SweepRow", "SweepResult", "sweep"]


@dataclass(frozen=True)
class Timing:
    """Times of one benchmark, in milliseconds.

    Attributes
    ----------
    median : float
        Median of the samples (ms).
    spread : float
        Interquartile range of the samples (ms): 75th minus 25th percentile.
    samples : tuple[float, ...]
        Every timed run (ms), in order.
    """

    median: float
    spread: float
    samples: tuple = ()


def do_bench(fn, *, runs: int = 50, warmup: int = 5, spin_cycles: int = 2_000_000) -> Timing:
    """Time ``fn()`` on the GPU: median and spread of ``runs`` runs, each timed with CUDA events.

    ``warmup`` calls come first (compilation, caches, clocks).  Before each
    timed run the current stream gets a spin kernel (``torch.cuda._sleep`` of
    ``spin_cycles`` GPU clock cycles, ~1 ms on an H200) that outlasts the
    host's work of recording the start event and launching ``fn``'s kernels:
    the events then time the GPU work, not the gaps while Python launches it.
    ``fn`` must enqueue its work on torch's current stream (a
    :class:`~tvm_tirx.Kernel` call does).

    Parameters
    ----------
    fn : Callable[[], Any]
        The work to time.
    runs, warmup : int
        Timed runs (at least 1) and untimed calls before them.
    spin_cycles : int
        Length of the spin kernel before each run, in GPU clock cycles.

    Returns
    -------
    Timing
        ``median`` and ``spread`` (interquartile range) in milliseconds.

    Raises
    ------
    RuntimeError
        torch with CUDA is not available.
    ValueError
        ``runs`` < 1.
    """
    if runs < 1:
        raise ValueError(f"do_bench: runs must be at least 1, got {runs}")
    try:
        import torch  # pylint: disable=import-outside-toplevel  # optional
    except ImportError as err:
        raise RuntimeError("do_bench needs torch with CUDA") from err
    if not torch.cuda.is_available():
        raise RuntimeError("do_bench needs a CUDA GPU (torch.cuda.is_available() is False)")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(spin_cycles)  # pylint: disable=protected-access
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return Timing(statistics.median(samples), _iqr(samples), tuple(samples))


def _iqr(samples) -> float:
    if len(samples) < 2:
        return 0.0
    q = statistics.quantiles(samples, n=4)
    return q[2] - q[0]


# -- sweep ----------------------------------------------------------------------------------------


@dataclass
class SweepRow:
    """One configuration of a :func:`sweep`.

    Attributes
    ----------
    config : dict
        The keyword arguments given to ``make_kernel``.
    timing : Timing | None
        Its time; None when it failed or was not timed.
    error : str | None
        Why it was dropped (``"TileError: ..."``), or None.
    kernel : tvm_tirx.Kernel | None
        The compiled kernel (None when it did not compile, or with an RPC
        runner could not be exported).
    server : str | None
        ``"host:port"`` of the RPC server that loaded and timed it (a sweep
        with an :class:`~tvm_tirx.testing.RPCRunner`; also set when it
        failed there); None in a local sweep.
    """

    config: dict
    timing: Timing | None = None
    error: str | None = None
    kernel: Kernel | None = field(default=None, repr=False)
    server: str | None = None


@dataclass
class SweepResult:
    """What :func:`sweep` found.

    Attributes
    ----------
    best : SweepRow | None
        The fastest configuration that compiled (None if none was timed).
    rows : list[SweepRow]
        Every configuration, in the order given.
    """

    best: SweepRow | None
    rows: list

    def table(self) -> str:
        """A plain-text table: configuration, median ms, spread ms, or why it was dropped."""
        lines = []
        for row in self.rows:
            config = ", ".join(f"{k}={v}" for k, v in row.config.items())
            if row.error is not None:
                status = f"dropped: {row.error.splitlines()[-1] if row.error else ''}"
            elif row.timing is None:
                status = "compiled"
            else:
                mark = "  <- best" if row is self.best else ""
                status = f"{row.timing.median:.4f} ms (spread {row.timing.spread:.4f}){mark}"
            where = f" [on {row.server}]" if row.server else ""
            lines.append(f"{config}: {status}{where}")
        return "\n".join(lines)


def _compile_one(make_kernel, config, compile_kwargs):
    """Worker: compile one configuration; ``(kernel or None, error text or None)``."""
    try:
        return compile_kernel(make_kernel(**config), **compile_kwargs), None
    except Exception as err:  # pylint: disable=broad-except
        return None, f"{type(err).__name__}: {err}"


def _export_one(kernel, config, export, path):
    """Write ``kernel``'s library to ``path`` with ``export``; the error text, or None."""
    try:
        export(kernel, config, path)
    except Exception as err:  # pylint: disable=broad-except
        return f"export failed: {type(err).__name__}: {err}"
    return None


def _compile_in_worker(make_kernel, config, compile_kwargs, export=None, path=None):
    """Worker process: compile (which fills the compile cache) and, given ``export``,
    write the library to ``path``; only the outcome (error text or None) travels back."""
    kernel, error = _compile_one(make_kernel, config, compile_kwargs)
    if kernel is None or export is None:
        return error
    return _export_one(kernel, config, export, path)


class _Progress:
    """tqdm when it is installed, else a one-line counter on stderr."""

    def __init__(self, total: int, enabled: bool, label: str):
        self.total, self.done, self.label, self.bar = total, 0, label, None
        self.enabled = enabled and total > 0
        if self.enabled:
            try:
                from tqdm.auto import tqdm  # pylint: disable=import-outside-toplevel  # optional

                self.bar = tqdm(total=total, desc=label)
            except ImportError:
                self.bar = None

    def step(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(1)
        else:
            end = "\n" if self.done == self.total else ""
            print(f"\r{self.label}: {self.done}/{self.total}", end=end, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _worker_failure(err) -> str:
    """The dropped row's error for exception ``err`` of a compile worker's future."""
    if isinstance(err, BrokenProcessPool):
        return (
            f"worker process failed ({type(err).__name__}: {err}): the likely cause is a script "
            "whose top level is not guarded by if __name__ == '__main__': -- with workers > 0 the "
            "sweep spawns processes that re-import the main module (workers=0 compiles here and "
            "shows the error)"
        )
    return f"worker failed: {type(err).__name__}: {err}"


def _compile_all(make_kernel, configs, compile_kwargs, workers, progress, export=None, paths=None) -> list:
    """``[(kernel or None, error or None)]`` per configuration; given ``export``, the
    library of each one that compiles is written to its path in ``paths``."""
    paths = paths or [None] * len(configs)
    bar = _Progress(len(configs), progress, "compiling")
    errors = [None] * len(configs)
    try:
        if workers > 0:
            # spawn: a forked child of a process holding a CUDA context is not safe
            with cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {
                    pool.submit(_compile_in_worker, make_kernel, config, compile_kwargs, export, path): i
                    for i, (config, path) in enumerate(zip(configs, paths))
                }
                for future in cf.as_completed(futures):
                    try:
                        errors[futures[future]] = future.result()
                    except Exception as err:  # pylint: disable=broad-except
                        errors[futures[future]] = _worker_failure(err)
                    bar.step()
        # the workers filled the compile cache: loading here is cheap (and rebuilds without it)
        results = []
        for config, path, error in zip(configs, paths, errors):
            kernel, error = (None, error) if error else _compile_one(make_kernel, config, compile_kwargs)
            if kernel is not None and export is not None and workers == 0:
                error = _export_one(kernel, config, export, path)
                kernel = None if error else kernel
            results.append((kernel, error))
            if workers == 0:
                bar.step()
        return results
    finally:
        bar.close()


def sweep(
    make_kernel,
    configs,
    args,
    *,
    target="cuda",
    arch=None,
    options=None,
    workers: int | None = None,
    progress: bool = True,
    measure: bool = True,
    timer=None,
    runner=None,
) -> SweepResult:
    """Compile every configuration of a kernel, drop those that fail, time the rest.

    The kernels are timed here with ``timer`` (default :func:`do_bench`), or --
    given a ``runner`` (:class:`~tvm_tirx.testing.RPCRunner`) -- on the
    servers of an apache-tvm RPC tracker: each configuration is compiled and
    exported here (in the worker processes), and its library uploaded to a
    server the tracker hands out, loaded and timed there, on the server's device
    and clock.  A configuration that fails on its server (the library does not
    load, the call raises, the session times out) is dropped like one that does
    not compile, with the error and the server in its row.

    Parameters
    ----------
    make_kernel : Callable[..., PrimFunc]
        ``make_kernel(**config)`` returns the kernel for one configuration.
        With ``workers > 0`` it must be picklable (a module-level function).
    configs : Sequence[dict]
        The configurations (keyword arguments of ``make_kernel``).
    args : tuple | Callable[[dict], tuple]
        The arguments to call each kernel with, or a function of the
        configuration returning them.  With a ``runner``: numpy arrays
        (``ml_dtypes.bfloat16`` for bf16), torch or tvm tensors -- copied
        through host memory to each server's device -- and Python scalars.
    target, arch, options :
        As :func:`tvm_tirx.compile` takes them (with a ``runner``, ``arch`` is
        the servers' GPU's, e.g. ``"sm_90a"``: this machine may have none).
    workers : int | None
        Worker processes compiling in parallel (spawned; each fills the compile
        cache, from which this process then loads the kernels, and with a
        ``runner`` exports the libraries).  Default: one per CPU, at most one
        per configuration.  ``0`` compiles here, one by one.
    progress : bool
        Show a progress bar (tqdm when installed, else a counter on stderr).
    measure : bool
        Time the kernels (``False``: compile only, e.g. without a GPU; no
        ``runner`` is used).
    timer : Callable[[Callable[[], Any]], Timing] | None
        How to time one kernel call here; default :func:`do_bench`.
    runner : RPCRunner | None
        Time on RPC servers instead of here (see
        :class:`~tvm_tirx.testing.RPCRunner` for its export and measurement).

    Returns
    -------
    SweepResult
        ``best`` (the fastest timed row) and ``rows`` (every configuration,
        with its timing or why it was dropped; with a ``runner``, the server
        each one ran on).  A configuration whose ``make_kernel``, compile,
        export or remote run raises -- a :class:`~tvm_tirx.TileError`, a
        ``ValueError``, an ``RPCError`` -- is reported in its row, never raised.

    Raises
    ------
    RuntimeError
        ``measure`` is True, no ``runner`` is given and there is no GPU (from
        :func:`do_bench`); the ``runner``'s tracker cannot be reached or holds
        no server under its key.
    ValueError
        Both ``timer`` and ``runner`` are given.
    """
    if timer is not None and runner is not None:
        raise ValueError("sweep: give a timer (time here) or a runner (time on RPC servers), not both")
    configs = [dict(c) for c in configs]
    if workers is None:
        workers = min(len(configs), os.cpu_count() or 1)
    compile_kwargs = {"target": target, "arch": arch, "options": options}
    if measure and runner is not None:
        with tempfile.TemporaryDirectory(prefix="tvm_tirx_sweep_") as directory:
            paths = [os.path.join(directory, f"config{i}.so") for i in range(len(configs))]
            compiled = _compile_all(make_kernel, configs, compile_kwargs, workers, progress, runner.export, paths)
            rows = [SweepRow(config, error=error, kernel=kernel) for config, (kernel, error) in zip(configs, compiled)]
            _time_remotely(rows, paths, args, runner, progress)
    else:
        compiled = _compile_all(make_kernel, configs, compile_kwargs, workers, progress)
        rows = [SweepRow(config, error=error, kernel=kernel) for config, (kernel, error) in zip(configs, compiled)]
        if measure:
            _time_here(rows, args, timer or do_bench)
    timed = [r for r in rows if r.timing is not None]
    best = min(timed, key=lambda r: r.timing.median) if timed else None
    return SweepResult(best, rows)


def _call_args(args, config) -> tuple:
    return args(config) if callable(args) else tuple(args)


def _time_here(rows, args, timer) -> None:
    """Time each compiled row here with ``timer``."""
    for row in rows:
        if row.kernel is not None:
            call_args = _call_args(args, row.config)
            row.timing = timer(lambda k=row.kernel, a=call_args: k(*a))


def _time_remotely(rows, paths, args, runner, progress) -> None:
    """Time each compiled (and exported) row on ``runner``'s servers; record timing, error, server."""
    todo = [(row, path) for row, path in zip(rows, paths) if row.kernel is not None]
    runs = runner.run([(path, row.kernel.name, _call_args(args, row.config)) for row, path in todo], progress)
    for (row, _), run in zip(todo, runs):
        row.timing, row.error, row.server = run.timing, run.error, run.server
