"""What a user sees when ``@T.function`` fails to parse a kernel: one error with its
``file:line`` and a short traceback.

apache-tvm's parser raises a ``DiagnosticError``, whose text the ``sys.excepthook``
that ``import tvm`` installs replaces by "note: run with `TVM_BACKTRACE=1` ..." alone;
and an error raised while parsing arrived with the parser's chained re-raises, over a
hundred lines repeating the message three times.
"""

import os
import subprocess
import sys
import textwrap

import pytest

HEADER = """\
from tvm_tirx.script import tirx as T


@T.function
def kernel(A: T.Tensor((64, 4), "float32", align=16), n: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    regs = T.alloc_local((4,), "float32", layout="default")
"""
# the line of the snippet below HEADER (1-based)
LINE = HEADER.count("\n") + 1

CASES = {
    "undefined name": (
        'T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], regs, A.sub[tidd, :])',
        "Undefined variable: tidd",
    ),
    "defined twice": ('tid = T.cuda.thread_idx("x")', "Variable tid already defined in current scope"),
    "contract violation (TileError)": (
        'T.cuda.tile.apply(T.ptx["ld.global.v2.b32"], regs, A.sub[tid, :])',
        "ld.global.v2.b32: dst (operand 1): wrong atom shape",
    ),
    "bad argument of a builder": ('T.cuda.thread_idx("w")', "axis must be 'x', 'y' or 'z', got 'w'"),
}


def _run(tmp_path, snippet, env_extra=None):
    script = tmp_path / "user_kernel.py"
    script.write_text(HEADER + textwrap.indent(snippet, "    ") + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", "TVM_BACKTRACE")}
    env.update(env_extra or {})
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    return script, proc


@pytest.mark.parametrize("case", sorted(CASES))
def test_parse_error_prints_one_message_with_its_line(tmp_path, case):
    snippet, message = CASES[case]
    script, proc = _run(tmp_path, snippet)
    assert proc.returncode == 1
    assert "TVM_BACKTRACE" not in proc.stdout + proc.stderr
    err = proc.stderr
    assert message in err, err
    assert err.count(message) == 1, err
    assert f"{script}:{LINE}" in err, err
    assert len(err.splitlines()) <= 25, err
    assert "During handling of the above exception" not in err
    assert "The above exception was the direct cause" not in err


def test_parse_error_is_still_a_diagnostic_error(tmp_path):
    import runpy

    import tvm

    source = HEADER.replace("def kernel", "def kernel_undef") + "    regs[0] = tidd\n"
    path = tmp_path / "kernel_undef.py"
    path.write_text(source)
    # run the file as the user would (testing.load_kernel wraps errors for the CLI)
    with pytest.raises(tvm.error.DiagnosticError, match=r"Undefined variable: tidd\n --> .*kernel_undef\.py:\d+"):
        runpy.run_path(str(path))


def test_run_time_block_is_rejected_by_name(tmp_path):
    # a grid may be a run-time expression (test_launch_sizes.py); a block may not
    snippet = "T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=T.ceildiv(n, 2)))"
    header = HEADER.replace('    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))\n', "")
    header = header.replace('    tid = T.cuda.thread_idx("x")\n', "").replace(
        '    regs = T.alloc_local((4,), "float32", layout="default")\n', ""
    )
    script = tmp_path / "user_kernel.py"
    script.write_text(header + "    " + snippet + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", "TVM_BACKTRACE")}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1
    err = proc.stderr
    assert "block extent (n + 2 - 1) // 2 is a run-time value; block extents are ints" in err, err
    assert f"{script}:{header.count(chr(10)) + 1}" in err, err
    assert len(err.splitlines()) <= 25, err


def test_backtrace_on_request(tmp_path):
    # TVM_BACKTRACE=1 keeps the parser's chain for whoever debugs the parser itself
    _, proc = _run(tmp_path, CASES["undefined name"][0], {"TVM_BACKTRACE": "1"})
    assert proc.returncode == 1
    assert "Undefined variable: tidd" in proc.stderr
    assert "evaluator.py" in proc.stderr
