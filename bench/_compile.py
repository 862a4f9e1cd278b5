"""Compiling a benchmark's configurations: every one or an error naming the one that failed."""

from __future__ import annotations

from tvm_tirx import testing


def compile_all(build, params, names, what: str, arch=None, workers=None) -> list:
    """The kernels ``build(**p)`` for each ``p`` of ``params``, compiled by
    :func:`tvm_tirx.testing.sweep` (in parallel worker processes unless ``workers=0``).

    ``names`` label the configurations in errors, ``what`` the benchmark.

    Raises
    ------
    RuntimeError
        A configuration failed to compile: ``"<what> [<name>]: <its error>"``.
    """
    result = testing.sweep(build, params, (), arch=arch, workers=workers, measure=False, progress=False)
    for name, row in zip(names, result.rows):
        if row.kernel is None:
            raise RuntimeError(f"{what} [{name}]: {row.error}")
    return [row.kernel for row in result.rows]


def assemble_each(kernels) -> list:
    """The cubin bytes of each kernel (:func:`tvm_tirx.testing.assemble`), nvcc runs in
    parallel threads (at most 8)."""
    import concurrent.futures  # pylint: disable=import-outside-toplevel
    import os  # pylint: disable=import-outside-toplevel

    with concurrent.futures.ThreadPoolExecutor(max(1, min(8, os.cpu_count() or 1))) as pool:
        return list(pool.map(testing.assemble, kernels))
