"""The hang detector (issue 25 item 2): options={"detect_hangs": ...} bounds every mbarrier wait."""

import os
import subprocess
import sys

import pytest

import hang_kernels as K
import tvm_tirx
from tvm_tirx import testing


def _source(kernel, **options):
    return tvm_tirx.compile(kernel, arch="sm_90a", options=options or None).cuda_source


def test_off_by_default_and_on_with_the_option():
    assert "tvm_tirx_trap" not in _source(K.tma_with_byte_count)
    spin = _source(K.tma_with_byte_count, detect_hangs=True)
    assert spin.count('tvm_tirx_trap("') == 1
    assert "mbarrier wait timed out after 2000 ms on mbarrier bar (init count 1)" in spin
    assert "hang_kernels.py:" in spin and "clock64()" in spin
    # apache-tvm's spin-wait intrinsic is replaced by the bounded loop
    assert "mbarrier_wait(" not in spin.replace("tvm_tirx", "")
    loop = _source(K.arrivals, detect_hangs=50)
    assert "timed out after 50 ms on mbarrier bar" in loop and loop.count('tvm_tirx_trap("') == 1


def test_a_wait_inside_a_macro_names_its_line_and_the_call_sites():
    # each wait of the GEMM sits in the macro wait_phase (kernels/parts/ring.py), called from
    # the ring's acquire and wait, called from the producer and the consumer macros: the
    # message names the wait's line and how it was expanded
    import re

    from tvm_tirx.kernels.gemm import make_gemm

    source = _source(make_gemm(1024, 1024, 1024), detect_hangs=True)
    messages = set(re.findall(r"(\S*ring\.py:\d+ \(expanded from [^)]*\)): mbarrier wait timed out", source))
    assert len(messages) == 2, messages  # the producer's wait on empty, the consumer's on full
    assert any("producer.py:" in m for m in messages) and any("consumer.py:" in m for m in messages)
    assert "<unknown line>" not in source


def test_detect_hangs_option_is_checked():
    with pytest.raises(ValueError, match="detect_hangs"):
        tvm_tirx.compile(K.arrivals, arch="sm_90a", options={"detect_hangs": -5})


@testing.requires_nvcc
def test_bounded_waits_assemble():
    testing.assemble(tvm_tirx.compile(K.tma_with_byte_count, arch="sm_90a", options={"detect_hangs": True}))
    testing.assemble(tvm_tirx.compile(K.arrivals, arch="sm_90a", options={"detect_hangs": True}))


_SCRIPT = """
import sys, torch, tvm_tirx
import hang_kernels as K
case = sys.argv[1]
if case == "bytes":
    k = tvm_tirx.compile(K.tma_with_byte_count, target="cuda", options={"detect_hangs": 300})
    a = torch.randn(64, 64, device="cuda"); b = torch.zeros_like(a)
    k(a, b, 16384); torch.cuda.synchronize()
    assert torch.equal(a, b); print("right count: ok", flush=True)
    k(a, b, 4096); torch.cuda.synchronize()
else:
    k = tvm_tirx.compile(K.arrivals, target="cuda", options={"detect_hangs": 300})
    b = torch.zeros(128, device="cuda")
    k(b, 1); torch.cuda.synchronize(); print("right count: ok", flush=True)
    k(b, 2); torch.cuda.synchronize()
print("no trap", flush=True)
"""


@pytest.mark.gpu
@pytest.mark.parametrize("case, said", [("bytes", "expect_tx"), ("arrivals", "init count")])
def test_the_detector_traps_with_its_message_on_the_gpu(torch_cuda, case, said):
    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", _SCRIPT, case], capture_output=True, text=True, timeout=120, env=env)
    text = out.stdout + out.stderr
    assert "right count: ok" in text and "no trap" not in text and out.returncode != 0, text
    assert "mbarrier wait timed out after 300 ms on mbarrier bar" in text and "parity=0" in text, text
