"""pytest markers for tests of tile kernels: what the machine must have for a test to run.

* :data:`requires_cuda` -- a CUDA GPU and torch with CUDA;
* :data:`requires_nvcc` -- ``nvcc`` on the PATH;
* :func:`requires_arch` -- a GPU of at least an SM version.

The markers are built on first use, so that importing this module does not
import pytest.
"""

from __future__ import annotations

import shutil

from ..arch import device_capability, parse_arch

__all__ = ["has_cuda", "has_nvcc", "requires_cuda", "requires_nvcc", "arch_supported", "requires_arch"]


def has_cuda() -> bool:
    """Whether torch sees a CUDA GPU (False without torch)."""
    try:
        import torch  # pylint: disable=import-outside-toplevel  # optional
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def has_nvcc() -> bool:
    """Whether ``nvcc`` is on the PATH."""
    return shutil.which("nvcc") is not None


def _marker(condition, reason):
    import pytest  # pylint: disable=import-outside-toplevel  # only where a marker is used

    return pytest.mark.skipif(not condition, reason=reason)


def __getattr__(name):
    # Markers are built on first use so that importing this module does not import pytest.
    if name == "requires_cuda":
        import pytest  # pylint: disable=import-outside-toplevel  # only where a marker is used

        mark = _marker(has_cuda(), "needs a CUDA GPU and torch with CUDA")
        return lambda f: pytest.mark.gpu(mark(f))
    if name == "requires_nvcc":
        return _marker(has_nvcc(), "needs nvcc on the PATH")
    raise AttributeError(name)


_parse_arch = parse_arch
_device_capability = device_capability


def arch_supported(arch, capability: tuple[int, int] | None) -> bool:
    """Whether a GPU of compute ``capability`` runs code built for ``arch``.

    A plain ``sm_XY`` needs capability ``(X, Y)`` or newer.  Arch-specific
    targets are not forward compatible: ``sm_XYa`` needs exactly ``(X, Y)``,
    and a family target ``sm_XYf`` needs major ``X`` with minor ``Y`` or newer.
    ``capability=None`` (no GPU) supports nothing.

    Raises
    ------
    ValueError
        ``arch`` is not an SM architecture.
    """
    major, minor, suffix = _parse_arch(arch)
    if capability is None:
        return False
    capability = (int(capability[0]), int(capability[1]))
    if suffix == "a":
        return capability == (major, minor)
    if suffix == "f":
        return capability[0] == major and capability[1] >= minor
    return capability >= (major, minor)


def requires_arch(arch):
    """pytest marker factory: run the test only on a GPU that supports ``arch``.

    Use it as a decorator on a test function or class::

        @tvm_tirx.testing.requires_arch("sm_90a")
        def test_wgmma_kernel():
            ...

    The test is marked ``gpu`` (so ``pytest -m gpu`` selects it) and skipped
    unless GPU 0 is at least that SM version (see :func:`arch_supported`: an
    ``a`` suffix needs exactly that version).  The GPU is queried with
    ``torch.cuda.get_device_capability`` when torch with CUDA is available.

    Parameters
    ----------
    arch : str | int
        ``"sm_90a"``, ``"sm_80"``, ``"90"`` or ``90``.

    Returns
    -------
    Callable
        A decorator applying the ``gpu`` mark and a ``skipif`` mark.

    Raises
    ------
    ValueError
        ``arch`` is not an SM architecture (raised at decoration time).
    """
    import pytest  # pylint: disable=import-outside-toplevel  # only where a marker is used

    _parse_arch(arch)
    capability = _device_capability()
    found = "no CUDA GPU" if capability is None else f"a GPU of compute capability {capability[0]}.{capability[1]}"
    skip = pytest.mark.skipif(
        not arch_supported(arch, capability), reason=f"needs a GPU that runs {arch} code; found {found}"
    )

    def decorate(test):
        return pytest.mark.gpu(skip(test))

    return decorate
