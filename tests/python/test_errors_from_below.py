"""Mistakes that apache-tvm used to report from deep inside, now ours with the user's line.

* ``.sub[a:b]`` of a register tensor's ``.view()`` across the blocks of the layout the
  view keeps: apache-tvm's "dim 0 start/length must be multiples of the inner iter
  block 4" becomes a TileError naming the line, the blocks and the two fixes;
* a parameter ``T.Tensor((n * 4,), ...)`` whose ``n`` no argument gives: apache-tvm's
  MakePackedAPI stopped the build with "variables (n,) are used, but are not passed in
  as API arguments"; now ``@T.function`` refuses it, naming the parameter and its line.
"""

import importlib.util
import textwrap

import pytest

import tvm_tirx

HEADER = """\
from tvm_tirx.script import tirx as T

n = T.dynamic("n")

"""


def _load(tmp_path, name, body):
    """Import ``HEADER + body`` from a file (TVMScript reads the kernel's source)."""
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _line(body, text):
    """The file line of the first line of ``body`` containing ``text``."""
    lines = textwrap.dedent(body).splitlines()
    return HEADER.count("\n") + 1 + next(i for i, line in enumerate(lines) if text in line)


ACROSS_BLOCKS = """\
@T.function
def halves(A: T.Tensor((64, 8), "float32", align=16), B: T.Tensor((64, 8), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local(SHAPE, "float32")
    flat = VIEW
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], flat.sub[2:6], A.sub[tid, 0:4])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, 0:4], flat.sub[2:6])
"""


def test_a_slice_across_the_blocks_a_view_keeps_names_the_line_and_the_fix(tmp_path):
    body = ACROSS_BLOCKS.replace("SHAPE", "(2, 4)").replace("VIEW", "r.view(8)")
    with pytest.raises(tvm_tirx.TileError) as info:
        _load(tmp_path, "across", body)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'across.py'}:{_line(body, 'flat.sub[2:6], A')}: axis 0 of a .view(): "
                              "slice of a view across its layout's blocks: expected a start and length that are "
                              "constant multiples of 4"), message
    assert "found start 2, length 4" in message and "T.alloc_local((8,), ...)" in message
    assert "inner iter block" not in message  # apache-tvm's wording is gone


def test_the_fix_the_message_gives_compiles(tmp_path):
    body = ACROSS_BLOCKS.replace("SHAPE", "(8,)").replace("VIEW", "r")  # allocated in the shape it is sliced
    kernel = tvm_tirx.compile(_load(tmp_path, "fixed", body).halves, target="cuda", arch="sm_90a")
    assert "ld.global.v4.b32" in kernel.cuda_source


def test_a_run_time_slice_of_a_viewed_parameter_gets_the_same_error(tmp_path):
    body = """\
    @T.function
    def rows(A: T.Tensor((n, 4), "float32", align=16), B: T.Tensor((n, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(n, 64), block=64))
        i = T.cuda.block_idx("x") * 64 + T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        if i < n:
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(n * 4).sub[i * 4:i * 4 + 4])
            T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[i, :], r)
    """
    with pytest.raises(tvm_tirx.TileError, match=rf"rows\.py:{_line(body, 'A.view')}: axis 0 of a \.view\(\).*"
                                                 r"found a start or length known only at run time"):
        _load(tmp_path, "rows", body)


COPY4 = """\
@T.function
def copy4(PARAMS):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(n, 64), block=64))
    i = T.cuda.block_idx("x") * 64 + T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    if i < n:
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[i * 4:i * 4 + 4])
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[i * 4:i * 4 + 4], r)
"""
FLAT = 'A: T.Tensor((n * 4,), "float32", align=16), B: T.Tensor((n * 4,), "float32", align=16)'


def test_a_run_time_size_used_only_in_an_expression_names_the_parameter_and_the_fixes(tmp_path):
    body = COPY4.replace("PARAMS", FLAT)
    with pytest.raises(ValueError) as info:
        _load(tmp_path, "flat", body)  # at parse time, not deep in tvm_tirx.compile
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'flat.py'}:{_line(body, 'def copy4')}: T.Tensor parameter A: extent 0 "
                              "of shape (n * 4,) uses the run-time size n inside an expression (n * 4), and no "
                              "argument gives n"), message
    assert "T.Tensor((n, 4), ...)" in message and "scalar parameter n: T.int32" in message
    assert "not passed in as API arguments" not in message


@pytest.mark.parametrize("params", [f"n: T.int32, {FLAT}",  # the scalar the message offers
                                    'A: T.Tensor((n * 4,), "float32", align=16), '
                                    'B: T.Tensor((n * 4,), "float32", align=16), C: T.Tensor((n,), "int32")'],
                         ids=["scalar-n", "n-bare-elsewhere"])
def test_a_size_some_argument_gives_may_appear_in_expressions(tmp_path, params):
    kernel = tvm_tirx.compile(_load(tmp_path, "given", COPY4.replace("PARAMS", params)).copy4,
                              target="cuda", arch="sm_90a")
    assert "ld.global.v4.b32" in kernel.cuda_source
