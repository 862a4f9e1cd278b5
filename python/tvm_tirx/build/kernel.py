"""``tvm_tirx.compile``: build a tile kernel with apache-tvm, and the :class:`Kernel` it returns.

(The module is ``kernel``, not ``compile``: a submodule named ``compile`` would
replace the ``tvm_tirx.compile`` function as soon as it is imported.)
"""

from __future__ import annotations

import functools

import tvm

from ..errors import reported_here
from ..schedule.scheduled import has_tile_calls, lower_scheduled
from ..script.install import install
from ..tile.lower.lower import lower_tile_apply
from .arguments import ParamSpec, build_checker
from .debug import debug_build, instrument, refuse_scheduled
from .cache import cache_dir, cache_key, has_cuda_loader, load_entry, store_entry
from .dynamic_smem_limit import DynamicSmemLimit
from .export import pack_imports_with_device_binary
from .launch_sizes import LaunchSizes
from .nvcc import nvcc
from .options import cuda_compiler_flags, parse_options
from .pipeline import PIPELINE_NAME, is_s_tir, register_pipeline
from .target import resolve_target

__all__ = ["compile", "Kernel", "PIPELINE_NAME", "resolve_target"]


@reported_here
def compile(func_or_mod, target="cuda", *, arch: str | None = None, options=None) -> Kernel:  # pylint: disable=redefined-builtin
    """Build a kernel written with ``T.cuda.tile.apply``.

    A build that succeeded is kept in the compile cache on disk
    (:mod:`tvm_tirx.build.cache`: ``TVM_TIRX_CACHE_DIR`` moves it, ``TVM_TIRX_CACHE=0``
    turns it off); compiling the same kernel again -- in this process or
    another -- loads it from there.

    Parameters
    ----------
    func_or_mod : PrimFunc | IRModule
        One kernel (a PrimFunc, or an IRModule holding exactly one).
    target : str | dict | Target
        ``"cuda"`` (the default).
    arch : str | None
        CUDA architecture such as ``"sm_90a"``; required without a GPU.
    options : dict | None
        ``"flags"``: CUDA compiler flags (NVRTC or nvcc: ``-lineinfo``,
        ``--use_fast_math``, ``-maxrregcount=N``); ``"ptxas"``: ptxas flags
        (``-v``, ``--register-usage-level=N``); any other key is a
        ``tvm.transform.PassContext`` config entry.  See
        :mod:`tvm_tirx.build.options`.  ``"detect_hangs"`` and
        ``"check_assumptions"`` not given here come from the innermost
        :func:`tvm_tirx.debug_build` block, else the ``TVM_TIRX_DETECT_HANGS`` /
        ``TVM_TIRX_CHECK_ASSUMPTIONS`` environment variables (:mod:`tvm_tirx.build.debug`).

    Returns
    -------
    Kernel
        Callable on torch CUDA tensors and tvm tensors.

    Raises
    ------
    TileError
        A tile call breaks its contract (found by ``LowerTileApply``).
    ValueError
        No arch without a GPU; not exactly one PrimFunc; a module with Relax
        functions (build those with ``tvm.compile``, see :mod:`tvm_tirx.ops.relax`);
        an unknown key in ``options``; a ``TVM_TIRX_*`` debug variable that is
        neither on, off nor a number of milliseconds; a debug build of a kernel
        that ``sch.tensorize`` gave tile calls.
    TypeError
        ``options`` is not a dict, or its ``"flags"``/``"ptxas"`` is not a list of str.
    """
    install()
    name, func = _the_kernel(func_or_mod)
    tgt = resolve_target(target, arch)
    opts = parse_options(options)
    directory = cache_dir()
    if directory is None:
        return Kernel(_build(func, name, tgt, opts), func, name, tgt, options=opts)
    key = cache_key(func.script(show_meta=True), name, tgt, opts.key())
    kernel = _from_cache(directory, key, func, name, tgt, opts)
    if kernel is not None:
        return kernel
    executable = _build(func, name, tgt, opts)
    kernel = Kernel(executable, func, name, tgt, options=opts)
    # A process that can load CUDA modules stores the library too; without a
    # CUDA driver the build holds only CUDA source, and the entry its metadata.
    write = executable.export_library if has_cuda_loader() else None
    store_entry(directory, key, name, kernel.cuda_source, write)
    return kernel


def _the_kernel(func_or_mod):
    """``(name, PrimFunc)`` of the one kernel in ``func_or_mod``."""
    if isinstance(func_or_mod, tvm.IRModule):
        mod = func_or_mod
    else:
        name = getattr(func_or_mod, "__name__", None) or "main"
        attrs = func_or_mod.attrs
        if attrs is not None and "global_symbol" in attrs:
            name = str(attrs["global_symbol"])
        mod = tvm.IRModule({name: func_or_mod})
    if any(isinstance(f, tvm.relax.Function) for f in mod.functions.values()):
        raise ValueError(
            "tvm_tirx.compile builds one kernel; a module with Relax functions is built with "
            "tvm.compile(mod, target, relax_pipeline='tvm_tirx', tir_pipeline='tvm_tirx') "
            "and run with tvm.relax.VirtualMachine"
        )
    funcs = [(gv.name_hint, f) for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
    if len(funcs) != 1:
        raise ValueError(f"tvm_tirx.compile: expected one PrimFunc, found {len(funcs)}")
    return funcs[0]


def _build(func, name, tgt, opts):
    """apache-tvm's executable for ``func`` (lowered here first)."""
    pipeline = register_pipeline()
    # Lower here, in Python, so that a contract violation reaches the caller as
    # the TileError it is (through the pass pipeline's FFI boundary it would
    # arrive as a RuntimeError).  The pipeline's own LowerTileApply then has
    # nothing left to do.
    debug = opts.debug()
    with tgt:
        if is_s_tir(func):
            # a scheduled PrimFunc that tensorize gave tile calls (tensor_intrin)
            refuse_scheduled(debug, [name] if has_tile_calls(func) else [])
            mod = lower_scheduled(tvm.IRModule({name: func}))
        else:
            mod = tvm.IRModule({name: instrument(lower_tile_apply(func), func, debug)})
    # the checks are built in already: the pipeline must not add them a second time
    with tvm.transform.PassContext(config=dict(opts.pass_config)), cuda_compiler_flags(opts), debug_build():
        return tvm.compile(mod, target=tgt, tir_pipeline=pipeline)


def _from_cache(directory, key, func, name, tgt, opts):
    """The Kernel stored under ``key``, or None (no entry, or one that does not verify or load)."""
    entry = load_entry(directory, key)
    if entry is None or entry.name != name:
        return None
    executable = None
    if entry.library is not None:
        try:
            executable = tvm.runtime.Executable(tvm.runtime.load_module(entry.library))
        except Exception:  # pylint: disable=broad-except
            return None  # e.g. stored by a process with a CUDA runtime this one lacks: rebuild
    kernel = Kernel(executable, func, name, tgt, options=opts, from_library=executable is not None)
    kernel.__dict__["cuda_source"] = entry.cuda_source
    return kernel


class Kernel:
    """A compiled tile kernel.

    Call it with one argument per kernel parameter, in order: torch CUDA
    tensors (zero copy through DLPack) or tvm tensors for ``T.Tensor``
    parameters.  Every argument is checked before launch.  The kernel runs
    on torch's current CUDA stream, and a call can be captured in a CUDA graph.

    Attributes
    ----------
    name : str
        The kernel's global symbol.
    func : PrimFunc
        The kernel as written (before lowering).
    target : tvm.target.Target
        The CUDA target (with ``arch``).
    options : CompileOptions
        The compile options (:mod:`tvm_tirx.build.options`).
    executable : tvm.runtime.Executable
        apache-tvm's build result (for a kernel from the compile cache: the
        stored library, or -- in a process without a CUDA runtime, where the
        cache keeps sources only -- a build made on first use).
    """

    def __init__(self, executable, func, name, target, *, options=None, from_library=False):
        self.func = func
        self.name = name
        self.target = target
        self.options = options if options is not None else parse_options(None)
        self._executable = executable
        # a build made here from source: export_library works on it (not on a loaded library)
        self._source_build = None if from_library else executable
        self._params = [ParamSpec.of(p) for p in func.params]
        self._check = _with_launch_sizes(build_checker(self._params, name), func, name, target)
        # a run-time dynamic shared memory size: its limit is raised once per device
        self._dyn_limit = DynamicSmemLimit(name)

    @property
    def executable(self):
        """apache-tvm's executable (``tvm.runtime.Executable``)."""
        if self._executable is None:
            self._executable = self._source_executable()
        return self._executable

    def _source_executable(self):
        if self._source_build is None:
            self._source_build = _build(self.func, self.name, self.target, self.options)
        return self._source_build

    @functools.cached_property
    def _function(self):
        """The device launcher, looked up once (apache-tvm's lookup costs more than a launch)."""
        return self.executable[self.name]

    # -- sources ----------------------------------------------------------------
    @functools.cached_property
    def cuda_source(self) -> str:
        """The generated CUDA C++ source (str)."""
        for mod in _walk_modules(self._source_executable().mod):
            if mod.kind in ("cuda",):
                for fmt in ("cu", ""):
                    try:
                        src = mod.inspect_source(fmt)
                    except Exception:  # pylint: disable=broad-except
                        continue
                    if src and "__global__" in src:
                        return src
        raise RuntimeError("tvm_tirx: the CUDA module holds no source")

    @functools.cached_property
    def ptx(self) -> str:
        """PTX assembly of :attr:`cuda_source`, produced by the machine's ``nvcc`` (str).

        Raises
        ------
        RuntimeError
            ``nvcc`` is missing or rejects the source.
        """
        return nvcc(self.cuda_source, self.target, "ptx", flags=self.options.compiler_args()).decode()

    def cubin(self) -> bytes:
        """Assemble :attr:`cuda_source` into a cubin with ``nvcc``/``ptxas`` (bytes), with the
        compile options' flags."""
        return nvcc(self.cuda_source, self.target, "cubin", flags=self.options.compiler_args())

    def script(self) -> str:
        """The kernel as TVMScript, before lowering."""
        return self.func.script()

    def export(self, path, *, fmt: str = "cubin") -> None:
        """Write the kernel as a shared library that holds compiled device code.

        The library is apache-tvm's ``export_library`` output -- the host
        launcher, plus the CUDA module serialized into it -- except that the
        CUDA module carries the kernel assembled for :attr:`target`'s arch by
        the machine's ``nvcc`` (with the compile options' flags) instead of
        whatever the build kept (on a machine
        without a GPU driver apache-tvm keeps CUDA *source*, which a
        runtime-only process cannot compile).  Another process loads it with
        ``tvm.runtime.load_module(path)``, also with ``TVM_USE_RUNTIME_LIB=1``,
        once ``libtvm_runtime_cuda.so`` is loaded, and calls
        ``module[kernel.name](*tensors)``.  No argument checks run there, and
        a kernel with a run-time dynamic shared memory size over 48 KiB needs
        :func:`tvm_tirx.build.dynamic_smem_limit.raise_dynamic_smem_limit` called
        once per device first (``Kernel`` does that itself).

        Parameters
        ----------
        path : str | os.PathLike
            The ``.so`` file to write.
        fmt : str
            ``"cubin"`` (SASS for the arch; the default) or ``"fatbin"``
            (SASS plus PTX of the arch, as ``nvcc -arch=<arch>`` packs it).

        Raises
        ------
        ValueError
            ``fmt`` is neither ``"cubin"`` nor ``"fatbin"``.
        RuntimeError
            ``nvcc`` is missing or rejects the kernel, or the built module does
            not have the one CUDA module this method expects.
        """
        if fmt not in ("cubin", "fatbin"):
            raise ValueError(f"Kernel.export: fmt must be 'cubin' or 'fatbin', got {fmt!r}")
        binary = nvcc(self.cuda_source, self.target, fmt, flags=self.options.compiler_args())

        def pack_imports(mod, is_system_lib, symbol_prefix, workspace_dir):
            return pack_imports_with_device_binary(mod, is_system_lib, symbol_prefix, workspace_dir, fmt, binary)

        self._source_executable().mod.export_library(str(path), fpack_imports=pack_imports)

    # -- launch -------------------------------------------------------------------
    def __call__(self, *args):
        """Launch the kernel on ``args`` (one per parameter), on torch's current stream.

        Every argument is checked before anything is launched, so a call that
        raises has run no kernel and left every tensor as it was.

        Raises
        ------
        TypeError
            Wrong number of arguments, an argument that is not a tensor, or a
            scalar parameter given something other than a Python bool / int /
            float of its kind.
        ValueError
            A tensor with the wrong shape, dtype, device, strides or a base
            pointer that breaks the parameter's ``align``; an integer scalar
            that does not fit its dtype; a run-time launch size that these
            arguments make invalid (a grid extent of 0 or over CUDA's limit, a
            dynamic shared memory size below the kernel's carve-outs or over
            the target's limit; :mod:`tvm_tirx.build.launch_sizes`).
        RuntimeError
            A run-time dynamic shared memory size over 48 KiB, and the
            kernel's limit on the device could not be raised
            (:mod:`tvm_tirx.build.dynamic_smem_limit`; the first launch of such a
            kernel on a device raises it, outside any CUDA graph capture).
        """
        dyn_bytes = self._check(args)
        if dyn_bytes is not None:
            self._dyn_limit.before(self._function, args, dyn_bytes)
        self._function(*args)

    def launcher(self, *args):
        """Check ``args`` as a call does, and return the unchecked launch function.

        For callers that launch the kernel many times on arguments of one *signature*
        (every tensor of the same shape, strides, dtype, device and base-pointer
        alignment, every scalar the same value): the checks and the launch sizes are the
        same for all of them, so they are run once here, and each launch is then
        ``fn(*args)`` -- apache-tvm's host function (which still encodes the TMA tensor
        maps and computes the grid from its own arguments) and the launch, nothing else.
        The torch operators keep one per call signature
        (:class:`tvm_tirx.ops.eager.Plans`).

        Parameters
        ----------
        *args : torch.Tensor | tvm.runtime.Tensor | bool | int | float
            One per kernel parameter, as for a call.

        Returns
        -------
        Callable
            ``fn(*args)`` launches on torch's current stream without any check: calling
            it with arguments of another signature is the caller's error (undefined
            behaviour, as for a raw CUDA launch).

        Raises
        ------
        TypeError, ValueError, RuntimeError
            As :meth:`__call__` does, for these arguments.
        """
        dyn_bytes = self._check(args)
        if dyn_bytes is not None:
            self._dyn_limit.before(self._function, args, dyn_bytes)
        return self._function

    def __repr__(self):
        return f"<tvm_tirx.Kernel {self.name} ({self.target.attrs.get('arch', '')})>"


def _with_launch_sizes(check, func, name, target):
    """``check``, followed by the checks of the kernel's run-time launch sizes
    (:mod:`.launch_sizes`) when it has any."""
    sizes = LaunchSizes.of(func, name, str(target.attrs.get("arch", "")) or None)
    if sizes is None:
        return check

    def check_call(args):
        check(args)
        return sizes(args)

    return check_call


def _walk_modules(mod):
    yield mod
    for sub in mod.imports:
        yield from _walk_modules(sub)
