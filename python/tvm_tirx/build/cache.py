"""The compile cache on disk: a second process compiling the same kernel loads it instead.

Where: ``$TVM_TIRX_CACHE_DIR`` if set, else ``tvm_tirx`` in the user's cache
directory (``$XDG_CACHE_HOME``, by default ``~/.cache``).  ``TVM_TIRX_CACHE=0``
turns the cache off.

Key: SHA-256 of everything that changes the binary -- the kernel's printed
TVMScript (as written, before lowering), the target (kind, arch, host), the
compile options, the versions of tvm_tirx (and a fingerprint of its source
files, so an edited checkout never reads entries of the old code),
apache-tvm, tvm-ffi and the CUDA compilers (nvcc, NVRTC), the environment
variables apache-tvm's CUDA build reads, and whether a CUDA driver is present
(without one apache-tvm keeps CUDA source instead of a binary).

Entry: a directory ``<key>/`` holding ``meta.json`` (the kernel's name, its
CUDA source, and the SHA-256 of every other file and of the metadata itself)
and, when the build produced device code, ``kernel.so`` (apache-tvm's
``export_library`` of the build, loaded back with
``tvm.runtime.load_module``).  An entry is written into a fresh directory
and renamed into place (atomic on POSIX), so several processes can compile
at once: the first rename wins, the others drop their copy.

The cache holds code that is loaded into the process, so:

* the directory is created private (mode 0700); a directory that is not
  owned by the user or that other users can write to is not used (one
  warning, then every compile runs without the cache);
* an entry is loaded only if every file's SHA-256 matches the one recorded
  when it was written, and the metadata's own hash matches; anything else
  (truncation, corruption, tampering) is deleted and rebuilt;
* only successful builds are written: a ``TileError`` or any other failure
  leaves the cache as it was.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import shutil
import stat
import subprocess
import tempfile
import warnings

import tvm
import tvm_ffi

from .._version import __version__

__all__ = ["cache_dir", "cache_key", "load_entry", "store_entry", "Entry"]

#: Bumped when the layout of an entry changes.
FORMAT = "tvm_tirx-cache-1"
META = "meta.json"
LIBRARY = "kernel.so"

#: apache-tvm's CUDA build reads these (``tvm.support.nvcc``).
_TVM_ENV = (
    "TVM_CUDA_COMPILE_MODE",
    "TVM_CUDA_PTXAS_REG_LEVEL",
    "TVM_CUDA_PTXAS_EXTRA_OPTS",
    "TVM_CUDA_NVRTC_EXTRA_OPTS",
    "TVM_CUDA_NVCC_NO_FAST_MATH",
    "TVM_KERNEL_DEBUG",
    "TVM_KERNEL_DUMP",
)

_WARNED: set = set()


def cache_dir():
    """The cache directory (a ``pathlib.Path``, created 0700), or None when the cache is off.

    None when ``TVM_TIRX_CACHE=0``, when the directory cannot be created, or
    when it is not safe: not owned by the current user, or writable by group
    or others (then a ``UserWarning`` says so, once per directory and process).
    """
    if os.environ.get("TVM_TIRX_CACHE", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    where = os.environ.get("TVM_TIRX_CACHE_DIR")
    if not where:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        where = os.path.join(base, "tvm_tirx")
    path = pathlib.Path(where)
    try:
        if not path.is_dir():
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(path, 0o700)  # the umask may have cleared bits; mkdir never adds any
        info = os.stat(path)
    except OSError as err:
        _warn_once(path, f"tvm_tirx: cannot create the compile cache directory {path} ({err}); compiling without the cache")
        return None
    reason = _unsafe(info)
    if reason:
        _warn_once(path, f"tvm_tirx: not using the compile cache directory {path}: {reason}; compiling without the cache")
        return None
    return path


def _unsafe(info) -> str:
    """Why a directory with ``os.stat`` result ``info`` may not hold the cache ('' if it may)."""
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"it is owned by user id {info.st_uid}, not by this user ({os.getuid()})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"other users can write to it (mode {stat.S_IMODE(info.st_mode):04o}; use chmod 700)"
    return ""


def _warn_once(path, message: str) -> None:
    if str(path) not in _WARNED:
        _WARNED.add(str(path))
        warnings.warn(message, UserWarning, stacklevel=4)


# -- the key --------------------------------------------------------------------------------------


@functools.cache
def _package_fingerprint() -> str:
    """tvm_tirx's version plus the size and mtime of each of its source files."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package, not build/
    h = hashlib.sha256(__version__.encode())
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".py"):
                full = os.path.join(dirpath, name)
                st = os.stat(full)
                h.update(f"{os.path.relpath(full, root)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return f"{__version__}+{h.hexdigest()[:16]}"


@functools.cache
def _nvcc_version() -> str:
    try:
        out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return "none"
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "none"


@functools.cache
def _nvrtc_version() -> str:
    try:
        from cuda.bindings import nvrtc  # pylint: disable=import-outside-toplevel  # optional

        _, major, minor = nvrtc.nvrtcVersion()
        return f"{major}.{minor}"
    except Exception:  # pylint: disable=broad-except
        return "none"


@functools.cache
def has_cuda_loader() -> bool:
    """Whether this process can load CUDA modules (apache-tvm's CUDA runtime is usable)."""
    return tvm_ffi.get_global_func("ffi.Module.load_from_bytes.cuda", allow_missing=True) is not None


@functools.cache
def _toolchain() -> str:
    return json.dumps(
        {
            "format": FORMAT,
            "tvm_tirx": _package_fingerprint(),
            "apache-tvm": tvm.__version__,
            "tvm-ffi": tvm_ffi.__version__,
            "nvcc": _nvcc_version(),
            "nvrtc": _nvrtc_version(),
            "cuda_loader": has_cuda_loader(),
        },
        sort_keys=True,
    )


def cache_key(script: str, name: str, target, options_key: str) -> str:
    """The SHA-256 (hex) naming a kernel's entry.

    Parameters
    ----------
    script : str
        The kernel's printed TVMScript (``func.script(show_meta=True)``).
    name : str
        Its global symbol.
    target : tvm.target.Target
        The CUDA target (its JSON form, with arch and host, is hashed).
    options_key : str
        :meth:`CompileOptions.key` of the compile options.
    """
    env = {k: os.environ[k] for k in _TVM_ENV if k in os.environ}
    h = hashlib.sha256()
    for part in (_toolchain(), json.dumps(env, sort_keys=True), str(target), options_key, name, script):
        h.update(len(part.encode()).to_bytes(8, "little"))
        h.update(part.encode())
    return h.hexdigest()


# -- entries ------------------------------------------------------------------------------------


class Entry:
    """A loaded (verified) cache entry.

    Attributes
    ----------
    name : str
        The kernel's global symbol.
    cuda_source : str
        The generated CUDA source.
    library : str | None
        Path of the verified ``kernel.so``, None when the entry has none.
    """

    def __init__(self, name, cuda_source, library):
        self.name = name
        self.cuda_source = cuda_source
        self.library = library


def _sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _meta_digest(meta: dict) -> str:
    body = {k: v for k, v in meta.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def load_entry(directory, key: str):
    """The verified entry ``key`` in ``directory``, or None.

    An entry that exists but does not verify (unreadable or malformed
    metadata, a different key or format, a file missing or whose SHA-256
    differs from the recorded one) is removed, so that the caller's rebuild
    replaces it.
    """
    entry_dir = os.path.join(directory, key)
    if not os.path.isdir(entry_dir):
        return None
    try:
        with open(os.path.join(entry_dir, META), encoding="utf-8") as f:
            meta = json.load(f)
        ok = (
            isinstance(meta, dict)
            and meta.get("format") == FORMAT
            and meta.get("key") == key
            and meta.get("sha256") == _meta_digest(meta)
            and all(_sha256_file(os.path.join(entry_dir, n)) == h for n, h in meta["files"].items())
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        shutil.rmtree(entry_dir, ignore_errors=True)
        return None
    library = os.path.join(entry_dir, LIBRARY) if LIBRARY in meta["files"] else None
    return Entry(meta["name"], meta["cuda_source"], library)


def store_entry(directory, key: str, name: str, cuda_source: str, write_library=None) -> None:
    """Write entry ``key``: metadata, and ``kernel.so`` if ``write_library`` is given.

    ``write_library(path)`` writes the library file.  Everything goes into a
    private temporary directory beside the entries, which is then renamed to
    ``key``; if another process got there first, its entry stays and this one
    is dropped.  Failures to write are not errors (the kernel was built; the
    cache only misses next time).
    """
    tmp = None
    try:
        tmp = tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=directory)
        files = {}
        if write_library is not None:
            write_library(os.path.join(tmp, LIBRARY))
            files[LIBRARY] = _sha256_file(os.path.join(tmp, LIBRARY))
        meta = {"format": FORMAT, "key": key, "name": name, "cuda_source": cuda_source, "files": files}
        meta["sha256"] = _meta_digest(meta)
        with open(os.path.join(tmp, META), "w", encoding="utf-8") as f:
            json.dump(meta, f)  # no fsync: a file cut short by a crash fails its hash
        try:
            os.rename(tmp, os.path.join(directory, key))
            tmp = None
        except OSError:
            if not os.path.isdir(os.path.join(directory, key)):
                raise
            # another process stored the same entry first: keep theirs
    except Exception as err:  # pylint: disable=broad-except
        # the kernel was built; only the next compile will miss
        _warn_once(f"{directory}:write", f"tvm_tirx: could not write a compile cache entry in {directory} ({err})")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
