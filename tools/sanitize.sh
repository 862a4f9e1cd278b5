#!/usr/bin/env bash
# Run the GPU tests under NVIDIA compute-sanitizer: memcheck, then racecheck.
#
#   bash tools/sanitize.sh [memcheck|racecheck|all] [extra pytest args...]
#
# On the device machine (see ../shared/gpu/README.md), after stage 2:
#   . /tmp/tirx-site/env.sh && export PYTHONPATH=$PWD/python:$PYTHONPATH && bash tools/sanitize.sh
#
# - PYTORCH_NO_CUDA_MEMORY_CACHING=1 gives every torch tensor its own cudaMalloc, so an
#   access past a tensor's end is outside any allocation and memcheck reports it (with
#   torch's caching allocator it would land in the same pool and go unseen).
# - --target-processes all follows the subprocesses some tests start (the runtime-only
#   export test).
# - --error-exitcode makes any finding fail the run; the summary line of each tool is
#   printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
SANITIZER="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}"
which_tools="${1:-all}"
shift || true
case "$which_tools" in
  all) tools=(memcheck racecheck) ;;
  memcheck | racecheck) tools=("$which_tools") ;;
  *) echo "usage: $0 [memcheck|racecheck|all] [pytest args...]" >&2; exit 2 ;;
esac
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
status=0
for tool in "${tools[@]}"; do
  # First the canary: a kernel with a bug of this tool's kind must be reported, or the
  # setup hides errors and a clean run below would prove nothing.
  if "$SANITIZER" --tool "$tool" --error-exitcode 86 --print-limit 2 \
      python3 tools/sanitizer_canary.py "$tool" > /tmp/canary.log 2>&1; then
    echo "== $tool: the canary was NOT reported; this sanitizer setup cannot be trusted"
    tail -n 20 /tmp/canary.log
    status=1
    continue
  fi
  echo "== $tool: canary reported as expected:"
  grep -m 3 -E "Invalid|hazard|Race|ERROR SUMMARY|RACECHECK SUMMARY" /tmp/canary.log
  log="$(mktemp)"
  echo "== compute-sanitizer --tool $tool: python3 -m pytest tests -m gpu $*"
  "$SANITIZER" --tool "$tool" --target-processes all --error-exitcode 86 --print-limit 20 \
    python3 -m pytest tests -m gpu -q -p no:cacheprovider "$@" 2>&1 | tee "$log" | tail -n 25
  rc=${PIPESTATUS[0]}
  echo "== $tool: exit $rc; sanitizer summaries:"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY" "$log" | sort | uniq -c
  [ "$rc" -ne 0 ] && status=1
  rm -f "$log"
done
exit $status
