"""``tvm_tirx.compile``: build a tile kernel with apache-tvm, and the :class:`Kernel` it returns.

(The module is ``kernel``, not ``compile``: a submodule named ``compile`` would
replace the ``tvm_tirx.compile`` function as soon as it is imported.)
"""

from __future__ import annotations

import functools

from .arch import gpu_arch as _gpu_arch
from .export import pack_imports_with_device_binary
from .pipeline import PIPELINE_NAME, register_pipeline
from .tile.lower import lower_tile_apply
from .tile.views import int_or_none

__all__ = ["compile", "Kernel", "PIPELINE_NAME", "resolve_target"]


def resolve_target(target="cuda", arch: str | None = None):
    """The apache-tvm ``Target`` for ``target`` and ``arch``.

    Parameters
    ----------
    target : str | dict | tvm.target.Target
        ``"cuda"``, a target dict, or a Target.
    arch : str | None
        ``"sm_90a"`` and the like.  Defaults to the GPU's own arch.

    Raises
    ------
    ValueError
        No GPU is present and ``arch`` was not given, or the target is not CUDA.
    """
    import tvm  # pylint: disable=import-outside-toplevel

    if isinstance(target, tvm.target.Target):
        if arch is None:
            return target
        target = dict(target.export())
    if isinstance(target, str):
        if target != "cuda":
            raise ValueError(f"tvm_tirx.compile: target must be 'cuda', got {target!r}")
        target = {"kind": "cuda"}
    target = dict(target)
    if target.get("kind") != "cuda":
        raise ValueError(f"tvm_tirx.compile: target kind must be 'cuda', got {target.get('kind')!r}")
    if arch is None:
        arch = target.get("arch") or _gpu_arch()
    if arch is None:
        raise ValueError(
            "tvm_tirx.compile: no CUDA GPU is present, so the architecture cannot be "
            "detected; pass arch=, e.g. tvm_tirx.compile(func, target='cuda', arch='sm_90a')"
        )
    target["arch"] = arch
    return tvm.target.Target(target)


def compile(func_or_mod, target="cuda", *, arch: str | None = None, options=None) -> Kernel:  # pylint: disable=redefined-builtin
    """Build a kernel written with ``T.cuda.tile.apply``.

    Parameters
    ----------
    func_or_mod : PrimFunc | IRModule
        One kernel (a PrimFunc, or an IRModule holding exactly one).
    target : str | dict | Target
        ``"cuda"`` (the default).
    arch : str | None
        CUDA architecture such as ``"sm_90a"``; required without a GPU.
    options : dict | None
        ``tvm.transform.PassContext`` config entries.

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
        functions (build those with ``tvm.compile``, see :mod:`tvm_tirx.relax`).
    """
    import tvm  # pylint: disable=import-outside-toplevel

    from .script.install import install  # pylint: disable=import-outside-toplevel

    install()
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
    name, func = funcs[0]
    tgt = resolve_target(target, arch)
    pipeline = register_pipeline()
    # Lower here, in Python, so that a contract violation reaches the caller as
    # the TileError it is (through the pass pipeline's FFI boundary it would
    # arrive as a RuntimeError).  The pipeline's own LowerTileApply then has
    # nothing left to do.
    with tgt:
        mod = tvm.IRModule({name: lower_tile_apply(func)})
    with tvm.transform.PassContext(config=dict(options or {})):
        executable = tvm.compile(mod, target=tgt, tir_pipeline=pipeline)
    return Kernel(executable, func, name, tgt)




def _dtype_name(x) -> str:
    text = str(x)
    return text[len("torch.") :] if text.startswith("torch.") else text


class Kernel:
    """A compiled tile kernel.

    Call it with one argument per kernel parameter, in order: torch CUDA
    tensors (zero copy through DLPack) or tvm tensors for ``T.Tensor``
    parameters.  Every argument is checked before launch.

    Attributes
    ----------
    name : str
        The kernel's global symbol.
    func : PrimFunc
        The kernel as written (before lowering).
    target : tvm.target.Target
        The CUDA target (with ``arch``).
    executable : tvm.runtime.Executable
        apache-tvm's build result.
    """

    def __init__(self, executable, func, name, target):
        self.executable = executable
        self.func = func
        self.name = name
        self.target = target
        self._params = [_ParamSpec.of(p) for p in func.params]

    # -- sources ----------------------------------------------------------------
    @functools.cached_property
    def cuda_source(self) -> str:
        """The generated CUDA C++ source (str)."""
        for mod in _walk_modules(self.executable.mod):
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
        return _nvcc(self.cuda_source, self.target, "ptx").decode()

    def cubin(self) -> bytes:
        """Assemble :attr:`cuda_source` into a cubin with ``nvcc``/``ptxas`` (bytes)."""
        return _nvcc(self.cuda_source, self.target, "cubin")

    def script(self) -> str:
        """The kernel as TVMScript, before lowering."""
        return self.func.script()

    def export(self, path, *, fmt: str = "cubin") -> None:
        """Write the kernel as a shared library that holds compiled device code.

        The library is apache-tvm's ``export_library`` output -- the host
        launcher, plus the CUDA module serialized into it -- except that the
        CUDA module carries the kernel assembled for :attr:`target`'s arch by
        the machine's ``nvcc`` instead of whatever the build kept (on a machine
        without a GPU driver apache-tvm keeps CUDA *source*, which a
        runtime-only process cannot compile).  Another process loads it with
        ``tvm.runtime.load_module(path)``, also with ``TVM_USE_RUNTIME_LIB=1``,
        once ``libtvm_runtime_cuda.so`` is loaded, and calls
        ``module[kernel.name](*tensors)``.  No argument checks run there.

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
        binary = _nvcc(self.cuda_source, self.target, fmt)

        def pack_imports(mod, is_system_lib, symbol_prefix, workspace_dir):
            return pack_imports_with_device_binary(mod, is_system_lib, symbol_prefix, workspace_dir, fmt, binary)

        self.executable.mod.export_library(str(path), fpack_imports=pack_imports)

    # -- launch -------------------------------------------------------------------
    def __call__(self, *args):
        """Launch the kernel on ``args`` (one per parameter).

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
            that does not fit its dtype.
        """
        if len(args) != len(self._params):
            raise TypeError(
                f"{self.name}: expected {len(self._params)} argument(s) "
                f"({', '.join(p.name for p in self._params)}), got {len(args)}"
            )
        sizes: dict = {}
        for spec, arg in zip(self._params, args):
            spec.check(self.name, arg, sizes)
        self.executable[self.name](*args)

    def __repr__(self):
        return f"<tvm_tirx.Kernel {self.name} ({self.target.attrs.get('arch', '')})>"


def _walk_modules(mod):
    yield mod
    for sub in mod.imports:
        yield from _walk_modules(sub)


def _nvcc(source: str, target, fmt: str, check: bool = True) -> bytes:
    """Run the machine's ``nvcc`` on ``source``: ``fmt="ptx"`` gives PTX, ``"cubin"``
    the assembled binary.  nvcc 13 runs ptxas on ``--ptx`` output too; with
    ``check=False`` the PTX is returned even when ptxas rejects it."""
    import subprocess  # pylint: disable=import-outside-toplevel
    import tempfile  # pylint: disable=import-outside-toplevel

    sm = str(target.attrs.get("arch", ""))
    if not sm.startswith("sm_"):
        raise RuntimeError(f"tvm_tirx: target has no sm_ arch: {target}")
    if fmt == "ptx":
        flags = ["--ptx", f"-arch=compute_{sm[3:]}"]
    else:
        flags = [f"--{fmt}", f"-arch={sm}"]
    with tempfile.TemporaryDirectory() as tmp:
        src, out = f"{tmp}/kernel.cu", f"{tmp}/kernel.{fmt}"
        with open(src, "w", encoding="utf-8") as f:
            f.write(source)
        try:
            proc = subprocess.run(
                ["nvcc", *flags, "-O3", "-std=c++17", "-w", "-o", out, src],
                capture_output=True,
                text=True,
                check=False,
            )
        except FileNotFoundError as err:
            raise RuntimeError("tvm_tirx: nvcc is not on the PATH") from err
        import os  # pylint: disable=import-outside-toplevel

        if proc.returncode != 0 and not (not check and fmt == "ptx" and os.path.exists(out)):
            raise RuntimeError(f"tvm_tirx: nvcc could not build the kernel ({fmt}):\n{proc.stderr}")
        with open(out, "rb") as f:
            return f.read()

class _ParamSpec:
    """What one kernel parameter accepts."""

    def __init__(self, name, shape, dtype, align, is_tensor):
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.align = align
        self.is_tensor = is_tensor

    @classmethod
    def of(cls, param):
        from tvm import tirx  # pylint: disable=import-outside-toplevel

        if tirx.is_buffer_var(param):
            # a symbolic extent (``n = T.int32()``; ``T.Tensor((n, 4), ...)``) is kept
            # by name: any extent fits, the same one wherever the name appears
            shape = tuple(_static_or_name(s) for s in param.shape)
            return cls(param.name, shape, param.dtype, int(param.data_alignment), True)
        return cls(param.name, None, str(param.ty.dtype), 1, False)

    def check(self, kernel: str, arg, sizes: dict | None = None) -> None:
        """Raise TypeError/ValueError if ``arg`` does not fit; ``sizes`` collects the
        extents bound to symbolic dimensions across the call's arguments."""
        where = f"{kernel}: argument {self.name!r}"
        sizes = {} if sizes is None else sizes
        if not self.is_tensor:
            self._check_scalar(where, arg)
            return
        if _is_torch_tensor(arg):
            self._check_torch(where, arg, sizes)
        elif hasattr(arg, "shape") and hasattr(arg, "dtype") and hasattr(arg, "device"):
            self._check_common(where, tuple(arg.shape), str(arg.dtype), _device_kind(arg.device), sizes)
        else:
            raise TypeError(
                f"{where}: expected a CUDA tensor of shape {self.shape} and dtype {self.dtype}, "
                f"got {type(arg).__name__}"
            )

    def _check_scalar(self, where, arg):
        import numbers  # pylint: disable=import-outside-toplevel

        kind = "bool" if self.dtype == "bool" else "float" if self.dtype.startswith(("float", "bfloat")) else "int"
        accepted = {
            "bool": (bool,),
            "int": (numbers.Integral,),
            "float": (numbers.Real,),
        }[kind]
        if not isinstance(arg, accepted) or (kind == "int" and isinstance(arg, bool)):
            raise TypeError(f"{where}: expected a Python {kind} for a {self.dtype} scalar, got {type(arg).__name__}")
        if kind == "int":
            from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel

            bits = DataType(self.dtype).bits
            lo, hi = (0, 2**bits) if self.dtype.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1))
            if not lo <= int(arg) < hi:
                raise ValueError(f"{where}: {int(arg)} does not fit {self.dtype} ([{lo}, {hi - 1}])")

    def _check_shape(self, where, shape, sizes):
        expected = "(" + ", ".join(str(d) for d in self.shape) + ("," if len(self.shape) == 1 else "") + ")"
        if len(shape) != len(self.shape):
            raise ValueError(f"{where}: expected shape {expected}, got {tuple(shape)}")
        bound = {}
        for want, got in zip(self.shape, shape):
            if isinstance(want, int):
                if want != got:
                    raise ValueError(f"{where}: expected shape {expected}, got {tuple(shape)}")
                continue
            seen = sizes.get(want, bound.get(want))
            if seen is not None and seen != got:
                raise ValueError(
                    f"{where}: expected shape {expected} with {want} = {seen} (from an earlier "
                    f"dimension), got {tuple(shape)}"
                )
            bound[want] = got
        sizes.update(bound)

    def _check_common(self, where, shape, dtype, device, sizes):
        if dtype != self.dtype:
            raise ValueError(f"{where}: expected dtype {self.dtype}, got {dtype}")
        self._check_shape(where, tuple(shape), sizes)
        if device != "cuda":
            raise ValueError(f"{where}: expected a CUDA tensor, got one on {device}")

    def _check_torch(self, where, t, sizes):
        if _dtype_name(t.dtype) != self.dtype:
            raise ValueError(f"{where}: expected dtype {self.dtype}, got {_dtype_name(t.dtype)}")
        self._check_shape(where, tuple(t.shape), sizes)
        expected, stride = [], 1
        for extent in reversed(tuple(t.shape)):
            expected.append(stride)
            stride *= extent
        expected = tuple(reversed(expected))
        strides = tuple(t.stride())
        if any(e != s for e, s, n in zip(expected, strides, tuple(t.shape)) if n != 1):
            raise ValueError(
                f"{where}: expected a contiguous row-major tensor (strides {expected}), "
                f"got strides {strides}"
            )
        if t.data_ptr() % self.align != 0:
            raise ValueError(
                f"{where}: the parameter is declared align={self.align} bytes, but the tensor's "
                f"data pointer is {t.data_ptr() % self.align} bytes past such a boundary"
            )
        if t.device.type != "cuda":
            raise ValueError(f"{where}: expected a CUDA tensor, got one on {t.device.type}")


def _static_or_name(extent):
    """An extent as an int, or the name of its variable when it is symbolic."""
    value = int_or_none(extent)
    return str(extent) if value is None else value


def _is_torch_tensor(x) -> bool:
    cls = type(x)
    return cls.__module__.startswith("torch") and hasattr(x, "data_ptr")


def _device_kind(dev) -> str:
    kind = getattr(dev, "type", None)
    if isinstance(kind, str):
        return kind
    dlpack_type = getattr(dev, "dlpack_device_type", None)
    code = dlpack_type() if callable(dlpack_type) else getattr(dev, "device_type", None)
    return {2: "cuda", 1: "cpu"}.get(int(code) if code is not None else -1, str(dev))
