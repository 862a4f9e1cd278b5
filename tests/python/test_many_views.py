"""Kernels with thousands of buffer views (``.sub``, ``.view``, ``.permute``, views made
in macros) parse, print, lower and compile: apache-tvm's IRBuilder would exit the
views' frames recursively and crash the process at about 250 of them
(:mod:`tvm_tirx.script.flat_frames`)."""

import contextlib
import os
import subprocess
import sys
import textwrap

import pytest

import tvm

from tvm_tirx.script import flat_frames
from tvm_tirx.script import tirx as T


def _kernel_source(n: int) -> str:
    """A kernel module whose body holds ``n`` tile calls, each on views of its own."""
    lines = [
        "from tvm_tirx.script import tirx as T",
        "",
        "@T.macro",
        "def load_row(r, A, i):",
        "    row = A.sub[i, :]",
        '    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, row)',
        "",
        "@T.function",
        f'def many(A: T.Tensor(({n}, 4), "float32", align=16), B: T.Tensor(({n}, 4), "float32", align=16)):',
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))",
        '    r = T.alloc_local((4,), "float32")',
    ]
    for i in range(n):
        # apache-tvm spends ~0.1 s per macro call (inspect.getouterframes): few macro views
        kind = 3 if i % 50 == 49 else i % 3
        if kind == 0:  # .sub
            lines.append(f'    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[{i}, :])')
        elif kind == 1:  # .view, then .sub
            half = (i % 2) * 4
            lines.append(
                f'    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.view({n // 2}, 8).sub[{i // 2}, {half}:{half + 4}], r)'
            )
        elif kind == 2:  # .view, .permute, .sub
            lines.append(f'    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view({n}, 1, 4).permute(1, 0, 2).sub[0, {i}, :])')
        else:  # a view made inside a macro
            lines.append(f"    load_row(r, A, {i})")
    return "\n".join(lines) + "\n"


def _run_stages(tmp_path, n: int, timeout: int = 900):
    """Parse, print, lower and compile the ``n``-view kernel in a subprocess (so that a
    crash fails the test instead of killing pytest); returns the process."""
    (tmp_path / "many_views.py").write_text(_kernel_source(n))
    loads = sum(1 for i in range(n) if i % 50 == 49 or i % 3 != 1)
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import tvm_tirx
        from tvm_tirx import testing
        from many_views import many
        assert many.script().count("T.cuda.tile.apply") == {n}
        lowered = testing.lower(many)
        assert testing.count_ptx(lowered, "ld.global.v4.b32") == {loads}
        assert testing.count_ptx(lowered, "st.global.v4.b32") == {n - loads}
        kernel = tvm_tirx.compile(many, target="cuda", arch="sm_90a")
        assert "__global__" in kernel.cuda_source
        print("stages ok")
        """
    )
    env = dict(os.environ, TVM_TIRX_CACHE="0")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, check=False)


@pytest.mark.slow
def test_thousands_of_views_parse_lower_and_compile(tmp_path):
    # 2000 views (.sub, .view, .view+.permute, and 40 made in a macro) in one block:
    # today's apache-tvm exits their frames recursively and the process dies (SIGSEGV)
    proc = _run_stages(tmp_path, 2000)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert "stages ok" in proc.stdout


def _mixed_kernel():
    @T.macro
    def load_row(r, A, i):
        row = A.sub[i, :]
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, row)

    @T.function
    def mixed(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=2048))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((4,), "float32")
        s = T.alloc_shared((32, 4), "float32", scope="shared.dyn", align=16)
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])
        T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], s.sub[tid, :], r)
        rows = B.view(2, 32, 4)
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], rows.sub[1, tid, :], r)
        for j in T.serial(2):
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(64, 1, 4).permute(1, 0, 2).sub[0, 32 * j + tid, :])
            if tid < 16:
                load_row(r, A, tid + 32 * j)
                T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], r)
            load_row(r, A, tid)
        n = tid * 2
        T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[n, :], r)
        load_row(r, A, n + 1)
        T.cuda.cta_sync()
        T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], r, s.sub[31 - tid, :])

    return mixed


def test_flat_exits_build_the_ir_apache_tvm_builds(monkeypatch):
    # views in the body, in loops, under an if, in macros, after a scalar binding,
    # carve-outs: the same PrimFunc as apache-tvm's recursive exits give
    flat = _mixed_kernel()
    monkeypatch.setattr(flat_frames, "flat_frame_exits", contextlib.nullcontext)
    stock = _mixed_kernel()
    tvm.ir.assert_structural_equal(flat, stock, map_free_vars=True)


def test_apache_tvm_frames_are_left_as_they_were():
    from tvm.script.ir_builder.base import IRBuilderFrame

    stock = IRBuilderFrame.add_callback
    _mixed_kernel()
    assert IRBuilderFrame.add_callback is stock
    try:

        @T.function
        def broken(A: T.Tensor((64, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], A.sub[0, :], A.sub[1, :])

    except Exception:  # pylint: disable=broad-except
        pass
    assert IRBuilderFrame.add_callback is stock
