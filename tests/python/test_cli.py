"""`python -m tvm_tirx compile FILE.py:FUNC --arch ... --emit ...`."""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from tvm_tirx import cli, testing

ARCH = "sm_90a"

KERNELS = textwrap.dedent(
    """
    from tvm_tirx.script import tirx as T


    @T.function
    def read_next_row(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        registers = T.alloc_local((4,), "float32", layout="default")
        shared = T.alloc_shared((64, 4), "float32", align=16)
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], registers, A.sub[tid, :])
        T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], shared.sub[tid, :], registers)
        T.cuda.cta_sync()
        T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], registers, shared.sub[(tid + 1) % 64, :])
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], registers)


    @T.function
    def twelve_floats(A: T.Tensor((64, 12), "float32", align=16), B: T.Tensor((64, 12), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((3, 4), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :].view(3, 4))
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :].view(3, 4), r)


    @T.function
    def misaligned(A: T.Tensor((64, 4), "float32")):
        # parses; LowerTileApply cannot prove the 16-byte alignment
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])


    not_a_kernel = 42
    """
)

BAD_ATOM = textwrap.dedent(
    """
    from tvm_tirx.script import tirx as T


    @T.function
    def k(A: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((3,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, 0:3])  # line 10
    """
)


@pytest.fixture
def kernels_file(tmp_path):
    path = tmp_path / "my_kernels.py"
    path.write_text(KERNELS)
    return path


def _cli(capsys, *argv):
    """(exit status, stdout, stderr) of cli.main(argv)."""
    status = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def _one_error_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err
    return lines[0]


# -- stages ------------------------------------------------------------------------------------


def test_emit_script_prints_the_parsed_tvmscript(capsys, kernels_file):
    status, out, err = _cli(capsys, "compile", f"{kernels_file}:read_next_row", "--emit", "script")
    assert status == 0, err
    assert "def read_next_row(" in out
    assert 'T.cuda.tile.apply("ld.global.v4.b32", registers, ' in out
    assert out.count("T.cuda.tile.apply(") == 4


def test_emit_lowered_has_ptx_calls_and_no_tile_apply(capsys, kernels_file):
    status, out, err = _cli(capsys, "compile", f"{kernels_file}:twelve_floats", "--emit", "lowered", "--arch", ARCH)
    assert status == 0, err
    assert "tile.apply" not in out
    assert out.count("T.ptx.ld(") == 1 and out.count("T.ptx.st(") == 1
    assert out.count("T.unroll(3)") == 2  # one unrolled repeat loop per tile call
    # without --arch (and no GPU) the lowered IR is still printed
    status, out_no_arch, _ = _cli(capsys, "compile", f"{kernels_file}:twelve_floats", "--emit", "lowered")
    assert status == 0 and "tile.apply" not in out_no_arch


def test_emit_cuda_prints_the_generated_source(capsys, kernels_file):
    status, out, err = _cli(capsys, "compile", f"{kernels_file}:read_next_row", "--arch", ARCH, "--emit", "cuda")
    assert status == 0, err
    assert '__global__ void __launch_bounds__(64) read_next_row_kernel(' in out
    assert out.count('"ld.global.v4.b32') == 1 and out.count('"st.shared.v4.b32') == 1


@testing.requires_nvcc
def test_emit_ptx_targets_the_arch_and_holds_the_kernels_instructions(capsys, kernels_file):
    status, out, err = _cli(capsys, "compile", f"{kernels_file}:read_next_row", "--arch", ARCH, "--emit", "ptx")
    assert status == 0, err
    assert ".target sm_90a" in out
    assert ".visible .entry read_next_row_kernel(" in out
    for opcode in ("ld.global.v4.b32", "st.shared.v4.b32", "ld.shared.v4.b32", "st.global.v4.b32"):
        assert len(re.findall(re.escape(opcode) + r"\s", out)) == 1, opcode
    status, out, err = _cli(capsys, "compile", f"{kernels_file}:twelve_floats", "--arch", "sm_80", "--emit", "ptx")
    assert status == 0, err
    assert ".target sm_80" in out
    assert len(re.findall(r"ld\.global\.v4\.b32\s", out)) == 3  # one per repeat


def test_cuda_without_arch_and_without_gpu_says_to_pass_arch(capsys, kernels_file, monkeypatch):
    from tvm_tirx.build import target as target_module

    monkeypatch.setattr(target_module, "_gpu_arch", lambda: None)
    for stage in ("cuda", "ptx", "sass"):
        status, out, err = _cli(capsys, "compile", f"{kernels_file}:read_next_row", "--emit", stage)
        assert status == 1 and out == ""
        assert "--arch" in _one_error_line(err)


# -- sass --------------------------------------------------------------------------------------


def test_emit_sass_without_a_disassembler_exits_2_naming_both_tools(capsys, kernels_file, monkeypatch):
    import shutil

    from tvm_tirx import cli

    which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name in ("cuobjdump", "nvdisasm") else which(name, *a, **k))
    monkeypatch.setattr(cli, "_wheel_tool", lambda tool: None)
    # the tools are looked for before the compile (tens of seconds) starts
    monkeypatch.setattr(cli, "build_kernel", lambda *a, **k: pytest.fail("compiled before finding a disassembler"))
    status, out, err = _cli(capsys, "compile", f"{kernels_file}:read_next_row", "--arch", ARCH, "--emit", "sass")
    assert status == 2 and out == ""
    line = _one_error_line(err)
    assert "needs nvdisasm on the PATH" in line and "cuobjdump" in line


@testing.requires_nvcc
def test_emit_sass_runs_the_disassembler_on_the_cubin(capsys, kernels_file, tmp_path, monkeypatch):
    # a stand-in nvdisasm (the first tool tried) that checks it is handed "<cubin for sm_90>"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvdisasm"
    tool.write_text(
        "#!" + sys.executable + "\n"
        "import struct, sys\n"
        "assert len(sys.argv) == 2, sys.argv\n"
        "data = open(sys.argv[1], 'rb').read()\n"
        "assert data[:4] == b'\\x7fELF' and struct.unpack_from('<H', data, 18)[0] == 190\n"
        "print('FAKE SASS', len(data), b'sm_90a' in data)\n"
    )
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    status, out, err = _cli(capsys, "compile", f"{kernels_file}:read_next_row", "--arch", ARCH, "--emit", "sass")
    assert status == 0, err
    assert out.startswith("FAKE SASS ") and out.strip().endswith("True")


@testing.requires_nvcc
@pytest.mark.skipif(not any(map(__import__("shutil").which, ("cuobjdump", "nvdisasm"))), reason="no cuobjdump/nvdisasm")
def test_emit_sass_with_the_real_disassembler(capsys, kernels_file):
    status, out, err = _cli(capsys, "compile", f"{kernels_file}:read_next_row", "--arch", ARCH, "--emit", "sass")
    assert status == 0, err
    assert "LDG" in out and "STS" in out and "LDS" in out and "STG" in out


# -- errors --------------------------------------------------------------------------------------


def test_missing_file(capsys, tmp_path):
    status, out, err = _cli(capsys, "compile", f"{tmp_path}/nope.py:k", "--emit", "script")
    assert status == 1 and out == ""
    assert "nope.py: no such file" in _one_error_line(err)


def test_missing_function_lists_the_kernels(capsys, kernels_file):
    status, _, err = _cli(capsys, "compile", f"{kernels_file}:read_next", "--emit", "script")
    assert status == 1
    line = _one_error_line(err)
    assert "no function 'read_next'" in line and "read_next_row" in line and "twelve_floats" in line


def test_name_that_is_not_a_kernel(capsys, kernels_file):
    status, _, err = _cli(capsys, "compile", f"{kernels_file}:not_a_kernel", "--emit", "script")
    assert status == 1
    assert "not a kernel defined with @T.function" in _one_error_line(err)


def test_file_without_func_needs_a_name_unless_it_has_one_kernel(capsys, kernels_file, tmp_path):
    status, _, err = _cli(capsys, "compile", str(kernels_file), "--emit", "script")
    assert status == 1 and "FUNC" in _one_error_line(err)
    single = tmp_path / "single.py"
    single.write_text(KERNELS.split("@T.function")[0] + "@T.function" + KERNELS.split("@T.function")[1])
    status, out, _ = _cli(capsys, "compile", str(single), "--emit", "script")
    assert status == 0 and "def read_next_row(" in out


def test_tile_error_while_parsing_is_one_line_with_the_source_line(capsys, tmp_path):
    path = tmp_path / "bad_atom.py"
    path.write_text(BAD_ATOM)
    status, out, err = _cli(capsys, "compile", f"{path}:k", "--emit", "script")
    assert status == 1 and out == ""
    line = _one_error_line(err)
    assert "TileError" in line and "wrong atom shape" in line and "ld.global.v4.b32" in line
    assert "bad_atom.py:10" in line


def test_tile_error_while_lowering(capsys, kernels_file):
    status, out, _ = _cli(capsys, "compile", f"{kernels_file}:misaligned", "--emit", "script")
    assert status == 0 and "def misaligned(" in out  # parsing accepts it
    status, out, err = _cli(capsys, "compile", f"{kernels_file}:misaligned", "--emit", "lowered", "--arch", ARCH)
    assert status == 1 and out == ""
    line = _one_error_line(err)
    assert "TileError" in line and "align" in line and "my_kernels.py:" in line


def test_tvmscript_error_is_one_line_with_its_location(capsys, tmp_path):
    path = tmp_path / "undefined.py"
    path.write_text(BAD_ATOM.replace("A.sub[tid, 0:3]", "B.sub[tid, :]"))
    status, _, err = _cli(capsys, "compile", f"{path}:k", "--emit", "script")
    assert status == 1
    line = _one_error_line(err)
    assert "Undefined variable: B" in line and "undefined.py:10" in line


def test_python_error_in_the_file(capsys, tmp_path):
    path = tmp_path / "boom.py"
    path.write_text("import tvm_tirx\nraise KeyError('boom')\n")
    status, _, err = _cli(capsys, "compile", f"{path}:k", "--emit", "script")
    assert status == 1
    assert "boom.py: KeyError: 'boom'" in _one_error_line(err)
    path.write_text("def (:\n")
    status, _, err = _cli(capsys, "compile", f"{path}:k", "--emit", "script")
    assert status == 1 and "SyntaxError" in _one_error_line(err)


@testing.requires_nvcc
def test_nvcc_rejection_is_one_line_naming_the_cause(capsys, kernels_file):
    status, out, err = _cli(capsys, "compile", f"{kernels_file}:read_next_row", "--arch", "sm_12345", "--emit", "ptx")
    assert status == 1 and out == ""
    line = _one_error_line(err)
    assert "nvcc" in line and "compute_12345" in line


def test_usage_errors_exit_2(capsys, kernels_file):
    assert cli.main(["compile", f"{kernels_file}:read_next_row", "--emit", "bogus"]) == 2
    assert cli.main([]) == 2
    capsys.readouterr()


# -- as a program ------------------------------------------------------------------------------


def _python_m(*argv, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "tvm_tirx", *map(str, argv)],
        capture_output=True, text=True, timeout=300, cwd=cwd,
    )


@pytest.mark.slow
def test_python_m_help_documents_compile():
    proc = _python_m("--help")
    assert proc.returncode == 0
    assert "compile" in proc.stdout and "--emit" in proc.stdout and "sass" in proc.stdout
    proc = _python_m("compile", "--help")
    assert proc.returncode == 0
    for word in ("FILE.py:FUNC", "--arch", "--emit", "script", "lowered", "cuda", "ptx", "sass"):
        assert word in proc.stdout, word


@pytest.mark.slow
def test_python_m_compile_and_its_errors(kernels_file):
    proc = _python_m("compile", "my_kernels.py:read_next_row", "--arch", ARCH, "--emit", "cuda", cwd=kernels_file.parent)
    assert proc.returncode == 0, proc.stderr
    assert "read_next_row_kernel(" in proc.stdout
    proc = _python_m("compile", "my_kernels.py:nothing", "--emit", "script", cwd=kernels_file.parent)
    assert proc.returncode == 1 and proc.stdout == ""
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
