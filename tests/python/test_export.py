"""Kernel.export: a shared library holding device code compiled for the kernel's arch.

On a machine without a GPU driver apache-tvm's build keeps the kernel as CUDA
*source* (its CUDA runtime library cannot load, so codegen falls back to a
source-only module), and ``export_library`` would store that source, which a
runtime-only process cannot compile.  ``Kernel.export`` stores the cubin (or
fatbin) that nvcc makes for the kernel's arch instead.
"""

import ctypes
import os
import struct
import subprocess
import sys
import textwrap

import pytest

import tvm_tirx
from tvm_tirx import testing

from kernels import read_next_row

ARCH = "sm_90a"
EM_CUDA = 190
FATBIN_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50, little-endian

pytestmark = testing.requires_nvcc


def _library_blob(path) -> bytes:
    """The serialized imports that export_library embeds (symbol ``__tvm_ffi__library_bin``)."""
    import tvm  # noqa: F401  (the library's tvm-ffi symbols resolve against the loaded runtime)

    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    head = bytes((ctypes.c_ubyte * 8).in_dll(lib, "__tvm_ffi__library_bin"))
    (nbytes,) = struct.unpack("<Q", head)
    return bytes((ctypes.c_ubyte * (8 + nbytes)).in_dll(lib, "__tvm_ffi__library_bin"))


def _cuda_module(blob: bytes):
    """``(fmt, payload, payload after fmt)`` of the one ``cuda`` module in ``blob``.

    Layout (tvm-ffi): <nbytes:u64> <indptr:vec<u64>> <children:vec<u64>> (<kind:str> [<bytes:str>])*;
    a cuda module's bytes: <fmt:str> <fmap> <code:str>.
    """
    pos = 8

    def u64():
        nonlocal pos
        (v,) = struct.unpack_from("<Q", blob, pos)
        pos += 8
        return v

    def string():
        nonlocal pos
        n = u64()
        pos += n
        return blob[pos - n : pos]

    indptr = [u64() for _ in range(u64())]
    [u64() for _ in range(u64())]
    found = []
    for _ in range(len(indptr) - 1):
        kind = string()
        if kind != b"_lib":
            payload = string()
            if kind == b"cuda":
                found.append(payload)
    assert pos == len(blob) and len(found) == 1
    payload = found[0]
    (fmt_len,) = struct.unpack_from("<Q", payload, 0)
    fmt = payload[8 : 8 + fmt_len]
    return fmt, payload, payload[8 + fmt_len :]


def _cubin_sm(code: bytes) -> int:
    """The SM number in a cubin's ELF header (EF_CUDA_SM, bits 8..15 of e_flags)."""
    assert code[:4] == b"\x7fELF", code[:16]
    assert struct.unpack_from("<H", code, 18)[0] == EM_CUDA
    return (struct.unpack_from("<I", code, 48)[0] >> 8) & 0xFF


def test_export_stores_a_cubin_for_the_arch_not_cuda_source(tmp_path):
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    assert "__global__" in kernel.cuda_source
    path = tmp_path / "read_next_row.so"
    kernel.export(path)
    assert path.is_file() and path.stat().st_size > 0
    data = path.read_bytes()
    assert b"__global__" not in data and b"asm volatile" not in data  # no CUDA source anywhere
    fmt, payload, _ = _cuda_module(_library_blob(path))
    assert fmt == b"cubin"
    assert b"read_next_row_kernel" in payload and b"threadIdx.x" in payload  # the launch table is kept
    cubin = kernel.cubin()
    assert payload.endswith(struct.pack("<Q", len(cubin)) + cubin)  # the code is nvcc's cubin
    assert _cubin_sm(cubin) == 90 and b"sm_90a" in cubin


def test_export_follows_the_kernels_arch(tmp_path):
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch="sm_80")
    path = tmp_path / "sm80.so"
    kernel.export(str(path))
    fmt, payload, _ = _cuda_module(_library_blob(path))
    assert fmt == b"cubin"
    code = payload[-len(kernel.cubin()) :]
    assert _cubin_sm(code) == 80 and b"sm_90" not in code


def test_export_fatbin(tmp_path):
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    path = tmp_path / "fat.so"
    kernel.export(path, fmt="fatbin")
    fmt, _, after_fmt = _cuda_module(_library_blob(path))
    assert fmt == b"fatbin"
    code_at = after_fmt.index(FATBIN_MAGIC)
    assert b"\x7fELF" in after_fmt[code_at:]  # the sm_90a SASS inside the fatbin
    assert b"-arch sm_90a" in after_fmt[code_at:]


def test_export_rejects_other_formats(tmp_path):
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    with pytest.raises(ValueError, match="cubin"):
        kernel.export(tmp_path / "k.so", fmt="ptx")
    assert not (tmp_path / "k.so").exists()


def _run_python(code, **env):
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=dict(os.environ, **env)
    )


def test_runtime_only_process_loads_the_library_and_hands_the_cubin_to_the_cuda_loader(tmp_path):
    """Without a GPU, stand in for libtvm_runtime_cuda's loader to see what it would receive."""
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch=ARCH)
    path = tmp_path / "read_next_row.so"
    kernel.export(path)
    (tmp_path / "expected.cubin").write_bytes(kernel.cubin())
    code = textwrap.dedent(
        f"""
        import struct, tvm, tvm_ffi
        assert tvm._RUNTIME_ONLY
        got = []

        @tvm_ffi.register_global_func("ffi.Module.load_from_bytes.cuda", override=True)
        def load_cuda(data):
            data = bytes(data)
            (n,) = struct.unpack_from("<Q", data, 0)
            got.append((data[8 : 8 + n], data))
            return tvm_ffi.system_lib()  # any module will do as the stand-in

        mod = tvm.runtime.load_module({str(path)!r})
        fmt, data = got[0]
        cubin = open({str(tmp_path / "expected.cubin")!r}, "rb").read()
        assert fmt == b"cubin" and data.endswith(cubin), fmt
        assert mod.implements_function({kernel.name!r})
        print("ok", len(got))
        """
    )
    out = _run_python(code, TVM_USE_RUNTIME_LIB="1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "1"]


@pytest.mark.gpu
def test_exported_library_runs_in_a_runtime_only_process(tmp_path, torch_cuda):
    kernel = tvm_tirx.compile(read_next_row, target="cuda")
    path = tmp_path / "read_next_row.so"
    kernel.export(path)
    code = textwrap.dedent(
        f"""
        import pathlib
        import torch
        import tvm
        from tvm_ffi.libinfo import load_lib_ctypes

        assert tvm._RUNTIME_ONLY
        # runtime-only mode does not load the CUDA runtime library by itself
        load_lib_ctypes(
            package="tvm",
            target_name="tvm_runtime_cuda",
            extra_lib_paths=[pathlib.Path(tvm.__file__).parent / "lib"],
            mode="RTLD_LOCAL",
        )
        mod = tvm.runtime.load_module({str(path)!r})
        assert [m.kind for m in mod.imports] == ["cuda"]
        run = mod[{kernel.name!r}]
        for seed in range(3):
            g = torch.Generator(device="cuda").manual_seed(seed)
            a = torch.randn(64, 4, device="cuda", generator=g)
            b = torch.full_like(a, float("nan"))
            run(a, b)
            torch.cuda.synchronize()
            assert torch.equal(b, torch.roll(a, shifts=-1, dims=0)), seed
        print("ok")
        """
    )
    out = _run_python(code, TVM_USE_RUNTIME_LIB="1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok"]
