"""Debug builds at every entry point: ``detect_hangs`` and ``check_assumptions``.

Two instrumentations of a lowered kernel make a wrong kernel fail loudly on
the GPU instead of hanging or reading out of bounds:

``detect_hangs``
    every mbarrier wait is bounded; one that times out prints its source line
    and traps (the mbarrier family's ``instrument`` hook: :func:`instrument`
    runs every registered family's, :class:`tvm_tirx.tile.ir.registry.Family`).
``check_assumptions``
    every ``T.assume(cond)`` becomes a run-time check that prints its source
    line and traps when ``cond`` is false (:mod:`tvm_tirx.tile.kernel.assumptions`).

They are options of the ``"tvm_tirx"`` TIR pipeline, so they reach every way
of building a kernel.  A build takes them, most specific first, from:

1. ``tvm_tirx.compile(..., options={"detect_hangs": ..., "check_assumptions": ...})``
   (a key given there wins for that build);
2. the innermost ``with tvm_tirx.debug_build(detect_hangs=..., check_assumptions=...):``
   block of the calling thread -- around ``tvm.compile(mod, target,
   tir_pipeline="tvm_tirx")``, a Relax build (``relax_pipeline="tvm_tirx",
   tir_pipeline="tvm_tirx"``), a torch operator's first call, or
   ``tvm_tirx.compile``;
3. the environment variables :data:`ENV_DETECT_HANGS` (``TVM_TIRX_DETECT_HANGS``:
   ``1``/``true``/``on`` for the default timeout, a number of milliseconds
   above 1, ``0``/``false``/``off`` or unset for off) and
   :data:`ENV_CHECK_ASSUMPTIONS` (``TVM_TIRX_CHECK_ASSUMPTIONS``: ``1``/``0``),
   read whenever a kernel is built -- the one switch for the torch operators,
   whose kernels are built on first use.

(apache-tvm 0.27 takes no new ``PassContext`` config names from Python, and
``tvm.compile`` passes no arguments to a named pipeline's factory: hence the
block and the variables.)  Off, nothing changes: the generated CUDA is the
same as without this module.  Kernels that ``sch.tensorize`` gave tile calls
(:mod:`tvm_tirx.schedule.scheduled`) are not instrumented: a debug build of
one is refused (:func:`refuse_scheduled`) rather than built without the checks.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from dataclasses import dataclass


# (the tile modules are imported where they are used: the "tvm_tirx" pipeline imports this
# module while apache-tvm loads the plugin, which may happen while tvm_tirx.tile is loading)

__all__ = ["DebugOptions", "debug_build", "current_debug", "instrument", "refuse_scheduled", "hang_timeout",
           "ENV_DETECT_HANGS", "ENV_CHECK_ASSUMPTIONS", "DEFAULT_TIMEOUT_MS"]

#: Environment variable: ``detect_hangs`` of every build without a nearer setting.
ENV_DETECT_HANGS = "TVM_TIRX_DETECT_HANGS"
#: Environment variable: ``check_assumptions`` of every build without a nearer setting.
ENV_CHECK_ASSUMPTIONS = "TVM_TIRX_CHECK_ASSUMPTIONS"

#: The timeout (ms) of ``detect_hangs=True``.
DEFAULT_TIMEOUT_MS = 2000

_ON = ("1", "true", "on", "yes")
_OFF = ("", "0", "false", "off", "no")


@dataclass(frozen=True)
class DebugOptions:
    """What a debug build adds.

    Attributes
    ----------
    detect_hangs : int
        Milliseconds an mbarrier wait may spin before the kernel traps (0: off).
    check_assumptions : bool
        Build ``T.assume`` conditions as run-time checks.
    """

    detect_hangs: int = 0
    check_assumptions: bool = False

    def __bool__(self) -> bool:
        return bool(self.detect_hangs or self.check_assumptions)


_OFF_OPTIONS = DebugOptions()
_CURRENT: contextvars.ContextVar = contextvars.ContextVar("tvm_tirx_debug_build", default=None)


def hang_timeout(value, where: str = "detect_hangs") -> int:
    """``detect_hangs`` as milliseconds (``0``/``False``: off; ``True``: the default timeout).

    Raises
    ------
    TypeError
        ``value`` is neither a bool nor an int.
    ValueError
        ``value`` is below 0 or above ``tvm_tirx.build.options.MAX_HANG_TIMEOUT_MS``
        (its cycle count must fit in an int64).
    """
    from ..tile.ir.hooks import CYCLES_PER_MS  # pylint: disable=import-outside-toplevel

    most = (2**63 - 1) // CYCLES_PER_MS
    if isinstance(value, bool):
        return DEFAULT_TIMEOUT_MS if value else 0
    if not isinstance(value, int):
        raise TypeError(f"{where} must be a bool or an int of milliseconds (0: off), got {value!r}")
    if value < 0:
        raise ValueError(f"{where} must be 0 (off) or a positive number of milliseconds, got {value}")
    if value > most:
        raise ValueError(f"{where} must be at most {most} ms (the timeout in SM cycles, "
                         f"ms * {CYCLES_PER_MS}, must fit in an int64), got {value}")
    return value


def _check_flag(value, where: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{where} must be a bool, got {value!r}")
    return value


@contextlib.contextmanager
def debug_build(*, detect_hangs=False, check_assumptions: bool = False):
    """Within the block (this thread or task), kernels are built as debug builds.

    Parameters
    ----------
    detect_hangs : bool | int
        ``True`` (a 2000 ms timeout) or a timeout in milliseconds; ``False``/``0``: off.
    check_assumptions : bool
        Build every ``T.assume`` as a run-time check.

    Raises
    ------
    TypeError, ValueError
        As :func:`hang_timeout` for ``detect_hangs``; ``check_assumptions`` not a bool.
    """
    options = DebugOptions(hang_timeout(detect_hangs, "debug_build: detect_hangs"),
                           _check_flag(check_assumptions, "debug_build: check_assumptions"))
    token = _CURRENT.set(options)
    try:
        yield options
    finally:
        _CURRENT.reset(token)


def _env_hangs() -> int:
    text = os.environ.get(ENV_DETECT_HANGS, "").strip().lower()
    if text in _OFF:
        return 0
    if text in _ON:
        return hang_timeout(True)
    if text.isdigit():
        return hang_timeout(int(text), ENV_DETECT_HANGS)
    raise ValueError(f"{ENV_DETECT_HANGS}={text!r}: expected 1/true/on (the default timeout), "
                     "a number of milliseconds, or 0/false/off")


def _env_check() -> bool:
    text = os.environ.get(ENV_CHECK_ASSUMPTIONS, "").strip().lower()
    if text in _OFF or text in _ON:
        return text in _ON
    raise ValueError(f"{ENV_CHECK_ASSUMPTIONS}={text!r}: expected 1/true/on or 0/false/off")


def current_debug() -> DebugOptions:
    """The debug options of a build started now: the innermost :func:`debug_build`
    block, else the environment variables, else off.

    Raises
    ------
    ValueError
        An environment variable holds something else than documented.
    """
    options = _CURRENT.get()
    if options is not None:
        return options
    if ENV_DETECT_HANGS not in os.environ and ENV_CHECK_ASSUMPTIONS not in os.environ:
        return _OFF_OPTIONS
    return DebugOptions(_env_hangs(), _env_check())


def instrument(lowered, source, options: DebugOptions):
    """PrimFunc ``lowered`` (after ``LowerTileApply``) with the checks ``options`` ask for:
    the ``T.assume`` checks, then each registered family's ``instrument`` hook, in
    family registration order (:class:`tvm_tirx.tile.ir.registry.Family`; the mbarrier
    family's bounds the waits for ``detect_hangs``).

    Parameters
    ----------
    lowered : PrimFunc
        The kernel after lowering (its ``T.assume`` statements still there).
    source : PrimFunc
        The same kernel before lowering (the hang messages quote its barrier counts).
    options : DebugOptions
        What to add; off: ``lowered`` itself.

    Returns
    -------
    PrimFunc
        The instrumented kernel.
    """
    from ..tile.kernel.assumptions import check_assumptions  # pylint: disable=import-outside-toplevel
    from ..tile.ir.registry import families  # pylint: disable=import-outside-toplevel

    if not options:
        return lowered
    if options.check_assumptions:
        lowered = check_assumptions(lowered)
    for family in families():
        if family.instrument is not None:
            lowered = family.instrument(lowered, source, options)
    return lowered


def refuse_scheduled(options: DebugOptions, names) -> None:
    """Raise when a debug build meets kernels that ``sch.tensorize`` gave tile calls.

    Parameters
    ----------
    options : DebugOptions
        The build's debug options (nothing is raised when off).
    names : Iterable[str]
        The scheduled kernels with tile calls (nothing is raised when empty).

    Raises
    ------
    ValueError
        Both are non-empty: the debug checks are not built into scheduled kernels.
    """
    names = sorted(names)
    if not options or not names:
        return
    asked = [k for k, v in (("detect_hangs", options.detect_hangs), ("check_assumptions", options.check_assumptions))
             if v]
    raise ValueError(
        f"tvm_tirx: {' and '.join(asked)} cannot be built into the scheduled kernel(s) {', '.join(names)} "
        "(tile calls put there by sch.tensorize are not instrumented); build them without the debug "
        f"options (unset {ENV_DETECT_HANGS} / {ENV_CHECK_ASSUMPTIONS}, or inside "
        "tvm_tirx.debug_build(detect_hangs=False, check_assumptions=False))"
    )
