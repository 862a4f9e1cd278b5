#!/usr/bin/env bash
# The GPU steps the open issues (40, 42, 43) wait on; every part writes its whole log under
# $OUT (the device's fetched folder) and prints its summary.  Run on an H100 on 2026-12-05
# (evening) and no longer waiting: verify, tiles-misaligned, dsum-route, verify-2, backward-profile,
# gemm-ops-a, gemm-ops-b, attention-backward-kernel, sanitize-backward-columns.  Run on an H100 on
# 2026-12-06: gpu-suite (394 passed after two fixes), decode-slabs (64 x 4096 x 4096 still 0.47x:
# the slabs were not its cause), split-k-tiles (split-K 1.04-5x slower than unsplit: route stays
# off), fp8-blocks (0.70-0.84x per-tensor), backward-host (416 us median, was 716),
# sanitize-split-k (clean).  Run on an H100 later on 2026-12-06: ncu-split-k and ncu-decode (the
# split-K epilogue issue-bound: fixed by predicated .v2 slab accesses), split-k-tests (20 passed,
# before and after that fix), fp8-blocks (the scale prefetch: +1-3%), gemm-ops-c (Llama classes:
# geomean 0.981, min 0.866), decode-slabs and split-k-tiles (after the fix), sanitize-split-k (clean),
# ncu-split-k-source (the split kernel's stalls: ring fill 40%, slabs 20%, fences 10%),
# decode-block-m (block_m 64 in 4 splits stays the fastest at 64 x 4096 x 4096).  Run on an H100 in a
# third session on 2026-12-06: decode-tiles(-tests) (128-row tiles at m = 64 slow: A box rows past m), decode-64(-tests)
# and decode-64-widths (the 64-row tile), ncu-llama, ncu-decode-64, route-tests, decode-slabs,
# gemm-ops-b, few-tiles-64, ncu-5000(-unpadded), pad-k, gemm-ops-square.  Run on an H100 in a
# fourth session on 2026-12-06: attention-block-n-tests (8 passed), attention-bn-256 (blocks of 80:
# +5-10%), attention-bn-64 (no gain; cut at 400 s), attention-bn-128 (two stages lose), gpu-suite
# (437 passed, 2 skipped), then by hand the head_dim 256 GPU tests (-k "256 or head_dims": 10
# passed) and --ops --classes head-dim / ragged / table.  Run on an H100 in a fifth session on
# 2026-12-06: attention-consumers-tests (12 passed), deterministic (4, then 6 with the overlapped
# backward), attention-256-tests (48 passed, twice: before and after the planner took three
# consumers), attention-consumers (three consumers win at head_dim 64 full: +13-21%),
# backward-overlap-tests (8 passed), backward-kernels (overlap +4-5% at head_dim 128),
# attention-backward-kernel (geomean 0.784x, was 0.746), backward-host (388 us median),
# attention-ops-64 (13 rows: graph geomean 1.025).  Run on an H100 in a sixth session on 2026-12-06:
# dsum (9 passed) and backward-route-tests (13 passed: the operator now takes make_dsum(zero_dq=True)),
# backward-timeline (the main kernel is the gap: 945 vs cuDNN's 709 us at 4,32,8,2048,128 causal),
# attention-short (no schedule beats the plan at 32 x 16 x 512 x 128: 436 vs cuDNN 506 TFLOP/s),
# backward-launch (kernel_grads 68.5 us of autograd.grad's 357), backward-lpt-tests (12 passed),
# backward-lpt-deterministic (8 passed, after the grid of (kv_heads, batch, key_blocks)),
# attention-backward-kernel (with the first, one-dimensional longest-first order on for causal:
# geomean 0.745), backward-kernels (longest_first loses everywhere but the longest causal row: off),
# racecheck-backward-overlap (16 hazards between the row copier's srows stores and the consumers'
# loads; see docs/kernels.rst).  A seventh session on 2026-12-06 got no machine: sixteen starts were refused
# (H100 and H200; 1426 of the 1800 s), and the rest was too little to start one.  Run on an H100 on
# 2026-12-07: backward-sections-tests (4 passed; the deterministic kernel in sections of one head failed the
# checker: det-sections-probe), sections-quick (sections 2-15% faster: on by default at head_dim 128),
# attention-backward-sections (geomean 0.869x the fastest peer); later the same day, on another H100:
# rows-tests (23 passed), rows-quick (rows/2 7-14% faster than columns/4 at head_dim 64: PLANS[64]),
# sections-64 (2-3% faster: SECTION_HEAD_DIMS gains 64), det-sections-probe (compiled at 1x there), the operator's
# table by hand with the new plan (geomean 0.852x), deterministic (8 passed), memcheck of rows (0 errors).
# On 2026-12-07 (a second session) eight starts were refused (about 1000 of the 1800 s); then on an H100:
# backward-sections-tests (6 + 3 passed: the rows cases, and the deterministic kernel in sections of one head
# at head_dim 128 and 64), deterministic-sections (1.05-1.20x, the same bits: DETERMINISTIC_SECTIONS on), the
# deterministic and route GPU tests with it on (13 passed), backward-timeline (GPU spans: ours 905 / cuDNN 890 us
# at 4,32,8,2048,128 causal, 958 / 882 at 8,16,16,2048,64, 616 / 602 at 32,16,16,512,128), profile_attention
# --launch / --host, and tools/backward_host_compare.py (host per call: ours 568 / cuDNN 400 us).
# On 2026-12-07 (a third session), on an H100: kv-tests (44 passed), kv-short (O in K's stage against Q's rows),
# kv-tests-2 (18 passed), kv-short-2 (+10% at 32 x 16 x 512 x 128, -4..-6% at full rows of 2048-4096 keys),
# ncu-forward-short(-source) (ours 167 us, cuDNN's 159), then with the planner's choice kv-tests-3 (21 passed),
# kv-ops (17 rows: graph geomean 1.039, min 0.957) and kv-ops-fp16 (11 rows: 1.067, min 0.975).
# On 2026-12-07 (a fourth session) no machine came: 28 calls (H200 and H100) were refused, 1561 of the 1800 s.
# On 2026-12-07 (a fifth session), on an H100: kv-final-tests (36 passed), kv-final-sanitize (memcheck 0 errors;
# racecheck cut at 300 s, and again by hand at 540 s), kv-final-ops (graph geomean 1.033, min 0.951) and
# kv-final-ops-fp16 (1.048, min 0.946), the same table with the switch off (1.008, min 0.856): KV_STAGING on.
# On 2026-12-07 (a sixth session) no machine came: three starts failed, then "no new device machine is lent at
# present" (about 500 of the 1800 s); that session built scores_ahead for the backward (CPU only).
# On 2026-12-08 no machine came: ten calls (H200, then H100) from 00:20 to 01:57 were refused (about 1110 of the 1800 s),
# then "no new device machine is lent at present"; that session built v_ring (K's and V's halves of a stage on barriers of
# their own) for the forward, CPU only.  Carrying stage1 and stage2 in one call is refused (over 64 MiB with the tree).
# What the next session should run, in calls of at most 10 minutes on one warm machine
# (DEADLINE=$(( $(date +%s) + 580 ))); first vring-tests, vring-256 and vring-ops (does FlashAttention-3's two-stage
# overlapped schedule lift head_dim 256, the op table's 0.95x rows? if so, schedules.V_RING on), then vring-128 and
# vring-64; on an H200, attention-ops and attention-ops-fp16 (issue 42's acceptance table, every class, both dtypes):
#   0. grad-path-tests and grad-path-launch (the ops' autograd path, torch.autograd.Function: CPU-tested only),
#      kv-racecheck (the hand-over under racecheck on a few tiles), then attention-weak-64, attention-weak-256,
#      attention-weak-512 (the op table's rows below 1.00x: schedules and block widths the plan did not take),
#      ncu-decode-32 (issue 40's weakest rows: does cuBLAS's weight stay in L2 where ours does not?);
#   A. backward-ahead-tests, backward-ahead and attention-backward-ahead (the backward's next S^T under dK: never
#      run; the last through the operator, TVM_TIRX_ATTENTION_SCORES_AHEAD=1), then
#      attention-backward-kernel (the operator's table as committed: not rerun since 2026-12-07's first session);
#   B. racecheck-backward-columns (the serial kernel has the same srows chain: does racecheck report it
#      too? if so the tool does not follow a named barrier into one thread's mbarrier.arrive);
#   C. ncu-backward-vs-cudnn and ncu-backward-source (our backward kernel and cuDNN's under ncu; our stalls
#      per SASS instruction: where the 0.75-0.85x comes from);
#   D. attention-backward-kernel, memcheck-backward-overlap, gemm-ops-a, gemm-ops-c.
# A refused start costs device time (15 s to 3 min each; on 2026-12-06 three refusals took ~440
# of the 1800 s, and in the later session five took ~560): after one, wait out the minutes it
# names (or 10 minutes where it names none) before one more try, and keep the kind the same.
# Other parts: route-tests, sanitize, decode-route-on, tiles, attention-backward (kernel
# off), sanitize-attention-backward, backward-kernels, varlen, varlen-kernel, ncu-backward,
# tiles-256, attention-tma-store, dsum, attention-ops.
#
#   . /tmp/tirx-site/env.sh && export PYTHONPATH=$PWD/python:$PYTHONPATH && export OUT && \
#     DEADLINE=$(( $(date +%s) + 585 )) bash tools/device_batch.sh PART...
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/device-batch}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
WANTED=" $* "
part() {  # part NAME SECONDS COMMAND...: run (if wanted), log to $OUT/NAME.txt, print its summary
  local name="$1" limit="$2"
  shift 2
  [ "$WANTED" = "  " ] || [[ "$WANTED" == *" $name "* ]] || return 0
  if [ -n "${DEADLINE:-}" ]; then  # DEADLINE: seconds since epoch by which every part must end
    local left=$(( DEADLINE - $(date +%s) - 5 ))
    [ "$left" -lt 30 ] && { echo "== $name skipped: ${left}s left before DEADLINE"; return 0; }
    [ "$left" -lt "$limit" ] && limit="$left"
  fi
  echo "== $name (limit ${limit}s)"
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
  echo "rc=$? after $(( $(date +%s) - t0 ))s"
  grep -E "^(FAILED|ERROR)|passed|failed|hazard|SUMMARY" "$OUT/$name.txt" | head -20
}
part gpu-suite 400 python3 -m pytest tests -m gpu -q -n 14 --tb=short -p no:cacheprovider \
  --ignore=tests/python/test_attention_backward_deterministic.py
# the deterministic backward spins on global counts: a wrong turn would hang, so it runs alone, briefly
part deterministic 150 python3 -m pytest tests/python/test_attention_backward_deterministic.py -m gpu -q -n 4 \
  --tb=short -p no:cacheprovider
part route-tests 150 python3 -m pytest -q -m gpu -n 15 --tb=short -p no:cacheprovider \
  tests/python/test_gemm_small_m.py tests/python/test_torch_ops.py tests/python/test_eager_ops.py
# the kernel tests only: the operators' tests capture CUDA graphs, which cannot allocate
# with cudaMalloc during capture, as PYTORCH_NO_CUDA_MEMORY_CACHING=1 (which memcheck needs)
# makes torch do (on 2026-12-05, "-k small_m_kernel_on_gpu" also took the four operator
# tests: 4 failed, 4 passed; the logs were not kept, so which four is not known)
part sanitize 240 bash tools/sanitize.sh all -m gpu tests/python/test_gemm_small_m.py -k test_the_small_m_kernel_on_gpu
part split-sweep 240 python3 bench/gemm_decode.py --repeats 10
show() { [ -f "$OUT/$1.txt" ] && tail -"$2" "$OUT/$1.txt"; return 0; }
show split-sweep 22
part decode-route-on 200 python3 bench/gemm.py --ops --classes decode --triton --runs 10
show decode-route-on 14
part decode-route-off 150 env TVM_TIRX_SMALL_M=0 python3 bench/gemm.py --ops --classes decode --runs 10
show decode-route-off 14
part tiles 420 python3 bench/gemm.py --tiles --runs 20 --sizes 3072x3072x3072 5000x5000x5000 1536x1536x1536 \
  2048x2048x2048 4096x4096x4096 8192x1024x4096 1024x10240x8192 8192x8192x4096
show tiles 14
part attention-ops 400 python3 bench/attention.py --ops
show attention-ops 40
# the same table (every class) in fp16: issue 42's acceptance asks for both dtypes in one run each
part attention-ops-fp16 400 python3 bench/attention.py --ops --dtype float16
show attention-ops-fp16 40
part attention-backward 500 env TVM_TIRX_ATTENTION_BACKWARD=0 python3 bench/attention.py --backward
show attention-backward 14
part attention-backward-kernel 500 python3 bench/attention.py --backward
show attention-backward-kernel 14
part sanitize-attention-backward 400 bash tools/sanitize.sh all tests/python/test_attention_backward.py \
  -k "(every_length and keys) or forward_kernels"
part backward-kernels 500 python3 bench/attention.py --backward-kernels
show backward-kernels 24
part sanitize-backward-columns 400 bash tools/sanitize.sh all tests/python/test_attention_backward.py \
  -k "every_length and columns"
part varlen 200 env TVM_TIRX_ATTENTION_VARLEN=0 python3 bench/attention.py --varlen
show varlen 10
part varlen-kernel 200 python3 bench/attention.py --varlen
show varlen-kernel 10
part attention-tma-store 420 python3 bench/attention.py --runs 10 --causal both \
  --rows 32,16,512,128 64,16,512,128 4,32,4096,128 4,16,4096,256 1,16,16384,64 --schedules \
  "persistent both, rows <= 4096" "persistent both, rows <= 4096, TMA store" "persistent ping-pong, TMA store" \
  ping-pong "ping-pong, TMA store" "persistent overlap" "persistent overlap, TMA store"
show attention-tma-store 16
# racecheck of one backward configuration per head_dim, small enough to finish (the whole
# every-length test did not, in 400 s, on 2026-12-05)
part racecheck-attention-backward 400 bash tools/sanitize.sh racecheck tests/python/test_attention_backward.py \
  -k "float16_heads_and_stages and (128-float16-8-2 or 64-float16-1-3)"
part sanitize-varlen 300 bash tools/sanitize.sh all tests/python/test_attention_varlen.py \
  -k "one_packed_call and causal"
# where the backward kernel's time goes (issue 43 is at 0.56-0.72x cuDNN): one launch, D 128 causal
part ncu-backward 300 ncu -k regex:attention_backward --launch-skip 2 --launch-count 1 --section SpeedOfLight \
  --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SourceCounters \
  python3 tools/profile_attention.py 1,32,32,8192,128 --causal
show ncu-backward 120
# the cooperative 256-row tiles (block_m=256) against 128 x 256, 128 x 192 and cuBLAS on the shapes cuBLAS takes them for
part tiles-256 420 python3 bench/gemm.py --tiles --runs 20 --only 256x 128x192 --sizes 5000x5000x5000 \
  4096x4096x4096 8192x1024x4096 3072x3072x3072 1024x10240x8192 8192x8192x4096 6144x6144x6144 2048x2048x2048
show tiles-256 16
# the backward's Dsum in one pass (make_dsum; TVM_TIRX_ATTENTION_DSUM=1 takes it): its GPU tests, then the
# backward table through the op with it (compare with attention-backward-kernel, same call)
part dsum 200 python3 -m pytest tests/python/test_attention_dsum.py -m gpu -q -n 4 --tb=short -p no:cacheprovider
part attention-backward-dsum 500 env TVM_TIRX_ATTENTION_DSUM=1 python3 bench/attention.py --backward
show attention-backward-dsum 14
# what the last GPU run left unverified: the workspaces made outside CUDA graph pools (the one
# failure of 2026-12-05's gpu-suite), make_dsum, and the deterministic backward by columns
part verify 200 python3 -m pytest -m gpu -q -n 4 --tb=short -p no:cacheprovider \
  tests/python/test_eager_ops.py tests/python/test_attention_dsum.py tests/python/test_attention_backward_deterministic.py
# is it K's rows (not a multiple of 128 bytes) or M and N (not multiples of the tile) that halve 5000^3?
part tiles-misaligned 300 python3 bench/gemm.py --tiles --runs 10 --only 128x192 256x160 256x192 \
  --sizes 4096x4096x4096 4096x4096x4000 5000x5000x5120 5000x5000x5000
show tiles-misaligned 12
part dsum-route 300 python3 bench/attention.py --dsum --runs 10
show dsum-route 10
part gemm-ops 500 python3 bench/gemm.py --ops --runs 20
show gemm-ops 70
# the backward's GPU time per kernel through the op (the preparation around the kernel): torch.profiler
part backward-profile 200 bash -c "python3 tools/profile_attention.py 4,32,8,2048,128 --causal --calls 5 --table && \
  python3 tools/profile_attention.py 1,32,32,8192,128 --causal --calls 3 --table"
show backward-profile 40
# the GEMM table through ops.linear in two calls (each under 10 minutes with its compiles)
part gemm-ops-a 560 python3 bench/gemm.py --ops --runs 20 --classes suite
show gemm-ops-a 32
part gemm-ops-b 560 python3 bench/gemm.py --ops --runs 20 --classes square ragged-m narrow-n decode
show gemm-ops-b 30
part gemm-ops-c 560 python3 bench/gemm.py --ops --runs 20 --classes llama3-8b llama3-70b
show gemm-ops-c 28
# after the K padding (planner.k_padding) and make_dsum by default: their GPU tests, and every
# backward GPU test through the operator (now with make_dsum's Dsum)
part verify-2 300 python3 -m pytest -m gpu -q -n 8 --tb=short -p no:cacheprovider tests/python/test_attention_dsum.py \
  tests/python/test_attention_backward.py "tests/python/test_torch_ops.py::test_linear_pads_k_on_gpu_and_gives_the_unpadded_kernels_bits"
# the host's share of a backward call (torch.profiler put ~500-950 us of CPU inside the op)
part backward-host 120 python3 tools/profile_attention.py 4,32,8,2048,128 --causal --host
show backward-host 45
# racecheck of the operator's backward kernels (by columns) on one configuration per head_dim
part racecheck-backward-columns 400 bash tools/sanitize.sh racecheck tests/python/test_attention_backward.py \
  -k "float16_heads_and_stages and (128-float16-8-3-columns or 64-float16-1-4-columns)"
# the split-K slabs (2026-12-05, night; no GPU that session): the small-M kernel's reduction now
# stores per-split slabs and sums them in order (it added them with red.global.add.f32); the tile
# kernel's split-K (make_gemm(splits=...), planner.choose_split behind TVM_TIRX_SPLIT_K=1)
part split-k-tests 300 python3 -m pytest -m gpu -q -n 8 --tb=short -p no:cacheprovider \
  tests/python/test_gemm_small_m.py tests/python/test_gemm_split_k.py tests/python/test_torch_ops.py
# the decode class after the slabs (64 x 4096 x 4096 was 0.42x with the atomics)
part decode-slabs 240 python3 bench/gemm.py --ops --classes decode --triton --runs 10
show decode-slabs 14
# split-K against the tiles the planner takes unsplit: the costs FILL_TILES and REDUCE_TILES to calibrate
part split-k-tiles 400 python3 bench/gemm.py --tiles --runs 20 --only split 128x128 128x64 --sizes \
  1000x1000x1000 100x4096x4096 128x4096x4096 512x512x512 768x768x768 300x1024x8192 1536x1536x1536 1000x4096x4096
show split-k-tiles 14
# the ops on the split-K route (the classes whose waves are short), against F.linear
part split-k-ops 500 env TVM_TIRX_SPLIT_K=1 python3 bench/gemm.py --ops --runs 20 --classes square ragged-m decode
show split-k-ops 24
part sanitize-split-k 300 bash tools/sanitize.sh all tests/python/test_gemm_split_k.py -k split_k_on_gpu
# FP8 with block scales (make_gemm(block_scales=True), 2026-12-05 night, no GPU then): its GPU tests,
# then its rate against the per-tensor kernel and torch._scaled_mm (issue 40 asks 0.95x per-tensor)
part fp8-blocks 400 bash -c "python3 -m pytest -m gpu -q -n 4 --tb=short -p no:cacheprovider \
  tests/python/test_gemm_block_scales.py && python3 bench/gemm_fp8_blocks.py --runs 20"
show fp8-blocks 14
# where the time goes (2026-12-06, H100): the tile split-K ran 2.5x slower than its unsplit tile at
# 1000^3 (58 vs 148 TFLOP/s), and 64 x 4096 x 4096 decode stayed at 0.47x cuBLAS after the slabs
NCU_SECTIONS="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters"
# (gemm_ncu.py profiles exactly its two launches, ours then torch.matmul: --profile-from-start off)
NCU="ncu --profile-from-start off $NCU_SECTIONS"
part ncu-split-k 300 bash -c "$NCU python3 bench/gemm_ncu.py 1000x1000x1000 --option block_n=128 --option stages=6 \
  --option persistent=False --option splits=2 && $NCU python3 bench/gemm_ncu.py 1000x1000x1000 --option block_n=128 \
  --option stages=6 --option persistent=False"
part ncu-decode 150 $NCU python3 bench/gemm_ncu.py 64x4096x4096 --ops
# where in the split kernel the warps wait, per SASS instruction (ncu's sampled stall reasons, as CSV:
# 2026-12-06, after the predicated slab accesses, 1000^3 128 x 128 in 2 splits took 22.6 us, 13.5 unsplit)
part ncu-split-k-source 200 bash -c "ncu --profile-from-start off --section WarpStateStats --section SourceCounters \
  --page source --print-source sass --csv python3 bench/gemm_ncu.py 1000x1000x1000 --option block_n=128 \
  --option stages=6 --option persistent=False --option splits=2"
# the 64-row decode (0.58x cuBLAS after the predicated slabs): narrower row tiles (two or four CTAs
# per W tile, W's rereads from L2) against block_m 64, every split count
part decode-block-m 300 python3 bench/gemm_decode.py --m 64 --nk 4096x4096 --block-ms 16 32 64 --repeats 20
show decode-block-m 6
# decode on the tile kernel (2026-12-06): widths below 64 over the whole K, and 2-CTA clusters
# sharing A (x) by multicast, cuBLAS's form at 64 x 4096 x 4096 (nvjet 64x32, 1x2 clusters)
part decode-tiles-tests 240 python3 -m pytest -m gpu -q -n 8 --tb=short -p no:cacheprovider \
  tests/python/test_gemm_decode_tiles.py
part decode-tiles 400 python3 bench/gemm.py --tiles --runs 50 --only 128x64 128x32 128x16 --sizes 1x4096x4096 \
  8x4096x4096 16x4096x4096 64x4096x4096 1x14336x4096 16x4096x14336 64x14336x4096 128x4096x4096
show decode-tiles 16
# the 64-row tiles (one consumer warpgroup; 128-row tiles at m = 64 took 30 us against 17 at m = 128)
part decode-64-tests 240 python3 -m pytest -m gpu -q -n 8 --tb=short -p no:cacheprovider \
  tests/python/test_gemm_decode_tiles.py
part decode-64 400 python3 bench/gemm.py --tiles --runs 50 --only 64x 128x64 --sizes 1x4096x4096 8x4096x4096 \
  16x4096x4096 32x4096x4096 64x4096x4096 16x4096x14336 64x14336x4096 64x28672x4096 128x4096x4096
show decode-64 16
# cuBLAS's kernels at the Llama M = 512 rows below 0.9x (gemm-ops-c, 2026-12-06) and ours
part ncu-llama 300 bash -c "$NCU python3 bench/gemm_ncu.py 512x28672x4096 --ops && \
  $NCU python3 bench/gemm_ncu.py 512x4096x4096 --ops && $NCU python3 bench/gemm_ncu.py 2048x6144x4096 --ops"
# the 64-row tile's widths and depths at m = 32..64 (64 x 64 in 8 stages: 0.76x F.linear under a graph at
# 64 x 4096 x 4096, 11.4 against 8.7 us, H100 2026-12-06), and cuBLAS's kernel beside it under ncu
part decode-64-widths 300 python3 bench/gemm.py --tiles --runs 50 --only 64x --sizes 32x4096x4096 48x4096x4096 \
  64x4096x4096 64x14336x4096
show decode-64-widths 10
part ncu-decode-64 150 $NCU python3 bench/gemm_ncu.py 64x4096x4096 --ops
# the 64-row tiles where 128-row ones leave SMs idle (few tiles: 100 x 4096^2 at 0.62x F.linear under a
# graph with 64 CTAs of 128 x 64, 1000^3 0.70x, 2048 x 256 x 8192 0.75x; H100 2026-12-06, gemm-ops-b)
part few-tiles-64 300 python3 bench/gemm.py --tiles --runs 30 --only 64x64 64x32 64x128 128x64 128x32 128x128 \
  --sizes 100x4096x4096 1000x1000x1000 512x512x512 2048x256x8192 300x1024x8192 4096x512x4096 1000x4096x4096
show few-tiles-64 14
# 5000^3 stays at 0.71x with K padded to 64-byte rows (578 against 411 us): where its time goes
part ncu-5000 200 $NCU python3 bench/gemm_ncu.py 5000x5000x5000 --ops
# the same kernel on unpadded rows of 10000 bytes (the padded kernel took 441 us under ncu, cuBLAS
# 387, the two pads 168 more: F.pad's fill and a copy each)
part ncu-5000-unpadded 200 $NCU python3 bench/gemm_ncu.py 5000x5000x5000 --option block_m=256 --option block_n=160 \
  --option stages=4 --option persistent=False
# K padding in one pass (kernels/pad.py) instead of F.pad's fill and copy: its GPU tests, the operators'
# padded GEMM test, and the square class (5000^3 took 587 us against F.linear's 421 with F.pad)
part pad-k 200 python3 -m pytest -m gpu -q -n 4 --tb=short -p no:cacheprovider tests/python/test_pad_kernels.py \
  tests/python/test_torch_ops.py -k "pad"
part gemm-ops-square 300 python3 bench/gemm.py --ops --runs 20 --classes square
show gemm-ops-square 12
# keys per block (make_attention's block_n): correctness, then the sweep per head_dim
part attention-block-n-tests 300 python3 -m pytest tests/python/test_attention_block_n.py -m gpu -q -n 8 --tb=short \
  -p no:cacheprovider
part attention-bn-256 400 python3 bench/attention.py --runs 10 --rows 4,16,4096,256 2,8,4096,256 \
  --schedules ping-pong "ping-pong, TMA store" serial --block-n 80 48
show attention-bn-256 12
part attention-bn-64 400 python3 bench/attention.py --runs 10 --rows 4,32,4096,64 8,16,2048,64 \
  --schedules "persistent overlap" "persistent both" "persistent overlap, TMA store" --block-n 160 192
show attention-bn-64 12
part attention-bn-128 500 python3 bench/attention.py --runs 10 --rows 4,32,4096,128 16,32,1024,128 \
  --schedules "persistent both, TMA store" "persistent both, 2 stages, TMA store" --block-n 176 160
show attention-bn-128 14
# head_dim 256 in blocks of 80 keys by default: its GPU tests (varlen, the op, the table's plan), then the op's table
part attention-256-tests 300 python3 -m pytest -q -m gpu -n 14 --tb=short -p no:cacheprovider \
  tests/python/test_attention_varlen.py tests/python/test_attention_varlen_op.py tests/python/test_torch_attention.py \
  tests/python/test_kernels_attention.py tests/python/test_attention_tma_store.py tests/python/test_attention_planner.py
part attention-ops-256 400 python3 bench/attention.py --ops --classes table head-dim long
show attention-ops-256 30
# three consumer warpgroups (192 query rows per CTA) at head_dim 64: correctness, then against the table's schedule
part attention-consumers-tests 300 python3 -m pytest tests/python/test_attention_consumers.py -m gpu -q -n 8 --tb=short \
  -p no:cacheprovider
part attention-consumers 400 python3 bench/attention.py --runs 10 --rows 4,32,4096,64 8,16,2048,64 16,16,16384,64 \
  --schedules "persistent overlap" "overlap, 3 consumers" "persistent overlap, 3 consumers" \
  "persistent overlap, 3 consumers, TMA store"
show attention-consumers 12
# the backward's overlapped schedule (make_attention_backward(overlap=True), 2026-12-06, fifth session):
# its GPU tests (the deterministic ones with it are in the part deterministic), then the variants
part backward-overlap-tests 300 python3 -m pytest tests/python/test_attention_backward_overlap.py -m gpu -q -n 8 \
  --tb=short -p no:cacheprovider
# the planner's three consumer warpgroups at head_dim 64 through ops.attention (2b6c854), with the peers
part attention-ops-64 400 python3 bench/attention.py --ops --classes table head-dim
show attention-ops-64 30
# make_dsum(zero_dq=True): the operator's backward without its memset (d655d59): the dsum and route GPU tests
part backward-route-tests 300 python3 -m pytest tests/python/test_attention_dsum.py tests/python/test_attention_backward_route.py \
  -m gpu -q -n 6 --tb=short -p no:cacheprovider
# the overlapped backward under racecheck and memcheck, one configuration per head_dim
part racecheck-backward-overlap 400 bash tools/sanitize.sh racecheck tests/python/test_attention_backward_overlap.py \
  -k "float16_heads_and_stages_overlapped and (128-float16-8-3 or 64-float16-1-4)"
part memcheck-backward-overlap 400 bash tools/sanitize.sh memcheck tests/python/test_attention_backward_overlap.py \
  -k "every_length_from_one_overlapped"
# the backward call's timeline (when the host issues each launch, when the GPU runs it), ours and cuDNN
part backward-timeline 240 bash -c "python3 tools/profile_attention.py 8,16,16,2048,64 --calls 2 --timeline && \
  python3 tools/profile_attention.py 4,32,8,2048,128 --causal --calls 2 --timeline && \
  python3 tools/profile_attention.py 32,16,16,512,128 --calls 2 --timeline"
show backward-timeline 80
# the forward's short rows (32 x 16 x 512 x 128: 0.88x cuDNN through the operator): the schedules at the kernel
part attention-short 300 python3 bench/attention.py --runs 10 --rows 32,16,512,128 16,16,1024,128 --schedules \
  "persistent both, TMA store" "persistent overlap, TMA store" "persistent ping-pong, TMA store" \
  "both, 2 stages, TMA store" "persistent both, 2 stages, TMA store" "ping-pong, TMA store"
show attention-short 12
# the host's time of each step of the backward call; our backward kernel against cuDNN's under ncu
part backward-launch 150 python3 tools/profile_attention.py 4,32,8,2048,128 --causal --calls 2 --launch
show backward-launch 10
part ncu-backward-vs-cudnn 500 bash -c "for row in '4,32,8,2048,128 --causal' '8,16,16,2048,64'; do \
  for who in '' --cudnn; do ncu --section SpeedOfLight --section LaunchStats --section Occupancy \
  --section WarpStateStats --section SchedulerStats \
  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
  -k 'regex:attention_backward_h|flash_bprop' --launch-skip 1 --launch-count 1 \
  python3 tools/profile_attention.py \$row --calls 2 \$who; done; done"
# longest first in sections of key/value heads (make_attention_backward(longest_first=True, section=...)):
# its GPU tests (every length, and the same bits on every run), then bench/attention.py --backward-kernels
part backward-sections-tests 300 bash -c "python3 -m pytest -m gpu -q -n 8 --tb=short -p no:cacheprovider \
  tests/python/test_attention_backward.py -k longest_first && timeout 150 python3 -m pytest -m gpu -q -n 4 \
  --tb=short -p no:cacheprovider tests/python/test_attention_backward_deterministic.py -k 'same_bits and (True-True- or True-1])'"
# the plan and the sections alone (2 stages, not deterministic) on the causal rows (the sections change nothing on a
# full row) and 2,32,32,3000
part backward-sections 560 python3 -c "import sys; sys.path.insert(0, '.'); import bench._attention_backward as m; \
m.KERNEL_ROWS[:] = [r for r in m.KERNEL_ROWS if r[5]] + [(2, 32, 32, 3000, 128, True)]; \
m.KERNEL_VARIANTS.update({d: [v for v in vs if v[1] != 3 and not v[2]] for d, vs in m.KERNEL_VARIANTS.items()}); \
m.main_kernels(20)"
show backward-sections 20
# the least that decides the sections (a short window): two head_dim 128 causal rows, the plan and the sections
part sections-quick 300 python3 -c "import sys; sys.path.insert(0, '.'); import bench._attention_backward as m; \
m.KERNEL_ROWS[:] = [(4, 32, 8, 2048, 128, True), (2, 32, 32, 3000, 128, True), (1, 32, 32, 8192, 128, True)]; \
m.KERNEL_VARIANTS.update({128: [v for v in m.KERNEL_VARIANTS[128] if v[1] == 2 and not v[2]]}); m.main_kernels(20)"
show sections-quick 8
# the operator with the sections on for causal calls (TVM_TIRX_ATTENTION_SECTIONS=1), peers in the same run
part attention-backward-sections 500 env TVM_TIRX_ATTENTION_SECTIONS=1 python3 bench/attention.py --backward
show attention-backward-sections 14
# where in our backward kernel the warps wait, per SASS instruction (ncu's sampled stall reasons, CSV)
part ncu-backward-source 300 bash -c "ncu -k regex:attention_backward_h --launch-skip 1 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
  python3 tools/profile_attention.py 4,32,8,2048,128 --causal --calls 2"
# the causal backward launched longest walks first (make_attention_backward(longest_first=True)): its GPU tests,
# and the deterministic kernels with it (then backward-kernels times it against the default order)
part backward-lpt-tests 300 python3 -m pytest tests/python/test_attention_backward.py -m gpu -q -n 8 --tb=short \
  -p no:cacheprovider -k "longest or every_length or forward_kernels"
part backward-lpt-deterministic 150 python3 -m pytest tests/python/test_attention_backward_deterministic.py -m gpu \
  -q -n 4 --tb=short -p no:cacheprovider
# the deterministic kernel in sections that failed the checker on an H100 (2026-12-07) and compiles on the CPU
part det-sections-probe 120 python3 tools/det_sections_probe.py
show det-sections-probe 8
# longest first in sections at head_dim 64 (the causal row of KERNEL_ROWS), against the default order
part sections-64 200 python3 -c "import sys; sys.path.insert(0, '.'); import bench._attention_backward as m; \
m.KERNEL_ROWS[:] = [(4, 32, 32, 4096, 64, True)]; \
m.KERNEL_VARIANTS.update({64: [v for v in m.KERNEL_VARIANTS[64] if not v[2]]}); m.main_kernels(20)"
show sections-64 6
# the deterministic kernel in sections (2026-12-07, after the checker's proofs got a solver each): per call
# through the operator (DETERMINISTIC_SECTIONS off / on), default order vs sections, same bits expected
part deterministic-sections 200 python3 bench/attention.py --deterministic --runs 10
show deterministic-sections 8
# dq_split="rows" (head_dim 64, query blocks of 128) and the mask that tests offsets against three values per block:
# the GPU tests of every split (every length, float16 and stages, the forward's O and LSE), then the kernel alone
part rows-tests 300 python3 -m pytest tests/python/test_attention_backward.py -m gpu -q -n 8 --tb=short \
  -p no:cacheprovider -k "every_length or float16_heads or forward_kernels"
part rows-quick 300 python3 -c "import sys; sys.path.insert(0, '.'); import bench._attention_backward as m; \
m.KERNEL_ROWS[:] = [(8, 16, 16, 2048, 64, False), (4, 32, 32, 4096, 64, True)]; \
m.KERNEL_VARIANTS.update({64: [('columns', 4, False, False, False), ('rows', 2, False, False, False), \
('rows', 3, False, False, False), ('rows', 3, False, False, 'waves')]}); m.main_kernels(20)"
show rows-quick 8
# O staged in the last block's K stage (o_staging="kv", the head_dim 128 plan since 2026-12-07's third session):
# its GPU tests (every length, 3 CTAs over dozens of tiles, the operator's), then the schedule against O in Q's rows
# (run while make_attention staged in K's stage by default; since then "..., O in K" names it)
part kv-tests 300 python3 -m pytest -m gpu -q -n 14 --tb=short -p no:cacheprovider \
  tests/python/test_attention_tma_store.py tests/python/test_kernels_attention.py tests/python/test_torch_attention.py \
  tests/python/test_attention_planner.py tests/python/test_attention_block_n.py
part kv-short 300 python3 bench/attention.py --runs 10 --rows 32,16,512,128 16,32,1024,128 4,32,4096,128 \
  --schedules "persistent both, TMA store, O in K" "persistent both, TMA store"
show kv-short 16
part kv-ops 400 python3 bench/attention.py --ops --classes table short head-dim
show kv-ops 30
part kv-ops-fp16 300 python3 bench/attention.py --ops --classes table short --dtype float16
show kv-ops-fp16 24
# after the hand-over moved to the last Q K^T's retirement: the tests again, the schedules in 20 runs, and the short
# row under ncu (ours, cuDNN's; then our stalls per SASS instruction)
part kv-tests-2 200 python3 -m pytest -m gpu -q -n 14 --tb=short -p no:cacheprovider \
  tests/python/test_attention_tma_store.py
part kv-short-2 300 python3 bench/attention.py --runs 20 --rows 32,16,512,128 16,32,1024,128 4,32,2048,128 \
  4,32,4096,128 --schedules "persistent both, TMA store, O in K" "persistent both, TMA store"
show kv-short-2 20
part ncu-forward-short 300 bash -c "for who in '' --cudnn; do ncu --section SpeedOfLight --section WarpStateStats \
  --section SchedulerStats --section Occupancy --section LaunchStats \
  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
  -k 'regex:attention_h[0-9]|flash_fprop' --launch-skip 1 --launch-count 1 \
  python3 tools/profile_attention.py 32,16,16,512,128 --calls 2 \$who; done"
part ncu-forward-short-source 200 ncu -k regex:attention_h[0-9] --launch-skip 1 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
  python3 tools/profile_attention.py 32,16,16,512,128 --calls 2
# the planner's kv staging (causal rows on the persistent grid, full rows of at most 512 keys): its tests, then the op
part kv-tests-3 200 python3 -m pytest -m gpu -q -n 14 --tb=short -p no:cacheprovider \
  tests/python/test_attention_tma_store.py \
  tests/python/test_torch_attention.py -k "tma or attention"
# the hand-over on two mbarriers per consumer (after the review, 2026-12-07): its GPU tests with the planner's switch on
# (3 CTAs over dozens of tiles, lengths 1 and 77 give runs of one-block tiles), compute-sanitizer, then the op's table
part kv-final-tests 300 env TVM_TIRX_ATTENTION_KV_STAGING=1 python3 -m pytest -m gpu -q -n 14 --tb=short \
  -p no:cacheprovider tests/python/test_attention_tma_store.py tests/python/test_torch_attention.py \
  tests/python/test_kernels_attention.py
part kv-final-sanitize 300 env TVM_TIRX_ATTENTION_KV_STAGING=1 bash tools/sanitize.sh all -m gpu \
  tests/python/test_attention_tma_store.py -k "reuse_the_staging_tile and kv"
part kv-final-ops 400 env TVM_TIRX_ATTENTION_KV_STAGING=1 python3 bench/attention.py --ops --classes table short \
  head-dim
show kv-final-ops 30
part kv-final-ops-fp16 400 env TVM_TIRX_ATTENTION_KV_STAGING=1 python3 bench/attention.py --ops --classes table short \
  head-dim --dtype float16
show kv-final-ops-fp16 30
# the least that checks the kv hand-over on a GPU (for a session with little device time): the table's causal kernel
# over every length from one, and three CTAs over dozens of tiles (with and without ping-pong)
part kv-quick 200 env TVM_TIRX_ATTENTION_KV_STAGING=1 python3 -m pytest -m gpu -q -n 8 --tb=short -p no:cacheprovider \
  tests/python/test_attention_tma_store.py -k "d128-causal-table or d128-kv"
# racecheck of the kv hand-over on a few tiles (the test above did not finish under racecheck in 9 minutes, 2026-12-07)
part kv-racecheck 500 bash tools/sanitize.sh racecheck -m gpu tests/python/test_attention_tma_store.py \
  -k racecheck_size
# the op table's rows still below the fastest peer with kv staging on (H100, 2026-12-07: 4,32,32,4096,64 causal 0.95x,
# 4,32,32,4096,256 0.95x both, 64,16,16,512,128 causal 0.95x): the schedules and block widths the plan did not take
part attention-weak-64 300 python3 bench/attention.py --runs 20 --rows 4,32,4096,64 --causal yes --schedules \
  "persistent overlap" "persistent overlap, TMA store" "persistent overlap, 3 consumers, TMA store" \
  "persistent both, TMA store" --block-n 64 96
show attention-weak-64 14
part attention-weak-256 300 python3 bench/attention.py --runs 20 --rows 4,32,4096,256 --causal both --schedules \
  "ping-pong, TMA store" "persistent ping-pong, TMA store" --block-n 64 96 112
show attention-weak-256 14
part attention-weak-512 300 python3 bench/attention.py --runs 20 --rows 64,16,512,128 32,16,512,128 --causal both \
  --schedules "persistent both, TMA store, O in K" "persistent both, 2 stages, TMA store" "persistent both, TMA store" \
  --block-n 64 96
show attention-weak-512 14
# the autograd path (2026-12-07: the ops on inputs that need a gradient run under a torch.autograd.Function
# with the op's formula, not the registered op): the ops' GPU tests, then host time per call
part grad-path-tests 300 python3 -m pytest -m gpu -q -n 8 --tb=short -p no:cacheprovider tests/python/test_eager_ops.py \
  tests/python/test_attention_backward_route.py tests/python/test_torch_attention.py tests/python/test_decoder_model.py \
  tests/python/test_gemm_gated.py
part grad-path-launch 200 python3 bench/launch.py
show grad-path-launch 16
# the backward's scores_ahead order (make_attention_backward(overlap=True, scores_ahead=True): the next S^T under dK,
# CPU-built on 2026-12-07, never run) and the overlapped order by rows (head_dim 64, likewise): their GPU tests (every
# length, fp16, GQA, stages, sections; deterministic's same bits), then --backward-kernels on two head_dim 128 rows and
# two head_dim 64 rows (the operator's plan, then the same overlapped, ahead)
part backward-ahead-tests 300 bash -c "python3 -m pytest -m gpu -q -n 8 --tb=short -p no:cacheprovider \
  tests/python/test_attention_backward_ahead.py tests/python/test_attention_backward_overlap.py -k 'ahead or rows' && \
  timeout 150 python3 -m pytest -m gpu -q -n 4 --tb=short \
  -p no:cacheprovider tests/python/test_attention_backward_deterministic.py -k ahead"
part backward-ahead 500 python3 -c "import sys; sys.path.insert(0, '.'); import bench._attention_backward as m; \
m.KERNEL_ROWS[:] = [(4, 32, 8, 2048, 128, True), (1, 32, 32, 8192, 128, True), (4, 32, 32, 4096, 128, False), \
(8, 16, 16, 2048, 64, False), (4, 32, 32, 4096, 64, True)]; vs = m.KERNEL_VARIANTS; \
vs.update({128: [v for v in vs[128] if v[1] == 2 and not v[2]], 64: [v for v in vs[64] if v[0] == 'rows' and not v[4]]}); \
m.main_kernels(20)"
show backward-ahead 16
# the operator's table with the kernels asking for scores_ahead (run after backward-ahead-tests passed)
part attention-backward-ahead 500 env TVM_TIRX_ATTENTION_SCORES_AHEAD=1 python3 bench/attention.py --backward
show attention-backward-ahead 14
# decode at m = 32 and 1000^3, the GEMM table's weakest rows (H100, 2026-12-07, under a CUDA graph: 11.8 vs 7.7 us and
# 11.9 vs 8.1 us). cuBLAS's 7.7 us reads the 32 MiB weight at ~4.4 TB/s, above the H100's DRAM rate: in the graph's
# replays its weight stays in L2. ncu with --cache-control none (L2 kept between the launches, as in the replays):
# L2 hit rates and DRAM bytes of ours and cuBLAS's
part ncu-decode-32 300 bash -c "ncu --cache-control none --profile-from-start off $NCU_SECTIONS python3 \
  bench/gemm_ncu.py 32x4096x4096 --ops && ncu --cache-control none --profile-from-start off $NCU_SECTIONS python3 \
  bench/gemm_ncu.py 1000x1000x1000 --ops"
# K's and V's halves of a stage on barriers of their own (make_attention(v_ring=True), CPU-built on 2026-12-08):
# its GPU tests, then head_dim 256 (ping-pong as planned, and FlashAttention-3's two-stage overlapped schedule that the
# shared stage could not feed) and head_dim 128 (two stages of 160 keys against the table's three of 128)
part vring-tests 300 python3 -m pytest -m gpu -q -n 8 --tb=short -p no:cacheprovider tests/python/test_attention_v_ring.py \
  "tests/python/test_attention_varlen.py::test_head_dims_and_float16_packed_on_gpu"
part vring-256 420 python3 bench/attention.py --runs 10 --rows 4,16,4096,256 2,8,4096,256 --causal both --schedules \
  "ping-pong, TMA store" "ping-pong, V ring, TMA store" "both, 2 stages, V ring, TMA store" \
  "overlap, 2 stages, V ring, TMA store"
show vring-256 14
part vring-128 420 python3 bench/attention.py --runs 10 --rows 4,32,4096,128 2,16,16384,128 64,16,512,128 --causal both --schedules \
  "persistent both, TMA store, O in K" "persistent both, V ring, TMA store, O in K" "both, 2 stages, V ring, TMA store" \
  "persistent both, 2 stages, V ring, TMA store" --block-n 160
show vring-128 14
# head_dim 256's rows through the operator, its plan as committed and FlashAttention-3's (TVM_TIRX_ATTENTION_V_RING=1)
part vring-ops 500 bash -c "python3 bench/attention.py --ops --classes d256 && \
  TVM_TIRX_ATTENTION_V_RING=1 python3 bench/attention.py --ops --classes d256"
show vring-ops 30
# head_dim 64 (the op table's 4,32,32,4096,64 causal row at 0.95x): the plan's persistent overlapped kernels with V's own barriers
part vring-64 400 python3 bench/attention.py --runs 10 --rows 4,32,4096,64 8,16,2048,64 --causal both --schedules \
  "persistent overlap" "persistent overlap, V ring" "persistent overlap, 3 consumers, TMA store" \
  "persistent overlap, 3 consumers, V ring, TMA store"
show vring-64 14
