"""Swap the device code inside an exported library: CUDA source out, cubin/fatbin in.

Used by :meth:`tvm_tirx.Kernel.export`.  apache-tvm serializes the imported
CUDA module into the library with its format and code; on a machine without a
GPU driver that code is CUDA source, which a runtime-only process cannot
compile.  This module parses apache-tvm 0.27's (tvm-ffi's) serialized import
tree, replaces the CUDA module's format and code with nvcc's binary, and
refuses anything whose byte layout it does not recognise.
"""

from __future__ import annotations

import os
import re
import struct

import tvm_ffi

# -- export: the serialized import tree, with the CUDA module's code replaced ----------------
#
# ``export_library`` embeds the host module's imports as one blob (symbol
# ``__tvm_ffi__library_bin``), laid out by tvm-ffi as
#
#     <nbytes:u64> <indptr:vec<u64>> <child_indices:vec<u64>> (<kind:str> [<bytes:str>])*
#
# (a vec/str is a u64 length then the items; kind ``_lib`` is the host library
# itself and carries no bytes).  The ``cuda`` module's bytes are
# ``CUDAModuleNode::SaveToBytes`` -- identical for apache-tvm's
# CUDAFallbackModuleNode, which is what a machine without a GPU driver builds:
#
#     <fmt:str> <fmap:map<str, FunctionInfo>> <code:str>
#     FunctionInfo = <name:str> <arg_types:vec<DLDataType (4 bytes)>>
#                    <launch_param_tags:vec<str>> <arg_extra_tags:vec<i32>>
#
# ``ffi.Module.load_from_bytes.cuda`` (libtvm_runtime_cuda.so) reads it back;
# with fmt "cuda" it needs the Python-side ``tvm_callback_cuda_compile``, which
# a runtime-only process does not have, and with "cubin"/"fatbin" it hands the
# code to cuModuleLoadData.


class _Reader:
    """Little-endian reader of tvm's binary stream format."""

    def __init__(self, data: bytes, pos: int = 0):
        self.data = data
        self.pos = pos

    def u64(self) -> int:
        if self.pos + 8 > len(self.data):
            raise RuntimeError("tvm_tirx: truncated module blob")
        (value,) = struct.unpack_from("<Q", self.data, self.pos)
        self.pos += 8
        return value

    def raw(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise RuntimeError("tvm_tirx: truncated module blob")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def string(self) -> bytes:
        return self.raw(self.u64())


def _u64(value: int) -> bytes:
    return struct.pack("<Q", value)


def _string(value: bytes) -> bytes:
    return _u64(len(value)) + value


def _replace_cuda_code(payload: bytes, fmt: str, code: bytes) -> bytes:
    """A serialized CUDA module (``payload``) with its format and code replaced; its fmap kept."""
    reader = _Reader(payload)
    reader.string()  # the old format
    start = reader.pos
    for _ in range(reader.u64()):  # fmap entries
        reader.string()  # key
        reader.string()  # FunctionInfo.name
        reader.raw(4 * reader.u64())  # arg_types
        for _ in range(reader.u64()):  # launch_param_tags
            reader.string()
        reader.raw(4 * reader.u64())  # arg_extra_tags
    fmap = payload[start : reader.pos]
    reader.string()  # the old code
    if reader.pos != len(payload):
        raise RuntimeError("tvm_tirx: the CUDA module's serialized form is not the one Kernel.export knows")
    return _string(fmt.encode()) + fmap + _string(code)


def _with_device_binary(blob: bytes, fmt: str, code: bytes) -> bytes:
    """The packed-imports ``blob`` with its one ``cuda`` module holding ``code`` in format ``fmt``."""
    reader = _Reader(blob)
    nbytes = reader.u64()
    if nbytes != len(blob) - 8:
        raise RuntimeError("tvm_tirx: the packed module blob has an unexpected length")
    indptr = [reader.u64() for _ in range(reader.u64())]
    children = [reader.u64() for _ in range(reader.u64())]
    out = [_u64(len(indptr))] + [_u64(v) for v in indptr] + [_u64(len(children))] + [_u64(v) for v in children]
    replaced = 0
    for _ in range(max(len(indptr) - 1, 0)):
        kind = reader.string()
        out.append(_string(kind))
        if kind == b"_lib":
            continue
        payload = reader.string()
        if kind == b"cuda":
            payload = _replace_cuda_code(payload, fmt, code)
            replaced += 1
        out.append(_string(payload))
    if reader.pos != len(blob) or replaced != 1:
        raise RuntimeError(f"tvm_tirx: expected one CUDA module in the built library, found {replaced}")
    body = b"".join(out)
    return _u64(len(body)) + body


def pack_imports_with_device_binary(mod, is_system_lib, symbol_prefix, workspace_dir, fmt, code):
    """``fpack_imports`` for ``export_library``: apache-tvm's C packing of ``mod``'s imports,
    with the CUDA module's code replaced by ``code``.

    Parameters
    ----------
    mod : tvm.runtime.Module
        The host module being exported (its imports hold the CUDA module).
    is_system_lib, symbol_prefix, workspace_dir :
        As apache-tvm's ``export_library`` passes them.
    fmt : str
        ``"cubin"`` or ``"fatbin"``: the format recorded for ``code``.
    code : bytes
        The device binary (nvcc's output for the kernel's arch).

    Returns
    -------
    str
        Path of the C file holding the packed imports.

    Raises
    ------
    RuntimeError
        The serialized imports are not laid out as this module expects, or do
        not hold exactly one CUDA module.
    """
    blob = tvm_ffi.get_global_func("runtime.ModulePackImportsToTensor")(mod).numpy().tobytes()
    blob = _with_device_binary(blob, fmt, code)
    c_source = tvm_ffi.get_global_func("runtime.ModulePackImportsToC")(mod, is_system_lib, symbol_prefix)
    symbol = re.escape(str(tvm_ffi.get_global_func("runtime.ModuleImportsBlobName")()))
    array = re.compile(r"(" + symbol + r")\[\d+\] = \{[^}]*\};")
    if len(array.findall(c_source)) != 1:
        raise RuntimeError("tvm_tirx: apache-tvm's packed-imports C source has an unexpected form")
    rows = ",\n".join(
        "  " + ",".join(f"0x{b:02x}" for b in blob[i : i + 20]) for i in range(0, len(blob), 20)
    )
    c_source = array.sub(lambda m: f"{m.group(1)}[{len(blob)}] = {{\n{rows}\n}};", c_source)
    path = os.path.join(workspace_dir, f"{symbol_prefix}devc.c")
    with open(path, "w", encoding="utf-8") as f:
        f.write(c_source)
    return path
