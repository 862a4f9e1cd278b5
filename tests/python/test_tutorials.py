"""The tutorial scripts run from start to end and assemble every kernel they build.

Each script in ``tutorials/`` runs in its own process, as a user would run it
(``python tutorials/<name>.py`` from the repository root). Without a GPU the
scripts compile for sm_90a and assemble with ``nvcc``/``ptxas``; with one they
also run their kernels and assert the results.
"""

import pathlib
import subprocess
import sys

import pytest

from tvm_tirx import testing

ROOT = pathlib.Path(__file__).resolve().parents[2]
TUTORIALS = sorted((ROOT / "tutorials").glob("*.py"))

# The kernels each tutorial must report as assembled.
KERNELS = {
    "data_movement": ["read_next_row", "twelve_floats", "save_and_zero", "register_move", "predicated"],
    "arithmetic": ["two_a_plus_one", "relu_2a1_cta", "pack_f16x2", "add_f16x2", "pack_unpack_b64", "silu"],
    "scopes": ["warp_rows", "cta_twelve", "warpgroup_tile", "cluster_pair", "half_warp", "producer_warp"],
    "async_copies": ["stage_rows", "ragged_rows"],
    "warp_mma": ["warp_mma", "ld_st_matrix"],
    "tma_pipelines": ["add_one", "double_rows", "swizzled_halves"],
    # runs the stage scripts in tutorials/hopper_gemm/
    "hopper_gemm": ["gemm_tile", "gemm_kloop", "gemm_pipelined", "gemm_warp_specialized", "hopper_gemm"],
    "tir_schedules": ["add_one"],
    "attention": ["row_max", "attention"],
}


def _stops_early(stem):
    """The line a tutorial prints when it cannot run in this environment (it then
    exits 0 early), or None: ``tir_schedules`` needs a working ``Schedule.tensorize``
    (apache-tvm-ffi 0.1.14.post0, see ``tensor_intrin.tensorize_supported``);
    ``decoder_block`` needs torch."""
    if stem == "decoder_block":
        import importlib.util

        return None if importlib.util.find_spec("torch") else "decoder_block: needs torch"
    if stem == "tir_schedules":
        from tvm_tirx.schedule import tensor_intrin

        if not tensor_intrin.tensorize_supported():
            return "tir_schedules: Schedule.tensorize does not work with the installed apache-tvm-ffi"
    return None


def test_the_documented_tutorials_exist():
    assert {p.stem for p in TUTORIALS} >= set(KERNELS)


#: tutorials that take over ~13 s on a 2-core machine (the Hopper GEMM's five step scripts,
#: the decoder block's torch and Relax builds, the many small kernels of arithmetic and
#: attention): marked slow, run by CI and `-m "slow or not slow"`
SLOW = {"hopper_gemm", "decoder_block", "arithmetic", "attention"}


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW else p for p in TUTORIALS],
    ids=[p.stem for p in TUTORIALS],
)
def test_tutorial_runs(path):
    if not testing.has_nvcc():
        pytest.skip("the tutorials assemble their kernels: needs nvcc on the PATH")
    proc = subprocess.run(
        [sys.executable, str(path.relative_to(ROOT))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    lines = proc.stdout.splitlines()
    stop = _stops_early(path.stem)
    if stop:
        assert any(line.startswith(stop) for line in lines), output[-4000:]
        pytest.skip(f"{path.stem} stopped early: {stop}")
    assert f"{path.stem}: all kernels assembled" in lines, output[-4000:]
    for name in KERNELS.get(path.stem, []):
        assert any(line.startswith(f"assembled {name} for sm_") for line in lines), name
