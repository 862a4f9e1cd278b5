"""The compile cache on disk (tvm_tirx.build.cache): hits, misses, corruption, races, safety.

Every test points TVM_TIRX_CACHE_DIR at a directory of its own.  Whether a
compile was served from the cache is observed by counting calls of the build
(``tvm_tirx.build.kernel._build``), not by timing.
"""

import json
import os
import stat
import subprocess
import sys
import textwrap
import warnings

import pytest
import tvm

import tvm_tirx
from tvm_tirx import TileError
from tvm_tirx.build import cache
from tvm_tirx.build import kernel as kernel_module
from tvm_tirx.script import tirx as T

from kernels import read_next_row

ARCH = "sm_90a"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@T.function
def copy_rows(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)


@T.function
def out_of_bounds(A: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid + 1, :])


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("TVM_TIRX_CACHE_DIR", str(path))
    monkeypatch.delenv("TVM_TIRX_CACHE", raising=False)
    cache._WARNED.clear()  # pylint: disable=protected-access
    return path


@pytest.fixture
def builds(monkeypatch):
    """The number of real builds so far (a list, one item per build)."""
    done = []
    real = kernel_module._build  # pylint: disable=protected-access

    def counting(*args):
        done.append(args[1])
        return real(*args)

    monkeypatch.setattr(kernel_module, "_build", counting)
    return done


def _entries(path):
    return sorted(p.name for p in path.iterdir()) if path.is_dir() else []


def test_second_compile_is_served_from_the_cache(cache_dir, builds):
    first = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    assert len(builds) == 1 and len(_entries(cache_dir)) == 1
    second = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    assert len(builds) == 1  # no second build
    assert second.cuda_source == first.cuda_source and "__global__" in second.cuda_source
    assert second.name == first.name and second.script() == first.script()


def test_a_cached_kernel_still_checks_its_arguments(cache_dir, builds):
    tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    assert len(builds) == 1
    with pytest.raises(TypeError, match=r"expected 2 argument\(s\) \(A, B\), got 1"):
        kernel(object())


def test_a_cached_kernel_builds_its_executable_when_asked(cache_dir, builds):
    tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    assert len(builds) == 1
    # without a CUDA runtime the entry holds sources only: the executable is built on demand
    assert kernel.executable is not None
    assert len(builds) == (1 if cache.has_cuda_loader() else 2)


@pytest.mark.parametrize(
    "change",
    ["kernel", "arch", "flags", "ptxas", "pass_config"],
)
def test_any_change_of_what_is_compiled_misses(cache_dir, builds, change):
    tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    func, arch, options = read_next_row, ARCH, None
    if change == "kernel":
        func = copy_rows
    elif change == "arch":
        arch = "sm_80"
    elif change == "flags":
        options = {"flags": ["-lineinfo"]}
    elif change == "ptxas":
        options = {"ptxas": ["-v"]}
    else:
        options = {"tirx.disable_vectorize": True}
    tvm_tirx.compile(func, target="cuda", arch=arch, options=options)
    assert len(builds) == 2 and len(_entries(cache_dir)) == 2
    tvm_tirx.compile(func, target="cuda", arch=arch, options=options)  # ... and then hits
    assert len(builds) == 2


@pytest.mark.parametrize("what", ["tvm_tirx", "apache-tvm", "tvm-ffi", "nvcc", "nvrtc", "env"])
def test_the_key_covers_the_toolchain(monkeypatch, what):
    target = tvm.target.Target({"kind": "cuda", "arch": ARCH})
    script = read_next_row.script(show_meta=True)

    def key():
        cache._toolchain.cache_clear()  # pylint: disable=protected-access
        return cache.cache_key(script, "read_next_row", target, "{}")

    before = key()
    if what == "tvm_tirx":
        monkeypatch.setattr(cache, "_package_fingerprint", lambda: "9.9.9+0")
    elif what == "apache-tvm":
        monkeypatch.setattr(tvm, "__version__", "0.0.0")
    elif what == "tvm-ffi":
        import tvm_ffi

        monkeypatch.setattr(tvm_ffi, "__version__", "0.0.0")
    elif what == "nvcc":
        monkeypatch.setattr(cache, "_nvcc_version", lambda: "Build cuda_99.0")
    elif what == "nvrtc":
        monkeypatch.setattr(cache, "_nvrtc_version", lambda: "99.0")
    else:
        monkeypatch.setenv("TVM_CUDA_PTXAS_REG_LEVEL", "3")
    after = key()
    monkeypatch.undo()
    cache._toolchain.cache_clear()  # pylint: disable=protected-access
    assert before != after and key() == before


def test_editing_the_package_changes_its_fingerprint(tmp_path, monkeypatch):
    # a checkout whose source changed without a version bump must not read the old entries
    cache._package_fingerprint.cache_clear()  # pylint: disable=protected-access
    before = cache._package_fingerprint()  # pylint: disable=protected-access
    source = os.path.join(os.path.dirname(cache.__file__), "cache.py")
    st = os.stat(source)
    try:
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        cache._package_fingerprint.cache_clear()  # pylint: disable=protected-access
        assert cache._package_fingerprint() != before  # pylint: disable=protected-access
    finally:
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
        cache._package_fingerprint.cache_clear()  # pylint: disable=protected-access


def _the_entry(path):
    (name,) = _entries(path)
    return path / name


@pytest.mark.parametrize("damage", ["truncate", "empty", "garbage", "delete"])
def test_a_damaged_entry_is_rebuilt_not_loaded(cache_dir, builds, damage):
    good = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH).cuda_source
    meta = _the_entry(cache_dir) / cache.META
    data = meta.read_bytes()
    if damage == "truncate":
        meta.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        meta.write_bytes(b"")
    elif damage == "garbage":
        meta.write_bytes(os.urandom(len(data)))
    else:
        meta.unlink()
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    assert len(builds) == 2 and kernel.cuda_source == good
    # the rebuilt entry replaced the damaged one and serves the next compile
    tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    assert len(builds) == 2


def test_a_tampered_entry_is_not_loaded(cache_dir, builds):
    good = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH).cuda_source
    meta_path = _the_entry(cache_dir) / cache.META
    meta = json.loads(meta_path.read_text())
    meta["cuda_source"] = meta["cuda_source"].replace("__global__", "__global__ /* evil */")
    meta_path.write_text(json.dumps(meta))  # valid JSON, same key, but not what was hashed
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    assert len(builds) == 2
    assert kernel.cuda_source == good and "evil" not in kernel.cuda_source


def test_a_tampered_library_is_not_loaded(tmp_path):
    # an entry with a library file (what a process with a CUDA runtime stores)
    key = "ab" * 32
    cache.store_entry(tmp_path, key, "k", "source", lambda path: open(path, "wb").write(b"\x7fELF library"))
    entry = cache.load_entry(tmp_path, key)
    assert entry is not None and entry.library is not None and entry.cuda_source == "source"
    with open(entry.library, "r+b") as f:
        f.write(b"\x7fELF LIBRARY")  # same length, other bytes
    assert cache.load_entry(tmp_path, key) is None
    assert not (tmp_path / key).exists()  # removed, so that the rebuild replaces it


def test_an_entry_under_another_key_is_not_loaded(tmp_path):
    cache.store_entry(tmp_path, "a" * 64, "k", "source")
    os.rename(tmp_path / ("a" * 64), tmp_path / ("b" * 64))
    assert cache.load_entry(tmp_path, "b" * 64) is None


def test_contract_errors_are_never_cached(cache_dir, builds):
    for _ in range(2):
        with pytest.raises(TileError, match="ld.global.v4.b32"):
            tvm_tirx.compile(out_of_bounds, target="cuda", arch=ARCH)
    assert len(builds) == 2  # the second compile checked the contract again
    assert _entries(cache_dir) == []  # no entry, and no temporary directory left behind


def test_cache_off(cache_dir, builds, monkeypatch):
    monkeypatch.setenv("TVM_TIRX_CACHE", "0")
    tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    assert len(builds) == 2 and not cache_dir.exists()


def test_directory_is_created_private(tmp_path, monkeypatch):
    monkeypatch.setenv("TVM_TIRX_CACHE_DIR", str(tmp_path / "a" / "cache"))
    old = os.umask(0o022)
    try:
        path = cache.cache_dir()
    finally:
        os.umask(old)
    assert path == tmp_path / "a" / "cache"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700


def test_default_directory_is_in_the_users_cache_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("TVM_TIRX_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "tvm_tirx"


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_a_directory_others_can_write_is_not_used(cache_dir, builds, mode):
    cache_dir.mkdir()
    os.chmod(cache_dir, mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
        tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(messages) == 1, messages  # one warning, not one per compile
    assert "other users can write to it" in messages[0] and str(cache_dir) in messages[0]
    assert len(builds) == 2 and _entries(cache_dir) == []  # compiled without the cache


def test_a_directory_owned_by_another_user_is_not_used(cache_dir, monkeypatch):
    cache_dir.mkdir(mode=0o700)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(cache_dir).st_uid + 1)
    with pytest.warns(UserWarning, match="owned by user id"):
        assert cache.cache_dir() is None


_RACE = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {here!r})
    import tvm_tirx
    from kernels import read_next_row
    time.sleep(max(0.0, {start} - time.time()))  # both processes compile at the same moment
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch="sm_90a")
    assert "__global__" in kernel.cuda_source
    print("ok")
    """
)


@pytest.mark.slow
def test_two_processes_compiling_at_once(cache_dir, builds):
    import time

    code = _RACE.format(here=HERE, start=time.time() + 20)
    env = dict(os.environ, TVM_TIRX_CACHE_DIR=str(cache_dir))
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and out.split() == ["ok"], err
    assert len(_entries(cache_dir)) == 1  # one entry, no temporary directory left
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    assert builds == [] and "__global__" in kernel.cuda_source  # and it verifies and loads


@pytest.mark.gpu
def test_a_kernel_from_the_cache_runs(cache_dir, torch_cuda):
    torch = torch_cuda
    tvm_tirx.compile(read_next_row, target="cuda")
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {HERE!r})
        import torch, tvm_tirx
        from tvm_tirx.build import kernel as km
        from kernels import read_next_row
        km._build = None  # a build here would fail: the kernel must come from the cache
        kernel = tvm_tirx.compile(read_next_row, target="cuda")
        a = torch.randn(64, 4, device="cuda")
        b = torch.zeros(64, 4, device="cuda")
        kernel(a, b)
        torch.cuda.synchronize()
        assert torch.equal(b, torch.roll(a, -1, 0))
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TVM_TIRX_CACHE_DIR=str(cache_dir)))
    assert out.returncode == 0 and out.stdout.split() == ["ok"], out.stderr
    assert torch is not None
