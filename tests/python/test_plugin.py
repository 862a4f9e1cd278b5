"""The tvm.backends entry point: `import tvm` alone installs the names; runtime-only imports nothing."""

import os
import subprocess
import sys

import pytest


def _run(code, **env):
    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=300)


def _entry_point_installed():
    from importlib.metadata import entry_points

    return any(ep.name == "tvm_tirx" for ep in entry_points(group="tvm.backends"))


needs_entry_point = pytest.mark.skipif(
    not _entry_point_installed(), reason="tvm_tirx is not pip-installed (no tvm.backends entry point)"
)


@needs_entry_point
def test_import_tvm_alone_installs_the_names():
    code = (
        "import sys, tvm\n"
        "from tvm.script import tirx as T\n"
        "assert callable(T.cuda.tile.apply) and callable(T.function) and callable(T.Tensor)\n"
        "assert T.cuda.LaunchConfig(grid=2, block=(8, 4)).threads == 32\n"
        "print('ok', 'tvm_tirx.tile.lower.lower' in sys.modules)\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "ok"


@needs_entry_point
def test_runtime_only_mode_imports_no_compiler_parts():
    code = (
        "import sys, tvm\n"
        "assert tvm._RUNTIME_ONLY\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('tvm_tirx'))\n"
        "print(','.join(loaded))\n"
    )
    out = _run(code, TVM_USE_RUNTIME_LIB="1")
    assert out.returncode == 0, out.stderr
    loaded = set(filter(None, out.stdout.strip().split(",")))
    # the hook module itself may load; nothing that needs the compiler does
    assert loaded <= {"tvm_tirx", "tvm_tirx._plugin"}, loaded
