"""Contract errors found while lowering show the user's line with a caret under the operand,
report every violation of the kernel, and leave tvm_tirx.compile without our frames."""

import importlib.util
import textwrap
import traceback

import pytest

import tvm_tirx
from tvm_tirx import TileError, testing
from tvm_tirx.build.stages import describe_exception
from tvm_tirx.errors import TileErrors
from tvm_tirx.excerpts import excerpt, operand_key, split_location

HEADER = "from tvm_tirx.script import tirx as T\n\n\n"

TWO_MISTAKES = '''
@T.function
def kernel(A: T.Tensor((64, 4), "float32", align=8), B: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    regs = T.alloc_local((4,), "float32", layout="default")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], regs, A.sub[tid, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"],
                      B.sub[tid + 1, :],
                      regs)
'''

ONE_MISTAKE = '''
@T.function
def kernel(A: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    regs = T.alloc_local((4,), "float32", layout="default")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], regs, A.sub[tid + 1, :])
'''


def _load(tmp_path, source, name):
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel, path


def _caret(text):
    """(line of code above the caret line, the underlined text) of an excerpt."""
    lines = text.splitlines()
    marks = lines[-1].split("|", 1)[1]
    code = lines[-2].split("|", 1)[1]
    start = marks.index("^")
    return code, code[start : start + marks.count("^")]


def test_split_location_and_operand_key():
    assert split_location("/a/b.py:12") == ("/a/b.py", 12)
    assert split_location("<string>") is None and split_location(None) is None
    assert operand_key("src (operand 2)") == 2
    assert operand_key("parameter mbar") == "mbar"
    assert operand_key(None) is None and operand_key("the call") is None


def test_excerpt_underlines_positional_and_keyword_operands(tmp_path):
    path = tmp_path / "k.py"
    path.write_text(
        "def f():\n"
        "    T.cuda.tile.apply(T.ptx['x'], regs, A.sub[tid, :], mbar=bar.sub[0, :], coords=(0, 1))\n"
        "    T.cuda.tile.apply(T.ptx['y'],\n"
        "                      dst,\n"
        "                      src.view(4, 4))\n"
    )
    assert _caret(excerpt(f"{path}:2", "src (operand 2)"))[1] == "A.sub[tid, :]"
    assert _caret(excerpt(f"{path}:2", "dst (operand 1)"))[1] == "regs"
    assert _caret(excerpt(f"{path}:2", "parameter mbar"))[1] == "mbar=bar.sub[0, :]"
    assert _caret(excerpt(f"{path}:2", "parameter coords"))[1] == "coords=(0, 1)"
    # no operand, or one the call does not have: the whole statement
    whole = "T.cuda.tile.apply(T.ptx['x'], regs, A.sub[tid, :], mbar=bar.sub[0, :], coords=(0, 1))"
    assert _caret(excerpt(f"{path}:2", None))[1] == whole
    assert _caret(excerpt(f"{path}:2", "src (operand 7)"))[1] == whole
    # a call over several lines: its lines up to the operand's, the caret on the operand's
    text = excerpt(f"{path}:3", "src (operand 2)")
    assert _caret(text)[1] == "src.view(4, 4)"
    assert [line.split("|")[0].strip() for line in text.splitlines()] == ["", "3", "4", "5", ""]


def test_excerpt_without_a_readable_file_is_none(tmp_path):
    assert excerpt(f"{tmp_path}/missing.py:3", "src (operand 2)") is None
    assert excerpt(None) is None


def test_one_lowering_error_has_its_excerpt_as_a_note(tmp_path):
    kernel, path = _load(tmp_path, ONE_MISTAKE, "one_mistake")
    with pytest.raises(TileError, match="provably out of the tensor's bounds") as info:
        testing.lower(kernel)
    err = info.value
    assert str(err).startswith(f"{path}:10: ld.global.v4.b32: src (operand 2): ")
    assert "\n" not in str(err)  # the first line stands alone
    assert err.excerpt in err.__notes__
    assert _caret(err.excerpt)[1] == "A.sub[tid + 1, :]"


def test_every_violation_is_reported_with_its_excerpt(tmp_path):
    kernel, path = _load(tmp_path, TWO_MISTAKES, "two_mistakes")
    with pytest.raises(TileErrors) as info:
        tvm_tirx.compile(kernel, target="cuda", arch="sm_90a")
    err = info.value
    lines = str(err).splitlines()
    assert lines[0] == "2 contract violations:"
    assert [e.location for e in err.errors] == [f"{path}:10", f"{path}:11"]
    assert [_caret(e.excerpt)[1] for e in err.errors] == ["A.sub[tid, :]", "B.sub[tid + 1, :]"]
    # each violation's line, then its excerpt, in the message
    assert lines[1] == str(err.errors[0]) and lines[2:5] == err.errors[0].excerpt.splitlines()
    assert lines[5] == str(err.errors[1]) and _caret("\n".join(lines[6:]))[1] == "B.sub[tid + 1, :]"
    assert describe_exception(err) == f"TileError: {err.errors[0]} (1 of 2 contract violations)"


def _frames(err):
    return [frame.filename.replace("\\", "/") for frame in traceback.extract_tb(err.__traceback__)]


def test_the_traceback_ends_at_the_users_call(tmp_path, monkeypatch):
    kernel, _ = _load(tmp_path, ONE_MISTAKE, "short_traceback")
    monkeypatch.delenv("TVM_BACKTRACE", raising=False)
    with pytest.raises(TileError) as info:
        tvm_tirx.compile(kernel, target="cuda", arch="sm_90a")
    frames = _frames(info.value)
    assert frames[0] == __file__.replace("\\", "/")
    assert [f for f in frames if "/tvm_tirx/" in f] == [tvm_tirx.errors.__file__.replace("\\", "/")]
    # TVM_BACKTRACE=1 keeps the lowering's frames
    monkeypatch.setenv("TVM_BACKTRACE", "1")
    with pytest.raises(TileError) as info:
        tvm_tirx.compile(kernel, target="cuda", arch="sm_90a")
    assert any(f.endswith("tvm_tirx/tile/lower/lower.py") for f in _frames(info.value))


IN_A_MACRO = '''
@T.macro
def load_row(regs, A, tid):
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], regs, A.sub[tid + 1, :])


@T.function
def kernel(A: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    regs = T.alloc_local((4,), "float32", layout="default")
    load_row(regs, A, tid)
'''


def test_an_error_inside_a_macro_points_at_the_call_in_the_macro_body(tmp_path):
    # apache-tvm gives a statement built by a macro a SequentialSpan (call site, then the
    # macro body's line); the error names the body's line, where the operand is written
    kernel, path = _load(tmp_path, IN_A_MACRO, "in_macro")
    with pytest.raises(TileError) as info:
        tvm_tirx.compile(kernel, arch="sm_90a")
    line = (HEADER + textwrap.dedent(IN_A_MACRO)).splitlines().index(
        '    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], regs, A.sub[tid + 1, :])') + 1
    error = info.value.errors[0] if isinstance(info.value, TileErrors) else info.value
    assert error.location == f"{path}:{line}"
    assert _caret(error.with_excerpt().excerpt)[1] == "A.sub[tid + 1, :]"
