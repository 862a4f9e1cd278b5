"""``tvm_tirx.compile(..., options=)``: CUDA compiler and ptxas flags, and PassContext config.

``options`` is a dict.  These keys are ours:

``"flags"``
    Flags for the CUDA C++ compiler, passed as written -- to NVRTC or nvcc,
    whichever apache-tvm's build uses (``TVM_CUDA_COMPILE_MODE``, NVRTC by
    default), and to the ``nvcc`` that :attr:`Kernel.ptx`, :meth:`Kernel.cubin`
    and :meth:`Kernel.export` run: ``-lineinfo``, ``--use_fast_math``,
    ``-maxrregcount=64``.  A flag that one compiler does not know is an error
    of that compiler (NVRTC silently drops a few nvcc-only ones: ``-O*``,
    ``-Xptxas``, ``-Xcompiler``; use ``"ptxas"`` for ptxas).
``"ptxas"``
    Flags for ptxas, each passed on as ``--ptxas-options=<flag>`` (both
    compilers take that form): ``-v``, ``--register-usage-level=5``,
    ``--warn-on-spills``.
``"detect_hangs"``
    ``True`` (a 2 s timeout) or a timeout in milliseconds (``0`` or ``False``:
    off; at most :data:`MAX_HANG_TIMEOUT_MS`): every mbarrier
    wait of the kernel is bounded; one that times out prints its source line,
    the barrier, the parity and the counts the kernel states, and traps
    (the mbarrier family's ``instrument`` hook, :func:`tvm_tirx.build.debug.instrument`).  Default off: waits cost
    a little more with it (one ``clock64`` per poll).
``"check_assumptions"``
    ``True``: every ``T.assume(cond)`` of the kernel becomes a run-time check
    that prints its source line, the condition, the CTA and thread and traps
    when ``cond`` is false (:mod:`tvm_tirx.tile.kernel.assumptions`); default
    ``False``: assumptions are facts for the checker and cost nothing.

Not given, ``"detect_hangs"`` and ``"check_assumptions"`` come from
:func:`tvm_tirx.debug_build` or the environment (:mod:`tvm_tirx.build.debug`).

Every other key is a ``tvm.transform.PassContext`` config entry (such as
``"tirx.disable_vectorize"``); apache-tvm checks those names.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass, field

import tvm_ffi
from tvm.support import nvcc

from ..tile.ir.hooks import CYCLES_PER_MS
from .debug import DebugOptions, current_debug, hang_timeout

__all__ = ["CompileOptions", "parse_options", "cuda_compiler_flags", "MAX_HANG_TIMEOUT_MS"]

#: The largest ``detect_hangs`` (ms): its cycle count (ms * CYCLES_PER_MS) must fit in an int64.
MAX_HANG_TIMEOUT_MS = (2**63 - 1) // CYCLES_PER_MS

_OURS = ("flags", "ptxas", "check_assumptions", "detect_hangs")


def _flag_list(key: str, value) -> tuple:
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"tvm_tirx.compile: options[{key!r}] must be a list of str, got {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class CompileOptions:
    """The parsed ``options`` of :func:`tvm_tirx.compile`.

    Attributes
    ----------
    flags : tuple[str, ...]
        CUDA compiler flags (NVRTC or nvcc).
    ptxas : tuple[str, ...]
        ptxas flags.
    check_assumptions : bool
        Build ``T.assume`` conditions as run-time checks.
    detect_hangs : int
        Milliseconds an mbarrier wait may spin before the kernel traps (0: off).
    pass_config : dict
        ``tvm.transform.PassContext`` config entries.
    """

    flags: tuple = ()
    ptxas: tuple = ()
    check_assumptions: bool = False
    detect_hangs: int = 0
    pass_config: dict = field(default_factory=dict)

    def debug(self) -> DebugOptions:
        """``detect_hangs`` and ``check_assumptions`` as :class:`~tvm_tirx.build.debug.DebugOptions`."""
        return DebugOptions(self.detect_hangs, self.check_assumptions)

    def compiler_args(self) -> list:
        """Arguments for NVRTC or nvcc: ``flags`` then ``--ptxas-options=<flag>`` per ptxas flag."""
        return [*self.flags, *(f"--ptxas-options={p}" for p in self.ptxas)]

    def key(self) -> str:
        """A canonical text of the options (part of the compile cache key)."""
        return json.dumps(
            {
                "flags": self.flags,
                "ptxas": self.ptxas,
                "check_assumptions": self.check_assumptions,
                "detect_hangs": self.detect_hangs,
                "pass_config": self.pass_config,
            },
            sort_keys=True,
            default=str,
        )


def parse_options(options) -> CompileOptions:
    """``options`` (None or a dict, see the module docstring) as :class:`CompileOptions`.

    ``"detect_hangs"`` and ``"check_assumptions"`` not given take the current debug
    setting (:func:`tvm_tirx.build.debug.current_debug`: a ``tvm_tirx.debug_build``
    block, else the ``TVM_TIRX_*`` environment variables, else off).

    Raises
    ------
    TypeError
        ``options`` is not a dict, ``"flags"``/``"ptxas"`` is not a list of str,
        ``"check_assumptions"`` is not a bool or ``"detect_hangs"`` is not a
        bool or an int.
    ValueError
        A key without a dot other than ours (PassContext config names always
        have one: a misspelt key of ours is not passed on), or a
        ``"detect_hangs"`` below 0 or above :data:`MAX_HANG_TIMEOUT_MS`.
    """
    debug = current_debug()
    if options is None:
        return CompileOptions(check_assumptions=debug.check_assumptions, detect_hangs=debug.detect_hangs)
    if not isinstance(options, dict):
        raise TypeError(f"tvm_tirx.compile: options must be a dict, got {type(options).__name__}")
    for key in options:
        if key not in _OURS and "." not in str(key):
            raise ValueError(
                f"tvm_tirx.compile: unknown option {key!r}; expected 'flags' (CUDA compiler flags), "
                "'ptxas' (ptxas flags), 'check_assumptions' (bool), 'detect_hangs' (bool or milliseconds) "
                "or a PassContext config name "
                "such as 'tirx.disable_vectorize'"
            )
    check = options.get("check_assumptions", debug.check_assumptions)
    if not isinstance(check, bool):
        raise TypeError(f"tvm_tirx.compile: options['check_assumptions'] must be a bool, got {check!r}")
    return CompileOptions(
        flags=_flag_list("flags", options.get("flags", ())),
        ptxas=_flag_list("ptxas", options.get("ptxas", ())),
        check_assumptions=check,
        detect_hangs=hang_timeout(options.get("detect_hangs", debug.detect_hangs),
                                  "tvm_tirx.compile: options['detect_hangs']"),
        pass_config={k: v for k, v in options.items() if k not in _OURS},
    )


_CALLBACK = "tvm_callback_cuda_compile"
_SWAP_LOCK = threading.Lock()


def _callback_with(args: list):
    """apache-tvm's ``tvm_callback_cuda_compile`` (``tvm.support.nvcc``) with ``args`` added."""

    def compile_cuda(code, *_):
        mode = os.environ.get("TVM_CUDA_COMPILE_MODE", "nvrtc").lower()
        fmt = "cubin" if mode == "nvrtc" else "fatbin"  # what apache-tvm's callback makes
        return nvcc.compile_cuda(code, target_format=fmt, options=list(args), compiler=mode)

    return compile_cuda


@contextlib.contextmanager
def cuda_compiler_flags(options: CompileOptions):
    """Within the block, apache-tvm's build compiles CUDA with ``options.compiler_args()``.

    apache-tvm 0.27 compiles a kernel's CUDA through the global function
    ``tvm_callback_cuda_compile`` and passes it no options; the block
    registers one that passes them (else the same call as apache-tvm's) and
    puts the previous one back afterwards.  Without flags nothing is replaced.
    Builds in several threads at once are serialised by a lock.
    """
    args = options.compiler_args()
    if not args:
        yield
        return

    with _SWAP_LOCK:  # (importing tvm.support.nvcc first registers apache-tvm's callback)
        previous = tvm_ffi.get_global_func(_CALLBACK, allow_missing=True)
        tvm_ffi.register_global_func(_CALLBACK, _callback_with(args), override=True)
        try:
            yield
        finally:
            if previous is not None:
                tvm_ffi.register_global_func(_CALLBACK, previous, override=True)
            else:
                tvm_ffi.remove_global_func(_CALLBACK)
