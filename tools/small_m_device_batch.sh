#!/usr/bin/env bash
# What the small-M (decode) kernel needs from an H200 before the torch operators take it by
# default (kernels/gemm/planner.py: SMALL_M_ROUTE): its GPU tests, compute-sanitizer's
# memcheck and racecheck on them, the split-count sweep that calibrates the planner and the
# tables through ops.linear against F.linear and Triton (decode with and without the route).
# One call on the device machine, after stage 2 (see ../shared/gpu/README.md):
#
#   . /tmp/tirx-site/env.sh && export PYTHONPATH=$PWD/python:$PYTHONPATH && bash tools/small_m_device_batch.sh
#
# It prints each part's result; the tables come last.
set -uo pipefail
cd "$(dirname "$0")/.."
export TVM_TIRX_SMALL_M=1
echo "== GPU tests (small-M kernel, the ops on its route)"
python3 -m pytest -q -m gpu tests/python/test_gemm_small_m.py tests/python/test_torch_ops.py tests/python/test_eager_ops.py 2>&1 | tail -5
echo "== compute-sanitizer memcheck and racecheck on the small-M GPU tests"
bash tools/sanitize.sh all -m gpu tests/python/test_gemm_small_m.py -k small_m_kernel_on_gpu 2>&1 | tail -6
echo "== split counts (calibrates planner.choose_small_m)"
python3 bench/gemm_decode.py --repeats 10 2>&1 | tail -25
echo "== ops.linear against F.linear and Triton: decode with the small-M route, then without (the tile kernel)"
python3 bench/gemm.py --ops --classes decode --triton --runs 10 2>&1 | tail -12
TVM_TIRX_SMALL_M=0 python3 bench/gemm.py --ops --classes decode --runs 10 2>&1 | tail -12
echo "== ops.linear against F.linear, square class"
python3 bench/gemm.py --ops --classes square --runs 10 2>&1 | tail -12
